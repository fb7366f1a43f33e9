"""The features of given pairs: the mining job's judges applied to pairs a person already has.

The pairs index two side files of distinct texts (``src.txt``, ``tgt.txt`` in the job's work
directory, one text a line), so every stage is the mining job's own sharded stage on files:

* :func:`exact_features`: the exact-scoring stage (:func:`triemine.mining.score_shards.
  forced_scores_sharded`: log P(y|x), the source pieces left uncovered and the targets' priors
  log P(y|empty), in resumable shards
  on a pool) and the derived features (:func:`triemine.mining.features.derived`: ``ce_word``,
  ``ce_token``, ``pmi``, ``numerals``).  It is the one place this package calls the scoring
  stage;
* :func:`encoder_features`: the encoder's cosine and the ratio margin of each pair within its
  own corpus (each side's ``k`` nearest neighbours among the distinct texts of the other side, as
  LASER's scorer and stopes do for given pairs): the embedding and kNN stages
  (:mod:`triemine.embedding`) and :class:`~triemine.mining.candidates.MarginSpace`;
* :func:`language_flags`: 1.0 where CLD2 identifies a side as its language (or cannot tell),
  else 0.0 (the ``lang`` rule of ``trie-mine-prepare``,
  :func:`triemine.prepare.filters.lang_keeps`);
* the text features (``len_ratio``, ``number_match``) are the judge's own, computed for mined
  candidates too (:mod:`triemine.judging.features`).

Shapes: ``src_idx``/``tgt_idx`` are int64 arrays of the pairs (lines of the side files, 0-based);
each returned column is a float64 array of one value a pair, NaN where the pair was not scored.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np

from triemine.distributed.local import InlinePool
from triemine.embedding.embed_shards import embed_corpora
from triemine.embedding.knn_shards import knn_searches
from triemine.mining.candidates import CandidateSet, embedding_space
from triemine.mining.features import derived
from triemine.mining.score_shards import forced_scores_sharded
from triemine.prepare.filters import lang_keeps
from triemine.prepare.run import rule_keeps
from triemine.scoring.rows import JUDGE_ROWS

EXACT_COLUMNS = ("score", "n_tokens", "prior", "ce_word", "ce_token", "pmi", "numerals",
                 *JUDGE_ROWS)


def exact_features(model, src_file: Path, tgt_file: Path, src_texts: Sequence[str],
                   tgt_texts: Sequence[str], src_idx: np.ndarray, tgt_idx: np.ndarray,
                   work: Path, pool, *, progress: bool = False, resume: bool = True,
                   device: str = "cpu", precision: str = "fp32") -> Dict[str, np.ndarray]:
    """:data:`EXACT_COLUMNS` of every pair ``(src_idx[i], tgt_idx[i])``: the mining job's
    exact scores and priors in shards on ``pool`` (``work/scores.shards/``,
    ``work/priors.shards/``; a resumed run reuses the finished shards), then the derived
    features; the rows of :data:`triemine.scoring.rows.JUDGE_ROWS` come from the same pass
    (``uncovered``: the share of each source's pieces its target leaves uncovered, the decoder's
    cross-attention; ``eos_lp``, ``tok_min_lp``: :func:`triemine.scoring.forced.token_extremes`).
    ``src_texts``/``tgt_texts`` are the side files' lines; ``precision``: the model's arithmetic
    (:data:`triemine.scoring.precision.PRECISIONS`)."""
    src_idx = np.asarray(src_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    kw = dict(progress=progress, resume=resume, device=device, precision=precision)
    score, ntok, *judged, _ = forced_scores_sharded(
        model, src_idx, tgt_idx, src_file, tgt_file, work, pool, name="scores",
        desc="exact scores", coverage=True, **kw)
    targets = np.unique(tgt_idx)
    prior = np.full(len(tgt_texts), np.nan)
    if len(targets):
        prior[targets] = forced_scores_sharded(
            model, np.full(len(targets), -1, dtype=np.int64), targets, src_file, tgt_file,
            work, pool, name="priors", desc="priors", **kw)[0]
    cands = CandidateSet(src_idx, tgt_idx, np.zeros(len(src_idx), dtype=np.uint8),
                         {"score": score, "n_tokens": ntok, "prior": prior[tgt_idx]})
    cols = {**derived(cands, tgt_texts, src_texts).columns, **dict(zip(JUDGE_ROWS, judged))}
    return {c: np.asarray(cols[c], dtype=np.float64) for c in EXACT_COLUMNS}


def encoder_features(encoder: str, src_file: Path, tgt_file: Path, n_src: int, n_tgt: int,
                     src_idx: np.ndarray, tgt_idx: np.ndarray, work: Path, pool=None, *,
                     k: int = 4, skip_src: Optional[np.ndarray] = None,
                     skip_tgt: Optional[np.ndarray] = None, progress: bool = False,
                     device: str = "cpu") -> Dict[str, np.ndarray]:
    """``<encoder>_cos`` and ``<encoder>_margin`` of every pair: both side files embedded
    (``work/emb.<encoder>.{src,tgt}.npy``, in shards) and searched both ways for ``k``
    neighbours (``work/knn.<encoder>.{fwd,bwd}``); ``skip_src``/``skip_tgt`` (boolean masks of
    the side lines) are embedded as empty lines, no one's neighbours."""
    pool = pool if pool is not None else InlinePool()
    emb = {side: Path(work) / f"emb.{encoder}.{side}.npy" for side in ("src", "tgt")}
    xs, ys = embed_corpora(encoder, [(src_file, n_src, emb["src"], skip_src),
                                     (tgt_file, n_tgt, emb["tgt"], skip_tgt)], pool,
                           progress=progress)
    k = max(1, min(k, n_src, n_tgt))
    (fwd_sim, fwd_idx), (bwd_sim, bwd_idx) = knn_searches(
        [(emb["src"], emb["tgt"], f"knn.{encoder}.fwd"),
         (emb["tgt"], emb["src"], f"knn.{encoder}.bwd")], k, Path(work), pool,
        progress=progress, device=device)
    space = embedding_space(xs, ys, encoder, k, neighbours=(fwd_idx, fwd_sim, bwd_idx, bwd_sim),
                            work=work)
    return {c: np.asarray(v, dtype=np.float64) for c, v in space.features(
        np.asarray(src_idx, dtype=np.int64), np.asarray(tgt_idx, dtype=np.int64)).items()}


def language_flags(texts: Sequence[str], idx: np.ndarray, lang: str) -> np.ndarray:
    """1.0 for a pair whose side ``texts[idx[i]]`` CLD2 identifies as ``lang`` (or cannot
    tell), else 0.0; each distinct text identified once."""
    keep, _ = lang_keeps(list(texts), lang)
    return keep.astype(np.float64)[np.asarray(idx, dtype=np.int64)]


def rule_flags(texts: Sequence[str], idx: np.ndarray, lang: str) -> np.ndarray:
    """1.0 for a pair whose side ``texts[idx[i]]`` every per-line rule of ``trie-mine-prepare``
    keeps with its defaults for ``lang`` (:func:`triemine.prepare.run.rule_keeps`), else 0.0;
    each distinct text checked once."""
    return rule_keeps(list(texts), lang).astype(np.float64)[np.asarray(idx, dtype=np.int64)]
