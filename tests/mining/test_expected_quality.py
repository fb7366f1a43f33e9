"""A run's summary says what its kept pairs' prob promises without gold: the expected true
pairs, precision and (of the candidates) recall; and says why not where prob is not
calibrated."""
import numpy as np
import pytest

from triemine.io.tsv import read_mined, write_rows
from triemine.judging.quality import describe
from triemine.mining.result import expected_of


def _tsv(tmp_path, prob=True, density=0.25):
    cells = {"src_id": ["1", "1", "2", "3"], "tgt_id": ["a", "b", "b", "c"],
             "score": [-1.0] * 4, "ce_word": [1.0] * 4, "ce_token": [1.0] * 4,
             "combined": [1.0, 2.0, 3.0, 4.0], "src": ["x", "x", "y", "z"],
             "tgt": ["p", "q", "q", "r"]}
    if prob:
        cells["prob"] = [0.9, 0.2, 0.6, 0.1]
    path = tmp_path / "m.tsv"
    write_rows(path, list(cells), cells, meta={"pipeline": {}, "density": density})
    return read_mined(str(path))


def test_expected_quality_of_the_kept_rows_and_the_recall_of_each_sources_best(tmp_path):
    mined = _tsv(tmp_path)
    got = expected_of(mined, np.array([0, 2]))
    assert got["calibrated"] and got["kept"] == 2 and got["density"] == 0.25
    assert got["floor"] is False
    assert got["expected_true"] == pytest.approx(1.5)
    assert got["expected_precision"] == pytest.approx(0.75)
    # the sources' best: 0.9 (source 1), 0.6 (2), 0.1 (3)
    assert got["expected_recall"] == pytest.approx(1.5 / 1.6)
    line = describe(got)
    assert "1.5 true pairs of 2 kept" in line and "precision 0.750" in line
    assert "recall 0.938" in line


def test_without_a_calibrated_prob_the_summary_says_so(tmp_path):
    got = expected_of(_tsv(tmp_path, prob=False), np.array([0]))
    assert got == {"calibrated": False,
                   "why": "configuration of this TSV writes no calibrated prob"}
    assert describe(got).startswith("expected quality: none (")


def test_at_a_low_estimated_share_the_expected_figures_are_a_floor(tmp_path):
    from triemine.judging.quality import LOW_SHARE

    got = expected_of(_tsv(tmp_path, density=0.01), np.array([0, 2]))
    assert got["floor"] is True and got["expected_precision"] == pytest.approx(0.75)
    line = describe(got)
    assert "at least 1.5 true pairs of 2 kept (precision at least 0.750" in line
    assert "estimated share 0.010" in line and "trie-mine-review" in line
    assert "recall" not in line  # a recall of a floor's figures would mislead
    at = expected_of(_tsv(tmp_path, density=LOW_SHARE), np.array([0, 2]))
    assert at["floor"] is False and "at least" not in describe(at)
