"""Damaged caches and work files: found when read (sealed .npy, sealed JSON, shard CRC32s, line
index checksums), rebuilt or recomputed, never read silently; content digests see same-size
edits whose mtime was restored."""
import logging
import os
import random
import warnings

import numpy as np
import pytest

from triemine.io import checksum, keys
from triemine.errors import DamagedFile


def _flip(path, pos, rng):
    data = bytearray(path.read_bytes())
    data[pos] ^= rng.randrange(1, 256)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("seed", range(6))
def test_sealed_npy_round_trips_and_every_byte_flip_is_found(tmp_path, seed):
    rng = random.Random(seed)
    shape = (rng.randrange(0, 40),) + ((rng.randrange(1, 5),) if seed % 2 else ())
    arr = np.random.default_rng(seed).normal(size=shape).astype(rng.choice(["<f4", "<f8", "<i8"]))
    p = tmp_path / "a.npy"
    checksum.write_npy(p, arr, "test")
    assert np.array_equal(checksum.load_npy(p), arr) and np.array_equal(np.load(p), arr)
    assert np.array_equal(checksum.load_npy(p, mmap=False), arr)
    good = p.read_bytes()
    for pos in rng.sample(range(len(good)), min(len(good), 25)):  # same size, any byte
        p.write_bytes(good)
        _flip(p, pos, rng)
        with pytest.raises(DamagedFile, match=str(p)):
            checksum.load_npy(p)
    for cut in (0, 1, len(good) // 2, len(good) - 1):
        p.write_bytes(good[:cut])
        with pytest.raises(DamagedFile):
            checksum.load_npy(p)


def test_streamed_header_last_file_is_the_same_as_one_written_whole(tmp_path):
    arr = np.arange(1000, dtype=np.float64)
    with checksum.npy_writer(tmp_path / "s.npy", np.float64, what="t") as w:
        for a in range(0, 1000, 300):
            w.write(arr[a:a + 300])
    checksum.write_npy(tmp_path / "w.npy", arr)
    assert (tmp_path / "s.npy").read_bytes() == (tmp_path / "w.npy").read_bytes()


def test_a_foreign_npy_is_damaged_and_a_cache_of_it_is_discarded_with_a_warning(tmp_path, caplog):
    p = tmp_path / "c.npy"
    np.save(p, np.zeros(5))  # a plain .npy: no checksum
    with pytest.raises(DamagedFile, match="no checksum"):
        checksum.load_npy(p)
    with caplog.at_level(logging.WARNING):
        assert checksum.cached_npy(p, "test cache", np.float64, (5,)) is None
    assert not p.exists() and str(p) in caplog.text and "rebuilding" in caplog.text
    checksum.write_npy(p, np.zeros(4))
    assert checksum.cached_npy(p, "test cache", np.float64, (5,)) is None  # another shape


def test_sealed_json_refuses_an_edit_that_still_parses(tmp_path):
    raw = checksum.dumps_sealed({"n": 12, "done": ["a"]})
    assert checksum.loads_sealed(raw, "x") == {"n": 12, "done": ["a"]}
    with pytest.raises(DamagedFile, match="checksum"):
        checksum.loads_sealed(raw.replace(b"12", b"13"), "x")
    with pytest.raises(DamagedFile):
        checksum.loads_sealed(b"", "x")


def test_content_digest_sees_a_same_size_mid_file_edit_with_the_mtime_restored(tmp_path):
    p = tmp_path / "big.txt"
    data = bytearray(os.urandom(3 << 20))  # over the old head/tail stamp's 2 MiB
    p.write_bytes(bytes(data))
    first = keys.content_sha256(p)
    st = os.stat(p)
    data[len(data) // 2] ^= 1
    with open(p, "r+b") as f:
        f.seek(len(data) // 2)
        f.write(bytes(data[len(data) // 2:len(data) // 2 + 1]))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_size == st.st_size and os.stat(p).st_mtime_ns == st.st_mtime_ns
    assert keys.content_sha256(p) == keys.file_sha256(p) != first


def test_garbage_in_a_line_index_is_a_damaged_index_rebuilt(tmp_path):
    from triemine.io.corpus import open_corpus
    from triemine.io.lineindex import index_path

    p = tmp_path / "c.txt"
    p.write_text("".join(f"sentence {i}\n" for i in range(200)), encoding="utf-8")
    want = list(open_corpus(p).texts)
    idx = index_path(p, "auto")
    data = bytearray(idx.read_bytes())
    half = len(data) // 2
    data[half:] = os.urandom(len(data) - half)  # same size
    idx.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert list(open_corpus(p).texts) == want
    assert any(str(idx) in str(x.message) and "rebuilding" in str(x.message) for x in w)


def test_a_shard_damaged_in_place_is_computed_again(tmp_path):
    from triemine.distributed.shards import ShardStore, plan_shards

    shards = plan_shards(range(0, 10, 5), 10, 5)
    st = ShardStore(tmp_path / "s", {"k": 1}, shards)
    for s in shards:
        st.record(s, bytes(range(s.start, s.end)) * 10)
    _flip(st.path(1), 7, random.Random(1))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        again = ShardStore(tmp_path / "s", {"k": 1}, shards, resume=True)
    assert again.reused == [0] and [s.id for s in again.pending()] == [1]
    assert any(str(st.path(1)) in str(x.message) for x in w)


def test_a_column_changed_in_place_makes_the_store_unusable(tmp_path, caplog):
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.columns import ColumnStore, write_set

    c = CandidateSet(np.arange(50), np.arange(50)[::-1].copy(), np.ones(50, np.uint8),
                     {"score": np.linspace(0, 1, 50)})
    write_set(tmp_path / "s", c, done=("x",))
    assert ColumnStore.open(tmp_path / "s").done == ["x"]
    for name in ("score.npy", "tgt.npy", "columns.json"):
        path = tmp_path / "s" / name
        good = path.read_bytes()
        _flip(path, len(good) // 2, random.Random(2))
        with caplog.at_level(logging.WARNING):
            assert ColumnStore.open(tmp_path / "s") is None
        assert str(tmp_path / "s") in caplog.text
        path.write_bytes(good)
    assert ColumnStore.open(tmp_path / "s") is not None


def test_a_file_just_written_is_mapped_without_reading_its_rows_again(tmp_path, monkeypatch):
    """``written=True`` maps the same array without the rows' checksum pass, and still refuses
    what its trailer, header and length show: a cut file, a plain ``.npy``."""
    arr = np.random.default_rng(0).normal(size=(50, 3)).astype("<f4")
    p = tmp_path / "w.npy"
    checksum.write_npy(p, arr, "test")
    passes = []
    real = checksum.crc32_range
    monkeypatch.setattr(checksum, "crc32_range", lambda *a, **k: passes.append(1) or real(*a, **k))
    assert np.array_equal(checksum.load_npy(p, written=True), arr) and passes == []
    assert np.array_equal(checksum.load_npy(p), arr) and passes == [1]
    good = p.read_bytes()
    p.write_bytes(good[:-1])
    with pytest.raises(DamagedFile):
        checksum.load_npy(p, written=True)
    np.save(p, arr)
    with pytest.raises(DamagedFile, match="no checksum trailer"):
        checksum.load_npy(p, written=True)
