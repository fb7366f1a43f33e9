"""A calibrated probability of the combined score: ``prob`` = P(a pair is a translation | combined).

Platt scaling (a logistic curve of one score, Platt 1999): ``prob = 1 / (1 + exp(-(a * score +
b)))``, monotone in the score, so a ``--min-prob`` cut is a cut of that score
(:meth:`Calibration.threshold`).  Two curves are shipped:

* the ``zsum`` judges' (:mod:`triemine.judging.zsum`): ``prob`` of a mining job's
  ``combined``, fitted on the BUCC zh-en sample's candidates with its gold
  (``scripts/fit_calibration.py mined``), held in the judge file as its ``curve``;
* ``pairs`` (the ``curve`` of the ``combined`` configuration's given-pairs ``zsum`` judge,
  ``combined-pairs.json``, read by :func:`triemine.judging.shipped.shipped_calibration`):
  given pairs (``trie-mine-score``): a
  logistic regression on the pairs' features (its score ``judge``, a fixed
  :class:`~triemine.judging.combination.Combination` of standardised
  features, then the curve with ``a = 1``), fitted on a noisy set built from
  ``devsets/zh-en/train`` only (clean pairs and the noise kinds of :mod:`triemine.cleaning.noise`;
  ``scripts/fit_calibration.py pairs``), never on the transfer set.

:func:`reliability` and :func:`ece` measure a calibration (the HTML report's reliability diagram,
the benchmarks' expected calibration error).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

import numpy as np

from triemine.errors import InputError

BINS = 10


@dataclass(frozen=True)
class Calibration:
    """``prob = sigmoid(a * score + b)`` of the column ``score`` (default ``combined``);
    ``fitted_on`` says on what.  ``combination``: the fields of a
    :class:`~triemine.judging.combination.Combination` that computes the column ``score`` from the
    features first (a logistic regression on them, as the ``pairs`` curve is), or None when
    ``score`` is a column the job already has."""

    a: float
    b: float
    score: str = "combined"
    fitted_on: str = ""
    combination: Optional[Dict] = None

    def __call__(self, values) -> np.ndarray:
        """The probability of each value (NaN stays NaN), float64 of the input's shape."""
        z = self.a * np.asarray(values, dtype=np.float64) + self.b
        return 0.5 * (1.0 + np.tanh(0.5 * z))   # the logistic function, without overflow

    def threshold(self, prob: float) -> float:
        """The score at which the probability reaches ``prob`` (0 < prob < 1): ``prob >= p``
        is ``score >= threshold(p)`` (``a > 0``)."""
        if not 0.0 < prob < 1.0:
            raise InputError(f"a probability cut must be in (0, 1), got {prob}")
        return (math.log(prob / (1.0 - prob)) - self.b) / self.a

    @classmethod
    def fit(cls, scores, labels, fitted_on: str, score: str = "combined") -> "Calibration":
        """The maximum-likelihood curve (Newton's method on the logistic loss) of ``labels``
        (0/1) given ``scores``; non-finite scores are left out.  A ``ValueError`` when one class
        is missing."""
        x = np.asarray(scores, dtype=np.float64)
        y = np.asarray(labels, dtype=np.float64)
        keep = np.isfinite(x)
        x, y = x[keep], y[keep]
        if not (0 < y.sum() < len(y)):
            raise ValueError("a calibration needs both positive and negative examples")
        # Platt's targets: a little way off 0 and 1, so separable data gives a finite slope
        n1, n0 = y.sum(), len(y) - y.sum()
        t = np.where(y > 0, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))
        w = np.zeros(2)
        X = np.stack([x, np.ones_like(x)], axis=1)
        for _ in range(100):
            p = 0.5 * (1.0 + np.tanh(0.5 * (X @ w)))
            g = X.T @ (p - t)
            h = X.T @ (X * (p * (1 - p))[:, None]) + 1e-9 * np.eye(2)
            step = np.linalg.solve(h, g)
            w -= step
            if np.abs(step).max() < 1e-10:
                break
        return cls(float(w[0]), float(w[1]), score, fitted_on)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, data, where: str) -> "Calibration":
        try:
            cal = cls(**data)
        except TypeError as exc:
            raise InputError(f"not a calibration ({exc})", where) from None
        if not (math.isfinite(cal.a) and math.isfinite(cal.b) and cal.a > 0):
            raise InputError(f"a calibration needs a finite slope a > 0, got {cal.a}", where)
        return cal


def reliability(prob, labels, bins: int = BINS) -> List[Dict[str, float]]:
    """The reliability diagram's points: for each of ``bins`` equal-width probability bins that
    holds pairs, ``{"lo", "hi", "n", "mean_prob", "share_true"}``."""
    p = np.asarray(prob, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    keep = np.isfinite(p)
    p, y = p[keep], y[keep]
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        if m.any():
            out.append({"lo": b / bins, "hi": (b + 1) / bins, "n": int(m.sum()),
                        "mean_prob": float(p[m].mean()), "share_true": float(y[m].mean())})
    return out


def ece(prob, labels, bins: int = BINS) -> Optional[float]:
    """Expected calibration error: the pairs' share-weighted mean of ``|mean prob - share
    true|`` over :func:`reliability`'s bins (None without pairs)."""
    pts = reliability(prob, labels, bins)
    n = sum(q["n"] for q in pts)
    if not n:
        return None
    return float(sum(q["n"] * abs(q["mean_prob"] - q["share_true"]) for q in pts) / n)
