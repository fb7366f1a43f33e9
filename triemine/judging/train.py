"""Training a judge on labelled candidates: a user's own (``trie-mine-train-judge``) or the
shipped one's (``scripts/train_judge.py``).

:func:`train` reads what the judge needs from a mining TSV's rows (a
:class:`triemine.io.tsv.Mined`: its numeric columns, and the text features computed from its
texts where the TSV lacks them), fits a :class:`~triemine.judging.model.Judge` on 0/1 labels of
its rows and returns it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from triemine.judging.features import MINED_FEATURES, text_features
from triemine.judging.model import Judge


def mined_columns(mined) -> dict:
    """The judge's columns of every row of ``mined``: its numeric columns, with the text
    features (:func:`triemine.judging.features.text_features`) of its texts added where the
    TSV has none."""
    cols = {c: mined.col(c) for c in mined.numeric}
    for c, v in text_features(mined.src, mined.tgt).items():
        cols.setdefault(c, v)
    return cols


def train(mined, labels, features: Sequence[str] = MINED_FEATURES, fitted_on: str = "",
          c: float = 1.0) -> Judge:
    """The judge of 0/1 ``labels`` (one a row of ``mined``) on ``features``; a
    ``ValueError`` when the rows lack a feature or a class."""
    labels = np.asarray(labels)
    if labels.shape != (len(mined.src),):
        raise ValueError(f"{labels.shape[0]} labels for {len(mined.src)} rows")
    cols = mined_columns(mined)
    missing = [f for f in features if f not in cols]
    if missing:
        raise ValueError(f"the TSV has no column {', '.join(missing)} (mine it with the "
                         "default job's candidates)")
    return Judge.fit(cols, labels, features, fitted_on=fitted_on, c=c)
