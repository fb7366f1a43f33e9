"""The line-offset index of a corpus file: its lines read through ``mmap``, never the file whole.

A corpus of 10^8 lines is 10-20 GB of text and more as Python strings; every process of a mining
job (the driver and each worker) reads only the lines its stage needs, by their byte offsets.  The
index is a cache file in ``$TRIEMINE_CACHE/lines/``, built once per corpus (one pass over the
file, in chunks) and memory-mapped by every process after that.

File layout (little-endian)::

    b"TMLINES1"                     magic, 8 bytes
    uint64                          header length h
    h bytes                         JSON header: the corpus's real path, size and SHA-256 of its
                                    whole content, the number of lines n, the format, how many
                                    empty and skipped lines follow and the CRC32 of the arrays
    (n + 1) x uint64                offset of every line's first byte, then the end of the data
    n_empty x int64                 1-based numbers of the empty lines (blank or skipped)
    n_skipped x int64               1-based numbers of the skipped (bad) lines, a subset of those

A line's bytes run from its offset to the next one, less its ``\\n`` and a ``\\r`` before it.
An index whose file is shorter or longer than its header says, whose header does not parse, whose
arrays do not have their checksum (damaged in place), or whose corpus digest is not the corpus's
(another file, or this one changed since: :func:`triemine.io.keys.input_digest`, read again only
when the file's stamp changes) is never used: it is rebuilt, and a warning names the index file
and the reason.  The parsing rules (formats, ids,
empty lines, UTF-8) are :mod:`triemine.io.corpus`'s, which builds the index through
:func:`build_index`.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import warnings
import zlib
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from triemine.io.outfile import atomic_write
from triemine.io.checksum import crc32_range
from triemine.io.keys import file_stamp, input_digest
from triemine.io.paths import cache_name, cache_root

MAGIC = b"TMLINES1"
VERSION = 3                  # 2: the skipped lines; 3: the corpus digest, the checksum
SCAN_BYTES = 64 << 20        # newline scan window
BOM = b"\xef\xbb\xbf"


class StaleIndex(Exception):
    """An index file that must not be used; the message says why."""


def index_path(corpus_path, format: str, cache: Optional[Path] = None) -> Path:
    """Where the index of ``corpus_path`` read as ``format`` lives."""
    if cache is None:
        cache = cache_root() / "lines"
    return Path(cache) / cache_name(corpus_path, f"{format}.idx")


def scan_offsets(buf, size: int) -> np.ndarray:
    """``(n + 1,)`` uint64: the first byte of every line of ``buf[:size]`` (after a UTF-8 BOM),
    then ``size``.  The final newline ends the last line; it does not start a new one."""
    start = 3 if size >= 3 and buf[:3] == BOM else 0
    parts = []
    for a in range(start, size, SCAN_BYTES):
        b = min(a + SCAN_BYTES, size)
        parts.append(np.flatnonzero(np.frombuffer(buf[a:b], dtype=np.uint8) == 10) + (a + 1))
    ends = np.concatenate(parts).astype(np.uint64) if parts else np.zeros(0, dtype=np.uint64)
    if len(ends) and ends[-1] == size:  # the newline of the last line
        ends = ends[:-1]
    return np.concatenate([np.array([start], dtype=np.uint64), ends,
                           np.array([size], dtype=np.uint64)]) if size > start else \
        np.array([start], dtype=np.uint64)


def write_index(path: Path, header: dict, offsets: np.ndarray, empty: Sequence[int],
                skipped: Sequence[int] = ()) -> None:
    """Atomically: a reader sees the whole old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = [np.ascontiguousarray(offsets, dtype="<u8").tobytes(),
              np.asarray(empty, dtype="<i8").tobytes(), np.asarray(skipped, dtype="<i8").tobytes()]
    crc = 0
    for a in arrays:
        crc = zlib.crc32(a, crc)
    head = json.dumps(dict(header, version=VERSION, n_lines=len(offsets) - 1,
                           n_empty=len(empty), n_skipped=len(skipped), crc32=crc)).encode("utf-8")
    atomic_write(path, [MAGIC + struct.pack("<Q", len(head)) + head] + arrays, "line index")


def _lines_array(path: Path, offset: int, n: int) -> np.ndarray:
    return (np.memmap(path, dtype="<i8", mode="r", offset=offset, shape=(n,)) if n
            else np.zeros(0, dtype=np.int64))


def read_index(path: Path, corpus: dict) -> Tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """``(header, offsets, empty lines, skipped lines)``, the arrays memory-mapped;
    :class:`StaleIndex` when the file is not a whole, undamaged index of the corpus that
    ``corpus`` (its real ``path``, ``size`` and ``sha256``) describes."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise StaleIndex("it is not a line index (bad magic)")
        raw = f.read(8)
        if len(raw) < 8:
            raise StaleIndex(f"it is truncated ({size} bytes)")
        (hlen,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(f.read(hlen).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise StaleIndex(f"it is truncated or damaged ({size} bytes, header unreadable)") \
                from None
    if header.get("version") != VERSION:
        raise StaleIndex(f"it has format version {header.get('version')}, not {VERSION}")
    n, n_empty, n_skipped = (int(header[k]) for k in ("n_lines", "n_empty", "n_skipped"))
    body = 16 + hlen
    want = body + 8 * (n + 1) + 8 * n_empty + 8 * n_skipped
    if size != want:
        raise StaleIndex(f"it is {'truncated' if size < want else 'longer than its header says'}"
                         f" ({size} bytes, its header says {want})")
    old = header.get("corpus", {})
    for field in ("path", "size", "sha256"):
        if old.get(field) != corpus[field]:
            raise StaleIndex(f"it was built for another corpus or an older version of this one "
                             f"({field}: {old.get(field)!r}, the corpus has {corpus[field]!r})")
    with open(path, "rb") as f:
        if crc32_range(f, body, size) != header.get("crc32"):
            raise StaleIndex("it is damaged (checksum mismatch)")
    offsets = np.memmap(path, dtype="<u8", mode="r", offset=body, shape=(n + 1,))
    empty = _lines_array(path, body + 8 * (n + 1), n_empty)
    skipped = _lines_array(path, body + 8 * (n + 1 + n_empty), n_skipped)
    return header, offsets, empty, skipped


def open_mmap(path):
    """The corpus file memory-mapped read-only (an empty file: ``b""``)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def load_or_build(corpus_path, format: str, build: Callable[[object, np.ndarray], dict],
                  cache: Optional[Path] = None, label=None):
    """``(header, offsets, empty, skipped, mmap)`` of ``corpus_path``'s index (``header["stamp"]``:
    the corpus's :func:`~triemine.io.keys.file_stamp`, taken before it was mapped), built with
    ``build(mmap, offsets) -> header fields`` (which validates the lines and finds the empty and
    the skipped ones) when there is no usable one; an unusable one is named in a warning with its
    reason, then rebuilt (``label``: the corpus as warnings name it, default ``corpus_path``;
    the original of a decompressed copy)."""
    label = corpus_path if label is None else label
    stamp = file_stamp(corpus_path)
    path = index_path(corpus_path, format, cache)
    buf = open_mmap(stamp["path"])
    corpus = {"path": stamp["path"], "size": stamp["size"],
              "sha256": input_digest(stamp["path"])}
    if path.exists():
        try:
            header, *arrays = read_index(path, corpus)
            return (dict(header, stamp=stamp), *arrays, buf)
        except StaleIndex as exc:
            warnings.warn(f"{path}: line index of {label} not used, {exc}; rebuilding it",
                          stacklevel=2)
        except (OSError, KeyError, TypeError, ValueError) as exc:
            warnings.warn(f"{path}: line index of {label} unreadable ({exc}); rebuilding it",
                          stacklevel=2)
    offsets = scan_offsets(buf, stamp["size"])
    fields = build(buf, offsets)
    empty = np.asarray(fields.pop("empty_lines"), dtype=np.int64)
    skipped = np.asarray(fields.pop("skipped_lines"), dtype=np.int64)
    write_index(path, dict(fields, corpus=corpus), offsets, empty, skipped)
    header, *arrays = read_index(path, corpus)
    return (dict(header, stamp=stamp), *arrays, buf)
