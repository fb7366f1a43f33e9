"""The rank prior: target-side log-counts estimated from the shared vocabulary's order.

A Marian ``shared_vocabulary`` lists the pieces of *both* sides ordered by their frequency in the
segmented training data. On pieces that only the source side uses, the source model's unigram
score is ``log count + const``, so a monotone fit of source score against log rank turns any rank
into an estimated combined log-count. Target-only pieces (absent from the source model) get that
count; pieces both models know get the combined count minus the source model's share, and whether
they are target pieces at all is read off the decoder's output bias when the model has one.

Which pieces are "source-only" is decided per model from the scripts of the pieces' letters: a
source piece is a reference piece when it is written in a script that the source side uses and
the target-only pieces barely do (zh-en: CJK). For a pair whose two sides share their script
(fewer than :data:`MIN_REFERENCE` such pieces) the fit uses the upper envelope (90th percentile
per rank bin) of all source pieces instead: at a given rank the pieces with the highest source
score are those the target side barely uses.
"""
from __future__ import annotations

import logging
import math
import unicodedata
from collections import Counter
from typing import Sequence

import numpy as np

from triemine.errors import InputError
from triemine.models.segmentation.pieces import SPECIALS

logger = logging.getLogger(__name__)

MIN_REFERENCE = 200   # source-only pieces needed to fit the prior on them alone
ENVELOPE_QUANTILE = 90
ENVELOPE_MARGIN = 0.3  # nats below the envelope a piece may be and still count as source-only


def decoder_output_bias(model) -> np.ndarray | None:
    """The decoder's output-projection bias of a read CTranslate2 model
    (:class:`~triemine.models.ct2_reader.CT2Model`), or None if it has none."""
    if not model.has("decoder/projection/bias"):
        return None
    return np.asarray(model.get("decoder/projection/bias"), dtype=np.float64).reshape(-1)


def _monotone_rank_fit(log_rank: np.ndarray, score: np.ndarray, bin_width: float = 0.25,
                       quantile: float = 50):
    """A quantile of the source score per log-rank bin, made non-increasing, linearly
    interpolated (and extrapolated with the end slopes)."""
    edges = np.arange(0.0, log_rank.max() + bin_width, bin_width)
    xs, ys = [], []
    for lo in edges:
        sel = (log_rank >= lo) & (log_rank < lo + bin_width)
        if sel.sum() >= 3:
            xs.append(float(np.median(log_rank[sel])))
            ys.append(float(np.percentile(score[sel], quantile)))
    if len(xs) < 2:
        raise InputError("too few source pieces to calibrate the rank prior")
    ys = np.minimum.accumulate(np.array(ys))
    xs = np.array(xs)
    slope_hi = (ys[-1] - ys[-2]) / max(xs[-1] - xs[-2], 1e-6)
    slope_lo = (ys[1] - ys[0]) / max(xs[1] - xs[0], 1e-6)

    def fit(x: np.ndarray) -> np.ndarray:
        y = np.interp(x, xs, ys)
        y = np.where(x > xs[-1], ys[-1] + slope_hi * (x - xs[-1]), y)
        return np.where(x < xs[0], ys[0] + slope_lo * (x - xs[0]), y)

    return fit


def _scripts(piece: str) -> set:
    """Scripts of a piece's letters, by Unicode name ("CJK", "LATIN", "CYRILLIC", ...)."""
    return {unicodedata.name(c, "?").split(" ")[0] for c in piece if c.isalpha()}


def source_only_pieces(vocab: Sequence[str], source_scores: dict[str, float],
                       max_target_share: float = 0.1) -> list[int]:
    """Vocabulary indices of source pieces written in a script the target side barely uses: one
    found in under ``max_target_share`` of the target-only pieces (absent from the source model)
    and in at least 10 % of the source pieces (zh-en: CJK; none for a pair whose two sides share
    their script)."""
    target_only = [p for p in vocab if p and p not in source_scores and p not in SPECIALS]
    source = [p for p in vocab if p in source_scores]
    if not target_only or not source:
        return []
    tgt, src = Counter(), Counter()
    for p in target_only:
        tgt.update(_scripts(p))
    for p in source:
        src.update(_scripts(p))
    own = {s for s, n in src.items() if n >= 0.1 * len(source)
           and tgt[s] < max_target_share * len(target_only)}
    return [i for i, p in enumerate(vocab) if p in source_scores and _scripts(p) & own]


def rank_prior(vocab: Sequence[str], source_scores: dict[str, float],
               keep_ratio: float = 0.25, bias: np.ndarray | None = None,
               drop_target_only: bool = True, keep_floor: float = 0.05,
               min_bias_rank: int = 2000) -> tuple[dict[str, float], dict]:
    """Log-count estimates (natural log, source-model units) of the target side from ranks.

    Returns ``{piece: log_count}`` for pieces judged to belong to the target model, plus counts
    for the report. Without ``bias``, a piece the source model knows is kept when the target
    share of its estimated combined count is at least ``keep_ratio``. With the decoder's output
    bias (one value per vocabulary entry), membership of shared pieces ranked ``min_bias_rank``
    or later is decided by the bias instead: pieces the decoder was never trained to write end
    with a bias as low as source-only pieces; the threshold is the midpoint between the 90th
    percentile of source-only pieces and the 10th percentile of pieces absent from the source
    model. ``drop_target_only`` also drops low-bias pieces absent from the source model.
    """
    log_rank = np.log(np.arange(len(vocab), dtype=np.float64) + 1.0)
    ref = source_only_pieces(vocab, source_scores)
    stats = {"target_only": 0, "shared_kept": 0, "shared_dropped": 0, "target_only_dropped": 0,
             "bias_threshold": None, "reference_pieces": len(ref), "reference": "source-only"}
    if len(ref) >= MIN_REFERENCE:
        fit = _monotone_rank_fit(log_rank[ref], np.array([source_scores[vocab[i]] for i in ref]))
    else:
        every = [i for i, p in enumerate(vocab) if p in source_scores]
        if len(every) < 6:
            raise InputError(f"only {len(every)} vocabulary pieces are in the source "
                             f"sentencepiece model; it does not belong to this model")
        scores = np.array([source_scores[vocab[i]] for i in every])
        fit = _monotone_rank_fit(log_rank[every], scores, quantile=ENVELOPE_QUANTILE)
        ref = [i for i, s in zip(every, scores) if s >= fit(log_rank[i]) - ENVELOPE_MARGIN]
        stats.update(reference="upper envelope", reference_pieces=len(ref))
        logger.info("rank prior: no script of its own on the source side; fitted on the upper "
                    "envelope of all %d source pieces", len(every))
    total = fit(log_rank)
    out: dict[str, float] = {}
    threshold = None
    if bias is not None:
        if len(bias) != len(vocab):
            raise InputError(f"decoder output bias has {len(bias)} entries for a vocabulary of "
                             f"{len(vocab)}")
        tgt_only = [i for i, p in enumerate(vocab) if p and p not in source_scores]
        if ref and tgt_only:
            threshold = float(np.percentile(bias[ref], 90) + np.percentile(bias[tgt_only], 10)) / 2
        stats["bias_threshold"] = threshold
    for i, piece in enumerate(vocab):
        if not piece or piece in SPECIALS:
            continue
        single = len(piece) == 1  # every character stays encodable
        # The bias is no membership signal for frequent pieces (sentence-initial "▁It", "▁Let",
        # "▁Well" have biases as low as source-only pieces): below min_bias_rank ranks decide.
        writable = threshold is None or bias[i] >= threshold or i < min_bias_rank
        if piece not in source_scores:
            if writable or single or not drop_target_only:
                out[piece] = float(total[i])
                stats["target_only"] += 1
            else:
                stats["target_only_dropped"] += 1
            continue
        tot = math.exp(total[i])
        tgt = tot - math.exp(source_scores[piece])
        if threshold is None or i < min_bias_rank:
            keep = tgt >= keep_ratio * tot or single
        else:
            keep = writable or single
        if keep:
            out[piece] = math.log(max(tgt, (keep_floor if writable and threshold is not None
                                            else 0.05) * tot))
            stats["shared_kept"] += 1
        else:
            stats["shared_dropped"] += 1
    return out, stats
