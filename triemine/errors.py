"""Errors about user input. The CLI prints them as ``file:line: problem`` without a traceback."""
from __future__ import annotations

import os
from typing import Optional


class TrieMineError(Exception):
    """Base class for errors the command-line layer reports without a traceback."""


class InputError(TrieMineError):
    """Bad input: names the file, the 1-based line (when there is one) and the problem."""

    def __init__(self, problem: str, path: Optional[os.PathLike | str] = None,
                 line: Optional[int] = None):
        self.problem = problem
        self.path = None if path is None else os.fspath(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + problem)


class OutputError(TrieMineError):
    """A file that could not be written (a full disk, a quota, no permission): names the file and
    the system's reason; what was written before it is kept, so a rerun with ``--resume`` goes on
    from there once the cause is fixed."""

    RESUME = "the finished work is kept: fix this and rerun with --resume"

    def __init__(self, path, exc: Exception, what: str = "file", hint: Optional[str] = None):
        """``hint``: what the user can do, in parentheses after the reason (default
        :data:`RESUME`; ``""``: none, for the tools that have no ``--resume``)."""
        self.path = os.fspath(path)
        reason = getattr(exc, "strerror", None) or str(exc)
        hint = self.RESUME if hint is None else hint
        super().__init__(f"{self.path}: cannot write the {what}: {reason}"
                         + (f" ({hint})" if hint else ""))


class TrieFormatError(InputError):
    """A trie file that is truncated, foreign, of another version or corrupted."""


class DamagedFile(TrieMineError):
    """A cache or work-directory file whose checksum, length or header is not what its writer
    recorded (truncated, emptied, overwritten, foreign, or an older triemine's unchecked file).
    A cache's reader rebuilds it with a warning naming the file; a job's reader computes the
    state again, or refuses naming the file and what to delete (docs/decisions.md)."""

    def __init__(self, path, problem: str, what: str = "file"):
        self.path = os.fspath(path)
        self.problem = problem
        self.what = what
        super().__init__(f"{self.path}: damaged {what}: {problem}")


def describe(path) -> str:
    """What is at ``path`` when it is not a regular file: ``"not found"``, ``"a directory,
    not a file"``, ``"a FIFO (named pipe), not a regular file"``, ...; ``""`` for a file."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found" + (" (a broken symbolic link)" if os.path.islink(path) else "")
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISREG(mode):
        return ""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return f"is {what}, not a regular file"
    return "is not a regular file"
