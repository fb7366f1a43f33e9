"""Streaming line input and output for :mod:`triemine.prepare`: plain, gzip, xz or zstd.

:func:`read_batches` yields a file's lines (bytes, newline and a final ``\\r`` removed) a batch at
a time, whatever its compression (told by the file's first bytes, not its name);
:func:`open_output` writes a file atomically (:func:`triemine.outfile.atomic_open`), compressed
when its name ends in ``.gz``, ``.xz`` or ``.zst``.  Neither holds more than a block and a batch
in memory.  A missing, unreadable, truncated or corrupt input is an
:class:`~triemine.errors.InputError` naming the file and the line reached.
"""
from __future__ import annotations

import contextlib
import gzip
import lzma
import os
from contextlib import contextmanager
from typing import Iterator, List

from triemine.errors import InputError
from triemine.outfile import atomic_open
from triemine.textfile import open_binary

BLOCK = 1 << 20
MAGIC = {b"\x1f\x8b": "gzip", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
# the output is an intermediate file: fast compression (zlib 1 is about 3x faster than its 6)
GZIP_LEVEL = 1
SUFFIXES = {".gz": "gzip", ".xz": "xz", ".zst": "zstd"}


def compression_of(head: bytes) -> str:
    """``gzip``, ``xz``, ``zstd`` or ``plain``: the compression the first bytes ``head`` show."""
    return next((kind for magic, kind in MAGIC.items() if head.startswith(magic)), "plain")


def _decompressed(f, kind: str):
    if kind == "gzip":
        return gzip.GzipFile(fileobj=f, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(f, "rb")
    if kind == "zstd":
        import zstandard
        return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
    return f


def _errors():
    errs = [OSError, EOFError, lzma.LZMAError, gzip.BadGzipFile]
    with contextlib.suppress(ImportError):
        import zstandard
        errs.append(zstandard.ZstdError)
    return tuple(errs)


def read_batches(path, batch_lines: int = 10000, what: str = "input") -> Iterator[List[bytes]]:
    """The lines of ``path`` (1-based numbering is the order they come in) in lists of at most
    ``batch_lines``; a last line without a newline is a line, a file's final newline does not
    start one.  Raises :class:`InputError` (file and line) when the file cannot be read or its
    compressed stream is corrupt or truncated."""
    path = os.fspath(path)
    errors = _errors()
    done = 0
    with open_binary(path, what) as raw:
        kind = compression_of(raw.peek(8)[:8] if hasattr(raw, "peek") else b"")
        stream = _decompressed(raw, kind)
        rest = b""
        batch: List[bytes] = []
        try:
            while True:
                block = stream.read(BLOCK)
                if not block:
                    break
                parts = (rest + block).split(b"\n")
                rest = parts.pop()
                batch.extend(parts)
                while len(batch) >= batch_lines:
                    out, batch = batch[:batch_lines], batch[batch_lines:]
                    done += len(out)
                    yield [ln[:-1] if ln.endswith(b"\r") else ln for ln in out]
        except errors as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise InputError(f"cannot read the {kind} {what} after line {done + len(batch)}: "
                             f"{reason} (corrupt or truncated?)", path) from None
        if rest:
            batch.append(rest)
        if batch:
            yield [ln[:-1] if ln.endswith(b"\r") else ln for ln in batch]


@contextmanager
def open_output(path, what: str = "prepared corpus"):
    """``with open_output(path) as f: f.write(bytes)``: ``path`` written atomically, gzip, xz or
    zstd compressed when its name ends in ``.gz``, ``.xz`` or ``.zst``; a body that raises
    leaves ``path`` as it was; a failed write is an :class:`~triemine.errors.OutputError`."""
    kind = SUFFIXES.get(os.path.splitext(os.fspath(path))[1].lower(), "plain")
    with atomic_open(path, what, hint="") as f:
        if kind == "gzip":
            out = gzip.GzipFile(fileobj=f, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)
        elif kind == "xz":
            out = lzma.LZMAFile(f, "wb", preset=3)
        elif kind == "zstd":
            import zstandard
            out = zstandard.ZstdCompressor(level=3).stream_writer(f, closefd=False)
        else:
            out = None
        yield f if out is None else out
        if out is not None:
            out.close()
