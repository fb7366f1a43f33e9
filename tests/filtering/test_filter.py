"""Filtering: the score/filter registry (CE, CE ∪ Bicleaner, PMI), selection rules, the filter
CLI, Bicleaner errors."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from triemine.cli import filter_main
from triemine.io.tsv import read_mined
from triemine.filtering.rules import optimize_threshold, optimize_union
from triemine.errors import InputError
from triemine.evaluation.pipeline import Direction, evaluate
from triemine.filtering.bicleaner import BicleanerUnavailable, score_bicleaner
from triemine.filtering.registry import apply_rule, filter_scores, get_score, select, tune

HEADER = "src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt"


def write_tsv(path, rows, extra=()):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(HEADER + "".join("\t" + c for c in extra) + "\n")
        for r in rows:
            fh.write("\t".join(str(x) for x in r) + "\n")
    return str(path)


@pytest.fixture
def mined(tmp_path):
    rows = [("s1", "t1", -2.0, 0.5, 0.4, "a", "A", 0.2),
            ("s2", "t2", -9.0, 2.5, 2.0, "b", "B", 0.9),
            ("s3", "t3", -4.0, 1.0, 0.8, "c", "C", 0.6),
            ("s4", "t4", -20.0, 4.0, 3.0, "d", "D", 0.1)]
    return read_mined(write_tsv(tmp_path / "m.tsv", rows, extra=("bicleaner",)))


def test_ce_selection_is_inclusive_upper_bound(mined):
    assert select(mined, "ce", {"ce_word": 1.0}).tolist() == [True, False, True, False]
    assert select(mined, "ce", {"ce_word": 0.4999}).tolist() == [False] * 4
    assert select(mined, "ce_token", {"ce_token": 0.8}).tolist() == [True, False, True, False]


def test_ce_or_bicleaner_union_semantics(mined):
    ce_only = select(mined, "ce", {"ce_word": 1.0})
    bc_only = mined.col("bicleaner") >= 0.6
    both = select(mined, "ce+bicleaner", {"ce_word": 1.0, "bicleaner": 0.6})
    assert both.tolist() == (ce_only | bc_only).tolist() == [True, True, True, False]
    assert select(mined, "bicleaner", {"bicleaner": 0.6}).tolist() == bc_only.tolist()


def test_tune_ce_on_known_gold(mined):
    th = tune(mined, "ce", np.array([True, False, True, False]), n_gold=2)
    assert math.isclose(th["ce_word"], 1.75)


def test_tune_union_orients_each_score(mined):
    """A union of a higher-is-better and a lower-is-better score tunes both the right way round,
    in either order, and the tuned thresholds reproduce the selection."""
    correct = np.array([True, True, False, False])
    for spec in ("ce+bicleaner", "bicleaner+ce"):
        th = tune(mined, spec, correct, n_gold=2)
        assert select(mined, spec, th).tolist() == correct.tolist()


def test_registry_names_scores_once_and_refuses_unknown():
    assert get_score("ce").name == "ce_word" and not get_score("ce").higher_is_better
    assert get_score("pmi").higher_is_better
    assert [sc.name for sc in filter_scores("ce+bicleaner")] == ["ce_word", "bicleaner"]
    assert filter_scores("none") == ()
    for bad in ("nope", "ce+", "ce+ce_word", "a+b+c"):
        with pytest.raises(InputError):
            filter_scores(bad)


def test_one_to_one_rule_uses_each_sentence_once(tmp_path):
    rows = [("s1", "t1", -1, 0.5, 0.5, "a", "A"), ("s1", "t2", -1, 0.2, 0.2, "a", "B"),
            ("s2", "t2", -1, 0.1, 0.1, "b", "B"), ("s3", "t3", -1, 0.9, 0.9, "c", "C")]
    m = read_mined(write_tsv(tmp_path / "o.tsv", rows))
    # best first: (s2,t2) 0.1, then (s1,t2) is blocked by t2, (s1,t1) 0.5, (s3,t3) 0.9
    assert apply_rule(m, "one-to-one", "ce").tolist() == [0, 2, 3]
    assert apply_rule(m, "best-per-source", "ce").tolist() == [1, 2, 3]


def test_optimize_union_beats_or_matches_each_filter_alone():
    rng = np.random.default_rng(7)
    n = 300
    correct = rng.random(n) < 0.3
    # CE finds some correct pairs, Bicleaner finds others
    ce = np.where(correct & (rng.random(n) < 0.6), rng.uniform(0, 1, n), rng.uniform(0.8, 3, n))
    bc = np.where(correct & (rng.random(n) < 0.6), rng.uniform(0.7, 1, n), rng.uniform(0, 0.75, n))
    _, s_ce = optimize_threshold(ce, correct, int(correct.sum()), higher_is_better=False)
    _, s_bc = optimize_threshold(bc, correct, int(correct.sum()), higher_is_better=True)
    t_ce, t_bc, s_u = optimize_union(ce, bc, correct, int(correct.sum()))
    assert s_u.f1 >= max(s_ce.f1, s_bc.f1) - 1e-12
    keep = (ce <= t_ce) | (bc >= t_bc)
    assert (int((keep & correct).sum()), int(keep.sum())) == (s_u.correct, s_u.predicted)


def test_filter_cli_writes_kept_rows_and_bitext(tmp_path, mined, capsys):
    out, bitext = tmp_path / "kept.tsv", tmp_path / "kept.txt"
    assert filter_main([mined.path, "--filter", "ce+bicleaner", "--ce-max", "1.0",
                        "--bicleaner-min", "0.6",
                        "-o", str(out), "--bitext", str(bitext)]) == 0
    kept = read_mined(out)
    assert kept.src_ids == ["s1", "s2", "s3"] and kept.col("bicleaner").tolist() == [0.2, 0.9, 0.6]
    assert bitext.read_text(encoding="utf-8") == "a\tA\nb\tB\nc\tC\n"
    assert "kept 3 of 4 rows" in capsys.readouterr().err


def test_filter_cli_writes_the_bitext_in_the_format_asked_and_records_it(tmp_path, mined):
    out, bitext = tmp_path / "kept.tsv", tmp_path / "kept.jsonl.gz"
    assert filter_main([mined.path, "--filter", "ce", "--ce-max", "1.0", "-o", str(out),
                        "--bitext", str(bitext), "--bitext-format", "jsonl"]) == 0
    import gzip
    rows = [json.loads(line) for line in gzip.open(bitext, "rt", encoding="utf-8")]
    assert [(r["src_id"], r["tgt_id"]) for r in rows] == list(zip(read_mined(out).src_ids,
                                                                  read_mined(out).tgt_ids))
    assert all("ce_word" in r for r in rows)
    rec = read_mined(out).meta["bitext"]
    assert rec["format"] == "jsonl" and rec["pairs"] == len(rows) and rec["path"] == str(bitext)


def test_filter_cli_union_of_two_directions(tmp_path, capsys):
    fwd = write_tsv(tmp_path / "f.tsv", [("z1", "e1", -1, 0.5, 0.5, "zh one", "en one"),
                                         ("z2", "e2", -1, 3.0, 3.0, "zh two", "en two")])
    bwd = write_tsv(tmp_path / "b.tsv", [("e1", "z1", -1, 0.4, 0.4, "en one", "zh one"),
                                         ("e3", "z3", -1, 0.9, 0.9, "en three", "zh three")])
    bitext = tmp_path / "u.txt"
    assert filter_main([fwd, "--second", bwd, "--filter", "ce", "--ce-max", "1.0",
                        "--bitext", str(bitext)]) == 0
    assert bitext.read_text(encoding="utf-8") == "zh one\ten one\nzh three\ten three\n"


def test_filter_cli_needs_threshold_for_filter(tmp_path, mined, capsys):
    with pytest.raises(SystemExit):
        filter_main([mined.path, "--filter", "ce", "-o", str(tmp_path / "x.tsv")])
    assert "needs a threshold for ce_word" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--filter", "ce", "--ce-max", "nan"], "must be a finite number"),
    (["--ce-max", "inf"], "must be a finite number"),
    (["--filter", "ce", "--threshold", "pmi=1.0", "--ce-max", "1"], "does not use them"),
    (["--threshold", "nope=1"], "unknown score 'nope'"),
])
def test_filter_cli_refuses_thresholds_it_would_ignore_or_misuse(tmp_path, mined,
                                                                 capsys, argv, message):
    code = None
    try:
        code = filter_main([mined.path, "-o", str(tmp_path / "x.tsv")] + argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.tsv").exists()


def test_filter_cli_infers_the_filter_from_the_thresholds_given(tmp_path, mined, capsys):
    out = tmp_path / "k.tsv"
    assert filter_main([mined.path, "--ce-max", "1.0", "-o", str(out)]) == 0
    assert read_mined(out).src_ids == ["s1", "s3"]
    assert "filter=ce_word" in capsys.readouterr().err


def test_filter_cli_missing_bicleaner_column_is_clear(tmp_path, capsys):
    p = write_tsv(tmp_path / "n.tsv", [("s1", "t1", -1, 0.5, 0.5, "a", "A")])
    assert filter_main([p, "--filter", "bicleaner", "--bicleaner-min", "0.5", "-o",
                        str(tmp_path / "o.tsv")]) == 2
    err = capsys.readouterr().err
    assert "n.tsv: no column 'bicleaner'" in err and "Traceback" not in err


def test_bicleaner_missing_env_gives_instructions(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRIEMINE_BICLEANER_VENV", str(tmp_path / "no-such-env"))
    with pytest.raises(BicleanerUnavailable, match=r"scripts/bicleaner_setup\.sh"):
        score_bicleaner(["你好"], ["hello"])
    p = write_tsv(tmp_path / "m.tsv", [("s1", "t1", -1, 0.5, 0.5, "你好", "hello")])
    assert filter_main([p, "--bicleaner", "-o", str(tmp_path / "o.tsv")]) == 2
    assert "Bicleaner tool environment not found" in capsys.readouterr().err


def test_bicleaner_missing_model_gives_instructions(tmp_path, monkeypatch):
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "bicleaner-classify").write_text("#!/bin/sh\nexit 1\n")
    monkeypatch.setenv("TRIEMINE_BICLEANER_VENV", str(env))
    monkeypatch.setenv("TRIEMINE_BICLEANER_MODEL", str(tmp_path / "none.yaml"))
    with pytest.raises(BicleanerUnavailable, match=r"model not found.*bicleaner_train\.py"):
        score_bicleaner(["你好"], ["hello"])


def test_evaluate_with_bicleaner_column(tmp_path):
    """ce+bicleaner tuned on a tiny hand-made BUCC set finds pairs each filter alone misses."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "zh-en.t.zh").write_text("".join(f"z{i}\tzh {i}\n" for i in range(6)), encoding="utf-8")
    (d / "zh-en.t.en").write_text("".join(f"e{i}\ten {i}\n" for i in range(6)), encoding="utf-8")
    (d / "zh-en.t.gold").write_text("z0\te0\nz1\te1\nz2\te2\n", encoding="utf-8")
    from triemine.evaluation.bucc import read_bucc
    b = read_bucc(d / "zh-en.t.gold")
    rows = [("z0", "e0", -1, 0.3, 0.3, "zh 0", "en 0", 0.2),   # CE finds it
            ("z1", "e1", -1, 2.0, 2.0, "zh 1", "en 1", 0.9),   # Bicleaner finds it
            ("z2", "e2", -1, 0.4, 0.4, "zh 2", "en 2", 0.8),   # both
            ("z3", "e4", -1, 1.5, 1.5, "zh 3", "en 4", 0.5),   # wrong
            ("z5", "e5", -1, 3.0, 3.0, "zh 5", "en 5", 0.1)]   # wrong
    path = write_tsv(tmp_path / "m.tsv", rows, extra=("bicleaner",))
    m = read_mined(path)
    f = {k: evaluate([Direction(m)], b, k).strict for k in ("ce", "bicleaner", "ce+bicleaner")}
    assert f["ce"].f1 < 1.0 and f["bicleaner"].f1 < 1.0
    assert (f["ce+bicleaner"].correct, f["ce+bicleaner"].predicted) == (3, 3)
