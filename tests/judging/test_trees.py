"""The judge's ``trees`` kind (triemine.judging.trees): a forest as flat arrays, evaluated by
numpy as scikit-learn evaluates the model it came from, saved and loaded, fitted by the
training script."""
import sys
from pathlib import Path

import numpy as np
import pytest

from triemine.errors import InputError
from triemine.judging.model import Judge
from triemine.judging.trees import check_forest, forest_logit, forest_of_sklearn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

# two trees over features 0 and 1: tree 0 splits on x0 <= 0 (NaN left), then its right child
# on x1 <= 2 (NaN right); tree 1 is a single leaf
HAND = {"roots": [0, 5], "feature": [0, -1, 1, -1, -1, -1],
        "threshold": [0.0, 0.0, 2.0, 0.0, 0.0, 0.0], "missing_left": [1, 0, 0, 0, 0, 0],
        "left": [1, -1, 3, -1, -1, -1], "right": [2, -1, 4, -1, -1, -1],
        "value": [0.0, -1.0, 0.0, 0.5, 2.0, 0.25], "baseline": 0.125}


def _synthetic(n: int, seed: int):
    """Four features with an interaction (not linearly separable) and some NaNs."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    y = ((x[:, 0] * x[:, 1] > 0) ^ (rng.random(n) < 0.1)).astype(int)
    x[rng.random((n, 4)) < 0.05] = np.nan
    return x, y


def test_hand_built_forest_routes_each_row_to_its_leaf():
    forest = check_forest(HAND, 2)
    x = np.array([[-1.0, 9.0], [0.0, 0.0], [1.0, 2.0], [1.0, 2.5], [np.nan, 5.0],
                  [3.0, np.nan]])
    # leaves: 1, 1 (<= goes left), 3, 4, 1 (NaN left), 4 (NaN right); plus tree 1 and baseline
    want = 0.125 + 0.25 + np.array([-1.0, -1.0, 0.5, 2.0, -1.0, 2.0])
    np.testing.assert_array_equal(forest_logit(forest, x), want)
    assert forest_logit(forest, np.zeros((0, 2))).shape == (0,)


@pytest.mark.parametrize("change,problem", [
    ({"left": [0, -1, 3, -1, -1, -1]}, "trees"),        # a child that is not after its node
    ({"feature": [2, -1, 1, -1, -1, -1]}, "trees"),      # a feature the judge has not
    ({"value": [0.0, np.inf, 0.0, 0.5, 2.0, 0.25]}, "finite"),
    ({"roots": []}, "tree"),
    ({"baseline": None}, "baseline"),
])
def test_a_forest_that_is_not_trees_is_refused(change, problem):
    with pytest.raises(ValueError, match=problem):
        check_forest({**HAND, **change}, 2)
    with pytest.raises(ValueError):
        Judge(["a", "b"], 0.3, kind="trees", forest={**HAND, **change})


def test_numpy_evaluation_equals_sklearn():
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y = _synthetic(3000, 1)
    model = HistGradientBoostingClassifier(max_depth=3, max_iter=40, early_stopping=False,
                                           random_state=0).fit(x, y)
    test, _ = _synthetic(2000, 2)
    forest = forest_of_sklearn(model)
    z = forest_logit(forest, test)
    np.testing.assert_allclose(z, model.decision_function(test), rtol=0, atol=1e-9)
    p = 0.5 * (1 + np.tanh(0.5 * z))
    np.testing.assert_allclose(p, model.predict_proba(test)[:, 1], rtol=0, atol=1e-9)
    assert len(forest["roots"]) == 40


def test_trees_judge_saves_loads_and_keeps_its_contract(tmp_path):
    judge = Judge(["a", "b"], 0.3, kind="trees", forest=HAND, fitted_on="hand")
    path = tmp_path / "j.json"
    judge.save(path)
    back = Judge.load(path)
    assert back == judge and back.fingerprint() == judge.fingerprint()
    cols = {"a": np.array([-1.0, 1.0, np.nan, np.inf]), "b": np.array([0.0, 3.0, 1.0, 1.0])}
    z = back.logit(cols)
    np.testing.assert_array_equal(z[:2], [-0.625, 2.375])
    assert np.isnan(z[2:]).all()   # NaN where a feature is not finite, as the logistic
    other = Judge(["a", "b"], 0.3, kind="trees", forest={**HAND, "baseline": 0.0})
    assert other.fingerprint() != judge.fingerprint()
    with pytest.raises(ValueError, match="no mean"):
        Judge(["a", "b"], 0.3, kind="trees", forest=HAND, weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="no forest"):
        Judge(["a", "b"], 0.3, mean=[0, 0], std=[1, 1], weights=[1, 1], forest=HAND)
    bad = path.read_text().replace('"kind": "trees"', '"kind": "forest"')
    path.write_text(bad)
    with pytest.raises(InputError, match="kind"):
        Judge.load(path)


def test_a_trees_judge_is_seeded_and_learns_an_interaction():
    from triemine.judging.train import fit_trees

    x, y = _synthetic(2000, 3)
    cols = {f: x[:, i] for i, f in enumerate("abcd")}
    judge = fit_trees(cols, y, "abcd", "synthetic", seed=1)
    again = fit_trees(cols, y, "abcd", "synthetic", seed=1)
    assert judge.kind == "trees" and judge.fingerprint() == again.fingerprint()   # seeded
    fin = np.isfinite(x).all(axis=1)
    assert judge.train_prior == pytest.approx(y[fin].mean())
    test, ty = _synthetic(2000, 4)
    tc = {f: test[:, i] for i, f in enumerate("abcd")}
    p = judge.prob(judge.logit(tc))
    ok = np.isfinite(p)
    assert ((p[ok] >= 0.5) == ty[ok]).mean() > 0.8      # x0 * x1 > 0: no line separates it
    linear = Judge.fit(cols, y, tuple("abcd"))
    q = linear.prob(linear.logit(tc))
    assert ((q[ok] >= 0.5) == ty[ok]).mean() < 0.7


def test_a_weighted_blend_weighs_both_of_its_judges():
    from triemine.judging.train import fit

    x, y = _synthetic(1500, 6)
    cols = {f: x[:, i] for i, f in enumerate("abcd")}
    plain = fit(cols, y, tuple("abcd"), "blend")
    ones = fit(cols, y, tuple("abcd"), "blend", sample_weight=np.ones(len(y)))
    np.testing.assert_allclose(ones.logit(cols), plain.logit(cols), rtol=0, atol=1e-9)
    w = np.where(y == 1, 3.0, 1.0)        # positives weigh three times: both parts must see it
    heavy = fit(cols, y, tuple("abcd"), "blend", sample_weight=w)
    fin = np.isfinite(x).all(axis=1)
    assert heavy.train_prior == pytest.approx(np.average(y[fin], weights=w[fin]))
    linear = Judge.fit(cols, y, tuple("abcd"), sample_weight=w)
    trees = fit(cols, y, tuple("abcd"), "trees", sample_weight=w)
    np.testing.assert_allclose(heavy.logit(cols), 0.5 * (linear.logit(cols) + trees.logit(cols)),
                               rtol=0, atol=1e-12)
    unweighted_trees = fit(cols, y, tuple("abcd"), "trees")
    gap = trees.logit(cols)[fin] - unweighted_trees.logit(cols)[fin]
    assert gap.mean() > 0.5          # log 3 = 1.1 more odds of a positive, roughly


def test_blend_is_the_mean_of_its_two_judges(tmp_path):
    from triemine.judging.train import fit_trees

    x, y = _synthetic(1500, 5)
    cols = {f: x[:, i] for i, f in enumerate("abcd")}
    linear = Judge.fit(cols, y, tuple("abcd"))
    trees = fit_trees(cols, y, tuple("abcd"), seed=2)
    blend = Judge.blend(linear, trees, "both")
    path = tmp_path / "b.json"
    blend.save(path)
    back = Judge.load(path)
    assert back == blend and back.kind == "blend"
    z = back.logit(cols)
    np.testing.assert_allclose(z, 0.5 * (linear.logit(cols) + trees.logit(cols)), rtol=0,
                               atol=1e-12)
    assert np.isnan(z[~np.isfinite(x).all(axis=1)]).all()
    with pytest.raises(ValueError, match="same rows"):
        Judge.blend(trees, linear)
    with pytest.raises(ValueError, match="one mean"):
        Judge(list("abcd"), 0.3, kind="blend", forest=trees.forest)


def test_a_judge_reads_its_features_at_the_tsv_precision():
    """A full-precision feature and the value a mining TSV writes for it fall on the same side
    of a split, so a TSV's judge column is what its own columns give."""
    from triemine.io.tsv import format_number

    forest = {**HAND, "threshold": [3e-7, 0.0, 2.0, 0.0, 0.0, 0.0]}
    judge = Judge(["a", "b"], 0.3, kind="trees", forest=forest)
    full = np.array([4e-7, -4e-7, 0.9999996, 2.0000004])
    written = np.array([float(format_number(v)) for v in full])
    b = np.array([9.0, 9.0, 1.0, 1.0])
    np.testing.assert_array_equal(judge.logit({"a": full, "b": b}),
                                  judge.logit({"a": written, "b": b}))
    assert judge.logit({"a": full[:1], "b": b[:1]})[0] == 0.125 + 0.25 - 1.0   # 4e-7 reads 0
