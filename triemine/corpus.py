"""Reading monolingual corpora: plain text (one sentence per line) or BUCC TSV (``id<TAB>sentence``).

Every line keeps its 0-based position ``i``: that is the "line id" tries store, and
``corpus.ids[i]`` maps it back to the corpus id (the TSV id column, or the 1-based line number as
a string for plain text). Empty lines (nothing but whitespace in the sentence; in TSV also a
blank line, whose id is ``""``) stay in place with text ``""`` and are listed in ``empty_lines``
(1-based line numbers); nothing is dropped or renumbered.

:func:`read_corpus` reads a file whole (small corpora, gold files, tests); :func:`open_corpus`
gives the same :class:`Corpus` with ``ids`` and ``texts`` read through the file's line-offset index
(:mod:`triemine.lineindex`), so a process holds a corpus's offsets, not its text: what the mining
job and its workers use.  Both apply the same rules (:func:`_parse_lines`) and raise the same
errors.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence

import numpy as np

from triemine.errors import InputError
from triemine.textfile import decode_utf8, read_bytes

FORMATS = ("auto", "plain", "tsv")


@dataclass
class Corpus:
    path: str
    format: str
    ids: Sequence[str]       # a list, or a view of the file (open_corpus)
    texts: Sequence[str]
    empty_lines: List[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)

    def line_of(self, index: int) -> int:
        """1-based line number of the 0-based line index."""
        return index + 1

    @property
    def non_empty(self) -> List[int]:
        """0-based indices of the non-empty lines."""
        keep = np.ones(len(self.texts), dtype=bool)
        keep[np.asarray(self.empty_lines, dtype=np.int64) - 1] = False
        return np.flatnonzero(keep).tolist()


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


def _parse_lines(lines: Sequence[str], format: str, path: str, first: int = 1, seen=None):
    """``(ids, texts, empty)`` of ``lines`` (line numbers from ``first``) read as ``format``;
    ``seen`` (id -> line, a dict or None) catches duplicate TSV ids."""
    ids: List[str] = []
    texts: List[str] = []
    empty: List[int] = []
    if format == "plain":
        for i, ln in enumerate(lines, first):
            ids.append(str(i))
            if ln.strip():
                texts.append(ln)
            else:
                texts.append("")
                empty.append(i)
        return ids, texts, empty
    for i, ln in enumerate(lines, first):
        if not ln.strip():  # a blank line: kept in place as an empty line without id
            ids.append("")
            texts.append("")
            empty.append(i)
            continue
        head, tab, text = ln.partition("\t")
        if not tab:
            raise InputError("no tab: TSV lines must be id<TAB>sentence", path, i)
        if not head.strip() or any(c.isspace() for c in head):
            raise InputError(f"bad id {head!r} (empty or containing spaces)", path, i)
        if seen is not None:
            if head in seen:
                raise InputError(f"duplicate id {head!r} (first on line {seen[head]})", path, i)
            seen[head] = i
        ids.append(head)
        if text.strip():
            texts.append(text)
        else:
            texts.append("")
            empty.append(i)
    return ids, texts, empty


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")


def read_corpus(path: os.PathLike | str, format: str = "auto") -> Corpus:
    """Read ``path`` as ``plain`` or ``tsv`` (``auto``: TSV when every non-empty line has a tab
    and a first field without spaces). Errors name the file and the 1-based line."""
    _check_format(format)
    p = os.fspath(path)
    lines = _split_lines(read_bytes(p, "corpus file"), p)
    if format == "auto":
        format = "tsv" if _looks_tsv(lines) else "plain"
    ids, texts, empty = _parse_lines(lines, format, p, 1, {})
    return Corpus(p, format, ids, texts, empty)


# lines per chunk of the index's validating pass
CHUNK_LINES = 1 << 16


class _Lines(Sequence[str]):
    """A read-only view of a corpus's ids or texts through its line index: ``len``, ``[i]``,
    ``[a:b]`` (a list) and iteration decode only the lines asked for."""

    def __init__(self, buf, offsets: np.ndarray, format: str, field: str, path: str = ""):
        self._buf, self._off, self._fmt, self._field = buf, offsets, format, field
        self._path = path

    def __len__(self) -> int:
        return len(self._off) - 1

    def _range(self, a: int, b: int) -> List[str]:
        if b <= a:
            return []
        block = bytes(self._buf[int(self._off[a]):int(self._off[b])])
        try:
            lines = block.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            lines = []
        if lines and lines[-1] == "" and block.endswith(b"\n"):
            lines.pop()
        if len(lines) != b - a:  # the index was built from what the file held then
            raise InputError(f"the file changed while it was read (lines {a + 1}-{b} are not "
                             "where its line index says): rerun the job", self._path, a + 1)
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        return self._fields(lines, a)

    def _fields(self, lines: List[str], a: int) -> List[str]:
        if self._fmt == "plain":
            if self._field == "ids":
                return [str(i) for i in range(a + 1, a + 1 + len(lines))]
            return [ln if ln.strip() else "" for ln in lines]
        out = []
        for ln in lines:
            if not ln.strip():
                out.append("")
                continue
            head, _, text = ln.partition("\t")
            out.append(head if self._field == "ids" else (text if text.strip() else ""))
        return out

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            if step == 1:
                return self._range(a, b)
            return [self[j] for j in range(a, b, step)]
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"line index {i} out of range ({n} lines)")
        return self._range(i, i + 1)[0]

    def __iter__(self) -> Iterator[str]:
        for a in range(0, len(self), CHUNK_LINES):
            yield from self._range(a, min(a + CHUNK_LINES, len(self)))


def _validate(path: str, format: str):
    """The index builder of :func:`open_corpus`: one pass over the lines in chunks, the rules
    of :func:`_parse_lines` (so the same errors at the same lines as :func:`read_corpus`), the
    format ``auto`` decides, and the empty lines.  Duplicate TSV ids are found from 64-bit hashes
    sorted once, then confirmed on the text: memory of 8 bytes a line, not a set of ids."""

    def build(buf, offsets) -> dict:
        n = len(offsets) - 1
        view = {"plain": [], "tsv": []}
        looks_tsv, any_line = True, False
        hashes = []
        for a in range(0, n, CHUNK_LINES):
            b = min(a + CHUNK_LINES, n)
            block = bytes(buf[int(offsets[a]):int(offsets[b])])
            lines = _split_lines_at(block, path, a + 1)
            if format in ("auto", "plain"):
                view["plain"] += _parse_lines(lines, "plain", path, a + 1)[2]
            if format == "tsv" or (format == "auto" and looks_tsv):
                non_blank = any(ln.strip() for ln in lines)  # _looks_tsv's rule, chunk by chunk
                if format == "auto" and non_blank and not _looks_tsv(lines):
                    looks_tsv = False
                    continue
                try:
                    ids, _, empty = _parse_lines(lines, "tsv", path, a + 1)
                except InputError as exc:  # read_corpus's order: bad UTF-8 anywhere first,
                    for c in range(b, n, CHUNK_LINES):  # then a duplicate id before this line
                        e = min(c + CHUNK_LINES, n)
                        _split_lines_at(bytes(buf[int(offsets[c]):int(offsets[e])]), path, c + 1)
                    ok = _parse_lines(lines[:exc.line - a - 1], "tsv", path, a + 1)[0]
                    _duplicates(buf, offsets, np.concatenate(hashes + [_hashes(ok)]), path)
                    raise
                view["tsv"] += empty
                hashes.append(_hashes(ids))
                any_line = any_line or non_blank
        fmt = format if format != "auto" else ("tsv" if looks_tsv and any_line else "plain")
        if fmt == "tsv":
            _duplicates(buf, offsets, np.concatenate(hashes) if hashes else np.zeros(0, np.int64),
                        path)
        return {"format": fmt, "empty_lines": view[fmt]}
    return build


def _hashes(ids: List[str]) -> np.ndarray:
    return np.fromiter((hash(x) for x in ids), dtype=np.int64, count=len(ids))


def _split_lines_at(block: bytes, path: str, first: int) -> List[str]:
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        try:
            decode_utf8(block, path)
        except InputError as exc:  # the same message, the line counted from the file's start
            raise InputError(exc.problem, path, exc.line + first - 1) from None
        raise
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def _duplicates(buf, offsets, hashes: np.ndarray, path: str) -> None:
    """The first line whose TSV id an earlier line has, as :func:`read_corpus` reports it: only
    the lines whose hash another line shares are read again, in file order."""
    order = np.argsort(hashes, kind="stable")
    h = hashes[order]
    same = np.flatnonzero(h[1:] == h[:-1])
    if not len(same):
        return
    shared = np.zeros(len(h), dtype=bool)
    shared[same] = shared[same + 1] = True
    view = _Lines(buf, offsets, "tsv", "ids", path)
    seen: dict = {}
    for i in np.sort(order[shared]).tolist():
        head = view[i]
        if not head:  # blank lines have no id
            continue
        if head in seen:
            raise InputError(f"duplicate id {head!r} (first on line {seen[head]})", path, i + 1)
        seen[head] = i + 1


def open_corpus(path: os.PathLike | str, format: str = "auto", cache=None) -> Corpus:
    """``path`` as :func:`read_corpus` reads it (same ids, texts, empty lines and errors), its
    ids and texts read on demand through the line-offset index in ``$TRIEMINE_CACHE/lines/``
    (built on first use, rebuilt with a warning when stale: :mod:`triemine.lineindex`)."""
    from triemine.lineindex import load_or_build

    _check_format(format)
    p = os.fspath(path)
    if not os.path.exists(p):
        raise InputError("corpus file not found", p)
    if os.path.isdir(p):
        raise InputError("corpus file is a directory, not a file", p)
    header, offsets, empty, buf = load_or_build(p, format, _validate(p, format), cache)
    fmt = header["format"]
    return Corpus(p, fmt, _Lines(buf, offsets, fmt, "ids", p),
                  _Lines(buf, offsets, fmt, "texts", p), empty.tolist())


def sentences(path: os.PathLike | str, limit: Optional[int] = None, what: str = "sentences"
              ) -> List[str]:
    """The first ``limit`` non-empty sentences of a corpus (plain text or id<TAB>text); an
    :class:`InputError` when it has none."""
    texts = [t for t in read_corpus(path).texts if t.strip()][:limit]
    if not texts:
        raise InputError(f"no {what} in the file", os.fspath(path))
    return texts
