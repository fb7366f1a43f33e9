"""The ``zsum`` judge: a fixed combination of standardised features, its probability curve and
its cut, one small JSON file (``combined.json``, ``mt-only.json`` beside this module).

The judge writes its score column ``column`` (:data:`COLUMN`, ``combined``, for mined candidates;
``judge`` for the given-pairs judge of ``trie-mine-score``): ``sum_i w_i * (x_i - mean_i)
/ std_i`` (:class:`~triemine.judging.combination.Combination`: hand weights, a normalisation
fitted once without gold, ``choices`` for a held-out re-choice of one weight) and, when it has a
``curve``, ``prob`` = ``sigmoid(a * score + b)`` (Platt,
:class:`~triemine.judging.calibration.Calibration`).  Its ``cut`` is ``score >= value``,
tuned where ``source`` says (None: it ships none).

A file holds exactly ``version`` (:data:`VERSION`), ``kind`` (``"zsum"``), ``column`` (a
non-empty name that is none of its features nor ``prob``), ``combination``
(a fitted combination's fields), ``curve`` (``{"a", "b", "fitted_on"}`` with ``a > 0``, or
null) and ``cut`` (``{"value", "direction", "source"}`` and optionally ``signature`` and
``scores_where_chosen``, or null); :meth:`ZSum.of` checks every one and names the file in its
:class:`~triemine.errors.InputError`.  A configuration record names the file and its
:meth:`ZSum.fingerprint`, under ``judge`` for mined candidates and ``pairs_judge`` for given
pairs (:mod:`triemine.judging.shipped`).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Dict, Mapping, Optional

import numpy as np

from triemine.errors import InputError
from triemine.io import read_json
from triemine.judging.calibration import Calibration
from triemine.judging.combination import Combination

VERSION = 1
KIND = "zsum"
COLUMN = "combined"   # the score column a mining zsum judge writes, ranks by and cuts
FIELDS = ("version", "kind", "column", "combination", "curve", "cut")
CURVE_FIELDS = ("a", "b", "fitted_on")
CUT_REQUIRED = ("value", "direction", "source")
CUT_OPTIONAL = ("signature", "scores_where_chosen")
MAX_BYTES = 1 << 20


def _number(v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class ZSum:
    """A checked ``zsum`` judge (module docstring): ``combination`` (fitted), ``curve`` (None:
    no ``prob``; its ``score`` is ``column``), ``cut`` (the file's object, None: no shipped
    cut) and ``column``, the score column it writes."""

    combination: Combination
    curve: Optional[Calibration]
    cut: Optional[Dict[str, object]]
    column: str = COLUMN

    kind = KIND

    @property
    def cut_value(self) -> Optional[float]:
        """The cut ``combined >= value``; None when the judge ships none."""
        return None if self.cut is None else float(self.cut["value"])

    def columns(self, columns: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """``{column: ...}`` of ``columns`` (float64, one value a row), with ``prob`` when
        the judge has a curve; an :class:`InputError` naming a missing feature."""
        out = {self.column: self.combination(dict(columns))}
        if self.curve is not None:
            out["prob"] = np.asarray(self.curve(out[self.column]), dtype=np.float64)
        return out

    def as_dict(self) -> dict:
        """The file's fields (what :meth:`of` reads back to an equal judge)."""
        curve = None if self.curve is None else {
            "a": self.curve.a, "b": self.curve.b, "fitted_on": self.curve.fitted_on}
        return {"version": VERSION, "kind": KIND, "column": self.column,
                "combination": asdict(self.combination),
                "curve": curve, "cut": None if self.cut is None else dict(self.cut)}

    def fingerprint(self) -> str:
        """The first 16 hex digits of the SHA-256 of the judge's canonical JSON."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @classmethod
    def of(cls, data, where: str) -> "ZSum":
        """A judge from a file's fields (module docstring): every field present, none unknown,
        each checked; an :class:`InputError` naming ``where`` and the first problem."""
        try:
            if not isinstance(data, dict) or data.get("version") != VERSION:
                raise ValueError(f"version {VERSION} judge expected")
            if data.get("kind") != KIND:
                raise ValueError(f"kind must be {KIND!r}, got {data.get('kind')!r}")
            missing = [k for k in FIELDS if k not in data]
            if missing:
                raise ValueError(f"a {KIND} judge needs {', '.join(missing)}")
            unknown = sorted(set(data) - set(FIELDS))
            if unknown:
                raise ValueError(f"unknown field(s) {', '.join(unknown)}")
            column = data["column"]
            if not isinstance(column, str) or not column or column == "prob":
                raise ValueError(f"column must be a non-empty name other than prob, got "
                                 f"{column!r}")
            comb = cls._combination(data["combination"], where, column)
            return cls(comb, cls._curve(data["curve"], column), cls._cut(data["cut"]), column)
        except (TypeError, ValueError) as exc:
            raise InputError(f"not a judge file ({exc})", where) from None

    @staticmethod
    def _combination(data, where: str, column: str) -> Combination:
        if not isinstance(data, dict):
            raise ValueError("combination must be an object of a combination's fields")
        try:
            comb = Combination.of(data, where)
        except InputError as exc:
            raise ValueError(f"combination: {exc.problem}") from None
        if not comb.features or not all(isinstance(f, str) and f for f in comb.features):
            raise ValueError("combination: features must be a list of column names")
        if len(set(comb.features)) != len(comb.features) or column in comb.features:
            raise ValueError(f"combination: a feature is named twice or is {column!r}")
        if not (len(comb.mean) == len(comb.std) == len(comb.features)):
            raise ValueError("combination: one mean and std per feature (a fitted combination)")
        if any(s <= 0 for s in comb.std):
            raise ValueError("combination: every std must be positive")
        return comb

    @staticmethod
    def _curve(data, column: str) -> Optional[Calibration]:
        if data is None:
            return None
        if not isinstance(data, dict) or sorted(data) != sorted(CURVE_FIELDS):
            raise ValueError(f"curve must be null or an object of {', '.join(CURVE_FIELDS)}")
        a = _number(data["a"], "curve a")
        _number(data["b"], "curve b")
        if a <= 0:
            raise ValueError(f"curve a must be > 0 (prob rises with {column}), got {a}")
        if not isinstance(data["fitted_on"], str):
            raise ValueError("curve fitted_on must be a text")
        return Calibration(data["a"], data["b"], column, data["fitted_on"])

    @staticmethod
    def _cut(data) -> Optional[Dict[str, object]]:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError("cut must be null or an object")
        missing = [k for k in CUT_REQUIRED if k not in data]
        unknown = sorted(set(data) - set(CUT_REQUIRED) - set(CUT_OPTIONAL))
        if missing or unknown:
            raise ValueError(f"cut needs {', '.join(CUT_REQUIRED)}"
                             + (f" and has no {', '.join(unknown)}" if unknown else ""))
        _number(data["value"], "cut value")
        for k in ("direction", "source") + (("signature",) if "signature" in data else ()):
            if not isinstance(data[k], str) or not data[k]:
                raise ValueError(f"cut {k} must be a non-empty text")
        if not isinstance(data.get("scores_where_chosen", {}), dict):
            raise ValueError("cut scores_where_chosen must be an object")
        return dict(data)

    @classmethod
    def load(cls, path) -> "ZSum":
        """A ``zsum`` judge file; an :class:`InputError` naming ``path`` for one that is
        missing, over 1 MB or not one (:meth:`of`)."""
        where = os.fspath(path)
        if not os.path.isfile(path):
            raise InputError("no such judge file", where)
        if os.path.getsize(path) > MAX_BYTES:
            raise InputError("a zsum judge file is at most 1 MB", where)
        return cls.of(read_json(path, "judge file"), where)
