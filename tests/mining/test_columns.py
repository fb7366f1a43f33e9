"""The candidate stores of the mining job (triemine.mining.columns): written block by block,
read back block by block bit for bit, columns replaced atomically, stages cut short never
taken for finished ones."""
import os

import numpy as np
import pytest

from triemine.errors import OutputError
from triemine.mining.candidates import CandidateSet
from triemine.mining.columns import INDEX, ColumnStore, write_set, write_store


def _set(n, seed=0, start=0):
    rng = np.random.default_rng(seed)
    score = rng.normal(size=n)
    score[rng.random(n) < 0.3] = np.nan
    return CandidateSet(np.arange(start, start + n), rng.integers(0, 10 ** 9, n),
                        rng.integers(0, 8, n), {"score": score, "x": rng.normal(size=n)})


def _same(a: CandidateSet, b: CandidateSet) -> bool:
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in
               [(a.src, b.src), (a.tgt, b.tgt), (a.origin, b.origin)] +
               [(a.columns[c], b.columns[c]) for c in b.columns]) and \
        list(a.columns) == list(b.columns)


def test_a_store_written_in_blocks_reads_back_in_any_blocks_bit_for_bit(tmp_path):
    parts = [_set(n, seed) for seed, n in enumerate((5, 0, 7, 1))]
    whole = CandidateSet(*(np.concatenate(c) for c in zip(*[(p.src, p.tgt,
                                                             p.origin) for p in parts])),
                         {c: np.concatenate([p.columns[c] for p in parts]) for c in ("x", "score")})
    store = write_store(tmp_path / "s", iter(parts), ["x", "score"], done=("gen",))
    again = ColumnStore.open(tmp_path / "s")
    assert (len(again), again.columns, again.done) == (13, ["x", "score"], ["gen"])
    for block in (1, 4, 13, 100):
        got = list(again.blocks(block))
        assert [len(g) for g in got] == [min(block, 13 - a) for a in range(0, 13, block)]
        assert _same(CandidateSet(*(np.concatenate(c) for c in
                                    zip(*[(g.src, g.tgt, g.origin) for g in got])),
                                  {c: np.concatenate([g.columns[c] for g in got])
                                   for c in ("x", "score")}), whole)
    assert np.array_equal(store.mapped("tgt"), whole.tgt)
    empty = write_store(tmp_path / "e", iter(()), ["x"])
    assert len(empty) == 0 and list(empty.blocks()) == [] and len(empty.mapped("src")) == 0
    assert empty.first_row_of_source(5) == 0
    sorted_set = write_set(tmp_path / "r", CandidateSet([0, 2, 2, 5], [1, 0, 3, 0], [1] * 4))
    assert [sorted_set.first_row_of_source(s) for s in (0, 1, 2, 3, 6)] == [0, 1, 1, 3, 4]


def test_a_store_refuses_blocks_of_other_columns_and_reserved_names(tmp_path):
    with pytest.raises(ValueError, match="a block with columns"):
        write_store(tmp_path / "s", [_set(3)], ["x"])
    with pytest.raises(ValueError, match="cannot be a column file"):
        write_store(tmp_path / "s", [], ["src"])
    assert not list((tmp_path / "s").glob("*.tmp*"))  # no temporary file left behind
    assert ColumnStore.open(tmp_path / "s") is None


def test_columns_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    cands = _set(9)
    store = write_set(tmp_path / "s", cands, done=("gen",))
    filled = np.where(np.isnan(cands.col("score")), 1.5, cands.col("score"))

    def blocks(fail_at=None):
        for i, (a, b) in enumerate(store.bounds(4)):
            if i == fail_at:
                raise RuntimeError("killed")
            yield {"score": filled[a:b], "n_tokens": np.full(b - a, 3.0)}
    from triemine.mining import columns
    monkeypatch.setattr(columns, "BLOCK", 4)
    with pytest.raises(RuntimeError, match="killed"):  # cut short: nothing changed
        store.put_columns(["score", "n_tokens"], blocks(fail_at=2), "scores")
    again = ColumnStore.open(tmp_path / "s")
    assert again.done == ["gen"] and again.columns == ["score", "x"]
    assert _same(again.block(0, 9), cands)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == \
        [INDEX, "origin.npy", "score.npy", "src.npy", "tgt.npy", "x.npy"]
    real = os.replace

    def full_disk(a, b):
        if str(b).endswith("n_tokens.npy"):
            raise OSError(28, "No space left on device")
        return real(a, b)
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OutputError, match="n_tokens.npy"):
        store.put_columns(["score", "n_tokens"], blocks(), "scores")
    monkeypatch.setattr(os, "replace", real)
    # the first column is renamed in last, so the stage's work (its NaN rows) is still there
    assert np.isnan(ColumnStore.open(tmp_path / "s").rows("score", 0, 9)).any()
    (tmp_path / "s" / "score.npy.tmp999999").write_bytes(b"a killed writer's")
    done = store.put_columns(["score", "n_tokens"], blocks(), "scores")
    assert not list((tmp_path / "s").glob("*.tmp*"))  # its file is gone too
    again = ColumnStore.open(tmp_path / "s")
    assert again.done == ["gen", "scores"] and again.columns == ["score", "x", "n_tokens"]
    assert np.array_equal(again.rows("score", 0, 9), filled) and done.columns == again.columns
    with pytest.raises(ValueError, match="rows written"):
        store.put_columns(["y"], iter([{"y": np.zeros(4)}]), "y")
    assert not (tmp_path / "s" / "y.npy").exists()
    (tmp_path / "s" / "x.npy").write_bytes((tmp_path / "s" / "x.npy").read_bytes()[:-8])
    assert ColumnStore.open(tmp_path / "s") is None  # a column cut short: not a store
