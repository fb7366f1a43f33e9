"""--config judge end to end on the tiny model: the judge's columns in the mining TSV, its
prob shifted by --density, another judge by --judge, the same features for the same pairs
given to trie-mine-score, and the combined configuration's prob column."""
import numpy as np
import pytest

from triemine.io import read_mined
from triemine.judging.features import MINED_FEATURES
from triemine.scoring.rows import JUDGE_ROWS
from triemine.judging.model import Judge, load_judge
from triemine.judging.prior import estimate_prior, sigmoid
from triemine.config.configurations import configuration
from triemine.judging.shipped import judge_record, shipped_calibration


def _mine(tiny_model_dir, corpora, out, *extra):
    from triemine.cli import mine_main

    src, tgt, _, _ = corpora
    assert mine_main(["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt),
                      "-q", "-o", str(out)] + list(extra)) == 0
    return read_mined(out)


def test_judge_configuration_writes_judge_and_prob(tiny_model_dir, corpora, tmp_path,
                                                   monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    m = _mine(tiny_model_dir, corpora, tmp_path / "j.tsv", "--config", "judge")
    assert len(m) > 0 and {"judge", "prob", "len_ratio", "number_match",
                           *JUDGE_ROWS} <= set(m.columns)
    assert ((m.col("uncovered") >= 0) & (m.col("uncovered") <= 1)).all()
    # log-probabilities of single tokens: EOS's and the least of the others', every token's
    # at most the sum of all (score, EOS included)
    for c in ("eos_lp", "tok_min_lp"):
        assert (m.col(c) <= 0).all() and (m.col(c) >= m.col("score") - 1e-5).all()
    judge = load_judge()
    cols = {c: m.col(c) for c in m.numeric}
    np.testing.assert_allclose(m.col("judge"), judge.logit(cols), atol=1e-5)
    # no --density: prob is shifted to the share EM estimates from the candidates themselves
    share = estimate_prior(m.col("judge"), judge.train_prior)
    np.testing.assert_allclose(m.col("prob"), judge.prob(m.col("judge"), share), atol=2e-6)
    assert m.meta["density"] == pytest.approx(share, abs=1e-4)
    at = _mine(tiny_model_dir, corpora, tmp_path / "at.tsv", "--config", "judge", "--density",
               repr(judge.train_prior))
    np.testing.assert_allclose(at.col("prob"), sigmoid(at.col("judge")), atol=1e-6)
    low = _mine(tiny_model_dir, corpora, tmp_path / "low.tsv", "--config", "judge",
                "--density", "0.001")
    np.testing.assert_allclose(low.col("judge"), m.col("judge"), atol=1e-9)
    np.testing.assert_allclose(low.col("prob"), judge.prob(low.col("judge"), 0.001), atol=1e-6)
    assert (low.col("prob") <= at.col("prob")).all() and (low.col("prob") < at.col("prob")).any()
    # another judge: every candidate a translation by its bias alone
    rows = len(m)
    other = Judge.fit({f: np.arange(rows, dtype=float) for f in MINED_FEATURES},
                      np.arange(rows) % 2, MINED_FEATURES, "test")
    other = Judge(**{**other.as_dict(), "weights": [0.0] * len(MINED_FEATURES), "bias": 9.0})
    path = tmp_path / "other.json"
    other.save(path)
    mine = _mine(tiny_model_dir, corpora, tmp_path / "o.tsv", "--config", "judge", "--judge",
                 str(path))
    np.testing.assert_allclose(mine.col("judge"), 9.0)


def test_given_pairs_get_the_mined_features(tiny_model_dir, corpora, tmp_path, monkeypatch):
    from triemine.cleaning import score

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    m = _mine(tiny_model_dir, corpora, tmp_path / "j.tsv", "--config", "judge")
    res = score(list(zip(m.src, m.tgt)), model=tiny_model_dir, output=tmp_path / "s.tsv",
                config="judge", density=0.3)
    for c in ("len_ratio", "number_match", "numerals"):
        np.testing.assert_allclose(res.columns[c], m.col(c), atol=1e-6)  # the TSV's 6 places
    for c in ("ce_token", "pmi", "prior", "eos_lp", "tok_min_lp"):
        np.testing.assert_allclose(res.columns[c], m.col(c), atol=1e-3)
    assert np.isfinite(res.columns["uncovered"]).all()
    judge = load_judge()
    np.testing.assert_allclose(res.columns["prob"], judge.prob(res.columns["judge"], 0.3),
                               atol=1e-9)
    assert res.cut == ("prob", 0.5)


def test_combined_configuration_gains_its_curve_as_prob(tiny_model_dir, corpora, tmp_path,
                                                        monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    m = _mine(tiny_model_dir, corpora, tmp_path / "c.tsv", "--config", "combined")
    assert "judge" not in m.columns and not set(JUDGE_ROWS) & set(m.columns)
    curve = shipped_calibration("combined", "mined")
    np.testing.assert_allclose(m.col("prob"), curve(m.col("combined")), atol=1e-6)
    # the sidecar names the configuration's one judge, the zsum file, by its fingerprint
    assert m.meta["judge"] == judge_record("combined")
    assert judge_record("combined")["fingerprint"] == configuration("combined").judge["fingerprint"]
    assert m.columns.index("prob") > m.columns.index("combined")
