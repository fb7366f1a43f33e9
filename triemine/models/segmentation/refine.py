"""Discriminative refinement: an averaged batch perceptron over piece scores.

Viterbi re-segmentation of the detokenised estimation outputs is pushed towards the model's own
pieces. Besides one weight per piece (Rprop-style step sizes, capped) it learns weights of piece
classes (:func:`piece_features`), which carry corrections over to pieces that never occur in the
estimation outputs. The averaged iterate that does best on a held-out part of the estimation
outputs is kept, none when none beats the starting point.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from triemine.models.segmentation.pieces import HAN, SPACE, build_proto, processor

logger = logging.getLogger(__name__)


def piece_features(pieces: Sequence[str], source_scores: dict[str, float]) -> np.ndarray:
    """Piece classes whose scores the perceptron corrects as a group (0/1 matrix)."""
    cols = [
        lambda p: p in source_scores,                                   # shared with the source
        lambda p: p == SPACE,                                           # bare word boundary
        lambda p: p.startswith(SPACE) and len(p) > 1,                   # word-initial piece
        lambda p: p.lstrip(SPACE).isdigit(),                            # digits
        lambda p: p.lstrip(SPACE)[:1].isupper(),                        # capitalised
        lambda p: len(p.lstrip(SPACE)) == 1,                            # single character
        lambda p: len(p.lstrip(SPACE)) == 2,
        lambda p: len(p.lstrip(SPACE)) == 3,
        lambda p: len(p.lstrip(SPACE)) >= 6,
        lambda p: bool(HAN.search(p)),                                  # Han characters
        lambda p: not any(c.isalnum() for c in p),                      # punctuation / symbols
    ]
    return np.array([[1.0 if f(p) else 0.0 for f in cols] for p in pieces])


def agreement(sp, texts: Sequence[str], golds: Sequence[Sequence[str]]) -> tuple[float, list]:
    """Fraction of ``texts`` whose 1-best segmentation is the gold piece sequence, and the
    (gold, predicted) pairs that differ."""
    pred = sp.encode(list(texts), out_type=str)
    wrong = [(g, p) for g, p in zip(golds, pred) if list(g) != p]
    return 1.0 - len(wrong) / max(len(golds), 1), wrong


@dataclass
class RefineHistory:
    train_agreement: list = field(default_factory=list)
    dev_agreement: list = field(default_factory=list)
    dev_agreement_averaged: list = field(default_factory=list)
    kept_iterate: int | None = None


def refine_scores(template, scores: dict[str, float], pairs: Sequence[tuple[str, list]],
                  source_scores: dict[str, float], *, epochs: int = 20, lr: float = 0.01,
                  max_step: float = 0.3, dev_fraction: float = 0.1, seed: int = 1,
                  progress: bool = True) -> tuple[dict[str, float], RefineHistory]:
    """Refined ``scores`` for (text, model pieces) ``pairs`` and the training history."""
    hist = RefineHistory()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    n_dev = int(len(pairs) * dev_fraction) if len(pairs) >= 50 else 0
    dev = [pairs[i] for i in order[:n_dev]]
    train = [pairs[i] for i in order[n_dev:]]
    if not train or epochs <= 0:
        return scores, hist
    from tqdm import tqdm

    pieces = list(scores)
    index = {p: i for i, p in enumerate(pieces)}
    base = np.array([scores[p] for p in pieces])
    feats = piece_features(pieces, source_scores)
    w = np.zeros_like(base)
    theta = np.zeros(feats.shape[1])
    w_sum, theta_sum, n_sum = np.zeros_like(w), np.zeros_like(theta), 0
    best, best_epoch = (-1.0, None), None
    steps, prev_sign = np.full_like(w, 0.1), np.zeros_like(w)
    tt, tg = [t for t, _ in train], [g for _, g in train]
    check = dev or train
    ct, cg = [t for t, _ in check], [g for _, g in check]
    for epoch in tqdm(range(epochs), desc="perceptron", disable=not progress):
        cur = base + w + feats @ theta
        sp = processor(build_proto(template, dict(zip(pieces, cur))))
        acc, wrong = agreement(sp, tt, tg)
        hist.train_agreement.append(acc)
        if dev:
            hist.dev_agreement.append(agreement(sp, ct, cg)[0])
        if not wrong:
            break
        delta = np.zeros_like(w)
        for gold, pred in wrong:
            for p in gold:
                delta[index[p]] += 1.0
            for p in pred:
                j = index.get(p)
                if j is not None:
                    delta[j] -= 1.0
        # Rprop-style per-piece steps: grow while a piece keeps being pushed the same way,
        # halve when the push reverses (batch updates otherwise overshoot and oscillate).
        sign = np.sign(delta)
        same = sign * prev_sign
        steps = np.where(same > 0, np.minimum(steps * 1.2, max_step),
                         np.where(same < 0, steps * 0.5, steps))
        w += sign * steps
        prev_sign = np.where(same < 0, 0.0, sign)
        theta += lr / (1.0 + epoch / 10.0) * (feats.T @ delta) / max(len(wrong), 1)
        w_sum += w
        theta_sum += theta
        n_sum += 1
        # keep the averaged iterate that does best on the held-out part of the estimation data
        avg = base + (w_sum + feats @ theta_sum) / n_sum
        score_avg = agreement(processor(build_proto(template, dict(zip(pieces, avg)))), ct, cg)[0]
        hist.dev_agreement_averaged.append(score_avg)
        if score_avg > best[0]:
            best, best_epoch = (score_avg, avg), epoch
    start = (hist.dev_agreement or hist.train_agreement)[0]
    if best[1] is not None and best[0] > start:
        hist.kept_iterate = best_epoch
        logger.info("perceptron: agreement %.3f -> %.3f (averaged iterate of epoch %d)", start,
                    best[0], best_epoch)
        return dict(zip(pieces, best[1])), hist
    logger.info("perceptron: no iterate beats the starting agreement %.3f; kept the estimate",
                start)
    return scores, hist
