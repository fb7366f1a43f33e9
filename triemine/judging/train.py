"""Training a judge on labelled candidates: a user's own (``trie-mine-train-judge``) or the
shipped one's (``scripts/train_judge.py``).

:func:`fit` fits a :class:`~triemine.judging.model.Judge` of one of
:data:`~triemine.judging.model.KINDS` on feature columns and 0/1 labels; :func:`train` reads
what the judge needs from a mining TSV's rows (a :class:`triemine.io.tsv.Mined`: its numeric
columns, and the text features computed from its texts where the TSV lacks them) and fits
one.  The ``trees`` and ``blend`` kinds fit with scikit-learn (imported here, at training time
only: a fitted judge is evaluated by numpy).
"""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from triemine.judging.features import MINED_FEATURES, matrix, text_features
from triemine.judging.model import KINDS, Judge
from triemine.judging.trees import forest_of_sklearn

SHIPPED_KIND = "blend"  # the shipped judge's kind, the default of every fit
SEED = 58  # the forest's random state
# the forest's settings (scikit-learn's HistGradientBoostingClassifier, no early stopping)
TREES = {"max_depth": 3, "max_iter": 200, "learning_rate": 0.1, "l2_regularization": 1.0}


def mined_columns(mined) -> dict:
    """The judge's columns of every row of ``mined``: its numeric columns, with the text
    features (:func:`triemine.judging.features.text_features`) of its texts added where the
    TSV has none."""
    cols = {c: mined.col(c) for c in mined.numeric}
    for c, v in text_features(mined.src, mined.tgt).items():
        cols.setdefault(c, v)
    return cols


def fit_trees(columns, labels, features: Sequence[str], fitted_on: str = "",
              seed: int = SEED, sample_weight=None) -> Judge:
    """The ``trees`` judge of 0/1 ``labels`` on ``features`` of ``columns``: scikit-learn's
    ``HistGradientBoostingClassifier`` with :data:`TREES` (no early stopping, ``seed``), each
    row's loss times its ``sample_weight`` (default 1), its forest read out by
    :func:`triemine.judging.trees.forest_of_sklearn`; rows with a non-finite feature are left
    out, ``train_prior`` is the weighted share of positives."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y = matrix(columns, features), np.asarray(labels, dtype=np.int64)
    sw = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    keep = np.isfinite(x).all(axis=1)
    model = HistGradientBoostingClassifier(early_stopping=False, random_state=seed, **TREES)
    model.fit(x[keep], y[keep], sample_weight=None if sample_weight is None else sw[keep])
    return Judge(list(features), float(np.average(y[keep], weights=sw[keep])), kind="trees",
                 forest=forest_of_sklearn(model), fitted_on=fitted_on)


def fit(columns, labels, features: Sequence[str] = MINED_FEATURES, kind: str = SHIPPED_KIND,
        fitted_on: str = "", c: float = 1.0, seed: int = SEED, sample_weight=None) -> Judge:
    """The judge of ``kind`` of 0/1 ``labels`` on ``features`` of ``columns``: ``logistic``
    (:meth:`Judge.fit`, L2 strength ``1 / c``), ``trees`` (:func:`fit_trees`, ``seed``) or
    ``blend`` (both, :meth:`Judge.blend`), each row's loss times its ``sample_weight``
    (default 1); ``fitted_on`` says what it was fitted on, the model's settings appended.  A
    ``ValueError`` for another kind, or when a class is missing."""
    if kind not in KINDS:
        raise ValueError(f"unknown judge kind {kind!r} (choose from {', '.join(KINDS)})")
    trees_how = (f"HistGradientBoostingClassifier {json.dumps(TREES, sort_keys=True)}, "
                 f"seed {seed}")
    if kind == "trees":
        if len(set(np.asarray(labels).tolist())) < 2:
            raise ValueError("the labels hold one class: a judge needs both")
        return fit_trees(columns, labels, features, f"{fitted_on}; {trees_how}", seed,
                         sample_weight)
    judge = Judge.fit(columns, labels, features, fitted_on=fitted_on, c=c,
                      sample_weight=sample_weight)
    if kind == "blend":
        judge = Judge.blend(judge, fit_trees(columns, labels, features, seed=seed,
                                             sample_weight=sample_weight),
                            f"{fitted_on}; the mean log-odds of a logistic regression "
                            f"(C={c}) and {trees_how}")
    return judge


def train(mined, labels, features: Sequence[str] = MINED_FEATURES, fitted_on: str = "",
          c: float = 1.0, kind: str = SHIPPED_KIND, seed: int = SEED) -> Judge:
    """The judge of ``kind`` (:func:`fit`) of 0/1 ``labels`` (one a row of ``mined``) on
    ``features``; a ``ValueError`` when the rows lack a feature or a class."""
    labels = np.asarray(labels)
    if labels.shape != (len(mined.src),):
        raise ValueError(f"{labels.shape[0]} labels for {len(mined.src)} rows")
    cols = mined_columns(mined)
    missing = [f for f in features if f not in cols]
    if missing:
        raise ValueError(f"the TSV has no column {', '.join(missing)} (mine it with "
                         "--config judge, whose exact pass writes them, or pass --features)")
    return fit(cols, labels, features, kind, fitted_on, c, seed)
