"""The line-offset index: open_corpus reads what read_corpus reads (ids, texts, empty lines,
format, errors) without holding the text, and an index that is truncated, foreign or stale is
named and rebuilt, never used."""
import logging
import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from triemine.io import corpus as corpus_mod
from triemine.io import lineindex
from triemine.io.corpus import open_corpus, read_corpus
from triemine.errors import InputError

# lines built from pieces that exercise every rule: tabs, ids with spaces, blank and
# whitespace-only lines, \r line ends, non-ASCII text, duplicate ids, bytes that are not UTF-8
# ("#", written as 0xff)
PIECES = st.sampled_from(["a", "b", "x1", "x 2", "\t", " ", "\r", "中文", "é", "", "\t\t", "id",
                          "#"])
TEXT = st.lists(PIECES, max_size=5).map("".join)
# TSV-looking lines (an id, a tab, a text) most of the time, so that whole files are valid TSV
TSV_LINE = st.tuples(st.sampled_from(["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "x y"]),
                     TEXT).map("\t".join)
LINE = st.one_of(TSV_LINE, TSV_LINE, TSV_LINE, st.sampled_from(["", " ", "\r"]), TEXT)


def _same(path, fmt, cache):
    try:
        want = read_corpus(path, fmt)
    except InputError as exc:
        with pytest.raises(InputError) as got:
            open_corpus(path, fmt, cache=cache)
        assert str(got.value) == str(exc)
        return None
    got = open_corpus(path, fmt, cache=cache)
    assert got.format == want.format
    assert list(got.ids) == want.ids
    assert list(got.texts) == want.texts
    assert got.empty_lines == want.empty_lines
    assert list(got.skipped_lines) == want.skipped_lines and got.problems == want.problems
    assert len(got) == len(want)
    n = len(want)
    for i in range(n):
        assert got.texts[i] == want.texts[i] and got.ids[i] == want.ids[i]
    assert got.texts[1:n - 1] == want.texts[1:n - 1]
    assert got.texts[::2] == want.texts[::2]
    if n:
        assert got.texts[-1] == want.texts[-1]
    return got


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # same patch each input
@given(lines=st.lists(LINE, max_size=12), final_newline=st.booleans(), bom=st.booleans(),
       fmt=st.sampled_from(["auto", "plain", "tsv"]))
def test_open_corpus_reads_what_read_corpus_reads(tmp_path_factory, monkeypatch, lines,
                                                  final_newline, bom, fmt):
    # tiny chunks and scan windows: every chunk boundary is exercised
    monkeypatch.setattr(corpus_mod, "CHUNK_LINES", 3)
    monkeypatch.setattr(lineindex, "SCAN_BYTES", 7)
    d = tmp_path_factory.mktemp("li")
    text = "\n".join(lines) + ("\n" if final_newline and lines else "")
    path = d / "c.txt"
    path.write_bytes(
        (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8").replace(b"#", b"\xff")
    )
    _same(path, fmt, d / "cache")
    _same(path, fmt, d / "cache")  # the second time from the index file


def test_bad_lines_are_skipped_at_the_same_lines_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_mod, "CHUNK_LINES", 4)
    rows = [f"s{i}\tsentence {i}".encode() for i in range(20)]
    rows[13] = b"s2\tagain"        # a duplicate of line 3, in another chunk
    rows[9] = b"no tab here"
    rows[17] = b"s17\tbad \xff byte"
    p = tmp_path / "bad.tsv"
    p.write_bytes(b"\n".join(rows) + b"\n")
    for fmt in ("tsv", "auto"):
        got = _same(p, fmt, tmp_path / "cache")
        assert list(got.skipped_lines) == [10, 14, 18]
        assert [(i, why.split(" (")[0]) for i, why in got.problems] == [
            (10, "no tab: TSV lines must be id<TAB>sentence"), (14, "duplicate id 's2'"),
            (18, "invalid UTF-8 at byte 8 of the line")]
        assert got.texts[13] == got.ids[13] == "" and got.texts[2] == "sentence 2"
        assert got.texts[16:19] == ["sentence 16", "", "sentence 18"]
    p = tmp_path / "latin1.txt"  # mostly not UTF-8: refused at its first bad line
    p.write_bytes(b"".join(b"line %d \xe9\n" % i for i in range(10)) + b"fine\n")
    with pytest.raises(InputError) as exc:
        open_corpus(p, cache=tmp_path / "cache")
    assert exc.value.line == 1 and "not a UTF-8 corpus" in exc.value.problem


def test_index_is_reused_then_rebuilt_when_truncated_foreign_or_stale(tmp_path):
    cache = tmp_path / "cache"
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    a.write_text("".join(f"a{i}\tfirst corpus {i}\n" for i in range(50)), encoding="utf-8")
    b.write_text("".join(f"b{i}\tsecond {i}\n" for i in range(30)), encoding="utf-8")
    ca = open_corpus(a, cache=cache)
    idx_a = lineindex.index_path(a, "auto", cache)
    idx_b = lineindex.index_path(b, "auto", cache)
    assert idx_a.is_file() and ca.texts[49] == "first corpus 49"
    mtime = idx_a.stat().st_mtime_ns
    open_corpus(a, cache=cache)
    assert idx_a.stat().st_mtime_ns == mtime  # reused, not rebuilt

    # truncated: named, rebuilt, the right lines
    data = idx_a.read_bytes()
    idx_a.write_bytes(data[:-5])
    with pytest.warns(UserWarning, match=rf"{idx_a.name}.*truncated.*rebuilding"):
        again = open_corpus(a, cache=cache)
    assert list(again.texts) == read_corpus(a).texts
    assert idx_a.read_bytes() == data

    # another corpus's index in its place: named, rebuilt
    open_corpus(b, cache=cache)
    shutil.copy(idx_a, idx_b)
    with pytest.warns(UserWarning, match=rf"{idx_b.name}.*another corpus"):
        cb = open_corpus(b, cache=cache)
    assert list(cb.ids) == [f"b{i}" for i in range(30)]

    # the corpus changed after its index was built (same size, newer file): rebuilt
    b.write_text("".join(f"c{i}\tsecond {i}\n" for i in range(30)), encoding="utf-8")
    os.utime(b, ns=(b.stat().st_atime_ns, b.stat().st_mtime_ns + 10**9))
    with pytest.warns(UserWarning, match="another corpus or an older version"):
        cb = open_corpus(b, cache=cache)
    assert cb.ids[0] == "c0"

    # not an index at all
    idx_b.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="not a line index"):
        assert open_corpus(b, cache=cache).ids[29] == "c29"


def test_offsets_not_text_are_held(tmp_path):
    """A 200,000-line corpus: the view holds its (n + 1) offsets memory-mapped and decodes only
    the lines asked for."""
    p = tmp_path / "big.txt"
    p.write_text("".join(f"sentence number {i} of a larger corpus\n" for i in range(200_000)),
                 encoding="utf-8")
    c = open_corpus(p, cache=tmp_path / "cache")
    assert isinstance(c.texts._off, np.memmap) and len(c.texts._off) == 200_001
    assert c.texts[123_456] == "sentence number 123456 of a larger corpus"
    assert c.ids[199_999] == "200000" and len(c) == 200_000
    assert c.texts[8192:8195] == [
        f"sentence number {i} of a larger corpus" for i in (8192, 8193, 8194)
    ]
    assert c.non_empty[:3] == [0, 1, 2] and c.empty_lines == []


def test_a_file_changed_under_its_index_is_an_error_not_wrong_lines(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_text("s1\tab\ns2\tcd\n", encoding="utf-8")
    c = open_corpus(p, cache=tmp_path / "cache")
    with open(p, "r+b") as f:  # same size, same file, other line ends
        f.write(b"s1\ta\nbs2\tcd\n")
    with pytest.raises(InputError, match="changed while it was read") as exc:
        c.texts[0]
    assert exc.value.path == str(p) and exc.value.line == 1


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="not found"):
        open_corpus(tmp_path / "nope.txt", cache=tmp_path / "cache")
    with pytest.raises(InputError, match="directory"):
        open_corpus(tmp_path, cache=tmp_path / "cache")


def test_content_digest_is_read_once_per_version_of_a_file(tmp_path, monkeypatch, caplog):
    """Cache and resume keys hash whole files (corpora, embeddings: hundreds of GB at 10^8 a
    side); the digest is kept with the file's stamp and the file is read whole again only when
    the stamp changes (another size, mtime or first or last MiB)."""
    import hashlib
    import json

    from triemine.io import keys

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    p = tmp_path / "big.bin"
    data = bytearray(np.random.default_rng(0).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes())
    p.write_bytes(bytes(data))
    want = hashlib.sha256(bytes(data)).hexdigest()
    assert keys.content_sha256(p) == want == keys.file_sha256(p)
    reads = []
    real = keys.file_sha256
    monkeypatch.setattr(keys, "file_sha256", lambda path: reads.append(path) or real(path))
    assert keys.content_sha256(p) == want and reads == []  # from the digest file

    data[(3 << 20) // 2] ^= 0xFF  # the middle changed (same size), the file is newer: read again
    p.write_bytes(bytes(data))
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    assert keys.content_sha256(p) == hashlib.sha256(bytes(data)).hexdigest() != want
    assert len(reads) == 1

    saved = keys._digest_path(os.path.realpath(p))
    saved.write_text("{not json", encoding="utf-8")  # a damaged digest file: named, rewritten
    with caplog.at_level(logging.WARNING, logger="triemine.io.keys"):
        assert keys.content_sha256(p) == hashlib.sha256(bytes(data)).hexdigest()
    assert len(reads) == 2 and str(saved) in caplog.text
    assert json.loads(saved.read_text(encoding="utf-8"))["data"]["stamp"] == keys.file_stamp(p)
    raw = saved.read_bytes()  # a digit of the digest changed, the JSON still parses: named too
    at = raw.index(b'"sha256": "') + 11
    saved.write_bytes(raw[:at] + (b"0" if raw[at:at + 1] != b"0" else b"1") + raw[at + 1:])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="triemine.io.keys"):
        assert keys.content_sha256(p) == hashlib.sha256(bytes(data)).hexdigest()
    assert len(reads) == 3 and "checksum mismatch" in caplog.text
    with pytest.raises(FileNotFoundError):
        keys.content_sha256(tmp_path / "missing.bin")
