"""Every baseline as a miner, as a scorer of given pairs, and as a retriever (precision@k).

* :func:`mine` -- candidates of two corpora: the cosine kNN of the baseline's vectors with LASER's
  ratio margin (:class:`triemine.mining.candidates.MarginSpace`); each source's
  ``per_source`` and each target's ``per_target`` best by margin; a baseline with a pair head
  adds its score.  Columns ``<space>_cos``, ``<space>_margin`` and, with a head, ``<score>``.
* :func:`score_pairs` -- the same columns for given (source, target) pairs, e.g. trie-mine's
  candidates: the margin's neighbourhoods come from the given corpora (default: the distinct
  sentences of the pairs).
* :func:`mine_bucc` -- :func:`mine` on a BUCC set, as :class:`~triemine.io.tsv.Mined` rows for
  :func:`triemine.evaluation.pipeline.evaluate` (rank and filter by ``baseline.score``,
  rule ``one-to-one``).
* :func:`retrieval_precision` -- precision@1/3/10 of queries against a pool of targets.

The columns ``trie-mine-filter`` adds to a mining TSV:
:func:`triemine.baselines.systems.with_scores`.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from triemine.baselines.base import Baseline
from triemine.embedding.knn import knn
from triemine.errors import InputError
from triemine.mining.candidates import embedding_space
from triemine.io import Mined


def _normalised(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.maximum(norms, 1e-12), dtype=np.float32)


def _centred(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0, keepdims=True) if len(x) > 1 else x


def _space(baseline: Baseline, src_vecs: np.ndarray, tgt_vecs: np.ndarray):
    """The margin space of the vectors (each side first centred on its own mean when the
    baseline says ``centre``: it removes the component every sentence of a side shares)."""
    if baseline.centre:
        src_vecs, tgt_vecs = _centred(src_vecs), _centred(tgt_vecs)
    return embedding_space(_normalised(src_vecs), _normalised(tgt_vecs), baseline.space,
                           baseline.neighbours)


def _check_texts(texts: Sequence[str], what: str) -> list:
    texts = list(texts)
    if not texts:
        raise InputError(f"no {what} sentences")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(f"{what} sentence {bad + 1} is not text: {texts[bad]!r}")
    return texts


def mine(baseline: Baseline, src_texts: Sequence[str], tgt_texts: Sequence[str]):
    """:class:`~triemine.mining.candidates.CandidateSet` of the two corpora (module docstring)."""
    src_texts, tgt_texts = _check_texts(src_texts, "source"), _check_texts(tgt_texts, "target")
    src_vecs, tgt_vecs = baseline.encode(src_texts, "src"), baseline.encode(tgt_texts, "tgt")
    cands = _space(baseline, src_vecs, tgt_vecs).candidates(baseline.per_source,
                                                            baseline.per_target)
    if baseline.has_head:
        cands = cands.with_columns(**{baseline.score: baseline.head(src_vecs[cands.src],
                                                                    tgt_vecs[cands.tgt])})
    return cands


def score_pairs(baseline: Baseline, src_texts: Sequence[str], tgt_texts: Sequence[str],
                src_corpus: Optional[Sequence[str]] = None,
                tgt_corpus: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    """Columns (module docstring) of pairs ``(src_texts[i], tgt_texts[i])``, each ``(n,)``.

    The margin's neighbourhoods are searched in ``src_corpus``/``tgt_corpus`` (every sentence of
    the pairs is added to them); by default in the distinct sentences of the pairs."""
    src_texts, tgt_texts = _check_texts(src_texts, "source"), _check_texts(tgt_texts, "target")
    if len(src_texts) != len(tgt_texts):
        raise InputError(f"{len(src_texts)} sources but {len(tgt_texts)} targets")
    src_all, s = np.unique(np.asarray(list(src_corpus or []) + src_texts, dtype=object),
                           return_inverse=True)
    tgt_all, t = np.unique(np.asarray(list(tgt_corpus or []) + tgt_texts, dtype=object),
                           return_inverse=True)
    s, t = s[-len(src_texts):], t[-len(tgt_texts):]
    src_vecs, tgt_vecs = baseline.encode(list(src_all),
                                         "src"), baseline.encode(list(tgt_all), "tgt")
    cols = _space(baseline, src_vecs, tgt_vecs).features(s, t)
    if baseline.has_head:
        cols[baseline.score] = baseline.head(src_vecs[s], tgt_vecs[t])
    return cols


def mine_bucc(baseline: Baseline, bucc, meta: Optional[dict] = None):
    """:func:`mine` on a :class:`~triemine.evaluation.bucc.BuccSet`: ``Mined`` rows."""
    c = mine(baseline, bucc.src.texts, bucc.tgt.texts)
    si, ti = c.src.tolist(), c.tgt.tolist()
    return Mined.from_columns([bucc.src.ids[i] for i in si], [bucc.tgt.ids[i] for i in ti],
                              [bucc.src.texts[i] for i in si], [bucc.tgt.texts[i] for i in ti],
                              c.columns, meta=dict({"model": baseline.name, "mode": "baseline",
                                                    "source": bucc.src.path,
                                                    "target": bucc.tgt.path}, **(meta or {})))


def ranked_targets(baseline: Baseline, queries: Sequence[str], pool: Sequence[str],
                   depth: int = 10) -> np.ndarray:
    """``(n_queries, depth)`` pool indices, best first: the ``depth`` nearest by cosine, ranked
    by the baseline's score (margin over the pool, or its pair head)."""
    q = baseline.encode(_check_texts(queries, "query"), "src")
    p = baseline.encode(_check_texts(pool, "pool"), "tgt")
    space = _space(baseline, q, p)
    idx = knn(space.src_vecs, space.tgt_vecs, depth)[1]                  # (n, depth)
    s = np.repeat(np.arange(len(q)), idx.shape[1])
    t = idx.reshape(-1)
    if baseline.has_head:
        score = baseline.head(q[s], p[t])
    else:
        score = space.features(s, t)[baseline.score]
    order = np.argsort(-score.reshape(idx.shape), axis=1, kind="stable")
    return np.take_along_axis(idx, order, axis=1)


def retrieval_precision(baseline: Baseline, queries: Sequence[str], pool: Sequence[str],
                        gold: np.ndarray, ks: Tuple[int, ...] = (1, 3, 10)) -> Dict[str, float]:
    """``{"p@k": share of queries whose gold pool index ``gold[i]`` is among the k best}``."""
    ranked = ranked_targets(baseline, queries, pool, max(ks))
    hit = ranked == np.asarray(gold)[:, None]
    out = {f"p@{k}": round(float(hit[:, :k].any(axis=1).mean()), 4) for k in ks}
    out["queries"], out["pool"] = len(queries), len(pool)
    return out
