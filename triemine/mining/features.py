"""Exact MT scores and the features derived from them, for every candidate pair.

* :func:`exact_scores`: ``score`` (log P(y|x), EOS included) and ``n_tokens`` by teacher forcing
  for the candidates that lack them (those from the trie search already have them);
* :func:`target_priors`: log P(y | empty source) of the targets, from the trie's node priors when
  they exist, else by teacher forcing, cached per (target corpus, model);
* :func:`derived`: ``ce_word`` and ``ce_token`` (the paper's cross-entropies) and ``pmi``, the
  per-token pointwise mutual information ``(score - prior) / n_tokens``.

Work is done in chunks that are saved as they finish (``work_dir``), so an interrupted run
resumes without recomputing or losing scores.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from triemine.mining.candidates import CandidateSet

logger = logging.getLogger(__name__)


def _encoded(encode, texts: Sequence[str], needed: np.ndarray) -> list:
    """``encode(text)`` for the needed line indices, ``None`` elsewhere (no wasted work)."""
    out: list = [None] * len(texts)
    for i in np.unique(needed).tolist():
        out[i] = encode(texts[i])
    return out


def _chunked(work_dir: Optional[Path], name: str, n: int, chunk: int, compute):
    """``compute(start, end) -> float64 array`` over ``[0, n)`` in chunks; each finished chunk is
    saved in ``work_dir`` and reused by a resumed run."""
    parts = []
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        path = work_dir / f"{name}.{start:09d}-{end:09d}.npy" if work_dir is not None else None
        if path is not None and path.is_file():
            part = np.load(path)
        else:
            part = np.asarray(compute(start, end), dtype=np.float64)
            if path is not None:
                tmp = path.with_name(path.name + f".tmp{os.getpid()}.npy")
                np.save(tmp, part)
                os.replace(tmp, path)
        parts.append(part)
    return np.concatenate(parts) if parts else np.zeros(0)


def exact_scores(model, cands: CandidateSet, src_texts: Sequence[str], tgt_texts: Sequence[str],
                 work_dir: Optional[Path] = None, chunk: int = 2000,
                 progress: bool = False) -> CandidateSet:
    """Fill ``score`` and ``n_tokens`` where they are missing (NaN) by forced decoding."""
    from tqdm import tqdm

    from triemine.scoring.forced import ForcedScorer

    score = cands.col("score").copy()
    ntok = cands.col("n_tokens").copy()
    todo = np.flatnonzero(np.isnan(score))
    if len(todo):
        srcs = _encoded(model.encode_source, src_texts, cands.src[todo])
        tgts = _encoded(model.encode_target, tgt_texts, cands.tgt[todo])
        scorer = ForcedScorer(model)
        s_idx, t_idx = cands.src[todo], cands.tgt[todo]
        with tqdm(total=len(todo), desc="exact scores", unit="pair", disable=not progress) as bar:
            def compute(a, b):
                out = scorer.score_pairs(srcs, tgts, s_idx[a:b], t_idx[a:b])
                bar.update(b - a)
                return out
            score[todo] = _chunked(work_dir, "scores", len(todo), chunk, compute)
        ntok[todo] = [len(tgts[t]) for t in t_idx]
    return cands.with_columns(score=score, n_tokens=ntok)


def _corpus_key(model, tgt_texts: Sequence[str]) -> str:
    from triemine.decoding.mine import model_fingerprint

    h = hashlib.sha256(model_fingerprint(model).rsplit("@", 1)[-1].encode())
    for t in tgt_texts:
        h.update(t.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:32]


def target_priors(model, tgt_texts: Sequence[str], lines: np.ndarray, trie=None, node_prior=None,
                  cache_dir: Optional[Path] = None, progress: bool = False) -> np.ndarray:
    """log P(target line | empty source) for each of ``lines``.

    With a trie and its node priors the sentence prior is the prior of the line's terminal node
    (free).  Otherwise the needed lines are scored by teacher forcing and cached in
    ``cache_dir/<corpus+model key>.npy`` (one value per target line, NaN until computed), so a
    later run on the same target corpus only computes what is new.
    """
    from triemine.scoring.forced import ForcedScorer

    lines = np.asarray(lines, dtype=np.int64)
    table = np.full(len(tgt_texts), np.nan)
    path = None
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        path = cache_dir / f"{_corpus_key(model, tgt_texts)}.npy"
        if path.is_file():
            cached = np.load(path)
            if cached.shape == table.shape:
                table = cached
    if trie is not None and node_prior is not None:
        nodes = np.asarray(trie.term_nodes, dtype=np.int64)
        offs = np.asarray(trie.term_offsets, dtype=np.int64)
        ids = np.asarray(trie.term_ids, dtype=np.int64)
        per_id = np.repeat(np.asarray(node_prior, dtype=np.float64)[nodes], np.diff(offs))
        fill = np.isnan(table[ids])
        table[ids[fill]] = per_id[fill]
    need = np.unique(lines[np.isnan(table[lines])])
    if len(need):
        logger.info("computing the prior of %d target sentences", len(need))
        seqs = [model.encode_target(tgt_texts[i]) for i in need]
        table[need] = ForcedScorer(model).score_pairs([None], seqs, np.zeros(len(need), dtype=np.int64),
                                                      np.arange(len(need)), progress=progress)
        if path is not None:
            tmp = path.with_name(path.name + f".tmp{os.getpid()}.npy")
            np.save(tmp, table)
            os.replace(tmp, path)
    return table[lines]


def derived(cands: CandidateSet, tgt_texts: Sequence[str]) -> CandidateSet:
    """``ce_word``, ``ce_token`` and (with ``prior``) ``pmi`` from ``score`` and ``n_tokens``."""
    from triemine.decoding.mine import word_count

    score, ntok = cands.col("score"), cands.col("n_tokens")
    nwords = np.fromiter((word_count(tgt_texts[t]) for t in cands.tgt), dtype=np.float64,
                         count=len(cands))
    cols = {"ce_word": -score / (nwords + 1), "ce_token": -score / ntok}
    if "prior" in cands.columns:
        cols["pmi"] = (score - cands.col("prior")) / ntok
    return cands.with_columns(**cols)
