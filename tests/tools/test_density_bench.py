"""bench/density_bench.py's pure logic: how a mix is built from gold pairs, diluting sources and
English, and how its kept pairs are counted (gold, accidental translation, wrong)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import density_bench as db  # noqa: E402


def _toy(n_gold=40, n_dil=270, n_other=30):
    gold = [((f"g{i}", f"中文{i}"), (f"e{i}", f"English sentence number {i}."))
            for i in range(n_gold)]
    dil = [(f"d{i}", f"稀释{i}") for i in range(n_dil)]
    targets = [t for _, t in gold] + [(f"x{i}", f"Other line {i}") for i in range(n_other)]
    refs = {f"稀释{i}": f"Reference of diluting sentence {i}." for i in range(n_dil)}
    return gold, dil, targets, refs


def test_gold_count_makes_the_density_and_never_exceeds_the_gold_pairs():
    assert db.gold_count(2700, 0.10, 1000) == 300
    assert db.gold_count(2700, 0.03, 1000) == 84
    assert db.gold_count(2700, 0.01, 1000) == 27
    assert db.gold_count(2700, None, 1000) == 1000
    assert db.gold_count(2700, 0.5, 1000) == 1000  # 2700 wanted, 1000 there
    with pytest.raises(ValueError):
        db.gold_count(10, 1.0, 5)


def test_a_mix_keeps_every_target_and_nests_its_gold_subsets():
    gold, dil, targets, refs = _toy()
    dense = db.build_mix("m10", gold, dil, targets, 0.10, references=refs)
    sparse = db.build_mix("m3", gold, dil, targets, 0.03, references=refs)
    assert len(dense.gold) == 30 and len(sparse.gold) == 8
    assert set(sparse.gold.items()) < set(dense.gold.items())  # the same permutation's head
    assert dense.targets == targets == sparse.targets  # dropped pairs' English stays
    assert {i for i, _ in dense.sources} == set(dense.gold) | dense.diluting
    assert dense.diluting == {i for i, _ in dil}
    assert abs(dense.density - 30 / 300) < 1e-9
    ids = [i for i, _ in dense.sources]
    assert set(ids[:30]) != set(dense.gold)  # gold and diluting sources interleave
    assert dense.references["d3"] == "Reference of diluting sentence 3."
    g = next(iter(dense.gold))
    assert dense.references[g] == dict(targets)[dense.gold[g]]  # a gold source's own English
    again = db.build_mix("m10", gold, dil, targets, 0.10, references=refs)
    assert again.sources == dense.sources and again.gold == dense.gold  # seeded


def test_a_mix_refuses_gold_english_missing_from_the_targets():
    gold, dil, targets, refs = _toy()
    with pytest.raises(ValueError, match="not among the targets"):
        db.build_mix("bad", gold, dil, targets[1:], None, references=refs)


def test_near_duplicates_fold_case_punctuation_and_space():
    assert db.fold("  Hello,   WORLD! ") == "hello world"
    assert db.dice("It is raining.", "it is raining") == 1.0
    assert db.dice("The cat sat on the mat today", "The cat sat on the mat today!!") == 1.0
    assert db.dice("The passengers were terrified.", "The passengers on the bus are bored.") \
        < db.SAME_STORY
    near = db.dice("North Korea has been seeking a formal end to the war.",
                   "North Korea has been seeking a formal end to the war, it said.")
    assert db.SAME_STORY <= near < 1.0
    assert db.dice("ab", "cd") == 0.0


def test_kept_pairs_are_counted_as_gold_accidental_or_wrong():
    gold, dil, targets, refs = _toy()
    mix = db.build_mix("m", gold, dil, targets, 0.10, references=refs)
    g = sorted(mix.gold)[:3]
    src = g + ["d1", "d2", g[0]]
    tgt = [mix.gold[s] for s in g] + ["x1", "x2", "x3"]
    texts = [dict(targets)[t] for t in tgt[:3]] + [
        "reference of diluting sentence 1",  # its own English, folded: accidental
        "Other line 2", "Other line 3"]
    labels = db.classify(mix, src, tgt, texts)
    assert labels == ["gold"] * 3 + ["accidental", "wrong", "wrong"]
    c = db.count(mix, src, labels)
    assert (c["gold_kept"], c["wrong"], c["accidental"], c["kept"]) == (3, 2, 1, 6)
    assert c["P"] == round(3 / 5, 4) and c["P_strict"] == 0.5
    assert c["R"] == round(3 / 30, 4)
    assert c["wrong_diluting"] == 1  # d2; the gold source's wrong pair is not a diluting one
    assert c["wrong_diluting_pct"] == round(100 / 270, 3)
    assert c["wrong_per_10k_sources"] == round(1e4 * 2 / 300, 2)
    empty = db.count(mix, [], [])
    assert empty["P"] == 1.0 and empty["R"] == 0.0 and empty["F1"] == 0.0


def test_a_pair_read_as_a_translation_is_no_error(tmp_path):
    gold, dil, targets, refs = _toy()
    mix = db.build_mix("m", gold, dil, targets, 0.10, references=refs)
    zh = dict(mix.sources)
    g = sorted(mix.gold)[0]
    src, tgt = [g, "d2", "d3", "d4"], [mix.gold[g], "x2", "x3", "x4"]
    texts = [dict(targets)[mix.gold[g]], "Another rendering", "Wrong line", "Unread line"]
    path = tmp_path / "readings.tsv"
    path.write_text("verdict\tsrc\ttgt\n"
                    f"translation\t{zh['d2']}\tAnother rendering\n"
                    f"not\t{zh['d3']}\tWrong line\n", encoding="utf-8")
    readings = db.load_readings(path)
    labels = db.classify(mix, src, tgt, texts, readings)
    assert labels == ["gold", "read", "wrong", "wrong"]
    c = db.count(mix, src, labels, [(zh[s], t) in readings for s, t in zip(src, texts)])
    assert (c["read"], c["wrong"], c["unread"]) == (1, 2, 1)
    assert c["P"] == round(1 / 3, 4) and c["P_auto"] == 0.25 and c["P_strict"] == 0.25
    assert db.classify(mix, src, tgt, texts) == ["gold", "wrong", "wrong", "wrong"]


@pytest.mark.parametrize("body,problem", [
    ("maybe\tzh\ten\n", "not 'translation|not"), ("not\tzh\n", "not 'translation|not"),
    ("not\tzh\ten\ntranslation\tzh\ten\n", "read twice")])
def test_a_bad_readings_line_is_named(tmp_path, body, problem):
    path = tmp_path / "r.tsv"
    path.write_text("verdict\tsrc\ttgt\n" + body, encoding="utf-8")
    with pytest.raises(ValueError, match=problem) as err:
        db.load_readings(path)
    assert ":2:" in str(err.value) or ":3:" in str(err.value)


def test_the_shipped_readings_load():
    readings = db.load_readings()
    assert readings and any(readings.values()) and not all(readings.values())


def test_margin_cut_counts_what_it_spares_and_the_gold_it_loses():
    margin = np.array([1.0, 1.06, 1.12, 1.3, 1.04])
    is_gold = np.array([False, True, True, True, False])
    kept_gold = np.array([False, False, True, True, False])
    out = db.margin_cut(margin, is_gold, kept_gold, n_gold=4, cuts=(1.05, 1.15))
    assert out["1.05"] == {"spared": 0.4, "gold_candidates_dropped": 0, "kept_gold_lost": 0,
                           "recall_lost": 0.0}
    assert out["1.15"] == {"spared": 0.8, "gold_candidates_dropped": 2, "kept_gold_lost": 1,
                           "recall_lost": 0.25}


def test_runs_with_the_second_look_have_a_folder_of_their_own(tmp_path):
    assert db.work_folder(tmp_path, "judge", False) == tmp_path / "judge"
    assert db.work_folder(tmp_path, "judge", True) == tmp_path / "judge+look"


def test_second_look_is_refused_for_a_configuration_without_it(capsys):
    with pytest.raises(SystemExit) as exc:
        db.main(["--config", "mt-only", "--second-look", "--parts", "pairs"])
    assert exc.value.code == 2
    assert "does not list the second look" in capsys.readouterr().err


def test_look_added_counts_the_kept_pairs_the_second_look_proposed():
    pairs = [{"kind": "wrong", "generators": ["knn"]},
             {"kind": "wrong", "generators": ["knn", db.LOOK_GENERATOR]},
             {"kind": "accidental", "generators": [db.LOOK_GENERATOR]},
             {"kind": "wrong", "generators": [db.LOOK_GENERATOR]},
             {"kind": "accidental"}]  # a TSV without ``origin``: no generators known
    assert db.look_added(pairs) == {"kept": 3, "wrong": 2, "accidental": 1}
    assert db.look_added([]) == {"kept": 0, "wrong": 0, "accidental": 0}
