"""Filtering: CE threshold, CE ∪ Bicleaner, union of directions, filter CLI, Bicleaner errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

from triemine.cli import filter_main
from triemine.evaluation.bucc import read_mined
from triemine.evaluation.metrics import optimize_union
from triemine.evaluation.pipeline import Direction, evaluate, select
from triemine.filtering import select_ce, select_ce_or_bicleaner, tune_ce, union_directions
from triemine.filtering.bicleaner import BicleanerUnavailable, score_bicleaner

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
    assert select_ce(mined, 1.0).tolist() == [True, False, True, False]
    assert select_ce(mined, 0.4999).tolist() == [False] * 4
    assert select_ce(mined, 0.8, column="ce_token").tolist() == [True, False, True, False]


def test_ce_or_bicleaner_union_semantics(mined):
    ce_only = select_ce(mined, 1.0)
    bc_only = mined.col("bicleaner") >= 0.6
    both = select_ce_or_bicleaner(mined, 1.0, 0.6)
    assert both.tolist() == (ce_only | bc_only).tolist() == [True, True, True, False]
    assert select(mined, "ce+bicleaner", {"ce_word": 1.0, "bicleaner": 0.6}).tolist() == both.tolist()
    assert select(mined, "bicleaner", {"bicleaner": 0.6}).tolist() == bc_only.tolist()


def test_tune_ce_on_known_gold(mined):
    t, s = tune_ce(mined, np.array([True, False, True, False]), n_gold=2)
    assert math.isclose(t, 1.75) and s.f1 == 1.0


def test_optimize_union_beats_or_matches_each_filter_alone():
    rng = np.random.default_rng(7)
    n = 300
    correct = rng.random(n) < 0.3
    # CE finds some correct pairs, Bicleaner finds others
    ce = np.where(correct & (rng.random(n) < 0.6), rng.uniform(0, 1, n), rng.uniform(0.8, 3, n))
    bc = np.where(correct & (rng.random(n) < 0.6), rng.uniform(0.7, 1, n), rng.uniform(0, 0.75, n))
    from triemine.evaluation.metrics import optimize_threshold
    _, s_ce = optimize_threshold(ce, correct, int(correct.sum()), higher_is_better=False)
    _, s_bc = optimize_threshold(bc, correct, int(correct.sum()), higher_is_better=True)
    t_ce, t_bc, s_u = optimize_union(ce, bc, correct, int(correct.sum()))
    assert s_u.f1 >= max(s_ce.f1, s_bc.f1) - 1e-12
    keep = (ce <= t_ce) | (bc >= t_bc)
    assert (int((keep & correct).sum()), int(keep.sum())) == (s_u.correct, s_u.predicted)


def test_union_directions_swaps_and_dedups():
    fwd = [("zh1", "en1"), ("zh2", "en2")]
    bwd = [("en1", "zh1"), ("en3", "zh3")]
    assert union_directions(fwd, bwd) == {("zh1", "en1"), ("zh2", "en2"), ("zh3", "en3")}


def test_filter_cli_writes_kept_rows_and_bitext(tmp_path, mined, capsys):
    out, bitext = tmp_path / "kept.tsv", tmp_path / "kept.txt"
    assert filter_main([mined.path, "--filter", "ce+bicleaner", "--ce-max", "1.0", "--bicleaner-min", "0.6",
                        "-o", str(out), "--bitext", str(bitext)]) == 0
    kept = read_mined(out)
    assert kept.src_ids == ["s1", "s2", "s3"] and kept.col("bicleaner").tolist() == [0.2, 0.9, 0.6]
    assert bitext.read_text(encoding="utf-8") == "a\tA\nb\tB\nc\tC\n"
    assert "kept 3 of 4 rows" in capsys.readouterr().err


def test_filter_cli_union_of_two_directions(tmp_path, capsys):
    fwd = write_tsv(tmp_path / "f.tsv", [("z1", "e1", -1, 0.5, 0.5, "zh one", "en one"),
                                         ("z2", "e2", -1, 3.0, 3.0, "zh two", "en two")])
    bwd = write_tsv(tmp_path / "b.tsv", [("e1", "z1", -1, 0.4, 0.4, "en one", "zh one"),
                                         ("e3", "z3", -1, 0.9, 0.9, "en three", "zh three")])
    bitext = tmp_path / "u.txt"
    assert filter_main([fwd, "--second", bwd, "--filter", "ce", "--ce-max", "1.0", "--bitext", str(bitext)]) == 0
    assert bitext.read_text(encoding="utf-8") == "zh one\ten one\nzh three\ten three\n"


def test_filter_cli_needs_threshold_for_filter(tmp_path, mined, capsys):
    with pytest.raises(SystemExit):
        filter_main([mined.path, "--filter", "ce", "-o", str(tmp_path / "x.tsv")])
    assert "needs a ce_word threshold" in capsys.readouterr().err


def test_filter_cli_missing_bicleaner_column_is_clear(tmp_path, capsys):
    p = write_tsv(tmp_path / "n.tsv", [("s1", "t1", -1, 0.5, 0.5, "a", "A")])
    assert filter_main([p, "--filter", "bicleaner", "--bicleaner-min", "0.5", "-o", str(tmp_path / "o.tsv")]) == 2
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
