"""Compressed files in and out: gzip (``.gz``), xz (``.xz``) and Zstandard (``.zst``).

Inputs are recognised by their first bytes (:data:`CODECS`' magic numbers), whatever their
name; a file named ``.gz``/``.xz``/``.zst`` whose bytes are none of these is refused (a damaged
header, or a misnamed file), never read as text.  Zstandard frames written without a content
checksum (python-zstandard's default) cannot show damage inside them: each such file read is
recorded under its real path (size, SHA-256, and its text's SHA-256), and the same file
changed in place keeping its size is refused (:func:`_zstd_unchecked`).  A compressed corpus is
decompressed once, as a
stream, into a plain copy under ``$TRIEMINE_CACHE/decompressed/`` named by the compressed file's
content SHA-256 (:func:`plain_copy`); the line index and its memory map then work on that copy as
on any plain file (why a cache and not a seekable format: docs/decisions.md, "Compressed
corpora: a decompressed cache").  The copy is written atomically and sealed by a sidecar
recording its size and SHA-256, written after it: a copy without its sidecar (a killed run), or
one that is not what its sidecar records, is never used but decompressed again.  A damaged or
truncated compressed file is an :class:`~triemine.errors.InputError` naming it and the reason,
and leaves no copy behind.

Outputs whose path ends in one of the suffixes are compressed as they are written, by one
writer (:func:`output_file`: bitexts, prepared corpora, reports); every other path is written as
it is.  Outputs the tools read back or resume in place (mining TSVs, thresholds files) are
refused under a compressed name before any work (:func:`check_uncompressed`).
"""
from __future__ import annotations

import gzip
import hashlib
import logging
import lzma
import os
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from triemine.io.checksum import dumps_sealed, read_sealed
from triemine.errors import DamagedFile, InputError, describe
from triemine.io.outfile import _pid_alive, atomic_open, atomic_write
from triemine.io.keys import content_sha256, remember_sha256
from triemine.io.paths import cache_root

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


def _zstd_checked(path) -> bool:
    """Whether the first zstd frame of ``path`` carries a content checksum (a header the
    decoder cannot parse counts as checked: the decoder reports it)."""
    zstandard = _zstd()
    with open(path, "rb") as f:
        head = f.read(18)  # the longest frame header
    try:
        return bool(zstandard.get_frame_parameters(head).has_checksum)
    except zstandard.ZstdError:
        return True


def _frame_record(path) -> Path:
    """Where the record of a checksum-less zstd file read at ``path`` (its real path) is kept."""
    real = os.path.realpath(os.fspath(path)).encode("utf-8", "surrogateescape")
    return _cache_dir() / "unchecked" / (hashlib.sha256(real).hexdigest()[:32] + ".json")


def _zstd_unchecked(path) -> Iterator[bytes]:
    """:func:`_zstd_blocks` of a zstd file whose frames carry no content checksum (damage
    inside them decodes to other text without an error): each read is recorded (the file's
    size, its SHA-256 and its decompressed text's SHA-256) under the file's real path, and a
    file changed in place keeping its size (damage, as an edit of compressed data almost never
    keeps it) is an :class:`InputError` naming it; a file read for the first time is warned
    about once."""
    rec_path = _frame_record(path)
    size, digest = os.path.getsize(path), content_sha256(path)
    try:
        rec = read_sealed(rec_path, "zstd frame record")
    except FileNotFoundError:
        rec = None
    except (OSError, DamagedFile) as exc:
        logger.warning("%s; recording the file again", exc)
        rec = None
    rec = rec if isinstance(rec, dict) else None
    if rec is not None and rec.get("size") == size and rec.get("sha256") != digest:
        raise InputError("changed in place since it was read (the same size, other bytes) and "
                         "its zstd frames carry no content checksum, so the change cannot be "
                         "told from damage: restore the file, or remove "
                         f"{rec_path} if the change is meant", path)
    if rec is None or rec.get("sha256") != digest:
        logger.warning("%s: zstd frames without a content checksum: damage inside them cannot "
                       "be detected (compress with zstd's default --check)", path)
    h, n = hashlib.sha256(), 0
    for block in _zstd_blocks(path):
        h.update(block)
        n += len(block)
        yield block
    if rec is not None and rec.get("sha256") == digest and rec.get("plain_sha256") != h.hexdigest():
        raise InputError("decompressed to other text than when it was last read (the same "
                         "compressed bytes): a faulty decoder or memory?", path)
    rec_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(rec_path, dumps_sealed({"path": os.path.realpath(path), "size": size,
                                         "sha256": digest, "plain_size": n,
                                         "plain_sha256": h.hexdigest()}),
                 "zstd frame record", hint="")


def decompressed(path, codec: Codec) -> Iterator[bytes]:
    """The decompressed bytes of ``path`` in blocks; an :class:`InputError` naming the file
    and the reason when it is damaged or truncated (every frame or member is checked to its
    end-of-stream marker and checksum; zstd frames without a checksum as
    :func:`_zstd_unchecked` says)."""
    p = os.fspath(path)
    if codec.name == "gzip":
        return _gzip_like(gzip.open, p, (OSError, zlib.error))
    if codec.name == "xz":
        return _gzip_like(lzma.open, p, (lzma.LZMAError, OSError))
    return _zstd_blocks(p) if _zstd_checked(p) else _zstd_unchecked(p)


def check_uncompressed(outputs) -> None:
    """Refuse, before any work, an output named as compressed that the tools write plain
    because they read it back or resume it in place (mining TSVs, thresholds files, tries):
    ``outputs`` are ``(label, path)`` pairs
    (``None`` paths left out); an :class:`InputError` naming the flag and the file."""
    for label, path in outputs:
        codec = codec_of_name(path) if path is not None else None
        if codec is not None:
            raise InputError(f"{label}: this file is written plain (the tools read it back "
                             f"or resume it in place): drop the {codec.suffix} suffix, or "
                             "compress it afterwards", os.fspath(path))


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


@contextmanager
def output_file(path, what: str = "file", hint: Optional[str] = None):
    """``with output_file(path) as f: f.write(bytes)``: the one writer of the tools' outputs
    that may be compressed: ``path`` written atomically (:func:`triemine.io.outfile.atomic_open`),
    compressed when its name ends in ``.gz``, ``.xz`` or ``.zst`` (:func:`codec_of_name`); a
    body that raises leaves ``path`` as it was; a failed write is an
    :class:`~triemine.errors.OutputError`."""
    with atomic_open(Path(os.fspath(path)), what, hint) as f:
        out = CompressingFile(f, codec_of_name(path))
        yield out
        out.close()


def write_output(path, data: bytes, what: str = "file", hint: Optional[str] = None) -> None:
    """``data`` written to ``path`` by :func:`output_file` (compressed by its name)."""
    with output_file(path, what, hint) as f:
        f.write(data)


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
