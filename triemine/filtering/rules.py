"""The array work behind :mod:`triemine.filtering.registry`'s selection rules and filters.

* Selection rules: :func:`best_per_source` (each source keeps its best row) and
  :func:`one_to_one` (greedy: rows from best to worst, each source and each target used once).
* Threshold tuning: :func:`optimize_threshold` follows the approach of LASER's ``bucc.py``: sort
  candidates from best to worst score, walk down the list keeping running counts, and keep the
  cut with the best F1; the threshold is the midpoint between the last kept and the first dropped
  score. Cuts are only placed between different scores (tied candidates are kept or dropped
  together), so the threshold reproduces the reported scores when applied.
  :func:`optimize_union` tunes a union of two scores, :func:`threshold_curve` gives the whole
  sweep for plotting.
* :class:`PRF`: correct, predicted and gold counts with precision, recall and F1 (what tuning
  maximises; :mod:`triemine.evaluation.metrics` scores mined pairs with it too).

Inputs are NumPy arrays of one value per candidate row; nothing here knows file formats.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import numpy as np


@dataclass(frozen=True)
class PRF:
    correct: int
    predicted: int
    gold: int

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    def __add__(self, other: "PRF") -> "PRF":
        return PRF(self.correct + other.correct, self.predicted + other.predicted,
                   self.gold + other.gold)

    def as_dict(self) -> Dict[str, float]:
        return {"P": round(self.precision, 4), "R": round(self.recall, 4), "F1": round(self.f1, 4),
                "correct": self.correct, "predicted": self.predicted, "gold": self.gold}

    def short(self) -> str:
        return f"P={self.precision:.4f}|R={self.recall:.4f}|F1={self.f1:.4f}"


def best_per_source(src_ids: Sequence[str], values: np.ndarray,
                    higher_is_better: bool) -> np.ndarray:
    """Row indices keeping the best row of every source (ties: the earliest row), in row order."""
    values = np.asarray(values, dtype=np.float64)
    n = len(src_ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, codes = np.unique(np.asarray(src_ids, dtype=object), return_inverse=True)
    key = -values if higher_is_better else values
    # sort by (source, key, row); the first row of each source group is its best
    order = np.lexsort((np.arange(n), key, codes))
    first = np.ones(n, dtype=bool)
    first[1:] = codes[order][1:] != codes[order][:-1]
    return np.sort(order[first])


def one_to_one(src_ids: Sequence[str], tgt_ids: Sequence[str], values: np.ndarray,
               higher_is_better: bool) -> np.ndarray:
    """Greedy one-to-one assignment: walk the rows from best to worst ``values`` and keep a row
    when neither its source nor its target was kept before (ties: the earliest row first).
    Returns the kept row indices in row order.

    This is the post-step of Grégoire & Langlais (2017) and of most BUCC miners: a sentence takes
    part in at most one pair, so a strong pair suppresses the weaker pairs around it.
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(src_ids)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, s_codes = np.unique(np.asarray(src_ids, dtype=object), return_inverse=True)
    _, t_codes = np.unique(np.asarray(tgt_ids, dtype=object), return_inverse=True)
    order = np.lexsort((np.arange(n), -values if higher_is_better else values))
    s_used = np.zeros(int(s_codes.max()) + 1, dtype=bool)
    t_used = np.zeros(int(t_codes.max()) + 1, dtype=bool)
    keep = np.zeros(n, dtype=bool)
    # one pass over candidate pairs (not hypotheses): O(n), ~0.5 s per million pairs
    for i, s, t in zip(order.tolist(), s_codes[order].tolist(), t_codes[order].tolist()):
        if not (s_used[s] or t_used[t]):
            s_used[s] = t_used[t] = True
            keep[i] = True
    return np.flatnonzero(keep)


def _sweep(values: np.ndarray, correct: np.ndarray, higher_is_better: bool):
    """Sorted best-first values and, for every possible cut (after each distinct value), the
    number kept and correct kept. Cut 0 keeps nothing."""
    order = np.argsort(-values if higher_is_better else values, kind="stable")
    v = values[order]
    c = np.cumsum(correct[order].astype(np.int64))
    # a cut is allowed after position i when v[i] != v[i+1] (or i is last)
    ends = np.flatnonzero(np.append(v[1:] != v[:-1], True))
    kept = np.concatenate([[0], ends + 1])
    corr = np.concatenate([[0], c[ends]])
    return v, ends, kept, corr


def _f1(corr: np.ndarray, kept: np.ndarray, n_gold: int) -> np.ndarray:
    p = np.divide(corr, kept, out=np.zeros(len(kept)), where=kept > 0)
    r = corr / n_gold if n_gold else np.zeros(len(kept))
    return np.divide(2 * p * r, p + r, out=np.zeros(len(kept)), where=(p + r) > 0)


def threshold_curve(values: np.ndarray, correct: np.ndarray, n_gold: int,
                    higher_is_better: bool) -> Tuple[np.ndarray, np.ndarray,
                                                     np.ndarray, np.ndarray]:
    """P, R and F1 of every threshold at a distinct value (keeping that value and all better
    ones): ``(thresholds, precision, recall, f1)``, best-first -- the sweep
    :func:`optimize_threshold` maximises, for plotting."""
    values = np.asarray(values, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if len(values) == 0:
        empty = np.zeros(0)
        return empty, empty, empty, empty
    v, ends, kept, corr = _sweep(values, correct, higher_is_better)
    kept, corr = kept[1:], corr[1:]
    precision = corr / kept
    recall = corr / n_gold if n_gold else np.zeros(len(kept))
    return v[ends], precision, recall, _f1(corr, kept, n_gold)


def _cut(v: np.ndarray, ends: np.ndarray, k: int, higher_is_better: bool) -> float:
    """Threshold for cut ``k`` of :func:`_sweep`: midpoint between the last kept and the first
    dropped value; for cut 0 (keep nothing) a value just beyond the best one."""
    if k == 0:
        step = max(1.0, abs(float(v[0])))
        return float(v[0] + step) if higher_is_better else float(v[0] - step)
    last = int(ends[k - 1])
    if last + 1 >= len(v):
        return float(v[last])
    mid = float((v[last] + v[last + 1]) / 2.0)
    return float(v[last]) if mid == v[last + 1] else mid


def optimize_threshold(values: np.ndarray, correct: np.ndarray, n_gold: int,
                       higher_is_better: bool) -> Tuple[float, PRF]:
    """Threshold with the best F1 (LASER ``bucc.py`` style); ties prefer the stricter cut.

    ``values``: one score per candidate (one candidate per source); ``correct``: whether each
    candidate is a gold pair; ``n_gold``: size of the gold set (recall denominator).
    Returns ``(threshold, scores)``; when keeping nothing is best the threshold excludes all.
    """
    values = np.asarray(values, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if len(values) == 0:
        return (float("inf") if higher_is_better else float("-inf")), PRF(0, 0, n_gold)
    v, ends, kept, corr = _sweep(values, correct, higher_is_better)
    f1 = _f1(corr, kept, n_gold)
    k = int(np.argmax(f1))  # first maximum = fewest kept
    thr = _cut(v, ends, k, higher_is_better)
    return float(thr), PRF(int(corr[k]), int(kept[k]), n_gold)


def optimize_union(ce: np.ndarray, bc: np.ndarray, correct: np.ndarray, n_gold: int,
                   max_bc_thresholds: int = 256) -> Tuple[float, float, PRF]:
    """Best F1 of the union rule ``ce <= t_ce or bc >= t_bc`` over a grid of ``t_bc``.

    For every candidate ``t_bc`` (all distinct Bicleaner scores, or ``max_bc_thresholds``
    quantiles of them, plus "none") the best ``t_ce`` is found by the same sweep as
    :func:`optimize_threshold` over the rows Bicleaner did not keep.
    Returns ``(t_ce, t_bc, scores)``, both finite when there are candidates: a side that keeps
    nothing gets a value just beyond its best score (as :func:`_cut` does for one score), so
    that the thresholds can be saved as JSON and applied again.
    """
    ce = np.asarray(ce, dtype=np.float64)
    bc = np.asarray(bc, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if len(ce) == 0:
        return float("-inf"), float("inf"), PRF(0, 0, n_gold)
    cands = np.unique(bc)
    if len(cands) > max_bc_thresholds:
        cands = np.unique(np.quantile(bc, np.linspace(0, 1, max_bc_thresholds), method="nearest"))
    top_bc = float(np.max(bc[np.isfinite(bc)], initial=0.0))
    low_ce = float(np.min(ce[np.isfinite(ce)], initial=0.0))
    none_bc = top_bc + max(1.0, abs(top_bc))  # Bicleaner keeps nothing
    none_ce = low_ce - max(1.0, abs(low_ce))  # CE keeps nothing
    cands = np.append(cands, none_bc)
    best = (-1.0, 0.0, 0.0, PRF(0, 0, n_gold))
    for t_bc in cands[::-1]:  # strict to loose, so ties keep the stricter Bicleaner cut
        by_bc = bc >= t_bc
        base_n, base_c = int(by_bc.sum()), int((by_bc & correct).sum())
        rest = ~by_bc
        if rest.any():
            v, ends, kept, corr = _sweep(ce[rest], correct[rest], higher_is_better=False)
        else:
            v, ends, kept, corr = (
                np.zeros(0),
                np.zeros(0, dtype=np.int64),
                np.array([0]),
                np.array([0]),
            )
        f1 = _f1(corr + base_c, kept + base_n, n_gold)
        k = int(np.argmax(f1))
        if f1[k] > best[0] + 1e-12:
            t_ce = _cut(v, ends, k, higher_is_better=False) if len(v) else none_ce
            best = (float(f1[k]), t_ce, float(t_bc),
                    PRF(int(corr[k] + base_c), int(kept[k] + base_n), n_gold))
    return best[1], best[2], best[3]
