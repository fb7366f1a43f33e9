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

from triemine.errors import InputError
from triemine.judging.features import MINED_FEATURES, matrix, text_features
from triemine.judging.model import KINDS, OUTPUTS, Judge
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


def feature_list(text: str) -> list:
    """The comma-separated column names of ``text`` (``--features``), blanks around them
    dropped; a ``ValueError`` for none, a name given twice or a column the judge itself
    writes (:data:`~triemine.judging.model.OUTPUTS`)."""
    names = [f.strip() for f in str(text).split(",") if f.strip()]
    if not names:
        raise ValueError(f"no column named in {text!r} (comma-separated column names)")
    twice = sorted({f for f in names if names.count(f) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} named twice")
    own = [f for f in names if f in OUTPUTS]
    if own:
        raise ValueError(f"{', '.join(own)}: the judge's own output column(s), not features")
    return names


def gold_labels(mined, gold, mined_path: str, gold_path: str) -> np.ndarray:
    """The 0/1 label of every row of ``mined``: 1 where ``(src_id, tgt_id)`` is a pair of
    ``gold`` (``(l1 id, l2 id)`` pairs read from ``gold_path``).  An :class:`InputError`
    naming the gold file when no gold pair is a row of the TSV (``mined_path``), saying so
    when the gold's columns match the other way round."""
    pairs = set(gold)
    labels = np.fromiter(((s, t) in pairs for s, t in zip(mined.src_ids, mined.tgt_ids)),
                         dtype=np.int64, count=len(mined.src_ids))
    if labels.sum() == 0:
        swapped = sum((t, s) in pairs for s, t in zip(mined.src_ids, mined.tgt_ids))
        hint = (f"; {swapped} match with its columns swapped: write the source id first "
                "(src-id<TAB>tgt-id)" if swapped else
                "; is it the gold of these corpora?")
        raise InputError(f"none of its {len(pairs)} gold pairs is a candidate (src_id, tgt_id) "
                         f"of {mined_path}{hint}", gold_path)
    return labels
