"""The judge's columns of mined candidates, a block at a time (the mining job's last stage,
:func:`triemine.mining.finish.finish_tsv`).

:func:`judge_columns` returns the function that adds, to a block's columns, the text features
(:func:`triemine.judging.features.text_features`), ``judge`` (the judge's log-odds) and
``prob`` (its probability, shifted to ``density`` when one is stated); :func:`curve_columns`
the one that adds only ``prob``, a calibration curve of an existing column (a ``zsum``
judge's curve of ``combined``).  Both map ``(columns, src_texts, tgt_texts)`` to the new
columns, float64 arrays of one value a candidate.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import numpy as np

from triemine.judging.features import text_features
from triemine.judging.model import Judge

Columns = Dict[str, np.ndarray]
Adder = Callable[[Columns, Sequence[str], Sequence[str]], Columns]


def judge_columns(judge: Judge, density: Optional[float] = None) -> Adder:
    """The block function of ``judge`` (module docstring); ``density``: the share of the
    candidates that are translations (None: the judge's ``train_prior``)."""
    def add(columns: Columns, src: Sequence[str], tgt: Sequence[str]) -> Columns:
        out = text_features(src, tgt)
        z = judge.logit({**columns, **out})
        return {**out, "judge": z, "prob": judge.prob(z, density)}
    return add


def curve_columns(curve) -> Adder:
    """The block function that adds ``prob`` = ``curve(columns[curve.score])`` (a
    :class:`triemine.judging.calibration.Calibration`)."""
    def add(columns: Columns, _src: Sequence[str], _tgt: Sequence[str]) -> Columns:
        return {"prob": np.asarray(curve(columns[curve.score]), dtype=np.float64)}
    return add
