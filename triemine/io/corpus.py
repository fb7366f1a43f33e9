"""Reading monolingual corpora: plain text (a sentence a line) or BUCC TSV (``id<TAB>sentence``).

Every line keeps its 0-based position ``i``: that is the "line id" tries store, and
``corpus.ids[i]`` maps it back to the corpus id (the TSV id column, or the 1-based line number as
a string for plain text). Empty lines (nothing but whitespace in the sentence; in TSV also a
blank line, whose id is ``""``) stay in place with text ``""`` and are listed in ``empty_lines``
(1-based line numbers); nothing is dropped or renumbered.  A bad line (not UTF-8; in TSV, no
tab, an id with spaces or an id an earlier line has) is skipped the same way, kept in place as
an empty line, and counted in ``skipped_lines`` with the first ones' problems in ``problems``:
one bad line in 10^8 never ends a job.  A file with more bad lines than good ones is refused
(:class:`InputError` at its first bad line): it is in another format or encoding.  Format
``auto`` reads TSV when most non-blank lines look like ``id<TAB>sentence``; a file where some
but not most do (a tenth or more: :data:`AMBIGUOUS_TSV_SHARE`) is refused with the counts, a
few such lines in plain text are warned about and kept as text (:func:`_auto_format`).

:func:`read_corpus` reads a file whole (small corpora, gold files, tests); :func:`open_corpus`
gives the same :class:`Corpus` with ``ids`` and ``texts`` read through the file's line-offset index
(:mod:`triemine.io.lineindex`), so a process holds a corpus's offsets, not its text: what the mining
job and its workers use.  Both apply the same rules (:func:`_parse_lines`) and raise the same
errors.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from triemine.io.compression import plain_copy
from triemine.errors import InputError, describe
from triemine.io.keys import file_stamp, input_digest
from triemine.io.lineindex import BOM, load_or_build
from triemine.io.textfile import read_bytes

FORMATS = ("auto", "plain", "tsv")
logger = logging.getLogger(__name__)


# the skipped lines a warning names, with their problems; a corpus whose bad lines outnumber
# its good ones is refused: it is in another format or encoding, not a corpus with a few bad lines
SHOWN = 10


@dataclass
class Corpus:
    path: str
    format: str
    ids: Sequence[str]       # a list, or a view of the file (open_corpus)
    texts: Sequence[str]
    empty_lines: List[int] = field(default_factory=list)    # blank or skipped, 1-based
    skipped_lines: Sequence[int] = field(default_factory=list)  # bad lines, 1-based
    problems: List[Tuple[int, str]] = field(default_factory=list)  # the first SHOWN skipped

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

    def skipped_report(self) -> str:
        """One line for a warning: how many lines were skipped, the first ones and why; ``""``
        when none were."""
        n = len(self.skipped_lines)
        if not n:
            return ""
        shown = "; ".join(f"line {i}: {why}" for i, why in self.problems)
        return (f"{self.path}: skipped {n} bad line{'s' if n > 1 else ''} (kept in place as "
                f"empty lines, never mined): {shown}{'; ...' if n > len(self.problems) else ''}")


def decode_lines(data: bytes, first: int = 1) -> Tuple[List[str], Dict[int, str]]:
    """The lines of ``data`` (numbered from ``first``; a leading BOM dropped) and the problem of
    each line that is not UTF-8 (its text ``""``)."""
    if first == 1 and data.startswith(BOM):
        data = data[len(BOM):]
    bad: Dict[int, str] = {}
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        lines = []
        for i, raw in enumerate(data.split(b"\n"), first):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                lines.append("\n")  # no line holds a newline: the mark of a bad one
                bad[i] = f"invalid UTF-8 at byte {exc.start} of the line ({exc.reason})"
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    if bad:
        lines = ["" if ln == "\n" else ln for ln in lines]
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines], bad


# ``auto`` reads a corpus as plain text when at most half of its non-blank lines look like
# id<TAB>sentence; when this share or more do, it is neither (a TSV corpus that lost most of
# its tabs, or two files joined) and is refused; fewer such lines are warned about
AMBIGUOUS_TSV_SHARE = 0.1


def _auto_format(path: str, looks: int, non_blank: int) -> str:
    """The format ``auto`` reads a corpus of ``looks`` TSV-looking lines out of ``non_blank``
    in: ``tsv`` when more than half look so; a corpus where :data:`AMBIGUOUS_TSV_SHARE` of
    the lines or more (but not half) look so is an :class:`InputError` with the counts; fewer
    are read as plain text with a warning (their tab is kept as text)."""
    if 2 * looks > non_blank:
        return "tsv"
    if looks and looks >= AMBIGUOUS_TSV_SHARE * non_blank:
        raise InputError(f"{looks} of {non_blank} non-blank lines look like id<TAB>sentence "
                         "and the others do not: neither a plain-text nor a TSV corpus (a TSV "
                         "file that lost tabs? give every line its id, or none)", path)
    if looks:
        logger.warning("%s: read as plain text, but %d of %d non-blank lines look like "
                       "id<TAB>sentence (their first field and tab are kept as text)", path,
                       looks, non_blank)
    return "plain"


def tsv_votes(lines: Sequence[str]) -> Tuple[int, int]:
    """``(lines that look id<TAB>sentence, non-blank lines)``: ``auto`` reads a corpus as TSV
    when more than half of its non-blank lines look so."""
    looks = non_blank = 0
    for ln in lines:
        if not ln.strip():
            continue
        non_blank += 1
        head, tab, _ = ln.partition("\t")
        looks += bool(tab and head and not any(c.isspace() for c in head))
    return looks, non_blank


def _parse_lines(lines: Sequence[str], format: str, first: int = 1, seen=None,
                 bad: Optional[Dict[int, str]] = None):
    """``(ids, texts, empty, skipped)`` of ``lines`` (line numbers from ``first``) read as
    ``format``: ``skipped`` lists ``(line, problem)`` of the bad lines (not UTF-8, ``bad``; in TSV
    no tab, a bad id, or an id an earlier line has, when ``seen``, id -> line, is given), which
    stay in place as empty lines (id ``""`` in TSV)."""
    ids: List[str] = []
    texts: List[str] = []
    empty: List[int] = []
    skipped: List[Tuple[int, str]] = []
    bad = bad or {}
    for i, ln in enumerate(lines, first):
        problem = bad.get(i)
        head, text = str(i), ln
        if format == "tsv" and problem is None and ln.strip():
            head, tab, text = ln.partition("\t")
            if not tab:
                problem = "no tab: TSV lines must be id<TAB>sentence"
            elif not head.strip() or any(c.isspace() for c in head):
                problem = f"bad id {head!r} (empty or containing spaces)"
            elif seen is not None and head in seen:
                problem = f"duplicate id {head!r} (first on line {seen[head]})"
            elif seen is not None:
                seen[head] = i
        elif format == "tsv":
            head = ""  # a blank line: kept in place as an empty line without id
        if problem is not None:
            skipped.append((i, problem))
            head, text = ("" if format == "tsv" else head), ""
        ids.append(head)
        texts.append(text if text.strip() else "")
        if not text.strip():
            empty.append(i)
    return ids, texts, empty, skipped


def _refuse_mostly_bad(path: str, format: str, skipped: Sequence[Tuple[int, str]], n_skipped: int,
                       n_good: int) -> None:
    if n_skipped > n_good:
        line, problem = skipped[0]
        raise InputError(f"{problem}; {n_skipped} of {n_skipped + n_good} non-blank lines are bad, "
                         f"so this is not a {'UTF-8' if format == 'plain' else format.upper()} "
                         "corpus (check the file's format and encoding)", path, line)


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")


def read_corpus(path: os.PathLike | str, format: str = "auto") -> Corpus:
    """Read ``path`` as ``plain`` or ``tsv`` (``auto``: TSV when more than half of the non-blank
    lines have a tab and a first field without spaces).  A bad line (not UTF-8; in TSV without a
    tab, with a bad or repeated id) is skipped: kept in place as an empty line, listed in
    ``skipped_lines`` and ``problems``; a corpus with more bad lines than good ones is an
    :class:`InputError` naming the file and the first bad line."""
    _check_format(format)
    p = os.fspath(path)
    lines, bad = decode_lines(read_bytes(plain_copy(p), "corpus file"))
    if format == "auto":
        format = _auto_format(p, *tsv_votes(lines))
    ids, texts, empty, skipped = _parse_lines(lines, format, 1, {}, bad)
    _refuse_mostly_bad(p, format, skipped, len(skipped), len(texts) - len(empty))
    return Corpus(p, format, ids, texts, empty, [i for i, _ in skipped], skipped[:SHOWN])


# lines per chunk of the index's validating pass
CHUNK_LINES = 1 << 16


class _Lines(Sequence[str]):
    """A read-only view of a corpus's ids or texts through its line index: ``len``, ``[i]``,
    ``[a:b]`` (a list) and iteration decode only the lines asked for."""

    def __init__(self, buf, offsets: np.ndarray, format: str, field: str, path: str = "",
                 skipped: Optional[np.ndarray] = None, stamp: Optional[dict] = None,
                 data: Optional[str] = None):
        self._buf, self._off, self._fmt, self._field = buf, offsets, format, field
        self._path = path  # the corpus, as messages name it
        self._data = data or path  # the file mapped: the corpus, or its decompressed copy
        self._stamp = stamp  # the file's stamp (triemine.io.keys.file_stamp) as it was mapped
        self._skipped = np.zeros(0, dtype=np.int64) if skipped is None else skipped  # sorted

    def __len__(self) -> int:
        return len(self._off) - 1

    def file_key(self) -> Optional[dict]:
        """What these lines are read from (the file's content digest, its format and the field):
        a cache key for a result computed from every line (:mod:`triemine.decoding.lengths`);
        ``None`` for a view of no file, or of a file that has changed since it was mapped (its
        digest would name other lines than these)."""
        if not self._data or self._stamp is None or file_stamp(self._data) != self._stamp:
            return None  # the file on disk is not (or may not be) the one these lines map
        return {"file": input_digest(self._data), "format": self._fmt, "field": self._field}

    def _range(self, a: int, b: int) -> List[str]:
        if b <= a:
            return []
        block = bytes(self._buf[int(self._off[a]):int(self._off[b])])
        lines = block.decode("utf-8", errors="replace").split("\n")  # bad lines are skipped
        if lines and lines[-1] == "" and block.endswith(b"\n"):
            lines.pop()
        if len(lines) != b - a:  # the index was built from what the file held then
            raise InputError(f"the file changed while it was read (lines {a + 1}-{b} are not "
                             "where its line index says): rerun the job", self._path, a + 1)
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        out = self._fields(lines, a)
        if self._field == "texts" or self._fmt == "tsv":
            lo, hi = np.searchsorted(self._skipped, [a + 1, b + 1])
            for line in self._skipped[lo:hi].tolist():
                out[line - a - 1] = ""
        return out

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
    """The index builder of :func:`open_corpus`: one pass over the lines in chunks, with the rules
    of :func:`_parse_lines` (so the same format, empty and skipped lines, problems and errors as
    :func:`read_corpus`).  Repeated TSV ids are found from 64-bit hashes sorted once, then
    confirmed on the text: memory of 8 bytes a line, not a set of ids."""

    def build(buf, offsets) -> dict:
        n = len(offsets) - 1
        formats = ("plain", "tsv") if format == "auto" else (format,)
        views = {f: {"empty": [], "skipped": [], "problems": [], "ids": []} for f in formats}
        looks = non_blank = 0
        for a in range(0, n, CHUNK_LINES):
            b = min(a + CHUNK_LINES, n)
            lines, bad = decode_lines(bytes(buf[int(offsets[a]):int(offsets[b])]), a + 1)
            if format == "auto":
                votes = tsv_votes(lines)
                looks, non_blank = looks + votes[0], non_blank + votes[1]
            for f, view in views.items():
                ids, _, empty, skipped = _parse_lines(lines, f, a + 1, None, bad)
                view["empty"] += empty
                view["skipped"] += [i for i, _ in skipped]
                view["problems"] = (view["problems"] + skipped)[:SHOWN]
                if f == "tsv":
                    view["ids"].append(_hashes(ids, a))
        fmt = format if format != "auto" else _auto_format(path, looks, non_blank)
        view = views[fmt]
        empty, skipped, problems = view["empty"], view["skipped"], view["problems"]
        if fmt == "tsv" and view["ids"]:
            dups = _duplicates(buf, offsets, view["ids"], path)
            if dups:
                lines = [i for i, _ in dups]
                empty = sorted(set(empty).union(lines))
                skipped = sorted(skipped + lines)
                problems = sorted(problems + dups[:SHOWN])[:SHOWN]
        _refuse_mostly_bad(path, fmt, problems, len(skipped), n - len(empty))
        return {"format": fmt, "empty_lines": empty, "skipped_lines": skipped,
                "problems": problems}
    return build


def _hashes(ids: List[str], a: int) -> np.ndarray:
    """``(2, m)`` int64: the hashes and the 0-based lines of the ids that are not ``""``."""
    keep = [(hash(x), i) for i, x in enumerate(ids, a) if x]
    return np.array(keep, dtype=np.int64).reshape(-1, 2).T


def _duplicates(buf, offsets, hashes: List[np.ndarray], path: str) -> List[Tuple[int, str]]:
    """``(line, problem)`` of every line whose TSV id an earlier line has, as :func:`read_corpus`
    finds them: only the lines whose hash another line shares are read again, in file order."""
    h, where = np.concatenate(hashes, axis=1)
    order = np.argsort(h, kind="stable")
    h = h[order]
    same = np.flatnonzero(h[1:] == h[:-1])
    if not len(same):
        return []
    shared = np.zeros(len(h), dtype=bool)
    shared[same] = shared[same + 1] = True
    view = _Lines(buf, offsets, "tsv", "ids", path)
    seen: dict = {}
    dups = []
    for i in np.sort(where[order[shared]]).tolist():
        head = view[i]
        if head in seen:
            dups.append((i + 1, f"duplicate id {head!r} (first on line {seen[head]})"))
        else:
            seen[head] = i + 1
    return dups


def open_corpus(path: os.PathLike | str, format: str = "auto", cache=None) -> Corpus:
    """``path`` as :func:`read_corpus` reads it (same ids, texts, empty and skipped lines and
    errors), its ids and texts read on demand through the line-offset index in
    ``$TRIEMINE_CACHE/lines/``
    (built on first use, rebuilt with a warning when stale: :mod:`triemine.io.lineindex`).  A
    gzip, xz or zstd file is read through its decompressed copy
    (:func:`triemine.io.compression.plain_copy`); messages name ``path``."""
    _check_format(format)
    p = os.fspath(path)
    if describe(p):
        raise InputError(f"corpus file {describe(p)}", p)
    data = plain_copy(p)
    header, offsets, empty, skipped, buf = load_or_build(data, format, _validate(p, format), cache,
                                                         label=p)
    stamp = header.get("stamp")  # the file's stamp, taken before it was mapped
    fmt = header["format"]
    return Corpus(p, fmt, _Lines(buf, offsets, fmt, "ids", p, skipped, stamp, data),
                  _Lines(buf, offsets, fmt, "texts", p, skipped, stamp, data), empty.tolist(),
                  skipped, [tuple(x) for x in header["problems"]])


def open_pair(source_path, target_path) -> Tuple[Corpus, Corpus]:
    """The source and target corpora of a job (:func:`open_corpus`): one without a non-empty
    line is an :class:`InputError`; each corpus's skipped lines are warned about once, here
    (:func:`skipped_counts` for the summary)."""
    out = []
    for path, side in ((source_path, "source"), (target_path, "target")):
        corp = open_corpus(path)
        if len(corp.empty_lines) == len(corp):
            raise InputError(f"empty {side} file (no non-empty lines)", path)
        if len(corp.skipped_lines):
            logger.warning("%s", corp.skipped_report())
        out.append(corp)
    return out[0], out[1]


def skipped_counts(src: Corpus, tgt: Corpus) -> Dict[str, int]:
    """What a summary and a ``.meta.json`` record of the bad lines skipped (``skipped_bad``)."""
    return {"source": len(src.skipped_lines), "target": len(tgt.skipped_lines)}


def sentences(path: os.PathLike | str, limit: Optional[int] = None, what: str = "sentences"
              ) -> List[str]:
    """The first ``limit`` non-empty sentences of a corpus (plain text or id<TAB>text); an
    :class:`InputError` when it has none."""
    texts = [t for t in read_corpus(path).texts if t.strip()][:limit]
    if not texts:
        raise InputError(f"no {what} in the file", os.fspath(path))
    return texts
