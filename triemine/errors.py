"""Errors about user input. The CLI prints them as ``file:line: problem`` without a traceback."""
from __future__ import annotations

import os
from typing import Optional


class TrieMineError(Exception):
    """Base class for errors the command-line layer reports without a traceback."""


class InputError(TrieMineError):
    """Bad input: names the file, the 1-based line (when there is one) and the problem."""

    def __init__(self, problem: str, path: Optional[os.PathLike | str] = None, line: Optional[int] = None):
        self.problem = problem
        self.path = None if path is None else os.fspath(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = self.path if line is None else f"{self.path}:{line}"
            where += ": "
        super().__init__(where + problem)


class TrieFormatError(InputError):
    """A trie file that is truncated, foreign, of another version or corrupted."""
