"""Reading the project's text inputs: UTF-8 (an optional BOM is accepted), errors as ``file:line``.

Every reader of user files (corpora, gold files, mining TSVs, thresholds and sidecar JSON) goes
through :func:`read_text` or :func:`read_json`, so invalid UTF-8, a missing file or a JSON syntax
error is an :class:`~triemine.errors.InputError` naming the file, the line and the problem, never
a traceback.
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Any

from triemine.errors import InputError, describe

BOM = "\ufeff"


def decode_utf8(data: bytes, path, first_line: int = 1) -> str:
    """``data`` as text without a leading BOM; invalid UTF-8 names its line and byte
    (``first_line``: the file line ``data`` starts at, for a reader of one line at a time)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + first_line
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise InputError(f"invalid UTF-8 at byte {col} of the line ({exc.reason})", path,
                         line) from None
    return text[1:] if text.startswith(BOM) and first_line == 1 else text


@contextmanager
def open_binary(path, what: str = "file"):
    """``with open_binary(path) as f``: the file for reading, a missing, unreadable or
    directory path an :class:`InputError` naming it (as :func:`read_bytes` reports them)."""
    p = os.fspath(path)
    problem = describe(p)
    if problem and "directory" not in problem and "not found" not in problem:
        raise InputError(f"{what} {problem}", p)  # a FIFO would block, a device never end
    try:
        f = open(p, "rb")
    except FileNotFoundError:
        raise InputError(f"{what} not found", p) from None
    except IsADirectoryError:
        raise InputError(f"{what} is a directory, not a regular file", p) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", p) from None
    with f:
        yield f


def read_bytes(path, what: str = "file") -> bytes:
    with open_binary(path, what) as f:
        try:
            return f.read()
        except OSError as exc:
            raise InputError(f"cannot read {what}: {exc.strerror}", os.fspath(path)) from None


def read_text(path, what: str = "file") -> str:
    """The whole file as text (see :func:`decode_utf8`)."""
    return decode_utf8(read_bytes(path, what), os.fspath(path))


def _no_constants(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def read_json(path, what: str = "JSON file") -> Any:
    """Parse a JSON file strictly: ``NaN``/``Infinity`` are errors, not floats."""
    p = os.fspath(path)
    text = read_text(p, what)
    try:
        return json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", p, exc.lineno) from None
    except ValueError as exc:
        raise InputError(f"invalid JSON: {exc}", p) from None
