"""The judge: a logistic regression over standardised features, one small JSON file.

``judge`` = the log-odds that a pair is a translation, ``sum_i w_i * (x_i - mean_i) / std_i +
bias``, at the share of translations the judge was fitted at (``train_prior``); ``prob`` =
the logistic function of it, shifted to a stated or estimated share
(:mod:`triemine.judging.prior`).  Fitted by Newton's method on the L2-penalised logistic loss
(:meth:`Judge.fit`), so a fit is deterministic and needs numpy only.

The shipped judge is :data:`SHIPPED` (``judge.json`` beside this module; ``package_data``),
trained by ``scripts/train_judge.py`` on the training split only; a configuration record names
its :meth:`Judge.fingerprint`, so a changed file is noticed.  ``--judge FILE`` uses another
(:func:`load_judge`); ``trie-mine-train-judge`` fits one on a user's own labelled candidates.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from triemine.errors import InputError
from triemine.io import read_json
from triemine.judging.features import matrix
from triemine.judging.prior import estimate_prior, shift_logit, sigmoid

SHIPPED = Path(__file__).resolve().parent / "judge.json"
VERSION = 1
MAX_BYTES = 5 << 20   # a judge file is at most 5 MB


@dataclass(frozen=True)
class Judge:
    """A fitted judge (module docstring): ``features`` (column names), their ``mean`` and
    ``std`` over the training rows, ``weights`` of the standardised features, ``bias``,
    ``train_prior`` (the share of positives it was fitted on, in (0, 1)), ``fitted_on``."""

    features: List[str]
    mean: List[float]
    std: List[float]
    weights: List[float]
    bias: float
    train_prior: float
    fitted_on: str = ""
    version: int = VERSION
    extra: Dict[str, object] = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.features)
        if not n or not (len(self.mean) == len(self.std) == len(self.weights) == n):
            raise ValueError("one mean, std and weight per feature")
        for v in list(self.mean) + list(self.std) + list(self.weights) + [self.bias]:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"judge values must be finite numbers, got {v!r}")
        if any(s <= 0 for s in self.std):
            raise ValueError("every std must be positive")
        if not 0.0 < self.train_prior < 1.0:
            raise ValueError(f"train_prior must be in (0, 1), got {self.train_prior}")

    def logit(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The column ``judge``: each row's log-odds at ``train_prior`` (NaN where a feature is
        not finite); an :class:`InputError` naming missing columns."""
        try:
            x = matrix(columns, self.features)
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from None
        z = (x - np.asarray(self.mean)) / np.asarray(self.std)
        with np.errstate(invalid="ignore"):
            return z @ np.asarray(self.weights, dtype=np.float64) + self.bias

    def prob(self, logit, density: Optional[float] = None) -> np.ndarray:
        """The column ``prob`` of the judge's ``logit``: at ``train_prior`` when ``density``
        is None, shifted to ``density`` (the share of the candidates that are translations,
        in (0, 1)) when it is a number, to the share :func:`estimate_prior` finds when it is
        ``"estimate"``."""
        if density is None:
            return sigmoid(logit)
        if density == "estimate":
            density = estimate_prior(logit, self.train_prior)
        return sigmoid(shift_logit(logit, self.train_prior, float(density)))

    @classmethod
    def fit(cls, columns: Mapping[str, np.ndarray], labels, features: Sequence[str],
            fitted_on: str = "", c: float = 1.0, iters: int = 100,
            sample_weight=None) -> "Judge":
        """The L2-penalised (``1 / c`` times half the squared weights; the bias free) maximum
        likelihood judge of 0/1 ``labels`` on ``features`` of ``columns``, each row's loss
        times its ``sample_weight`` (default 1); rows with a non-finite feature are left out.
        ``train_prior`` is the weighted share of positives.  A ``ValueError`` when a class is
        missing."""
        x = matrix(columns, features)
        y = np.asarray(labels, dtype=np.float64)
        sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        keep = np.isfinite(x).all(axis=1)
        x, y, sw = x[keep], y[keep], sw[keep]
        if not 0 < y.sum() < len(y):
            raise ValueError("a judge needs both positive and negative examples")
        mean, std = np.average(x, axis=0, weights=sw), np.sqrt(
            np.average((x - np.average(x, axis=0, weights=sw)) ** 2, axis=0, weights=sw))
        std[std == 0] = 1.0
        X = np.concatenate([(x - mean) / std, np.ones((len(x), 1))], axis=1)
        reg = np.full(X.shape[1], 1.0 / c)
        reg[-1] = 0.0
        w = np.zeros(X.shape[1])
        for _ in range(iters):
            p = sigmoid(X @ w)
            g = X.T @ (sw * (p - y)) + reg * w
            h = X.T @ (X * (sw * p * (1 - p))[:, None]) + np.diag(reg) + 1e-9 * np.eye(len(w))
            step = np.linalg.solve(h, g)
            w -= step
            if np.abs(step).max() < 1e-10:
                break
        return cls(list(features), mean.tolist(), std.tolist(), w[:-1].tolist(), float(w[-1]),
                   float(np.average(y, weights=sw)), fitted_on)

    def as_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """The first 16 hex digits of the SHA-256 of the judge's canonical JSON: equal for
        equal judges, whatever file they were read from."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def save(self, path) -> None:
        """Write the judge as JSON to ``path``."""
        Path(path).write_text(json.dumps(self.as_dict(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def of(cls, data, where: str) -> "Judge":
        """A judge from its fields; an :class:`InputError` naming ``where`` otherwise."""
        try:
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise ValueError(f"version {VERSION} judge expected")
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise InputError(f"not a judge file ({exc})", where) from None

    @classmethod
    def load(cls, path) -> "Judge":
        """A judge file (:meth:`save`); an :class:`InputError` for one over 5 MB or not a
        judge."""
        if not os.path.isfile(path):
            raise InputError("no such judge file", os.fspath(path))
        if os.path.getsize(path) > MAX_BYTES:
            raise InputError("a judge file is at most 5 MB", os.fspath(path))
        return cls.of(read_json(path, "judge file"), os.fspath(path))


def load_judge(path=None) -> Judge:
    """The judge of ``path``, or the shipped one (:data:`SHIPPED`) when it is None."""
    return Judge.load(SHIPPED if path is None else path)
