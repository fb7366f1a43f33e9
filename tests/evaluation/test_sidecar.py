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
