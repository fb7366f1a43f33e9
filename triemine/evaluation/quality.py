"""How good a bitext is: what a reader counts (what its calibrated probabilities promise, read
from the run alone, is :func:`triemine.judging.quality.expected_quality`).

* :func:`stratified_precision`: the precision a reader measured on a stratified sample of the
  kept pairs, weighted back to the kept set, with its confidence interval
  (:func:`clopper_pearson` on the sample's effective size).

Pure functions of numbers (numpy, scipy's special functions and the standard library only).
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
from scipy.special import betaincinv

LEVEL = 0.95  # the confidence level of the intervals printed


def clopper_pearson(x: float, n: float, level: float = LEVEL) -> tuple:
    """The Clopper-Pearson ("exact") interval ``(low, high)`` of a proportion of ``x`` successes
    in ``n`` trials, 0 <= x <= n, n > 0; both may be fractional (an effective sample size and
    its successes: the beta quantiles take real arguments). Always inside [0, 1]; low is 0 at
    x = 0 and high is 1 at x = n."""
    if not n > 0 or not 0 <= x <= n:
        raise ValueError(f"expected 0 <= x <= n and n > 0, got x={x!r}, n={n!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    alpha = 1 - level
    low = 0.0 if x <= 0 else float(betaincinv(x, n - x + 1, alpha / 2))
    high = 1.0 if x >= n else float(betaincinv(x + 1, n - x, 1 - alpha / 2))
    return low, high


def stratified_precision(sizes: Sequence[int], answered: Sequence[int], true: Sequence[int],
                         level: float = LEVEL) -> Dict[str, object]:
    """The precision of a set of pairs measured on a stratified sample of it.

    Stratum ``h`` holds ``sizes[h]`` pairs of the set (N_h); a reader answered ``answered[h]``
    (n_h <= N_h) of the pairs drawn from it (drawn uniformly without replacement) and read
    ``true[h]`` (y_h <= n_h) of them as translations.

    * Estimate: P = sum_h W_h p_h with p_h = y_h / n_h and W_h = N_h / N, N the size of the
      strata with at least one answer (a stratum without answers is left out and the others'
      weights renormalised: ``unanswered_share`` is its share of the set).
    * Variance (the stratified formula, finite-population corrected):
      V = sum_h W_h^2 (1 - n_h / N_h) s_h^2 / n_h, s_h^2 = n_h / (n_h - 1) p_h (1 - p_h); a
      stratum of one answer takes s_h^2 = 1/4 (the largest a proportion has).
    * Interval: Korn and Graubard's: the Clopper-Pearson interval (:func:`clopper_pearson`) of
      P n_eff successes in n_eff trials, n_eff = P (1 - P) / V the effective sample size
      (the number of answers when V is 0 or P is 0 or 1: every stratum all-right or
      all-wrong), so it lies inside [0, 1] and is not empty at P = 0 or 1. Not the normal
      interval, which near P = 1 (where mined bitexts are) covers the truth far less often
      than the level says, nor Wilson's on the same n_eff, whose coverage near 1 falls lower
      from one set to another (docs/decisions.md, "The reading sheet's interval").

    Returns ``{"precision", "low", "high", "level", "variance", "n_eff", "answered",
    "strata_answered", "unanswered_share"}``; precision, low, high and n_eff are None when no
    stratum has an answer. Raises ``ValueError`` for lengths that differ or counts out of
    order (not 0 <= y_h <= n_h <= N_h)."""
    N = np.asarray(sizes, dtype=np.float64)
    n = np.asarray(answered, dtype=np.float64)
    y = np.asarray(true, dtype=np.float64)
    if not (N.shape == n.shape == y.shape) or N.ndim != 1:
        raise ValueError("sizes, answered and true must be 1-D of one length")
    if np.any(y < 0) or np.any(y > n) or np.any(n > N):
        raise ValueError("expected 0 <= true <= answered <= size in every stratum")
    has = n > 0
    total = float(N.sum())
    out: Dict[str, object] = {"level": level, "answered": int(n.sum()),
                              "strata_answered": int(has.sum()),
                              "unanswered_share": float(N[~has].sum() / total) if total else 0.0,
                              "precision": None, "low": None, "high": None, "variance": None,
                              "n_eff": None}
    if not has.any():
        return out
    N, n, y = N[has], n[has], y[has]
    W = N / N.sum()
    p_h = y / n
    s2 = np.where(n > 1, n / np.maximum(n - 1, 1) * p_h * (1 - p_h), 0.25)
    var = float(np.sum(W ** 2 * (1 - n / N) * s2 / n))
    p = float(np.sum(W * p_h))
    n_eff = p * (1 - p) / var if var > 0 and 0 < p < 1 else float(n.sum())
    low, high = clopper_pearson(p * n_eff, n_eff, level)
    out.update(precision=p, low=low, high=high, variance=var, n_eff=float(n_eff))
    return out
