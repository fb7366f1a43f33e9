"""A judge's share of translations above a margin floor (triemine.judging.floors): counted
against a brute-force share, in the judge file, and consistent with the job without a floor."""
import json

import numpy as np
import pytest

from triemine.errors import InputError
from triemine.judging.floors import Floors
from triemine.judging.model import Judge
from triemine.mining.finish import margin_floor
from triemine.mining.options import MineOptions

LOW = 1.02


def _rows(n: int, share: float, seed: int):
    """A feature ``a`` and a margin ``use_margin`` at or above LOW, both higher for positives;
    the classes look alike in every draw (a label shift only)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < share).astype(int)
    a = rng.normal(size=n) + np.where(y > 0, 1.0, -1.0)
    m = LOW + rng.exponential(np.where(y > 0, 0.08, 0.015))
    return {"a": a, "use_margin": m}, y


def test_share_at_a_floor_is_the_share_of_the_rows_it_keeps():
    cols, y = _rows(5000, 0.2, 1)
    floors = Floors.count(cols["use_margin"], y, LOW, other_rows=300, other_positives=40)
    m = cols["use_margin"]
    for f in (None, 1.0, LOW, 1.025, 1.03, 1.05, 1.1, 1.399, 1.4, 2.0):
        keep = m >= (f if f is not None else -np.inf)
        want = (y[keep].sum() + 40) / (keep.sum() + 300)
        assert floors.share(f) == pytest.approx(want, abs=1e-12), f
        assert floors.lost(f) == pytest.approx(1 - y[keep].sum() / y.sum(), abs=1e-12)
    assert floors.share(None) == pytest.approx((y.sum() + 40) / (len(y) + 300))
    # a floor between the grid's edges is read at the edge above it
    assert floors.share(1.0301) == floors.share(1.031)


@pytest.mark.parametrize("fields,problem", [
    ({"rows": [1, 2], "positives": [1]}, "one count"),
    ({"rows": [1, 2], "positives": [2, 0]}, "more positives"),
    ({"rows": [1, -2], "positives": [0, 0]}, "non-negative"),
    ({"rows": [1.5, 2], "positives": [0, 1]}, "non-negative"),
    ({"rows": [3], "positives": [0]}, "positive and negative"),
    ({"rows": [3], "positives": [1], "step": 0.0}, "step"),
    ({"rows": [3], "positives": [1], "feature": ""}, "feature"),
])
def test_bad_floors_are_refused(fields, problem):
    base = {"feature": "use_margin", "low": LOW, "step": 0.001}
    with pytest.raises(ValueError, match=problem):
        Floors(**{**base, **fields})


def test_count_refuses_a_margin_under_the_mined_floor():
    with pytest.raises(ValueError, match="at or above"):
        Floors.count([1.03, 1.01], [1, 0], LOW)


def _judge_with_floors(seed: int = 2):
    from dataclasses import replace

    cols, y = _rows(20000, 0.3, seed)
    judge = Judge.fit(cols, y, ("a", "use_margin"), fitted_on="synthetic")
    return replace(judge, floors=Floors.count(cols["use_margin"], y, LOW).as_dict())


def test_floors_live_in_the_judge_file_and_must_add_up(tmp_path):
    judge = _judge_with_floors()
    path = tmp_path / "j.json"
    judge.save(path)
    back = Judge.load(path)
    assert back == judge and back.fingerprint() == judge.fingerprint()
    assert back.prior_at(None) == judge.train_prior and back.prior_at(1.05) > judge.train_prior
    # a judge without floors keeps the fingerprint of a file that never had the field
    from dataclasses import replace
    plain = replace(judge, floors={})
    assert "floors" not in plain.as_dict() and plain.prior_at(1.05) == plain.train_prior
    data = json.loads(path.read_text())
    data["floors"]["other_rows"] = 500
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="floors give a share"):
        Judge.load(path)
    data["floors"]["colour"] = "red"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="not a judge file"):
        Judge.load(path)


def test_a_floored_job_gives_the_probabilities_of_the_job_without_it():
    """Label shift: the candidates above the floor get the same prob whether the run kept the
    rows under it (shift from train_prior) or dropped them (shift from the share at the
    floor); from train_prior after a floor they come out too high."""
    judge = _judge_with_floors()
    run, _ = _rows(40000, 0.04, 3)
    z = judge.logit(run)
    floor = 1.03
    keep = run["use_margin"] >= floor
    whole = judge.prob(z, "estimate")[keep]
    floored = judge.prob(z[keep], "estimate", floor)
    naive = judge.prob(z[keep], "estimate")
    assert np.abs(floored - whole).max() < 0.03
    assert np.abs(naive - whole).max() > 0.1
    assert keep.mean() < 0.8      # the floor drops a good share of the candidates


def test_the_job_reads_its_floor_when_the_judge_counts_its_margin():
    judge = _judge_with_floors()
    opts = MineOptions.of("judge")
    assert margin_floor(opts, judge) == opts.neighbours.min_margin
    from dataclasses import replace
    assert margin_floor(opts, replace(judge, floors={})) is None
    other = dict(judge.floors, feature="labse_margin")
    assert margin_floor(opts, replace(judge, floors=other)) is None


def test_the_chosen_floor_is_the_highest_that_drops_few_kept_translations():
    # 1,000 kept positives: 1 under 1.025, 2 more under 1.035, 10 more under 1.045; and
    # 500 positives the judge does not keep, all under 1.025 (they cost no recall)
    margins = [1.021] + [1.03] * 2 + [1.04] * 10 + [1.2] * 987 + [1.022] * 500 + [1.021] * 5000
    labels = [1] * 1500 + [0] * 5000
    kept = [1] * 1000 + [0] * 5500
    floors = Floors.count(margins, labels, LOW, kept=kept)
    assert floors.grid()[0] == LOW and floors.grid()[-1] == 1.07
    assert floors.lost(1.025) == 0.001 and floors.lost(1.035) == 0.003
    assert floors.choose() == 1.03      # 1.03 drops 1 of 1,000 kept, 1.035 drops 3
    assert floors.choose(0.0) == LOW
    assert floors.choose(0.003) == 1.04
    # counted without what the judge keeps, every positive counts
    assert Floors.count(margins, labels, LOW).lost(1.025) == pytest.approx(501 / 1500)
    with pytest.raises(ValueError, match="kept"):
        Floors(**{**floors.as_dict(), "kept": [1] * len(floors.rows)})
