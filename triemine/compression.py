"""Compressed files in and out: gzip (``.gz``), xz (``.xz``) and Zstandard (``.zst``).

Inputs are recognised by their first bytes (:data:`CODECS`' magic numbers), whatever their
name; a file named ``.gz``/``.xz``/``.zst`` whose bytes are none of these is refused (a damaged
header, or a misnamed file), never read as text.  A compressed corpus is decompressed once, as a
stream, into a plain copy under ``$TRIEMINE_CACHE/decompressed/`` named by the compressed file's
content SHA-256 (:func:`plain_copy`); the line index and its memory map then work on that copy as
on any plain file (why a cache and not a seekable format: docs/decisions.md, "Compressed
corpora: a decompressed cache").  The copy is written atomically and sealed by a sidecar
recording its size and SHA-256, written after it: a copy without its sidecar (a killed run), or
one that is not what its sidecar records, is never used but decompressed again.  A damaged or
truncated compressed file is an :class:`~triemine.errors.InputError` naming it and the reason,
and leaves no copy behind.

Outputs whose path ends in one of the suffixes are compressed as they are written
(:func:`codec_of_name`, :class:`CompressingFile`); every other path is written as it is.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
import lzma
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from triemine.checksum import dumps_sealed, read_sealed
from triemine.errors import DamagedFile, InputError
from triemine.outfile import _pid_alive, atomic_open, atomic_write
from triemine.paths import cache_root, content_sha256, remember_sha256
from triemine.textfile import describe

logger = logging.getLogger(__name__)

BLOCK = 1 << 20  # bytes read or written at a time


@dataclass(frozen=True)
class Codec:
    name: str
    suffix: str
    magic: bytes
    compressor: Callable[[], object]  # an object with compress(bytes) and flush()


def _zstd():
    try:
        import zstandard
    except ImportError:  # an install without its requirements
        raise InputError("reading or writing .zst files needs the zstandard package "
                         "(pip install zstandard)") from None
    return zstandard


CODECS = {
    "gzip": Codec("gzip", ".gz", b"\x1f\x8b",
                  lambda: zlib.compressobj(6, zlib.DEFLATED, 31)),  # gzip header, mtime 0
    "xz": Codec("xz", ".xz", b"\xfd7zXZ\x00", lambda: lzma.LZMACompressor(lzma.FORMAT_XZ)),
    "zstd": Codec("zstd", ".zst", b"\x28\xb5\x2f\xfd",
                  lambda: _zstd().ZstdCompressor(level=3, write_checksum=True).compressobj()),
}
SUFFIXES = tuple(c.suffix for c in CODECS.values())


def codec_of_name(path) -> Optional[Codec]:
    """The codec an output path asks for by its suffix (``None``: written as it is)."""
    name = os.fspath(path).lower()
    return next((c for c in CODECS.values() if name.endswith(c.suffix)), None)


def sniff(path) -> Optional[Codec]:
    """The codec of the file at ``path`` by its first bytes (``None``: not compressed); an
    :class:`InputError` for a file named as compressed whose bytes are not."""
    p = os.fspath(path)
    if describe(p):
        return None  # the reader reports a missing or special file in its own words (a FIFO
    try:             # would block here)
        with open(p, "rb") as f:
            head = f.read(8)
    except OSError:
        return None  # the reader reports a missing or unreadable file in its own words
    found = next((c for c in CODECS.values() if head.startswith(c.magic)), None)
    named = codec_of_name(p)
    if found is None and named is not None:
        raise InputError(f"named {named.suffix} but not {named.name} data (it starts with "
                         f"{head[:6]!r}): a damaged header, or rename the file", p)
    return found


def _gzip_like(opener, path, errors) -> Iterator[bytes]:
    with opener(path, "rb") as f:
        while True:
            try:
                block = f.read(BLOCK)
            except EOFError:
                raise InputError("truncated: the compressed data ends before its end-of-stream "
                                 "marker (an interrupted download or copy?)", path) from None
            except errors as exc:
                raise InputError(f"damaged compressed data ({exc})", path) from None
            if not block:
                return
            yield block


def _zstd_blocks(path) -> Iterator[bytes]:
    zstandard = _zstd()
    d = zstandard.ZstdDecompressor()
    with open(path, "rb") as f:
        obj, pending = d.decompressobj(), False
        for data in iter(lambda: f.read(BLOCK), b""):
            while data:
                try:
                    out = obj.decompress(data)
                except zstandard.ZstdError as exc:
                    raise InputError(f"damaged compressed data ({exc})", path) from None
                pending = True
                if out:
                    yield out
                if not obj.eof:
                    break
                data, obj, pending = obj.unused_data, d.decompressobj(), False  # next frame
    if pending:
        raise InputError("truncated: the compressed data ends inside a zstd frame (an "
                         "interrupted download or copy?)", path)


def decompressed(path, codec: Codec) -> Iterator[bytes]:
    """The decompressed bytes of ``path`` in blocks; an :class:`InputError` naming the file
    and the reason when it is damaged or truncated (every frame or member is checked to its
    end-of-stream marker and checksum)."""
    p = os.fspath(path)
    if codec.name == "gzip":
        return _gzip_like(gzip.open, p, (OSError, zlib.error))
    if codec.name == "xz":
        return _gzip_like(lzma.open, p, (lzma.LZMAError, OSError))
    return _zstd_blocks(p)


class CompressingFile:
    """``write(bytes)`` to the open binary file ``f``, compressed with ``codec`` as a stream
    (``None``: as they are); :meth:`close` writes the end of the stream (``f`` stays open)."""

    def __init__(self, f, codec: Optional[Codec]):
        self.f, self.comp = f, (codec.compressor() if codec is not None else None)

    def write(self, data: bytes) -> None:
        self.f.write(self.comp.compress(data) if self.comp is not None else data)

    def close(self) -> None:
        if self.comp is not None:
            self.f.write(self.comp.flush())
            self.comp = None


# -- the decompressed cache ------------------------------------------------------------------------

def _cache_dir() -> Path:
    return cache_root() / "decompressed"


def _copy_path(path, codec: Codec, digest: str) -> Path:
    name = Path(os.fspath(path)).name
    if name.lower().endswith(codec.suffix):
        name = name[:-len(codec.suffix)]
    return _cache_dir() / f"{digest}.{name or 'corpus'}"


def _usable(copy: Path) -> Optional[str]:
    """Why the cached copy must not be used (``None``: it is whole, as its sidecar records)."""
    side = copy.with_name(copy.name + ".json")
    try:
        rec = read_sealed(side, "decompressed copy's record")
    except FileNotFoundError:
        return "it has no record (its decompression did not finish)" if copy.exists() else ""
    except (OSError, DamagedFile) as exc:
        return str(exc)
    try:
        size = copy.stat().st_size
    except OSError:
        return "its record is there but the copy is not"
    if size != rec.get("size") or content_sha256(copy) != rec.get("sha256"):
        return "it is not what its record says (changed or damaged since it was written)"
    return None


def _clear_stale_temporaries(copy: Path) -> None:
    """Remove the temporary files a killed decompression of ``copy`` left (their pid is gone)."""
    for tmp in copy.parent.glob(copy.name + ".tmp*"):
        pid = tmp.name.rpartition(".tmp")[2]
        if pid.isdigit() and not _pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)


def plain_copy(path) -> str:
    """The path to read ``path`` through: ``path`` itself when it is not compressed, else its
    decompressed copy in the cache (made on first use, reused while whole).  An
    :class:`InputError` naming ``path`` for a damaged or truncated compressed file."""
    p = os.fspath(path)
    codec = sniff(p)
    if codec is None:
        return p
    copy = _copy_path(p, codec, content_sha256(p))
    why = _usable(copy)
    if why is None:
        return str(copy)
    if why:
        logger.warning("%s: decompressed copy of %s not used, %s; decompressing again", copy, p,
                       why)
    copy.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_temporaries(copy)
    h, size = hashlib.sha256(), 0
    with atomic_open(copy, "decompressed copy", hint="") as f:
        for block in decompressed(p, codec):
            f.write(block)
            h.update(block)
            size += len(block)
    remember_sha256(copy, h.hexdigest())
    atomic_write(copy.with_name(copy.name + ".json"), dumps_sealed(
        {"source": os.path.realpath(p), "codec": codec.name, "size": size,
         "sha256": h.hexdigest()}), "decompressed copy's record", hint="")
    logger.info("%s: decompressed (%s) into %s, %d bytes", p, codec.name, copy, size)
    return str(copy)
