"""trie-mine-eval without a sidecar refuses unless told the rule.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
hang guard in a subprocess.
"""
import os

import pytest

from triemine.cli import eval_main, filter_main
from triemine.io.tsv import write_rows

from helpers import run_main

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- eval and filter without a sidecar -----------------------------------------------------------

def test_eval_without_a_sidecar_refuses_unless_told_the_rule(tmp_path, capsys):
    cells = {"src_id": ["1", "1", "2"], "tgt_id": ["1", "2", "2"], "score": [-1.0, -2.0, -1.0],
             "ce_word": [2.0, 1.0, 1.0], "ce_token": [1.0, 1.0, 1.0],
             "combined": [9.0, 1.0, 9.0], "src": ["a", "a", "b"], "tgt": ["c", "e", "e"]}
    mined = tmp_path / "m.tsv"
    write_rows(mined, list(cells), cells)
    assert not os.path.exists(str(mined) + ".meta.json")
    gold = tmp_path / "zh-en.t.gold"
    gold.write_text("1\t1\n2\t2\n")
    for name in ("zh-en.t.zh", "zh-en.t.en"):
        (tmp_path / name).write_text("1\ta\n2\tb\n")
    rc, err = run_main(capsys, eval_main, [str(mined), "--gold", str(gold)])
    assert rc == 2 and "no .meta.json sidecar" in err and "--rule" in err
    assert eval_main([str(mined), "--gold", str(gold), "--rule", "one-to-one", "--rank-by",
                      "combined"]) == 0
    assert "F1=1.0000" in capsys.readouterr().out
    rc, err = run_main(capsys, filter_main, [str(mined), "-o", str(tmp_path / "k.tsv")])
    assert rc == 2 and "no .meta.json sidecar" in err and "names no known" not in err


# -- a judge's TSV is evaluated and filtered by its own judge ------------------------------------

def _judge_tsv(tmp_path):
    """A TSV of --config judge whose combined column would keep the wrong pairs and whose prob
    keeps the right ones, with the BUCC files of its gold."""
    from triemine.config.configurations import configuration

    cells = {"src_id": ["1", "1", "2", "2"], "tgt_id": ["1", "2", "2", "1"],
             "score": [-1.0] * 4, "ce_word": [1.0] * 4, "ce_token": [1.0] * 4,
             "combined": [1.0, 9.0, 1.0, 9.0], "judge": [3.0, -3.0, 2.0, -2.0],
             "prob": [0.95, 0.05, 0.9, 0.1], "src": ["a", "a", "b", "b"],
             "tgt": ["c", "e", "e", "c"]}
    mined = tmp_path / "j.tsv"
    write_rows(mined, list(cells), cells, meta={
        "pipeline": {"config": "judge"}, "combination": configuration("judge").combination})
    gold = tmp_path / "zh-en.t.gold"
    gold.write_text("1\t1\n2\t2\n")
    for name in ("zh-en.t.zh", "zh-en.t.en"):
        (tmp_path / name).write_text("1\ta\n2\tb\n")
    return mined, gold


def test_eval_tunes_and_scores_a_judge_tsv_by_its_prob(tmp_path, capsys):
    mined, gold = _judge_tsv(tmp_path)
    saved = tmp_path / "th.json"
    assert eval_main([str(mined), "--gold", str(gold), "--save-thresholds", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "F1=1.0000" in out and "filter=prob" in out and "filter=combined" not in out, out
    import json
    assert json.loads(saved.read_text())["filter"] == "prob"


def test_filter_min_prob_of_a_judge_tsv_is_its_prob_cut(tmp_path, capsys):
    mined, _ = _judge_tsv(tmp_path)
    kept = tmp_path / "k.tsv"
    assert filter_main([str(mined), "-o", str(kept), "--min-prob", "0.92"]) == 0
    err = capsys.readouterr().err
    assert "kept 1 of 4 rows" in err and "prob>=0.92" in err and "--min-prob 0.92" in err, err
    assert filter_main([str(mined), "-o", str(kept), "--threshold", "prob=0.92"]) == 0
    assert "kept 1 of 4 rows" in capsys.readouterr().err
