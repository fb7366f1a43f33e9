"""triemine.judging.quality and triemine.evaluation.quality: the quality a run's prob promises, the
stratified precision a reader measures and its interval; and a simulated reader whose truth is
known: its 95 % interval must bracket the true precision of the kept set in at least 90 of 100
draws."""
import math

import numpy as np
import pytest
from scipy.stats import binom

from triemine.evaluation.quality import clopper_pearson, stratified_precision
from triemine.judging.quality import expected_quality
from triemine.evaluation.review import Run, draw
from triemine.evaluation.review_answers import Answers, summarize


def test_expected_quality_is_the_sum_and_mean_of_prob_and_the_recall_of_best_probs():
    q = expected_quality([0.9, 0.5, 0.7])
    assert q["kept"] == 3
    assert q["expected_true"] == pytest.approx(2.1)
    assert q["expected_precision"] == pytest.approx(0.7)
    assert "expected_recall" not in q
    q = expected_quality(np.array([0.9, 0.5, 0.7]), best_prob_per_source=[0.9, 0.6, 0.7, 0.3])
    assert q["expected_findable"] == pytest.approx(2.5)
    assert q["expected_recall"] == pytest.approx(2.1 / 2.5)
    empty = expected_quality([], best_prob_per_source=[0.0, 0.0])
    assert empty["kept"] == 0 and empty["expected_precision"] is None
    assert empty["expected_recall"] is None


@pytest.mark.parametrize("bad", [[0.5, 1.2], [-0.1], [float("nan")], [[0.5, 0.5]]])
def test_expected_quality_refuses_what_is_not_a_list_of_probabilities(bad):
    with pytest.raises(ValueError, match="prob_kept"):
        expected_quality(bad)
    with pytest.raises(ValueError, match="best_prob_per_source"):
        expected_quality([0.5], best_prob_per_source=bad)


@pytest.mark.parametrize("x,n", [(0, 10), (3, 10), (10, 10), (97, 100), (1, 1)])
def test_clopper_pearson_is_the_binomial_tail_at_its_ends(x, n):
    low, high = clopper_pearson(x, n, 0.95)
    assert 0 <= low <= x / n <= high <= 1
    if x == 0:
        assert low == 0
    else:  # x or more successes are just as likely as alpha / 2 at the lower end
        assert binom.sf(x - 1, n, low) == pytest.approx(0.025, rel=1e-6)
    if x == n:
        assert high == 1
    else:
        assert binom.cdf(x, n, high) == pytest.approx(0.025, rel=1e-6)
    with pytest.raises(ValueError):
        clopper_pearson(n + 1, n)


def test_strata_are_weighted_by_their_share_of_the_set():
    # a big all-right stratum and a small all-wrong one: weighted 0.9, unweighted 0.5
    est = stratified_precision([900, 100], [10, 10], [10, 0])
    assert est["precision"] == pytest.approx(0.9)
    assert est["low"] < 0.9 < est["high"] and est["n_eff"] == 20  # no variance: the answers
    # one stratum, sampled: the plain proportion, the variance corrected for the finite set
    est = stratified_precision([50], [20], [15])
    assert est["precision"] == pytest.approx(0.75)
    assert est["variance"] == pytest.approx((1 - 20 / 50) * (20 / 19 * 0.75 * 0.25) / 20)
    assert est["n_eff"] == pytest.approx(0.75 * 0.25 / est["variance"])
    # two strata by the stratified formula
    est = stratified_precision([300, 100], [10, 5], [8, 2])
    w = np.array([0.75, 0.25])
    p = np.array([0.8, 0.4])
    var = np.sum(w ** 2 * (1 - np.array([10 / 300, 5 / 100])) * np.array([10, 5])
                 / np.array([9, 4]) * p * (1 - p) / np.array([10, 5]))
    assert est["precision"] == pytest.approx(float(w @ p))
    assert est["variance"] == pytest.approx(var)


def test_a_stratum_without_answers_is_left_out_and_named():
    est = stratified_precision([100, 300], [0, 10], [0, 7])
    assert est["precision"] == pytest.approx(0.7)
    assert est["unanswered_share"] == pytest.approx(0.25) and est["strata_answered"] == 1
    none = stratified_precision([100], [0], [0])
    assert none["precision"] is None and none["low"] is None and none["answered"] == 0
    with pytest.raises(ValueError):
        stratified_precision([10], [5], [6])
    with pytest.raises(ValueError):
        stratified_precision([10, 5], [5], [1])


def _kept_set(rng, size, low, calibration):
    """``size`` kept pairs with probs in [low, 1) skewed high, and a truth drawn once:
    Bernoulli(calibration(prob)) (a judge that is not calibrated: ``prob ** 2``)."""
    prob = low + (1 - low) * rng.beta(5, 1.5, size)
    truth = rng.random(size) < calibration(prob)
    ids = [f"s{i}" for i in range(size)]
    run = Run("kept.tsv", "scores", ids, [f"t{i}" for i in range(size)], ids, ids, prob,
              np.arange(size), {})
    return run, truth


@pytest.mark.parametrize("low,calibration,most_at_half,overconfident",
                         [(0.5, lambda p: p ** 2, 80, True), (0.5, lambda p: p, 80, False),
                          (0.97, lambda p: p, 95, False)])  # near 1 most samples are all right
def test_a_simulated_reader_of_100_pairs_brackets_the_true_precision(low, calibration,
                                                                    most_at_half, overconfident):
    """100 seeds, each a sheet of 100 of 2,000 kept pairs drawn as trie-mine-review draws them,
    answered from the truth; the 95 % interval must hold the true precision in >= 90 of them.
    The same draws at a 50 % level must miss it more often (``most_at_half``): the check can
    fail. A judge that promises too much (``prob ** 2`` true) is caught: the interval leaves
    out the expected precision (mean prob) in most draws."""
    run, truth = _kept_set(np.random.default_rng(11), 2000, low, calibration)
    true_precision = float(truth.mean())
    hits, hits_at_half, promised, widths = 0, 0, 0, []
    for seed in range(100):
        sheet = draw(run, n=100, seed=seed, below=0)
        answers = Answers("answers.tsv", sheet.fingerprint, sheet.params())
        for no, p in enumerate(sheet.pairs, 3):
            answers.rows[p["src_id"], p["tgt_id"]] = ("y" if truth[int(p["src_id"][1:])]
                                                      else "n", no)
        s = summarize(run, sheet, answers)
        assert s["drawn"] == 100 and s["y"] + s["n"] == 100
        hits += s["low"] <= true_precision <= s["high"]
        promised += s["low"] <= s["expected_precision"] <= s["high"]
        widths.append(s["high"] - s["low"])
        half = stratified_precision([st["size"] for st in s["strata"]],
                                    [st["y"] + st["n"] for st in s["strata"]],
                                    [st["y"] for st in s["strata"]], level=0.5)
        hits_at_half += half["low"] <= true_precision <= half["high"]
    assert hits >= 90, f"coverage {hits}/100 of the true precision {true_precision:.4f}"
    assert hits_at_half < most_at_half
    if overconfident:  # the judge promises 0.88 where 0.78 are right
        assert promised < 50
    assert max(widths) < 0.3 and not math.isnan(sum(widths))
