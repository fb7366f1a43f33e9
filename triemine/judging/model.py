"""The judge: a logistic regression or a forest of boosted trees over the pair's features, one
small JSON file.

``judge`` = the log-odds that a pair is a translation at the share of translations the judge
was fitted at (``train_prior``): for ``kind`` ``logistic``, ``sum_i w_i * (x_i - mean_i) /
std_i + bias``, fitted by Newton's method on the L2-penalised logistic loss (:meth:`Judge.fit`,
deterministic, numpy only); for ``kind`` ``trees``, a forest's baseline plus one leaf value a
tree (:mod:`triemine.judging.trees`; fitted with scikit-learn by
:mod:`triemine.judging.train`, which evaluation never imports); for ``kind`` ``blend`` (the
shipped one), the mean of the two.  ``prob`` = the logistic function of it, shifted to a
stated or estimated share (:mod:`triemine.judging.prior`).  Every learned judge states its
score column, ``prob`` (:attr:`Judge.column`), and its cut, ``prob >= 0.5``
(:data:`CUT`, :attr:`Judge.cut`); the fixed combined score is the other judge kind,
:mod:`triemine.judging.zsum`.

The shipped judge is :data:`SHIPPED` (``judge.json`` beside this module; ``package_data``),
trained by ``scripts/train_judge.py`` on the training split only; a configuration record names
its :meth:`Judge.fingerprint`, so a changed file is noticed.  ``--judge FILE`` uses another
(:func:`load_judge`); ``trie-mine-train-judge`` fits one of any kind on a user's own labelled
candidates.
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
from triemine.io import DECIMALS, atomic_write, read_json
from triemine.judging.features import matrix
from triemine.judging.prior import estimate_prior, shift_logit, sigmoid
from triemine.judging.trees import check_forest, forest_logit

SHIPPED = Path(__file__).resolve().parent / "judge.json"
VERSION = 1
MAX_BYTES = 5 << 20   # a judge file is at most 5 MB
KINDS = ("logistic", "trees", "blend")
# the fields every judge file holds, and the parameters each kind needs besides
COMMON = ("version", "features", "train_prior", "kind")
REQUIRED = {"logistic": ("mean", "std", "weights", "bias"), "trees": ("forest",),
            "blend": ("mean", "std", "weights", "bias", "forest")}
CUT = 0.5   # every learned judge's cut: prob >= CUT
CUT_SOURCE = "the judge's probability cut: prob >= 0.5 (not tuned on any gold)"
OUTPUTS = ("judge", "prob", "kept")  # the columns a judge and its cut write: never its features


@dataclass(frozen=True)
class Judge:
    """A fitted judge (module docstring): ``features`` (column names), ``train_prior`` (the
    share of positives it was fitted on, in (0, 1)), its ``kind`` and that kind's parameters:
    for ``logistic`` the features' ``mean`` and ``std`` over the training rows, the
    ``weights`` of the standardised features and ``bias``; for ``trees`` a ``forest``
    (:mod:`triemine.judging.trees`; ``mean``, ``std`` and ``weights`` empty, ``bias`` 0);
    for ``blend`` both, its log-odds the mean of theirs (both fitted on the same rows).
    A ``ValueError`` for parameters that do not fit its kind."""

    features: List[str]
    train_prior: float
    kind: str = "logistic"
    mean: List[float] = field(default_factory=list)
    std: List[float] = field(default_factory=list)
    weights: List[float] = field(default_factory=list)
    bias: float = 0.0
    forest: Dict[str, object] = field(default_factory=dict)
    fitted_on: str = ""
    version: int = VERSION
    extra: Dict[str, object] = field(default_factory=dict)

    column = "prob"   # the score column every learned judge is ranked by and cut on
    cut_value = CUT   # and its cut, prob >= CUT

    @property
    def cut(self) -> Dict[str, object]:
        """The cut ``prob >= 0.5`` as a configuration states it (a pair more likely a
        translation than not, at the share of translations ``prob`` is shifted to)."""
        return {"value": CUT, "direction": "zh-en", "source": CUT_SOURCE}

    def __post_init__(self):
        n = len(self.features)
        if not n or self.kind not in KINDS:
            raise ValueError(f"a judge needs features and a kind among {', '.join(KINDS)}")
        params = list(self.mean) + list(self.std) + list(self.weights) + [self.bias]
        for v in params + [self.train_prior]:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"judge values must be finite numbers, got {v!r}")
        if not 0.0 < self.train_prior < 1.0:
            raise ValueError(f"train_prior must be in (0, 1), got {self.train_prior}")
        if self.kind == "logistic" and self.forest:
            raise ValueError("a logistic judge has no forest")
        if self.kind != "logistic":
            object.__setattr__(self, "forest", check_forest(self.forest, n))
        if self.kind == "trees":
            if params != [0.0] and params != [0]:
                raise ValueError("a trees judge has no mean, std, weights or bias")
            return
        if not (len(self.mean) == len(self.std) == len(self.weights) == n):
            raise ValueError("one mean, std and weight per feature")
        if any(s <= 0 for s in self.std):
            raise ValueError("every std must be positive")

    def logit(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The column ``judge``: each row's log-odds at ``train_prior`` (NaN where a feature is
        not finite); an :class:`InputError` naming missing columns.  The features are read at
        a mining TSV's precision (rounded to ``DECIMALS`` places), so the ``judge`` a job
        writes is the one its TSV's own columns give, whatever side of a split they fall."""
        try:
            x = np.round(matrix(columns, self.features), DECIMALS)
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from None
        if self.kind != "trees":
            with np.errstate(invalid="ignore"):
                z = (x - np.asarray(self.mean)) / np.asarray(self.std) @ np.asarray(
                    self.weights, dtype=np.float64) + self.bias
            if self.kind == "logistic":
                return z
        t = forest_logit(self.forest, x)
        t[~np.isfinite(x).all(axis=1)] = np.nan
        return t if self.kind == "trees" else 0.5 * (z + t)

    @classmethod
    def blend(cls, linear: "Judge", trees: "Judge", fitted_on: str = "") -> "Judge":
        """The ``blend`` of a ``logistic`` and a ``trees`` judge fitted on the same rows (same
        features and ``train_prior``); a ``ValueError`` otherwise."""
        if (linear.kind, trees.kind) != ("logistic", "trees") or \
                linear.features != trees.features or \
                abs(linear.train_prior - trees.train_prior) > 1e-12:
            raise ValueError("a blend needs a logistic and a trees judge of the same rows")
        return cls(list(linear.features), linear.train_prior, "blend", list(linear.mean),
                   list(linear.std), list(linear.weights), linear.bias, dict(trees.forest),
                   fitted_on)

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
        return cls(list(features), float(np.average(y, weights=sw)), mean=mean.tolist(),
                   std=std.tolist(), weights=w[:-1].tolist(), bias=float(w[-1]),
                   fitted_on=fitted_on)

    def as_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """The first 16 hex digits of the SHA-256 of the judge's canonical JSON: equal for
        equal judges, whatever file they were read from."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def save(self, path) -> None:
        """Write the judge as JSON to ``path``, atomically (a forest's arrays one line each)."""
        d = self.as_dict()
        forest = d.pop("forest")
        text = json.dumps(d, indent=1)
        if forest:
            lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in forest.items())
            text = text[:-2] + ',\n "forest": {\n' + lines + "\n }\n}"
        atomic_write(Path(path), (text + "\n").encode("utf-8"), "judge file")

    @classmethod
    def of(cls, data, where: str) -> "Judge":
        """A judge from its fields: ``version``, ``features``, ``train_prior``, ``kind`` and
        every parameter of that kind (:data:`REQUIRED`) must be present, nothing else unknown;
        an :class:`InputError` naming ``where`` and the first problem otherwise."""
        try:
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise ValueError(f"version {VERSION} judge expected")
            kind = data.get("kind")
            if kind not in KINDS:
                raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
            missing = [k for k in COMMON + REQUIRED[kind] if k not in data]
            if missing:
                raise ValueError(f"a {kind} judge needs {', '.join(missing)}")
            if not isinstance(data["features"], list) or not all(
                    isinstance(f, str) and f for f in data["features"]):
                raise ValueError("features must be a list of column names")
            if len(set(data["features"])) != len(data["features"]):
                raise ValueError("a feature is named twice")
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise InputError(f"not a judge file ({exc})", where) from None

    @classmethod
    def load(cls, path) -> "Judge":
        """A judge file (:meth:`save`); an :class:`InputError` naming ``path`` for one that is
        missing, a folder, over 5 MB or not a judge (:meth:`of`)."""
        where = os.fspath(path)
        if os.path.isdir(path):
            raise InputError("is a folder, not a judge file", where)
        if not os.path.isfile(path):
            raise InputError("no such judge file", where)
        if os.path.getsize(path) > MAX_BYTES:
            raise InputError("a judge file is at most 5 MB", where)
        return cls.of(read_json(path, "judge file"), where)


def load_judge(path=None) -> Judge:
    """The judge of ``path``, or the shipped one (:data:`SHIPPED`) when it is None."""
    return Judge.load(SHIPPED if path is None else path)


def judge_path(path=None) -> str:
    """The resolved path of the judge file ``path`` (the shipped one when None), as a run
    record names it beside the judge's fingerprint."""
    return os.path.abspath(os.fspath(SHIPPED if path is None else path))


def check_reads(judge: Judge, have, where: str, job: str) -> None:
    """Refuse ``judge`` (read from ``where``) when it reads a column not in ``have`` (the
    columns ``job``, a phrase naming the job, writes before the judge) or one of the judge's
    own outputs (:data:`OUTPUTS`): an :class:`InputError` naming the file and the columns."""
    own = [f for f in judge.features if f in OUTPUTS]
    if own:
        raise InputError(f"the judge reads {', '.join(own)}, which the judge itself writes: "
                         "train it on other features (trie-mine-train-judge --features)", where)
    missing = [f for f in judge.features if f not in have]
    if missing:
        raise InputError(f"the judge reads {', '.join(missing)}, which {job} does not write",
                         where)
