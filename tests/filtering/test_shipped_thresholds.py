"""A bitext from two corpora without gold: every configuration ships its selection and
threshold, trie-mine-filter uses it, a TSV without one (or without its ``combined``
column) is refused, and the paper and mt-only configurations keep what their thresholds
pass.

Tiny synthetic model (tests/conftest.py) except where marked ``shared_model``.
"""
import json
from dataclasses import asdict
from pathlib import Path

import pytest

import triemine
from triemine.cli import eval_main, filter_main
from triemine.errors import InputError
from triemine.config.configurations import NAMES
from triemine.filtering.selection import SELECTION, choose, shipped_default
from triemine.judging.shipped import shipped
from triemine.io.tsv import read_mined

from helpers import OTHER, PAIRS

TSV_HEADER = "src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt\tcombined\n"

pytestmark = pytest.mark.usefixtures("one_thread")


# -- a bitext without gold: the shipped threshold --------------------------------------------------

def _mined_tsv(path, rows, meta):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(TSV_HEADER)
        for r in rows:
            fh.write("\t".join(str(x) for x in r) + "\n")
    Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return str(path)


@pytest.fixture
def combined_tsv(tmp_path):
    """A mining-job TSV (its sidecar names the shipped combination): s1 has two candidates,
    t1 is wanted by s1 and s2, s3's only candidate is below the shipped threshold."""
    th = shipped_default("combined")
    t = next(iter(th.thresholds.values()))["combined"]
    rows = [("s1", "t1", -3, 1, 1, "a", "A", t + 3), ("s1", "t2", -3, 1, 1, "a", "B", t + 1),
            ("s2", "t1", -3, 1, 1, "b", "A", t + 2), ("s2", "t3", -3, 1, 1, "b", "C", t + 0.5),
            ("s3", "t4", -3, 1, 1, "c", "D", t - 0.5)]
    meta = {"model": "m", "mode": "knn", "beam": "-", "pipeline": {"candidates": ["knn"]},
            "combination": asdict(shipped("combined"))}
    return _mined_tsv(tmp_path / "m.tsv", rows, meta), t


def test_every_configuration_ships_its_selection_and_threshold():
    names = [n for n in NAMES if shipped_default(n) is not None]
    assert names == list(NAMES)
    for name in names:
        th = shipped_default(name)
        assert (th.rule, th.rank_by, th.filter) == SELECTION[name]
        if name != "paper":  # the threshold belongs to the exact shipped combination
            assert th.combination == asdict(shipped(name))


def test_filter_without_thresholds_uses_the_shipped_default(combined_tsv, tmp_path, capsys):
    path, t = combined_tsv
    assert filter_main([path, "--bitext", str(tmp_path / "b.txt")]) == 0
    err = capsys.readouterr().err
    assert "shipped default for combined" in err and "kept 2 of 5 rows" in err
    # one-to-one: s1-t1 first, then s2's best free target t3; s3 is below the threshold
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == "a\tA\nb\tC\n"
    assert filter_main([path, "--threshold", f"combined={t + 0.75}", "-o",
                        str(tmp_path / "k.tsv")]) == 0
    assert "kept 1 of 5 rows" in capsys.readouterr().err  # a given threshold overrides it


def test_no_shipped_default_is_refused_not_kept_whole(combined_tsv, tmp_path, capsys):
    path, _ = combined_tsv
    meta = json.loads(Path(path + ".meta.json").read_text())
    meta["combination"]["weights"][0] = 2.0  # a custom combination file of the same name
    Path(path + ".meta.json").write_text(json.dumps(meta))
    assert filter_main([path, "-o", str(tmp_path / "k.tsv")]) == 2
    err = capsys.readouterr().err
    assert "not the shipped one" in err and "Traceback" not in err
    assert not (tmp_path / "k.tsv").exists()
    Path(path + ".meta.json").write_text(json.dumps({"model": "m", "mode": "knn"}))
    assert filter_main([path, "-o", str(tmp_path / "k.tsv")]) == 2
    assert "no shipped default threshold" in capsys.readouterr().err
    assert not (tmp_path / "k.tsv").exists()


def test_a_tsv_that_lost_its_combined_column_is_refused(combined_tsv, tmp_path, capsys):
    path, _ = combined_tsv
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    Path(path).write_text("".join("\t".join(ln.split("\t")[:7]) + "\n" for ln in lines),
                          encoding="utf-8")
    gold = tmp_path / "xx-yy.t.gold"
    gold.write_text("s1\tt1\n", encoding="utf-8")
    for corpus, texts in (("xx-yy.t.xx", "s1\ta\ns2\tb\ns3\tc\n"),
                          ("xx-yy.t.yy", "t1\tA\nt2\tB\nt3\tC\nt4\tD\n")):
        (tmp_path / corpus).write_text(texts, encoding="utf-8")
    assert eval_main([path, "--gold", str(gold)]) == 2
    assert "wrote a 'combined' column" in capsys.readouterr().err
    assert filter_main([path, "-o", str(tmp_path / "k.tsv")]) == 2
    assert "wrote a 'combined' column" in capsys.readouterr().err
    # asked for by name, the other columns still select
    assert filter_main([path, "--ce-max", "2", "-o", str(tmp_path / "k.tsv")]) == 0


def test_the_paper_configuration_keeps_what_its_shipped_threshold_passes(tiny_model_dir, tmp_path,
                                                                         monkeypatch):
    """--config paper without gold: best per source by ce_word, then ce_word <= the shipped
    threshold (tuned on the BUCC sample)."""
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    limit = next(iter(shipped_default("paper").thresholds.values()))
    pairs = PAIRS[:12]  # sources PAIRS[12:24] have no translation among the targets
    res = triemine.mine([s for s, _ in PAIRS[:24]], OTHER[:12] + [t for _, t in pairs],
                        model=tiny_model_dir, config="paper", beam=3)
    assert "shipped default for paper" in res.selection.source
    assert res.selection.thresholds == limit
    assert (res.selection.rule, res.selection.rank_by) == ("best-per-source", "ce_word")
    m = res.candidates
    best = {}
    for i in range(len(m)):  # the reference: each source's lowest ce_word, first row on ties
        if m.src_ids[i] not in best or m.col("ce_word")[i] < m.col("ce_word")[best[m.src_ids[i]]]:
            best[m.src_ids[i]] = i
    want = sorted(i for i in best.values() if m.col("ce_word")[i] <= limit["ce_word"])
    assert res.kept.tolist() == want and res.summary["kept"] == len(want)
    # measured: the 12 translations have ce_word <= 1.4, the 12 others >= 4.5
    assert len(want) == 12 and {m.src_ids[i] for i in want} == {f"{k + 1}" for k in range(12)}


def test_the_mt_only_configuration_ships_its_threshold(tiny_model_dir, tmp_path, monkeypatch):
    """--config mt-only without gold: one-to-one by combined above the threshold shipped with it
    (tuned on the BUCC sample mined with --config mt-only), never refused for want of one."""
    from triemine.filtering.registry import apply_rule

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    saved = shipped_default("mt-only")
    limit = next(iter(saved.thresholds.values()))
    assert saved.combination == asdict(shipped("mt-only")) and limit["combined"] > 0
    res = triemine.mine([s for s, _ in PAIRS[:24]], OTHER[:12] + [t for _, t in PAIRS[:12]],
                        model=tiny_model_dir, config="mt-only")
    assert "shipped default for mt-only" in res.selection.source
    assert res.selection.thresholds == limit
    m = res.candidates
    want = [i for i in apply_rule(m, "one-to-one", "combined").tolist()
            if m.col("combined")[i] >= limit["combined"]]
    assert res.kept.tolist() == want and res.summary["kept"] == len(want)


def test_choose_refuses_a_filter_the_shipped_default_is_not_for(combined_tsv):
    path, _ = combined_tsv
    with pytest.raises(InputError,
                       match="no threshold for filter ce: the shipped default is for combined"):
        choose(read_mined(path), filt="ce")
