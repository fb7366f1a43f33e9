"""Reading monolingual corpora: plain text (one sentence per line) or BUCC TSV (``id<TAB>sentence``).

Every line keeps its 0-based position ``i``: that is the "line id" tries store, and
``corpus.ids[i]`` maps it back to the corpus id (the TSV id column, or the 1-based line number as
a string for plain text). Empty lines (nothing but whitespace in the sentence; in TSV also a
blank line, whose id is ``""``) stay in place with text ``""`` and are listed in ``empty_lines``
(1-based line numbers); nothing is dropped or renumbered.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional

from triemine.errors import InputError
from triemine.textfile import decode_utf8, read_bytes

FORMATS = ("auto", "plain", "tsv")


@dataclass
class Corpus:
    path: str
    format: str
    ids: List[str]
    texts: List[str]
    empty_lines: List[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)

    def line_of(self, index: int) -> int:
        """1-based line number of the 0-based line index."""
        return index + 1

    @property
    def non_empty(self) -> List[int]:
        """0-based indices of the non-empty lines."""
        empty = set(self.empty_lines)
        return [i for i in range(len(self.texts)) if i + 1 not in empty]


def _split_lines(data: bytes, path: str) -> List[str]:
    lines = decode_utf8(data, path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def _looks_tsv(lines: List[str]) -> bool:
    seen = False
    for ln in lines:
        if not ln.strip():
            continue
        head, tab, _ = ln.partition("\t")
        if not tab or not head or any(c.isspace() for c in head):
            return False
        seen = True
    return seen


def read_corpus(path: os.PathLike | str, format: str = "auto") -> Corpus:
    """Read ``path`` as ``plain`` or ``tsv`` (``auto``: TSV when every non-empty line has a tab
    and a first field without spaces). Errors name the file and the 1-based line."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    p = os.fspath(path)
    lines = _split_lines(read_bytes(p, "corpus file"), p)
    if format == "auto":
        format = "tsv" if _looks_tsv(lines) else "plain"
    ids: List[str] = []
    texts: List[str] = []
    empty: List[int] = []
    if format == "plain":
        for i, ln in enumerate(lines):
            ids.append(str(i + 1))
            if ln.strip():
                texts.append(ln)
            else:
                texts.append("")
                empty.append(i + 1)
        return Corpus(p, "plain", ids, texts, empty)
    seen = {}
    for i, ln in enumerate(lines):
        if not ln.strip():  # a blank line: kept in place as an empty line without id
            ids.append("")
            texts.append("")
            empty.append(i + 1)
            continue
        head, tab, text = ln.partition("\t")
        if not tab:
            raise InputError("no tab: TSV lines must be id<TAB>sentence", p, i + 1)
        if not head.strip() or any(c.isspace() for c in head):
            raise InputError(f"bad id {head!r} (empty or containing spaces)", p, i + 1)
        if head in seen:
            raise InputError(f"duplicate id {head!r} (first on line {seen[head]})", p, i + 1)
        seen[head] = i + 1
        ids.append(head)
        if text.strip():
            texts.append(text)
        else:
            texts.append("")
            empty.append(i + 1)
    return Corpus(p, "tsv", ids, texts, empty)


def sentences(path: os.PathLike | str, limit: Optional[int] = None, what: str = "sentences"
              ) -> List[str]:
    """The first ``limit`` non-empty sentences of a corpus (plain text or id<TAB>text); an
    :class:`InputError` when it has none."""
    texts = [t for t in read_corpus(path).texts if t.strip()][:limit]
    if not texts:
        raise InputError(f"no {what} in the file", os.fspath(path))
    return texts
