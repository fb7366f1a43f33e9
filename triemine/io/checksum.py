"""Files that carry their own checksum: every cache and work-directory array the package writes,
verified when it is read, so that damage (truncated, emptied, overwritten in place keeping its
size, a foreign file) is found, never read (the trie file format,
:mod:`triemine.trie.fileformat`, has its own header checksums in the same style).

* A *sealed* ``.npy``: a plain ``.npy`` (any reader of ``.npy`` files reads its array) followed by
  a 24-byte trailer ``b"TMSEAL01"``, ``uint64`` length of the ``.npy`` part, ``uint32`` CRC32 of
  the array bytes and then of the ``.npy`` header (the order lets a writer that streams the rows
  write the header last), ``uint32`` CRC32 of the trailer's first 20 bytes; little-endian.
* A *sealed* JSON document: ``{"crc32": CRC32 of the canonical JSON of "data", "data": ...}``.

Verification reads the whole file once (CRC32, several GB/s a core: docs/decisions.md); a
reader verifies at open, then maps the array.  Every problem is a
:class:`~triemine.errors.DamagedFile` naming the file.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from triemine.errors import DamagedFile
from triemine.io.outfile import atomic_open, npy_header

logger = logging.getLogger(__name__)

TRAILER = struct.Struct("<8sQII")
SEAL = b"TMSEAL01"
CHUNK = 1 << 22


def crc32_range(f, start: int, end: int, crc: int = 0) -> int:
    """CRC32 of bytes ``[start, end)`` of the open binary file ``f``, read in chunks;
    ``EOFError`` when the file ends first."""
    f.seek(start)
    buf = bytearray(min(CHUNK, max(end - start, 0)) or 1)
    view = memoryview(buf)
    left = end - start
    while left > 0:
        n = f.readinto(view[:min(left, len(buf))])
        if not n:
            raise EOFError
        crc = zlib.crc32(view[:n], crc)
        left -= n
    return crc


def _trailer(length: int, crc: int) -> bytes:
    head = TRAILER.pack(SEAL, length, crc, 0)[:-4]
    return head + struct.pack("<I", zlib.crc32(head))


class _NpyWriter:
    """The open file of :func:`npy_writer`: ``write(array or bytes)``, the rows after the header."""

    def __init__(self, f, itemsize: int):
        self.f, self.itemsize, self.nbytes, self.crc = f, itemsize, 0, 0

    @property
    def name(self) -> str:
        return self.f.name

    def write(self, data) -> None:
        view = memoryview(np.ascontiguousarray(data) if isinstance(data, np.ndarray) else data)
        view = view.cast("B") if view.ndim != 1 or view.format != "B" else view
        self.f.write(view)
        self.crc = zlib.crc32(view, self.crc)
        self.nbytes += len(view)

    def flush(self) -> None:
        self.f.flush()


@contextlib.contextmanager
def npy_writer(path, dtype, shape: Optional[tuple] = None, what: str = "file"):
    """A sealed ``.npy`` written atomically (:func:`~triemine.io.outfile.atomic_open`) from the rows
    given to ``write`` (C order).  With ``shape`` the header is written first (the rows must
    fill it); without, the file is 1-d and its header, written last, has the rows written.
    ``ValueError`` when the rows do not fill ``shape``."""
    dtype = np.dtype(dtype)
    first = npy_header(dtype, shape if shape is not None else (0,))
    with atomic_open(Path(path), what) as f:
        f.write(first)
        w = _NpyWriter(f, dtype.itemsize)
        yield w
        want = (int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape is not None
                else None)
        if want is not None and w.nbytes != want:
            raise ValueError(f"{path}: {w.nbytes} bytes of rows for a {shape} array")
        header = first if shape is not None else npy_header(dtype, (w.nbytes // dtype.itemsize,))
        if len(header) != len(first):  # a 1-d header: 128 bytes for any row count below 10^40
            raise ValueError(f"a .npy header of {len(header)} bytes")
        f.write(_trailer(len(header) + w.nbytes, zlib.crc32(header, w.crc)))
        if shape is None:
            f.seek(0)
            f.write(header)


def write_npy(path, arr, what: str = "file") -> None:
    """``arr`` (C order) as a sealed ``.npy``, atomically, written from the array itself."""
    arr = np.ascontiguousarray(arr)
    with npy_writer(path, arr.dtype, arr.shape, what) as w:
        w.write(arr)


def verify_npy(path, what: str = "file", crc: bool = True) -> Tuple[np.dtype, tuple, int]:
    """``(dtype, shape, offset of the rows)`` of the sealed ``.npy`` at ``path`` once its length
    and checksum hold; :class:`DamagedFile` otherwise (a missing file: ``FileNotFoundError``).
    ``crc=False`` checks the trailer, the header and the length but not the rows' checksum (no
    read of the rows: for a file this process has just written)."""
    p = os.fspath(path)
    fmt = np.lib.format
    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < TRAILER.size:
            raise DamagedFile(p, f"truncated ({size} bytes)" if size else "empty", what)
        f.seek(size - TRAILER.size)
        raw = f.read(TRAILER.size)
        seal, length, sealed_crc, tcrc = TRAILER.unpack(raw)
        if seal != SEAL or zlib.crc32(raw[:-4]) != tcrc:
            raise DamagedFile(p, "no checksum trailer (truncated, overwritten, or not written "
                                 "by this version of triemine)", what)
        if length != size - TRAILER.size:
            raise DamagedFile(p, f"{size} bytes, its trailer says {length + TRAILER.size}", what)
        f.seek(0)
        try:
            version = fmt.read_magic(f)
            shape, fortran, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else
                                     fmt.read_array_header_2_0)(f)
        except Exception as exc:  # any parser error (ValueError, TokenError, ...): damaged
            raise DamagedFile(p, f"unreadable .npy header ({exc})", what) from None
        offset = f.tell()
        f.seek(0)
        header = f.read(offset)
        try:
            body = crc32_range(f, offset, length) if crc else None
        except EOFError:
            raise DamagedFile(p, "truncated", what) from None
    if body is not None and zlib.crc32(header, body) != sealed_crc:
        raise DamagedFile(p, "checksum mismatch (the file was changed after it was written)",
                          what)
    if fortran or dtype.hasobject or \
            offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != length:
        raise DamagedFile(p, f"its header ({dtype}, {shape}) does not fit its length", what)
    return dtype, tuple(shape), offset


def load_npy(path, what: str = "file", mmap: bool = True, dtype=None,
             shape: Optional[tuple] = None, written: bool = False) -> np.ndarray:
    """The array of the sealed ``.npy`` at ``path``, verified (:func:`verify_npy`), memory-mapped
    read-only (or read into memory); with ``dtype``/``shape``, a file of another one is a
    :class:`DamagedFile` too (a cache written for other lines).  ``written``: this process has
    just written the file, so its rows are not read again for their checksum."""
    dt, sh, offset = verify_npy(path, what, crc=not written)
    if (dtype is not None and dt != np.dtype(dtype)) or (shape is not None and sh != tuple(shape)):
        raise DamagedFile(path, f"holds a {dt} array of shape {sh}, not "
                                f"{np.dtype(dtype) if dtype is not None else dt} {shape or sh}",
                          what)
    count = int(np.prod(sh, dtype=np.int64))
    if not count:
        return np.zeros(sh, dtype=dt)
    if mmap:
        return np.memmap(path, dtype=dt, mode="r", offset=offset, shape=sh)
    return np.fromfile(path, dtype=dt, count=count, offset=offset).reshape(sh)


def discard(exc: DamagedFile, then: str = "rebuilding it") -> None:
    """The rule for a damaged cache file: removed, with a one-line warning naming it and what
    happens next (the caller computes it again)."""
    logger.warning("%s; %s", exc, then)
    with contextlib.suppress(OSError):
        os.unlink(exc.path)


def cached_npy(path, what: str, dtype=None, shape: Optional[tuple] = None,
               mmap: bool = True) -> Optional[np.ndarray]:
    """A cache's array (:func:`load_npy`), or ``None`` when it is absent or damaged (a damaged
    file is :func:`discard`-ed: the caller rebuilds it)."""
    try:
        return load_npy(path, what, mmap=mmap, dtype=dtype, shape=shape)
    except FileNotFoundError:
        return None
    except DamagedFile as exc:
        discard(exc)
        return None


def json_crc32(data) -> int:
    """CRC32 of ``data``'s canonical JSON (sorted keys): the checksum of a sealed JSON document,
    of a shard manifest and its log lines, of a progress file."""
    return zlib.crc32(json.dumps(data, sort_keys=True).encode("utf-8"))


def dumps_sealed(data) -> bytes:
    """``data`` (JSON-serialisable) as a sealed JSON document."""
    data = json.loads(json.dumps(data))
    return json.dumps({"crc32": json_crc32(data), "data": data}, sort_keys=True).encode("utf-8")


def loads_sealed(raw: bytes, path, what: str = "file"):
    """The data of a sealed JSON document; :class:`DamagedFile` when it does not parse or its
    checksum does not hold."""
    try:
        doc = json.loads(raw.decode("utf-8"))
        crc, data = doc["crc32"], doc["data"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise DamagedFile(path, f"unreadable ({type(exc).__name__}: {exc})"
                          if raw else "empty", what) from None
    if json_crc32(data) != crc:
        raise DamagedFile(path, "checksum mismatch (the file was changed after it was written)",
                          what)
    return data


def read_sealed(path, what: str = "file"):
    """:func:`loads_sealed` of the file at ``path`` (``FileNotFoundError`` when missing)."""
    with open(path, "rb") as f:
        return loads_sealed(f.read(), path, what)
