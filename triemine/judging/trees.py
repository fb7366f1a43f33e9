"""A forest of binary trees as flat arrays, evaluated vectorised: the judge's ``trees`` kind.

A forest is gradient boosting's additive model of the log-odds: ``baseline`` plus, for every
tree, the value of the leaf a row reaches.  It is a mapping of plain lists (JSON), one entry a
node, the nodes of every tree in one list:

* ``roots``: the index of each tree's root node;
* ``feature``: the column a node splits on, -1 at a leaf;
* ``threshold``: a row goes to ``left`` when its feature is ``<= threshold``, else ``right``;
* ``missing_left``: 1 where a NaN feature goes ``left``, 0 where it goes ``right``;
* ``left``, ``right``: the children's indices, each larger than its node's own (-1 at a leaf);
* ``value``: a leaf's term of the log-odds (0 at an inner node);
* ``baseline``: the constant term (a number).

:func:`check_forest` validates one (so evaluation always ends, in at most the depth of the
deepest tree steps), :func:`forest_logit` evaluates it on a feature matrix, and
:func:`forest_of_sklearn` reads one out of a fitted scikit-learn
``HistGradientBoostingClassifier`` (the training script's model) without importing
scikit-learn, so the package never needs it at run time.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

BIG = float(np.finfo(np.float64).max)
ARRAYS = ("roots", "feature", "threshold", "missing_left", "left", "right", "value")


def check_forest(forest: Mapping, n_features: int) -> dict:
    """``forest`` (module docstring) as a dict of plain lists, checked: one entry a node in
    each array, features in ``[0, n_features)`` or -1 at a leaf, finite values, children after
    their node, at least one tree.  A ``ValueError`` naming the first problem."""
    if not isinstance(forest, Mapping) or set(forest) != set(ARRAYS) | {"baseline"}:
        raise ValueError(f"a forest has exactly the keys {', '.join(ARRAYS)} and baseline")
    base = forest["baseline"]
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base):
        raise ValueError("the forest's baseline must be a finite number")
    out = {"baseline": float(base)}
    for key in ARRAYS:
        vals = forest[key]
        if not isinstance(vals, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            raise ValueError(f"the forest's {key} must be a list of numbers")
        out[key] = list(vals)
    n = len(out["feature"])
    if not out["roots"] or any(len(out[k]) != n for k in ARRAYS if k != "roots"):
        raise ValueError("a forest needs a tree and one entry a node in every array")
    if not np.isfinite(np.asarray(out["threshold"] + out["value"], dtype=np.float64)).all():
        raise ValueError("the forest's thresholds and values must be finite")
    feat, left, right = (np.asarray(out[k]) for k in ("feature", "left", "right"))
    roots, miss = np.asarray(out["roots"]), np.asarray(out["missing_left"])
    node = np.arange(n)
    inner = feat >= 0
    ok = ((feat == np.round(feat)) & (feat >= -1) & (feat < n_features)).all() and \
        ((roots >= 0) & (roots < n) & (roots == np.round(roots))).all() and \
        np.isin(miss, (0, 1)).all() and \
        ((left[inner] > node[inner]) & (left[inner] < n) & (right[inner] > node[inner]) &
         (right[inner] < n)).all() and (left == np.round(left)).all() and \
        (right == np.round(right)).all()
    if not ok:
        raise ValueError("the forest's nodes are not trees over the judge's features")
    for k in ("roots", "feature", "missing_left", "left", "right"):
        out[k] = [int(v) for v in out[k]]
    out["threshold"] = [float(v) for v in out["threshold"]]
    out["value"] = [float(v) for v in out["value"]]
    return out


def forest_logit(forest: Mapping, x: np.ndarray) -> np.ndarray:
    """The log-odds of every row of ``x`` (``(rows, features)`` float64) by the checked
    ``forest``: ``baseline`` plus the sum over trees of the value of the leaf the row reaches.
    All rows walk all trees at once, one level a step."""
    x = np.asarray(x, dtype=np.float64)
    feat = np.asarray(forest["feature"], dtype=np.int64)
    thr = np.asarray(forest["threshold"], dtype=np.float64)
    miss = np.asarray(forest["missing_left"], dtype=bool)
    left = np.asarray(forest["left"], dtype=np.int64)
    right = np.asarray(forest["right"], dtype=np.int64)
    node = np.broadcast_to(np.asarray(forest["roots"], dtype=np.int64),
                           (len(x), len(forest["roots"]))).copy()
    rows = np.arange(len(x))[:, None]
    while True:
        f = feat[node]
        inner = f >= 0
        if not inner.any():
            break
        v = x[rows, np.maximum(f, 0)]
        go_left = np.where(np.isnan(v), miss[node], v <= thr[node])
        node = np.where(inner, np.where(go_left, left[node], right[node]), node)
    return float(forest["baseline"]) + np.asarray(forest["value"], dtype=np.float64)[node].sum(
        axis=1)


def forest_of_sklearn(model) -> dict:
    """The forest (module docstring) of a fitted binary scikit-learn
    ``HistGradientBoostingClassifier`` ``model`` without categorical features: its log-odds
    (``decision_function``) equals :func:`forest_logit` of the result on rows of finite or NaN
    features (an infinite split threshold is stored as the largest float).  Reads the fitted
    model's trees (``_predictors``, ``_baseline_prediction``); a ``ValueError`` for a model it
    cannot express."""
    predictors = getattr(model, "_predictors", None)
    if not predictors or any(len(p) != 1 for p in predictors):
        raise ValueError("a fitted binary HistGradientBoostingClassifier expected")
    out = {k: [] for k in ARRAYS}
    for (tree,) in predictors:
        nodes, base = tree.nodes, len(out["feature"])
        if nodes["is_categorical"].any():
            raise ValueError("categorical splits are not supported")
        leaf = nodes["is_leaf"].astype(bool)
        out["roots"].append(base)
        out["feature"] += np.where(leaf, -1, nodes["feature_idx"]).tolist()
        thr = np.clip(nodes["num_threshold"], -BIG, BIG)   # inf: every finite value one side
        out["threshold"] += np.where(leaf, 0.0, thr).tolist()
        out["missing_left"] += np.where(leaf, 0, nodes["missing_go_to_left"]).tolist()
        out["left"] += np.where(leaf, -1, nodes["left"] + base).tolist()
        out["right"] += np.where(leaf, -1, nodes["right"] + base).tolist()
        out["value"] += np.where(leaf, nodes["value"], 0.0).tolist()
    out["baseline"] = float(np.ravel(model._baseline_prediction)[0])
    return check_forest(out, int(model.n_features_in_))
