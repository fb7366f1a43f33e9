"""Real Bicleaner scoring with the locally trained zh-en model.

Needs the tool environment and the model (about 3 min + 12 min on a busy 2-core box, once):

    bash scripts/bicleaner_setup.sh && .venv-bicleaner/bin/python scripts/bicleaner_train.py

Without them these tests fail (they do not skip) with those two commands in the message.
"""
from __future__ import annotations

import numpy as np
import pytest

from triemine.cli import filter_main
from triemine.evaluation.bucc import read_bucc
from triemine.io.tsv import read_mined
from triemine.filtering.bicleaner import score_bicleaner
from triemine.io.paths import BUCC_ZH_EN, shared_path


pytestmark = [pytest.mark.bicleaner, pytest.mark.cluster]  # Bicleaner runs as a subprocess


def test_bicleaner_separates_gold_from_shuffled_pairs():
    b = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    gold = b.gold[:40]
    src = [b.src.text_of(s) for s, _ in gold]
    tgt = [b.tgt.text_of(t) for _, t in gold]
    wrong = tgt[7:] + tgt[:7]
    scores = score_bicleaner(src + src, tgt + wrong, batch_size=80, progress=False)
    assert scores.shape == (80,) and ((scores >= 0) & (scores <= 1)).all()
    good, bad = scores[:40], scores[40:]
    # measured on this slice: mean 0.65 vs 0.43, pairwise ranking accuracy ~0.85
    assert good.mean() > bad.mean() + 0.1
    assert np.mean(good[:, None] > bad[None, :]) > 0.7


def test_filter_cli_adds_bicleaner_column_in_batches(tmp_path, capsys):
    rows = [("z1", "e1", -3.0, 0.5, 0.4, "我喜欢猫。", "I like cats."),
            ("z2", "e2", -9.0, 2.5, 2.0, "今天天气很好。", "The stock market fell sharply."),
            ("z3", "e3", -4.0, 1.0, 0.8, "他明天去北京。", "He is going to Beijing tomorrow.")]
    p = tmp_path / "m.tsv"
    p.write_text("src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt\n"
                 + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "scored.tsv"
    assert filter_main([str(p), "--bicleaner", "--batch-size", "2", "-o", str(out)]) == 0
    m = read_mined(out)
    assert m.columns[-1] == "bicleaner" and len(m) == 3
    bc = m.col("bicleaner")
    assert bc[0] > bc[1] and bc[2] > bc[1]
