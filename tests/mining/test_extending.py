"""What a newcomer adds, and where (docs/decisions.md, "Stages, tasks, keys and drivers"): a
score in two files (its formula in triemine/mining/features.py, its name in
triemine/filtering/registry.py), a stage in three (its task, its driver, its test)."""
from dataclasses import dataclass
from typing import Tuple

import numpy as np
import pytest

from triemine.distributed.local import InlinePool
from triemine.distributed.stage import Stage, run_stage
from triemine.errors import InputError
from triemine.filtering import registry
from triemine.mining import features
from triemine.mining.candidates import CandidateSet
from triemine.judging.combination import Combination
from triemine.mining.options import MineOptions
from triemine.mining import run
from triemine.mining.run import MINE, MiningStage, available, check_combination, check_stages
from triemine.config.settings import key_of, setting


@pytest.fixture
def toy_score():
    """A score declared as a contributor would: its formula (features.derive) and its name
    (registry.register_score); removed after the test."""
    features.derive("toy_ratio", ("score", "n_tokens"))(
        lambda c, _src, tgt: c["score"] * np.array([len(t) for t in tgt]) / c["n_tokens"])
    registry.register_score("toy_ratio", False, "score x target characters / tokens")
    yield "toy_ratio"
    del features.DERIVED["toy_ratio"], registry.SCORES["toy_ratio"]


def test_a_toy_score_is_computed_named_and_usable_in_a_combination(toy_score):
    cands = CandidateSet(np.array([0, 1]), np.array([1, 0]), np.ones(2, dtype=np.uint8),
                         {"score": np.array([-2.0, -6.0]), "n_tokens": np.array([2.0, 3.0])})
    out = features.derived(cands, ["abc", "de"])
    assert out.col(toy_score).tolist() == [-2.0 * 2 / 2, -6.0 * 3 / 3]
    assert out.col("ce_token").tolist() == [1.0, 2.0]  # the others as before
    assert registry.get_score(toy_score).higher_is_better is False
    comb = Combination("toy", [toy_score, "ce_word"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0])
    opts = MineOptions.of("combined")
    have = available(MINE, opts, reverse=False)  # the columns the job's stages write, derived
    check_combination(opts, have, comb)  # the job can produce it
    assert comb(out.columns).tolist() == (out.col(toy_score) - out.col("ce_word")).tolist()
    with pytest.raises(InputError, match="needs dual_ce"):  # without a reverse model: cannot
        check_combination(opts, have, Combination("d", ["dual_ce"], [1.0], [0.0], [1.0]))


def test_a_stage_declares_its_columns_and_a_combination_may_use_them_after_it(monkeypatch):
    """A job stage's columns (its declaration, no list kept elsewhere) are usable by the
    combination of a stage list naming it before the combination, refused otherwise."""
    opts = MineOptions.of("combined")
    monkeypatch.setitem(run.MINING, "toy", MiningStage(lambda m: None, lambda o, r: {"toy_col"}))
    monkeypatch.setattr(run, "load_combination",
                        lambda o: Combination("t", ["toy_col"], [1.0], [0.0], [1.0]))
    check_stages(["toy", "combination"], opts, reverse=False)
    with pytest.raises(InputError, match="needs toy_col"):
        check_stages(["combination", "toy"], opts, reverse=False)
    assert "toy_col" not in available(MINE, opts, reverse=False)


@dataclass(frozen=True)
class SquareTask:
    """A toy stage's task: the squares of its shard's numbers."""

    shard: int
    start: int
    end: int
    power: int

    def needs(self) -> list:
        return []

    def run(self, ctx) -> Tuple[bytes, dict]:
        return b"".join(b"%d\n" % (i ** self.power) for i in range(self.start, self.end)), {}


@dataclass(frozen=True)
class SquareSettings:
    power: int = setting(2)
    threads: int = setting(1, transient=True)


def squares(n: int, work, pool, opts: SquareSettings = SquareSettings(), resume=True) -> bytes:
    """The toy stage's driver: its Stage, run, merged."""
    ran = run_stage(Stage("squares", work / "squares.shards", key_of(opts), (range(0, n, 4), n, 4),
                          lambda s: SquareTask(s.id, s.start, s.end, opts.power), ext="txt",
                          resume=resume, task=SquareTask), pool)
    ran.merge_to(work / "squares.txt")
    return (work / "squares.txt").read_bytes()


def test_a_toy_stage_runs_resumes_and_keys_its_settings(tmp_path):
    assert squares(10, tmp_path, InlinePool()) == b"".join(b"%d\n" % (i * i) for i in range(10))
    again = run_stage(Stage("squares", tmp_path / "squares.shards", key_of(SquareSettings()),
                            (range(0, 10, 4), 10, 4), lambda s: None, ext="txt",
                            task=SquareTask),
                      InlinePool())
    assert again.computed == [] and again.store.key["settings"]["power"] == 2
    assert squares(10, tmp_path, InlinePool(), SquareSettings(threads=4)) == \
        b"".join(b"%d\n" % (i * i) for i in range(10))  # transient: resumed, same key
    with pytest.raises(InputError, match="cannot resume"):  # another power: another key
        squares(10, tmp_path, InlinePool(), SquareSettings(power=3))
    assert squares(10, tmp_path, InlinePool(), SquareSettings(power=3), resume=False) == \
        b"".join(b"%d\n" % (i ** 3) for i in range(10))
