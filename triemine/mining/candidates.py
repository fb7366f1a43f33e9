"""Candidate pairs: where they come from and the scores they carry.

A :class:`CandidateSet` holds pairs ``(src[i], tgt[i])`` of 0-based line indices into the source
and target corpora, a bitmask saying which generator proposed each pair (the generators' origin
bits, :mod:`triemine.mining.generators`), and numeric columns (``NaN`` where a generator did not
compute a value).  The margin spaces the generators search: a multilingual sentence encoder's
(:func:`embedding_space`: ``<encoder>_cos``, ``<encoder>_margin``) and the MT model's own
translations against the targets (:func:`translation_space`: ``ret_cos``, ``ret_margin``).

Sets are united with :meth:`CandidateSet.union`; a pair proposed twice keeps one row whose
columns and origins are merged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np

from triemine.embedding.knn import (MarginNeighbours, cosine_of_pairs, knn,
                                    margin_candidate_blocks, margin_candidates, row_means)


@dataclass
class CandidateSet:
    src: np.ndarray                      # int64 (n,) source line index
    tgt: np.ndarray                      # int64 (n,) target line index
    origin: np.ndarray                   # uint8 (n,) bitmask of the generators' origin bits
    columns: Dict[str, np.ndarray] = field(default_factory=dict)  # float64 (n,), NaN = unknown

    def __post_init__(self):
        self.src = np.asarray(self.src, dtype=np.int64)
        self.tgt = np.asarray(self.tgt, dtype=np.int64)
        self.origin = np.asarray(self.origin, dtype=np.uint8)
        for k, v in list(self.columns.items()):
            self.columns[k] = np.asarray(v, dtype=np.float64)
            if self.columns[k].shape != self.src.shape:
                raise ValueError(
                    f"column {k}: {self.columns[k].shape} values for {len(self.src)} pairs"
                )

    def __len__(self) -> int:
        return len(self.src)

    @classmethod
    def empty(cls) -> "CandidateSet":
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, np.zeros(0, dtype=np.uint8))

    def col(self, name: str) -> np.ndarray:
        """Column ``name``; a missing column is an error (as :meth:`triemine.io.tsv.Mined.col`)."""
        if name not in self.columns:
            raise KeyError(f"candidate set has no column {name!r} "
                           f"(columns: {' '.join(self.columns) or 'none'})")
        return self.columns[name]

    def col_or_nan(self, name: str) -> np.ndarray:
        """Column ``name``, or NaN everywhere when no stage has computed it yet: the stages that
        fill a column (exact scores, priors) compute exactly its NaN rows."""
        return self.columns[name] if name in self.columns else np.full(len(self), np.nan)

    def take(self, idx) -> "CandidateSet":
        idx = np.asarray(idx, dtype=np.int64)
        return CandidateSet(self.src[idx], self.tgt[idx], self.origin[idx],
                            {k: v[idx] for k, v in self.columns.items()})

    def with_columns(self, **cols) -> "CandidateSet":
        new = dict(self.columns)
        new.update(cols)
        return CandidateSet(self.src, self.tgt, self.origin, new)

    def is_canonical(self) -> bool:
        """Whether the pairs are unique and sorted by source, then target (what
        :meth:`union` returns; the generators' sets are)."""
        s, t = self.src, self.tgt
        return bool(np.all((s[1:] > s[:-1]) | ((s[1:] == s[:-1]) & (t[1:] > t[:-1]))))

    def union(self, other: "CandidateSet") -> "CandidateSet":
        """All pairs of both sets, one row per pair (sorted by source, then target); where several
        rows have a value for a column, the earliest row's is kept (the first set's first)."""
        if not len(self) and not len(other):
            return CandidateSet.empty()
        for one, none in ((self, other), (other, self)):  # with an empty set: no copies, when
            if not len(none) and set(none.columns) <= set(one.columns) and one.is_canonical():
                return one                                # the pairs are sorted and unique
        src = np.concatenate([self.src, other.src])
        tgt = np.concatenate([self.tgt, other.tgt])
        width = int(max(tgt.max(), 0)) + 1
        key = src * width + tgt
        uniq, inv = np.unique(key, return_inverse=True)
        n = len(uniq)
        origin = np.zeros(n, dtype=np.uint8)
        np.bitwise_or.at(origin, inv, np.concatenate([self.origin, other.origin]))
        cols = {}
        for name in dict.fromkeys(list(self.columns) + list(other.columns)):
            vals = np.concatenate([self.col_or_nan(name), other.col_or_nan(name)])
            out = np.full(n, np.nan)
            # write the second set first, then the first set's known values over it
            order = np.arange(len(vals))[::-1]
            known = ~np.isnan(vals[order])
            out[inv[order][known]] = vals[order][known]
            cols[name] = out
        return CandidateSet(uniq // width, uniq % width, origin, cols)


class MarginSpace:
    """Sources and targets in one similarity space (sentence embeddings, or TF-IDF vectors of the
    MT model's translations), with LASER's ratio margin over ``k`` neighbours each way.

    :meth:`candidates` proposes pairs; :meth:`features` scores any pair (a candidate proposed by
    another generator gets the same columns).  Columns: ``<name>_cos`` and ``<name>_margin``.
    """

    def __init__(self, name: str, src_vecs, tgt_vecs, k: int = 4, origin: int = 0,
                 neighbours=None, work: Optional[Path] = None):
        self.name, self.origin = name, origin
        self.src_vecs, self.tgt_vecs = src_vecs, tgt_vecs
        if neighbours is None:
            fwd_idx, fwd_sim = _topk(src_vecs, tgt_vecs, k)
            bwd_idx, bwd_sim = _topk(tgt_vecs, src_vecs, k)
        else:  # computed elsewhere (the sharded search): (fwd_idx, fwd_sim, bwd_idx, bwd_sim)
            fwd_idx, fwd_sim, bwd_idx, bwd_sim = neighbours
        # each sentence's mean similarity to its neighbours: with ``work``, in mapped files there
        means = [row_means(sim, None if work is None else Path(work) / f"{name}.means.{side}.npy")
                 for sim, side in ((fwd_sim, "src"), (bwd_sim, "tgt"))]
        self.nb = MarginNeighbours(fwd_idx, fwd_sim, bwd_idx, bwd_sim, *means, k)

    def cosine(self, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
        if not len(src):
            return np.zeros(0)
        a, b = self.src_vecs[src], self.tgt_vecs[tgt]
        if hasattr(a, "multiply"):  # sparse rows
            return np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()
        return cosine_of_pairs(self.src_vecs, self.tgt_vecs, src, tgt)

    def features(self, src: np.ndarray, tgt: np.ndarray) -> Dict[str, np.ndarray]:
        cos = self.cosine(src, tgt)
        return {f"{self.name}_cos": cos, f"{self.name}_margin": self.nb.margin(src, tgt, cos)}

    def fill_features(self, cands: "CandidateSet") -> "CandidateSet":
        """``cands`` with this space's columns for every pair: computed (:meth:`features`) for
        the pairs that lack them, those this space proposed keep theirs (the same bits: the
        same function of the same rows).  With one generator that is no work at all (no random
        reads of the embedding files)."""
        names = self.columns
        have = {c: cands.col_or_nan(c) for c in names}
        todo = np.flatnonzero(np.isnan(have[names[0]]) | np.isnan(have[names[1]]))
        if not len(todo):
            return cands if all(c in cands.columns for c in names) else \
                cands.with_columns(**have)
        cols = {c: v.copy() for c, v in have.items()}
        for c, v in self.features(cands.src[todo], cands.tgt[todo]).items():
            cols[c][todo] = v
        return cands.with_columns(**cols)

    def candidates(self, per_source: int = 2, per_target: int = 1,
                   min_margin: Optional[float] = None) -> CandidateSet:
        """Each source's ``per_source`` best targets and each target's ``per_target`` best
        sources by margin (LASER's "max" strategy with 1 and 1), optionally only those with
        margin >= ``min_margin`` (a cheap first cut before exact MT scoring)."""
        s, t, _ = margin_candidates(self.nb, per_source, per_target, min_margin)
        return CandidateSet(s, t, np.full(len(s), self.origin, dtype=np.uint8),
                            self.features(s, t))

    @property
    def columns(self) -> tuple:
        return f"{self.name}_cos", f"{self.name}_margin"

    def candidate_blocks(self, per_source: int = 2, per_target: int = 1,
                         min_margin: Optional[float] = None, spill=None):
        """:meth:`candidates` a range of sources at a time (one :class:`CandidateSet` each,
        in order; concatenated, the very rows of :meth:`candidates`), the backward
        candidates of later ranges kept in files of ``spill``
        (:func:`~triemine.embedding.knn.margin_candidate_blocks`): what the job writes to its
        store as it goes, holding one range's candidates."""
        for s, t, _ in margin_candidate_blocks(self.nb, per_source, per_target, min_margin,
                                               spill=spill):
            yield CandidateSet(s, t, np.full(len(s), self.origin, dtype=np.uint8),
                               self.features(s, t))


def _topk(a, b, k: int, rows_per_block: int = 2048):
    """Top-``k`` inner products of every row of ``a`` against the rows of ``b``: ``(idx, sim)``,
    each (n_a, k), best first.  Dense rows go to faiss; sparse rows are multiplied in blocks."""
    if not hasattr(a, "tocsr"):
        sim, idx = knn(a, b, k)
        return idx, sim
    n, k = a.shape[0], min(k, b.shape[0])
    idx = np.zeros((n, k), dtype=np.int64)
    sim = np.zeros((n, k), dtype=np.float32)
    bt = b.T.tocsc()
    for start in range(0, n, rows_per_block):
        block = (a[start:start + rows_per_block] @ bt).toarray()
        part = (np.argpartition(-block, k - 1, axis=1)[:, :k] if k < block.shape[1] else
                np.tile(np.arange(block.shape[1]), (block.shape[0], 1)))
        vals = np.take_along_axis(block, part, axis=1)
        order = np.argsort(-vals, axis=1, kind="stable")
        idx[start:start + len(block)] = np.take_along_axis(part, order, axis=1)
        sim[start:start + len(block)] = np.take_along_axis(vals, order, axis=1)
    return idx, sim


def embedding_space(src_emb: np.ndarray, tgt_emb: np.ndarray, name: str, k: int = 4,
                    origin: int = 0, neighbours=None, work: Optional[Path] = None) -> MarginSpace:
    """A sentence encoder's space (L2-normalised float32 rows, memory-mapped or not);
    ``origin``: the bit its candidates carry (:mod:`triemine.mining.generators`);
    ``neighbours``: both directions' kNN when already computed
    (:func:`triemine.embedding.knn_shards.knn_sharded`); ``work``: a directory for the
    margin's per-sentence means, memory-mapped from there
    (:func:`~triemine.embedding.knn.row_means`)."""
    return MarginSpace(name, np.asarray(src_emb, dtype=np.float32),
                       np.asarray(tgt_emb, dtype=np.float32), k, origin, neighbours, work)


def translation_space(translations: Sequence[str], tgt_texts: Sequence[str], k: int = 4,
                      origin: int = 0) -> MarginSpace:
    """The MT model's own translations against the targets, no embedding model (name ``ret``):
    TF-IDF vectors of character 2-5-grams within words (sublinear tf, fitted on both sides)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, lowercase=True,
                          dtype=np.float32)
    vec.fit(list(tgt_texts) + list(translations))
    return MarginSpace("ret", vec.transform(translations).tocsr(), vec.transform(tgt_texts).tocsr(),
                       k, origin)
