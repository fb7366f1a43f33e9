"""A probability that knows the density: the prior shift of Saerens, Latinne and Decaestecker
(2002), "Adjusting the outputs of a classifier to new a priori probabilities".

A judge fitted where a share ``train_prior`` of the candidates are translations gives
P(translation | features) for that share; where the share is ``prior`` the posterior's odds
are multiplied by the prior odds' ratio (:func:`shift_logit`).  When the share is unknown it is
estimated from the run's own posteriors by EM (:func:`estimate_prior`): the new prior is the
mean of the shifted posteriors, repeated until it settles.

Shapes: logits and probabilities are float64 arrays of one value a candidate (NaN stays NaN).
"""
from __future__ import annotations

import math

import numpy as np

EPS = 1e-6   # priors are clipped to [EPS, 1 - EPS]


def _log_odds(p: float) -> float:
    p = min(max(float(p), EPS), 1.0 - EPS)
    return math.log(p / (1.0 - p))


def sigmoid(z) -> np.ndarray:
    """The logistic function of ``z`` (float64), without overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


def shift_logit(logit, train_prior: float, prior: float) -> np.ndarray:
    """The posterior log-odds ``logit`` (fitted at ``train_prior``) moved to ``prior``:
    ``logit + log-odds(prior) - log-odds(train_prior)``; both priors in (0, 1), clipped to
    [EPS, 1 - EPS].  Monotone in ``logit``; the identity when the priors are equal."""
    return np.asarray(logit, dtype=np.float64) + _log_odds(prior) - _log_odds(train_prior)


def estimate_prior(logit, train_prior: float, iters: int = 200, tol: float = 1e-7) -> float:
    """The share of translations among the candidates of ``logit`` (the judge's log-odds at
    ``train_prior``), by EM: start at ``train_prior``, set the prior to the mean posterior
    shifted to it, until it moves by less than ``tol`` (at most ``iters`` rounds).  Non-finite
    logits are left out; ``train_prior`` when none is left.  Returns a value in
    [EPS, 1 - EPS]."""
    z = np.asarray(logit, dtype=np.float64)
    z = z[np.isfinite(z)]
    prior = min(max(float(train_prior), EPS), 1.0 - EPS)
    if not z.size:
        return prior
    for _ in range(iters):
        new = float(sigmoid(shift_logit(z, train_prior, prior)).mean())
        new = min(max(new, EPS), 1.0 - EPS)
        if abs(new - prior) < tol:
            return new
        prior = new
    return prior
