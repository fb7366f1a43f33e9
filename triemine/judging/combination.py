"""A fixed combination of features into one score, so that one threshold transfers between sets.

The score of the ``zsum`` judge kind (:mod:`triemine.judging.zsum`, which holds a shipped one
with its probability curve and cut) and, in a configuration with a learned judge, the feature
``combined`` it reads.

``combined = sum_i w_i * (x_i - mean_i) / std_i`` over named candidate columns.  The means and
standard deviations are fitted once, without gold labels, on a reference candidate set (the
shipped ones on the BUCC zh-en sample's candidates) and then kept fixed: a threshold chosen on
one corpus means the same on another, which a normalisation refitted on every corpus would not
give (its statistics follow the share of true pairs among the candidates).

Weights are fixed by hand (each feature once, signed so that higher means more parallel), except
where ``choices`` lists the weights tried for a feature: that weight was chosen among them by
tuned F1 on the sample's gold (``scripts/fit_combination.py --choose``), and a held-out estimate
must choose again inside each training fold (:func:`triemine.evaluation.pipeline.evaluate_choosing`
over :meth:`Combination.variants`), never report the whole sample's choice as held-out.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Dict, List

import numpy as np

from triemine.errors import InputError
from triemine.io import read_json


@dataclass
class Combination:
    """``combined`` of ``features`` (module docstring): one weight each, ``mean``/``std``
    once fitted (:meth:`fit`), ``choices`` (at most one feature: the weights its weight was
    chosen among).  A ``ValueError`` for fields that do not fit."""

    name: str
    features: List[str]
    weights: List[float]
    mean: List[float] = field(default_factory=list)
    std: List[float] = field(default_factory=list)
    fitted_on: str = ""
    choices: Dict[str, List[float]] = field(default_factory=dict)  # feature -> weights tried

    def __post_init__(self):
        if len(self.weights) != len(self.features):
            raise ValueError("one weight per feature")
        if not isinstance(self.choices, dict):
            raise ValueError("choices must map a feature to the weights tried")
        unknown = [f for f in self.choices if f not in self.features]
        if unknown or len(self.choices) > 1:
            raise ValueError(
                f"choices must name one of the features, got {', '.join(self.choices)}"
            )
        for grid in self.choices.values():
            if not isinstance(grid, list) or not grid:
                raise ValueError("choices must list at least one weight")

    def with_weight(self, feature: str, weight: float) -> "Combination":
        """A copy with ``feature``'s weight set to ``weight`` (same normalisation)."""
        weights = [
            float(weight) if f == feature else w for f, w in zip(self.features, self.weights)
        ]
        return replace(self, weights=weights, mean=list(self.mean), std=list(self.std),
                       choices={k: list(v) for k, v in self.choices.items()})

    def variants(self) -> Dict[str, "Combination"]:
        """``{"feature=w": copy}`` for every weight in ``choices`` (in order), or ``{"": self}``."""
        if not self.choices:
            return {"": self}
        (feature, grid), = self.choices.items()
        return {f"{feature}={w:g}": self.with_weight(feature, w) for w in grid}

    def fit(self, columns: Dict[str, np.ndarray], fitted_on: str) -> "Combination":
        """Means and standard deviations of the features over a reference candidate set."""
        mean, std = [], []
        for f in self.features:
            v = np.asarray(columns[f], dtype=np.float64)
            v = v[np.isfinite(v)]
            if v.size < 2:
                raise ValueError(f"cannot fit {self.name}: feature {f} has fewer than 2 values")
            mean.append(float(v.mean()))
            std.append(float(v.std()) or 1.0)
        return Combination(self.name, list(self.features), list(self.weights), mean, std, fitted_on,
                           {k: list(v) for k, v in self.choices.items()})

    def __call__(self, columns: Dict[str, np.ndarray]) -> np.ndarray:
        if len(self.mean) != len(self.features):
            raise ValueError(f"combination {self.name} is not fitted")
        missing = [f for f in self.features if f not in columns]
        if missing:
            raise InputError(f"combination {self.name} needs the column(s) {', '.join(missing)}")
        out = 0.0
        for f, w, m, s in zip(self.features, self.weights, self.mean, self.std):
            out = out + w * (np.asarray(columns[f], dtype=np.float64) - m) / s
        return np.asarray(out, dtype=np.float64)

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path) -> "Combination":
        """A combination file (``Combination``'s fields as JSON)."""
        return cls.of(read_json(path, "combination file"), os.fspath(path))

    @classmethod
    def of(cls, data, where: str) -> "Combination":
        """A combination from its fields; an :class:`InputError` naming ``where`` otherwise."""
        try:
            comb = cls(**data)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"not a combination file ({exc})", where) from None
        for v in (
            comb.weights + comb.mean + comb.std + [w for g in comb.choices.values() for w in g]
        ):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InputError(f"combination values must be finite numbers, got {v!r}", where)
        return comb
