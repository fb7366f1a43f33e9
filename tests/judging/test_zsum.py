"""The fixed combination as a judge kind (``zsum``): its file's checks, the configuration records
naming their one judge, and the one function deciding a TSV's score column and default cut."""
import json
from dataclasses import asdict, replace

import numpy as np
import pytest

from triemine.config.configurations import NAMES, configuration
from triemine.errors import InputError
from triemine.filtering.selection import (default_selection, min_prob_threshold,
                                          shipped_thresholds)
from triemine.io.tsv import Mined
from triemine.judging import shipped as shipped_mod
from triemine.judging.combination import Combination
from triemine.judging.shipped import (ROOT, configuration_judge, learned, shipped, tsv_cut,
                                      tsv_selection, zsum_judge)
from triemine.judging.zsum import FIELDS, ZSum


def _data(name="combined") -> dict:
    return json.loads((ROOT / configuration(name).judge["file"]).read_text(encoding="utf-8"))


def _refused(tmp_path, data, match):
    path = tmp_path / "z.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=match) as exc:
        ZSum.load(path)
    assert str(path) in str(exc.value)   # the error names the file


def test_the_shipped_zsum_judges_read_and_match_their_records():
    for name in ("combined", "mt-only"):
        judge = configuration_judge(name)
        assert isinstance(judge, ZSum) and not learned(name)
        assert judge.fingerprint() == configuration(name).judge["fingerprint"]
        assert ZSum.of(judge.as_dict(), "again") == judge          # the file's fields round-trip
        assert judge.column == "combined" and judge.cut_value is not None
    assert learned("judge") and configuration_judge("paper") is None
    assert zsum_judge("combined").curve is not None and zsum_judge("mt-only").curve is None


def test_a_zsum_judge_writes_combined_and_its_curves_prob():
    judge = zsum_judge("combined")
    rng = np.random.default_rng(0)
    cols = {f: rng.normal(size=20) for f in judge.combination.features}
    out = judge.columns(cols)
    want = sum(w * (cols[f] - m) / s for f, w, m, s in zip(
        judge.combination.features, judge.combination.weights, judge.combination.mean,
        judge.combination.std))
    np.testing.assert_allclose(out["combined"], want, rtol=1e-12)
    np.testing.assert_allclose(out["prob"], 1 / (1 + np.exp(-(judge.curve.a * want
                                                              + judge.curve.b))), atol=1e-12)
    assert set(zsum_judge("mt-only").columns(
        {f: np.zeros(3) for f in zsum_judge("mt-only").combination.features})) == {"combined"}
    # the job's combined score is the judge's combination
    assert asdict(shipped("combined")) == asdict(judge.combination)


@pytest.mark.parametrize("drop", FIELDS)
def test_every_field_of_a_zsum_judge_is_required(tmp_path, drop):
    data = _data()
    del data[drop]
    _refused(tmp_path, data, "not a judge file")


@pytest.mark.parametrize("change, match", [
    (lambda d: d.update(extra=1), "unknown field"),
    (lambda d: d.update(column="prob"), "column must be a non-empty name other than prob"),
    (lambda d: d.update(column=""), "column must be a non-empty name"),
    (lambda d: d.update(column=d["combination"]["features"][1]), "named twice or"),
    (lambda d: d.update(version=2), "version 1"),
    (lambda d: d.update(kind="blend"), "kind must be 'zsum'"),
    (lambda d: d.update(combination=[1, 2]), "combination must be an object"),
    (lambda d: d["combination"].pop("weights"), "combination"),
    (lambda d: d["combination"].update(mean=[]), "a fitted combination"),
    (lambda d: d["combination"]["std"].__setitem__(0, 0.0), "std must be positive"),
    (lambda d: d["combination"]["weights"].__setitem__(1, "x"), "finite numbers"),
    (lambda d: d["combination"]["features"].__setitem__(0, "combined"), "named twice or"),
    (lambda d: d["combination"].update(choices={"nope": [1.0]}), "choices"),
    (lambda d: d["curve"].pop("b"), "curve must be null or an object"),
    (lambda d: d["curve"].update(a=-1.0), "curve a must be > 0"),
    (lambda d: d["curve"].update(a="1"), "curve a must be a finite number"),
    (lambda d: d["curve"].update(b=None), "curve b must be a finite number"),
    (lambda d: d["curve"].update(fitted_on=3), "fitted_on must be a text"),
    (lambda d: d.update(cut=5.4), "cut must be null or an object"),
    (lambda d: d["cut"].pop("value"), "cut needs value"),
    (lambda d: d["cut"].pop("direction"), "cut needs"),
    (lambda d: d["cut"].update(value=True), "cut value must be a finite number"),
    (lambda d: d["cut"].update(direction=""), "cut direction must be a non-empty text"),
    (lambda d: d["cut"].update(other=1), "has no other"),
    (lambda d: d["cut"].update(scores_where_chosen=[]), "scores_where_chosen must be"),
])
def test_each_bad_parameter_is_refused_naming_the_file(tmp_path, change, match):
    data = _data()
    change(data)
    _refused(tmp_path, data, match)


def test_a_zsum_judge_without_curve_or_cut_reads(tmp_path):
    data = dict(_data(), curve=None, cut=None)
    path = tmp_path / "z.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    judge = ZSum.load(path)
    assert judge.curve is None and judge.cut is None and judge.cut_value is None
    assert shipped_mod.read_any_judge(path) == judge        # dispatched by its kind
    with pytest.raises(InputError, match="no such judge file"):
        ZSum.load(tmp_path / "missing.json")


def test_a_record_whose_fingerprint_is_not_its_judges_is_refused(tmp_path, monkeypatch):
    rec = configuration("combined")
    (tmp_path / "z.json").write_text(json.dumps(_data()), encoding="utf-8")
    bad = replace(rec, judge={"file": "z.json", "fingerprint": "0" * 16})
    monkeypatch.setattr(shipped_mod, "configuration", lambda name: bad)
    monkeypatch.setattr(shipped_mod, "ROOT", tmp_path)
    with pytest.raises(InputError, match="fingerprint") as exc:
        shipped_mod.configuration_judge.__wrapped__("combined")
    assert str(tmp_path / "z.json") in str(exc.value)
    monkeypatch.setattr(shipped_mod, "configuration",
                        lambda name: replace(rec, judge={"file": "z.json"}))
    with pytest.raises(InputError, match="configuration combined"):
        shipped_mod.configuration_judge.__wrapped__("combined")


def test_the_given_pairs_judge_is_a_zsum_file_with_its_own_column():
    judge = configuration_judge("combined", "pairs")
    entry = configuration("combined").pairs_judge
    assert isinstance(judge, ZSum) and judge.fingerprint() == entry["fingerprint"]
    assert judge.column == "judge" and judge.cut is None and judge.curve.score == "judge"
    assert ZSum.of(judge.as_dict(), "again") == judge
    cal = shipped_mod.shipped_calibration("combined", "pairs")
    assert (cal.a, cal.b, cal.score) == (judge.curve.a, judge.curve.b, "judge")
    assert Combination.of(cal.combination, "x") == judge.combination   # the regression it reads
    rng = np.random.default_rng(1)
    cols = {f: rng.normal(size=9) for f in judge.combination.features}
    out = judge.columns(cols)
    assert set(out) == {"judge", "prob"}
    np.testing.assert_allclose(out["prob"], cal(judge.combination(cols)), atol=0)
    assert shipped_mod.judge_record("combined", "pairs")["fingerprint"] == entry["fingerprint"]
    for name in ("judge", "mt-only", "paper"):   # the learned judge judges given pairs itself
        assert configuration_judge(name, "pairs") is None
    with pytest.raises(InputError, match="ships no calibrated probability for pairs"):
        shipped_mod.shipped_calibration("mt-only", "pairs")
    with pytest.raises(ValueError, match="use must be"):
        configuration_judge("combined", "other")


def test_a_mining_record_naming_a_zsum_judge_of_another_column_is_refused(tmp_path,
                                                                         monkeypatch):
    rec = configuration("combined")
    (tmp_path / "z.json").write_text(json.dumps(dict(_data(), column="judge")), encoding="utf-8")
    fp = ZSum.load(tmp_path / "z.json").fingerprint()
    monkeypatch.setattr(shipped_mod, "configuration",
                        lambda name: replace(rec, judge={"file": "z.json", "fingerprint": fp}))
    monkeypatch.setattr(shipped_mod, "ROOT", tmp_path)
    with pytest.raises(InputError, match="writes the column 'combined'") as exc:
        shipped_mod.configuration_judge.__wrapped__("combined")
    assert str(tmp_path / "z.json") in str(exc.value)


def _meta(name):
    if name == "paper":
        return {"mode": "pre"}
    return {"pipeline": {"config": name},
            "combination": shipped_mod.shipped_combination_fields(name)}


# each configuration's TSV as the records before the judges held the cuts decided it:
# (rule, rank_by, filter), the default cut and whether --min-prob is a cut of prob itself
BEFORE = {
    "combined": (("one-to-one", "combined", "combined"), {"zh-en": {"combined": 5.4016585}}),
    "judge": (("one-to-one", "prob", "prob"), {"zh-en": {"prob": 0.5}}),
    "mt-only": (("one-to-one", "combined", "combined"), {"zh-en": {"combined": 4.9996125}}),
    "paper": (("best-per-source", "ce_word", "ce"), {"zh-en": {"ce_word": 2.8952834999999997}}),
}


@pytest.mark.parametrize("name", NAMES)
def test_the_one_cut_function_gives_each_configurations_tsv_its_former_cut(name):
    selection, thresholds = BEFORE[name]
    cut = tsv_cut(_meta(name))
    assert cut.config == name and cut.selection == selection
    assert cut.thresholds == thresholds and cut.problem is None
    saved = shipped_thresholds(_meta(name), "x.tsv")
    assert (saved.rule, saved.rank_by, saved.filter) == selection
    assert saved.thresholds == thresholds and saved.path == f"configuration {name}"
    if name == "judge":
        assert min_prob_threshold(_meta(name), 0.7) == ("prob", 0.7)
    elif name == "combined":   # the curve's combined cut
        score, value = min_prob_threshold(_meta(name), 0.5)
        assert score == "combined" and abs(value - 9.119705424755399 / 1.528434032200869) < 1e-9
    else:
        with pytest.raises(InputError, match="--min-prob"):
            min_prob_threshold(_meta(name), 0.5, "x.tsv")


@pytest.mark.parametrize("name", ["combined", "judge", "mt-only"])
def test_the_default_selection_of_a_mining_tsv_is_its_judges(name):
    selection, _ = BEFORE[name]
    cols = {"combined": np.array([1.0]), "prob": np.array([0.5])}
    mined = Mined.from_columns(["s1"], ["t1"], ["a"], ["b"], cols, meta=_meta(name))
    assert default_selection(mined) == selection
    # without its own ranking column, by combined; a TSV of no mining job as the paper's
    assert tsv_selection(_meta(name), {"combined"}) == BEFORE["combined"][0]
    assert tsv_selection(_meta("paper"), {"ce_word"}) == ("best-per-source", "ce_word", "none")


def test_a_custom_combinations_tsv_has_no_default_cut():
    comb = Combination.of(shipped_mod.shipped_combination_fields("combined"), "x")
    other = asdict(comb.with_weight("numerals", 0.2))          # a --combination file's
    meta = {"pipeline": {"config": "combined"}, "combination": other}
    cut = tsv_cut(meta)
    assert cut.thresholds is None and cut.curve is None and "--combination" in cut.problem
    assert cut.selection == BEFORE["combined"][0]             # still selected by combined
    with pytest.raises(InputError, match="not the shipped one") as exc:
        shipped_thresholds(meta, "c.tsv")
    assert "c.tsv" in str(exc.value)
    with pytest.raises(InputError, match="--min-prob"):
        min_prob_threshold(meta, 0.5, "c.tsv")
    named = {"pipeline": {}, "combination": dict(other, name="mine")}  # of no configuration
    assert tsv_cut(named).thresholds is None and tsv_cut(named).selection == BEFORE["combined"][0]
    with pytest.raises(InputError, match="ships no default threshold"):
        shipped_thresholds(named, "c.tsv")
