"""Streaming line input and output for :mod:`triemine.prepare`: plain, gzip, xz or zstd, through
:mod:`triemine.io.compression`'s codecs.

:func:`read_batches` yields a file's lines (bytes, newline and a final ``\\r`` removed) a batch at
a time, whatever its compression (told by the file's first bytes,
:func:`triemine.io.compression.sniff`), streaming: no decompressed copy is made, as the
preparation reads its input once (twice with the boilerplate filter);
:func:`open_output` writes a file atomically (:func:`triemine.io.outfile.atomic_open`), compressed
when its name ends in ``.gz``, ``.xz`` or ``.zst``.  A missing, unreadable, truncated or
corrupt input is an :class:`~triemine.errors.InputError` naming the file.
"""
from __future__ import annotations

import os
from typing import Iterator, List

from triemine.io import BLOCK, decompressed, open_binary, output_file, sniff


def _blocks(path, what: str) -> Iterator[bytes]:
    codec = sniff(path)
    if codec is not None:
        yield from decompressed(path, codec)
        return
    with open_binary(path, what) as f:
        yield from iter(lambda: f.read(BLOCK), b"")


def read_batches(path, batch_lines: int = 10000, what: str = "input") -> Iterator[List[bytes]]:
    """The lines of ``path`` (1-based numbering is the order they come in) in lists of at most
    ``batch_lines``; a last line without a newline is a line, a file's final newline does not
    start one.  Raises :class:`~triemine.errors.InputError` naming the file when it cannot be
    read or its compressed stream is damaged or truncated."""
    path = os.fspath(path)
    rest = b""
    batch: List[bytes] = []
    for block in _blocks(path, what):
        parts = (rest + block).split(b"\n")
        rest = parts.pop()
        batch.extend(parts)
        while len(batch) >= batch_lines:
            out, batch = batch[:batch_lines], batch[batch_lines:]
            yield [ln[:-1] if ln.endswith(b"\r") else ln for ln in out]
    if rest:
        batch.append(rest)
    if batch:
        yield [ln[:-1] if ln.endswith(b"\r") else ln for ln in batch]


def open_output(path, what: str = "prepared corpus"):
    """``with open_output(path) as f: f.write(bytes)``: ``path`` written atomically, gzip, xz or
    zstd compressed when its name ends in ``.gz``, ``.xz`` or ``.zst``
    (:func:`triemine.io.compression.output_file`); a body that raises leaves ``path`` as it was;
    a failed write is an :class:`~triemine.errors.OutputError`."""
    return output_file(path, what, hint="")
