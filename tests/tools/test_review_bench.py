"""bench/review_bench.py's figures of a set: the expected precision against the true one, and a
simulated reader's coverage, on a synthetic judge TSV whose truth is known."""
import sys
from pathlib import Path

import numpy as np

from triemine.config.configurations import configuration
from triemine.io.tsv import write_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import review_bench  # noqa: E402


def test_a_calibrated_run_promises_its_precision_and_the_reader_brackets_it(tmp_path):
    rng = np.random.default_rng(71)
    n = 600
    prob = rng.uniform(0.3, 1.0, n)
    true = rng.random(n) < prob
    cells = {"src_id": [f"s{i}" for i in range(n)], "tgt_id": [f"t{i}" for i in range(n)],
             "score": [-1.0] * n, "ce_word": [1.0] * n, "ce_token": [1.0] * n,
             "combined": [0.0] * n, "judge": np.log(prob / (1 - prob)).tolist(),
             "prob": prob.tolist(), "src": [f"源{i}" for i in range(n)],
             "tgt": [f"target {i}" for i in range(n)]}
    tsv = tmp_path / "j.tsv"
    write_rows(tsv, list(cells), cells, meta={
        "pipeline": {"config": "judge"}, "combination": configuration("judge").combination})
    gold = {(f"s{i}", f"t{i}") for i in np.flatnonzero(true)}
    got = review_bench.measure(tsv, gold, n=100, seeds=30)
    kept = prob >= 0.5
    assert got["kept"] == int(kept.sum())
    assert abs(got["true_precision"] - true[kept].mean()) < 1e-4
    assert abs(got["expected_precision"] - prob[kept].mean()) < 1e-4
    assert abs(got["precision_gap"]) < 0.05          # calibrated by construction
    assert got["reader_coverage"] >= 0.8 and 0 < got["reader_interval_width"] < 0.3
    # a reader of an overconfident run: every pair it keeps promises more than it holds
    wrong = {p for p in gold if int(p[0][1:]) % 3}
    worse = review_bench.measure(tsv, wrong, n=100, seeds=10)
    assert worse["precision_gap"] > 0.2 and worse["reader_coverage"] >= 0.8
