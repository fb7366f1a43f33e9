"""Reading a parallel corpus a person already has: the given pairs that ``trie-mine-score`` judges.

Formats (``format="auto"`` picks by name: ``.tmx`` TMX, ``.jsonl``/``.json`` JSON lines, two paths a
Moses pair, anything else TSV; a ``.gz``/``.xz``/``.zst`` suffix is looked through, and any file is
read through its decompressed copy, :func:`triemine.io.compression.plain_copy`):

* ``tsv``: ``src<TAB>tgt`` or ``id<TAB>src<TAB>tgt`` lines; the column count is the one most
  non-blank lines have (2 or 3), a line with another count is a bad line;
* ``moses``: two line-aligned files (source, target); files of unequal length are refused;
* ``tmx``: TMX, each ``<tu>`` with two ``<tuv>`` (source language: the header's ``srclang``,
  else the first ``<tuv>``'s); inline markup (``<bpt>``, ``<ph>``...) is dropped with its content;
* ``jsonl``: one JSON object a line with ``src`` and ``tgt`` (optionally ``id``), or with
  ``translation: {l1: text, l2: text}`` (the ``hf`` bitext format: its first language is the
  source), with ``src_id`` when present.

Every pair keeps its ``line`` (1-based line of the file; of TMX, the line its ``<tu>`` opens on;
of a Moses pair, the line of both files).  A bad record (not UTF-8, wrong column count, a JSON
line that is not an object with the fields, a ``<tu>`` without two segments) is skipped and
counted with its line and problem (:attr:`Bitext.problems`, the first :data:`SHOWN`); a file with
more bad records than good ones, a TMX that is not XML, a Moses pair of unequal length and a
file without any pair are an :class:`~triemine.errors.InputError` naming the file and the line.
"""
from __future__ import annotations

import json
import os
import xml.parsers.expat
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from triemine.io import decode_lines, plain_copy, read_bytes, SHOWN, SUFFIXES
from triemine.errors import InputError

PAIR_FORMATS = ("auto", "tsv", "moses", "tmx", "jsonl")
INLINE_TMX = frozenset(("bpt", "ept", "it", "ph", "ut"))  # markup elements whose text is no text


@dataclass
class Bitext:
    """Given pairs in file order: ``lines[i]`` (1-based record line), ``ids[i]`` (the file's id,
    else the line as a string), ``src[i]``, ``tgt[i]``; ``skipped``: how many bad records were
    skipped, ``problems``: the first :data:`SHOWN` as ``(path, line, problem)``."""

    path: str
    format: str
    lines: List[int] = field(default_factory=list)
    ids: List[str] = field(default_factory=list)
    src: List[str] = field(default_factory=list)
    tgt: List[str] = field(default_factory=list)
    skipped: int = 0
    problems: List[Tuple[str, int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.src)

    def add(self, line: int, src: str, tgt: str, pid: Optional[str] = None) -> None:
        self.lines.append(line)
        self.ids.append(str(line) if pid is None else pid)
        self.src.append(src)
        self.tgt.append(tgt)

    def bad(self, path: str, line: int, problem: str) -> None:
        self.skipped += 1
        if len(self.problems) < SHOWN:
            self.problems.append((path, line, problem))

    def report(self) -> str:
        """One line for a warning: the bad records skipped, the first ones and why; ``""`` if
        none."""
        if not self.skipped:
            return ""
        shown = "; ".join(f"{p}:{ln}: {why}" for p, ln, why in self.problems)
        return (f"skipped {self.skipped} bad record{'s' if self.skipped > 1 else ''}: {shown}"
                + ("; ..." if self.skipped > len(self.problems) else ""))

    def check(self) -> "Bitext":
        """``self`` when it holds a pair and no more bad records than good ones; else an
        :class:`InputError` at the first bad record (or naming the empty file)."""
        if self.skipped and self.skipped >= len(self):
            path, line, problem = self.problems[0]
            raise InputError(f"{problem} ({self.skipped} of {self.skipped + len(self)} records "
                             f"are bad: not a {self.format} bitext?)", path, line)
        if not len(self):
            raise InputError(f"no pairs in the {self.format} file (empty)", self.path)
        return self


def _bare(path: str) -> str:
    """``path`` without its compression suffix."""
    for suf in SUFFIXES:
        if path.endswith(suf):
            return path[:-len(suf)]
    return path


def pair_format(paths: Sequence[str], format: str = "auto") -> str:
    """The format of ``paths`` (one file, or two for ``moses``): ``format`` unless ``auto``."""
    if format not in PAIR_FORMATS:
        raise InputError(f"unknown pairs format {format!r} (choose from {', '.join(PAIR_FORMATS)})")
    if format != "auto":
        if (len(paths) == 2) != (format == "moses"):
            raise InputError(
                f"format {format} reads {'two files' if format == 'moses' else 'one file'}"
                f", got {len(paths)}"
            )
        return format
    if len(paths) == 2:
        return "moses"
    if len(paths) != 1:
        raise InputError(f"give one pairs file or a Moses pair of two, got {len(paths)}")
    bare = _bare(os.fspath(paths[0])).lower()
    if bare.endswith(".tmx"):
        return "tmx"
    if bare.endswith((".jsonl", ".json")):
        return "jsonl"
    return "tsv"


def _lines(path: str) -> Tuple[List[str], dict]:
    if not os.path.isfile(path):
        raise InputError("no such file", path)
    return decode_lines(read_bytes(plain_copy(path), "pairs file"))


def _records(path: str, out: Bitext, lines: List[str], bad: dict):
    """``(line number, text)`` of the non-blank lines that are UTF-8; the others are counted
    as bad records in ``out``."""
    for i, ln in enumerate(lines, 1):
        if i in bad:
            out.bad(path, i, bad[i])
        elif ln.strip():
            yield i, ln


def read_tsv(path: str) -> Bitext:
    lines, bad = _lines(path)
    counts = [ln.count("\t") + 1 for ln in lines if ln.strip()]
    width = 3 if 2 * sum(c == 3 for c in counts) > len(counts) else 2
    out = Bitext(path, "tsv")
    for i, ln in _records(path, out, lines, bad):
        cells = ln.split("\t")
        if len(cells) != width:
            out.bad(path, i, f"{len(cells)} column{'s' if len(cells) > 1 else ''}, expected "
                    + ("id<TAB>src<TAB>tgt" if width == 3 else "src<TAB>tgt"))
            continue
        out.add(i, cells[-2], cells[-1], cells[0] if width == 3 else None)
    return out.check()


def read_moses(src_path: str, tgt_path: str) -> Bitext:
    (a, bad_a), (b, bad_b) = _lines(src_path), _lines(tgt_path)
    if len(a) != len(b):
        short, n, other, m = ((src_path, len(a), tgt_path, len(b)) if len(a) < len(b)
                              else (tgt_path, len(b), src_path, len(a)))
        raise InputError(f"Moses pair of unequal length: this file ends after {n} lines, "
                         f"{other} has {m}", short, n + 1)
    out = Bitext(src_path, "moses")
    for i, (s, t) in enumerate(zip(a, b), 1):
        why = [(p, bad[i]) for p, bad in ((src_path, bad_a), (tgt_path, bad_b)) if i in bad]
        if why:
            out.bad(why[0][0], i, why[0][1])
        elif s.strip() or t.strip():
            out.add(i, s, t)
    return out.check()


def read_jsonl(path: str) -> Bitext:
    lines, bad = _lines(path)
    out = Bitext(path, "jsonl")
    for i, ln in _records(path, out, lines, bad):
        try:
            obj = json.loads(ln)
        except ValueError as exc:
            out.bad(path, i, f"not JSON ({exc})")
            continue
        got = _json_pair(obj)
        if isinstance(got, str):
            out.bad(path, i, got)
        else:
            out.add(i, *got)
    return out.check()


def _json_pair(obj):
    """``(src, tgt, id or None)`` of a JSON line, or its problem as a string."""
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, expected an object with src and tgt"
    pid = obj.get("id", obj.get("src_id"))
    pid = None if pid is None else str(pid)
    if "src" in obj and "tgt" in obj:
        s, t = obj["src"], obj["tgt"]
    elif isinstance(obj.get("translation"), dict) and len(obj["translation"]) == 2:
        s, t = obj["translation"].values()
    else:
        return "no src and tgt fields (nor a translation of two languages)"
    if not isinstance(s, str) or not isinstance(t, str):
        return "src and tgt must be strings"
    return s, t, pid


class _TmxReader:
    """An expat pass over a TMX file: every ``<tu>``'s line and its ``(lang, text)`` segments."""

    def __init__(self, path: str):
        self.path, self.out = path, Bitext(path, "tmx")
        self.srclang: Optional[str] = None
        self.tu_line, self.tuvs, self.lang = 0, [], None
        self.text: Optional[List[str]] = None   # the open <seg>'s text
        self.inline = 0                          # depth inside inline markup of a <seg>
        p = self.parser = xml.parsers.expat.ParserCreate()
        p.StartElementHandler, p.EndElementHandler = self.start, self.end
        p.CharacterDataHandler = self.chars

    def start(self, name, attrs):
        if self.text is not None:
            self.inline += name in INLINE_TMX
        elif name == "header":
            self.srclang = (attrs.get("srclang") or "").lower() or None
        elif name == "tu":
            self.tu_line, self.tuvs = self.parser.CurrentLineNumber, []
        elif name == "tuv":
            self.lang = (attrs.get("xml:lang") or attrs.get("lang") or "").lower()
        elif name == "seg":
            self.text = []

    def chars(self, data):
        if self.text is not None and not self.inline:
            self.text.append(data)

    def end(self, name):
        if self.text is not None and name in INLINE_TMX:
            self.inline -= 1
        elif name == "seg" and self.text is not None:
            self.tuvs.append((self.lang, "".join(self.text)))
            self.text = None
        elif name == "tu":
            self._tu()

    def _tu(self):
        if len(self.tuvs) != 2:
            self.out.bad(self.path, self.tu_line, f"<tu> with {len(self.tuvs)} segments, "
                         "expected 2")
            return
        (la, a), (lb, b) = self.tuvs
        if self.srclang and lb == self.srclang and la != self.srclang:
            a, b = b, a
        self.out.add(self.tu_line, a, b)

    def read(self) -> Bitext:
        if not os.path.isfile(self.path):
            raise InputError("no such file", self.path)
        try:
            self.parser.Parse(read_bytes(plain_copy(self.path), "TMX file"), True)
        except xml.parsers.expat.ExpatError as exc:
            raise InputError(f"not XML: {xml.parsers.expat.errors.messages[exc.code]} at "
                             f"column {exc.offset + 1} (a TMX file must be XML)", self.path,
                             exc.lineno) from None
        return self.out.check()


def read_pairs(paths: Sequence[str] | str, format: str = "auto") -> Bitext:
    """The pairs of ``paths`` (one file, or a Moses pair), in file order (module docstring)."""
    paths = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else \
        [os.fspath(p) for p in paths]
    fmt = pair_format(paths, format)
    if fmt == "moses":
        return read_moses(*paths)
    return {"tsv": read_tsv, "jsonl": read_jsonl,
            "tmx": lambda p: _TmxReader(p).read()}[fmt](paths[0])
