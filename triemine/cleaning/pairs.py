"""Reading a parallel corpus a person already has: the given pairs that ``trie-mine-score`` judges.

Formats (``format="auto"`` picks by name: ``.tmx`` TMX, ``.jsonl``/``.json`` JSON lines, two paths a
Moses pair, anything else TSV; a ``.gz``/``.xz``/``.zst`` suffix is looked through, and any file is
read through its decompressed copy, :func:`triemine.io.compression.plain_copy`):

* ``tsv``: ``src<TAB>tgt`` or ``id<TAB>src<TAB>tgt`` lines; the column count is the one most
  non-blank lines have (2 or 3), a line with another count is a bad line;
* ``moses``: two line-aligned files (source, target); files of unequal length are refused;
* ``tmx``: TMX, each ``<tu>`` with two ``<tuv>``; inline markup (``<bpt>``, ``<ph>``...) is
  dropped with its content;
* ``jsonl``: one JSON object a line with ``src`` and ``tgt`` (optionally ``id``), or with
  ``translation: {l1: text, l2: text}`` (the ``hf`` bitext format), with ``src_id`` when present.

Sides by language, never by order, where the file names languages (TMX ``xml:lang``, else the
header's ``srclang`` for the segment without one; the keys of a JSON ``translation``): a tag is
matched by its primary subtag (``zh-Hant-TW`` is ``zh``).  Given the model's languages
``langs=(source, target)`` (:func:`triemine.models.model_dir.model_languages`), the segment in the
source language is the source; a record whose languages are not the model's pair refuses the file
(an :class:`~triemine.errors.InputError` naming file, line and languages); a file whose records
come the other way round (an en->zh memory for a zh->en model) is read the model's way round, with
one warning (:attr:`Bitext.swapped` counts them).  Without ``langs``: the TMX header's
``srclang``, else the first segment, is the source.  TSV, Moses and ``src``/``tgt`` JSON name no
languages: their first side is the source.

Every pair keeps its ``line`` (1-based line of the file; of TMX, the line its ``<tu>`` opens on;
of a Moses pair, the line of both files).  A bad record (not UTF-8, wrong column count, a JSON
line that is not an object with the fields, a ``<tu>`` without two segments) is skipped and
counted with its line and problem (:attr:`Bitext.problems`, the first :data:`SHOWN`); a file with
more bad records than good ones, a TMX that is not XML, a Moses pair of unequal length and a
file without any pair are an :class:`~triemine.errors.InputError` naming the file and the line.
"""
from __future__ import annotations

import json
import logging
import os
import xml.parsers.expat
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from triemine.io import decode_lines, plain_copy, read_bytes, SHOWN, SUFFIXES
from triemine.errors import InputError

logger = logging.getLogger(__name__)
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
    swapped: int = 0

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


def primary_subtag(tag: Optional[str]) -> str:
    """The primary language subtag of a BCP 47 / POSIX tag, lower case: ``zh-Hant-TW`` and
    ``zh_CN`` are ``zh``; ``""`` for None or an empty tag."""
    return (tag or "").strip().replace("_", "-").split("-")[0].lower()


class _Sides:
    """Puts each record's two ``(language tag, text)`` segments in the model's order
    (module docstring): ``langs`` the model's ``(source, target)`` or None."""

    def __init__(self, path: str, out: "Bitext", langs: Optional[Sequence[str]]):
        self.path, self.out = path, out
        self.langs = tuple(primary_subtag(x) for x in langs) if langs else None

    def __call__(self, line: int, first, second, declared: Optional[str] = None
                 ) -> Tuple[str, str]:
        """``(src, tgt)`` of the segments ``first`` and ``second``; ``declared``: the language
        the file says is its source (a segment without a language of its own is in the other
        segment's other language, or in ``declared`` when it comes first)."""
        (ta, a), (tb, b) = first, second
        la, lb, ld = primary_subtag(ta), primary_subtag(tb), primary_subtag(declared)
        if self.langs is None:
            swap = bool(ld) and lb == ld and la != ld
        else:
            s, t = self.langs
            if not la and not lb:
                la = ld
            if not la:
                la = t if lb == s else s if lb == t else ""
            if not lb:
                lb = t if la == s else s if la == t else ""
            if (la, lb) not in ((s, t), (t, s)):
                said = ", ".join(x or "(none)" for x in (ta, tb))
                raise InputError(f"languages {said} do not fit the model's {s}->{t} (a {s}-{t} "
                                 f"file is expected)", self.path, line)
            swap = la == t
        self.out.swapped += swap
        return (b, a) if swap else (a, b)

    def done(self) -> None:
        if self.out.swapped and self.langs:
            s, t = self.langs
            logger.warning("%s: %d of %d pairs give the %s side first: read the model's way "
                           "round, %s as the source", self.path, self.out.swapped, len(self.out),
                           t, s)


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


def read_jsonl(path: str, langs: Optional[Sequence[str]] = None) -> Bitext:
    lines, bad = _lines(path)
    out = Bitext(path, "jsonl")
    sides = _Sides(path, out, langs)
    for i, ln in _records(path, out, lines, bad):
        try:
            obj = json.loads(ln)
        except ValueError as exc:
            out.bad(path, i, f"not JSON ({exc})")
            continue
        got = _json_pair(obj)
        if isinstance(got, str):
            out.bad(path, i, got)
        elif len(got) == 4:  # a translation object: sides by key
            first, second, pid, _ = got
            out.add(i, *sides(i, first, second), pid)
        else:
            out.add(i, *got)
    sides.done()
    return out.check()


def _json_pair(obj):
    """``(src, tgt, id or None)`` of a JSON line, ``((lang, text), (lang, text), id or None,
    "translation")`` of one with a ``translation`` object, or its problem as a string."""
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, expected an object with src and tgt"
    pid = obj.get("id", obj.get("src_id"))
    pid = None if pid is None else str(pid)
    if "src" in obj and "tgt" in obj:
        s, t = obj["src"], obj["tgt"]
    elif isinstance(obj.get("translation"), dict) and len(obj["translation"]) == 2:
        (ka, s), (kb, t) = obj["translation"].items()
        if not isinstance(s, str) or not isinstance(t, str):
            return "the translation's texts must be strings"
        return (ka, s), (kb, t), pid, "translation"
    else:
        return "no src and tgt fields (nor a translation of two languages)"
    if not isinstance(s, str) or not isinstance(t, str):
        return "src and tgt must be strings"
    return s, t, pid


class _TmxReader:
    """An expat pass over a TMX file: every ``<tu>``'s line and its ``(lang, text)`` segments."""

    def __init__(self, path: str, langs: Optional[Sequence[str]] = None):
        self.path, self.out = path, Bitext(path, "tmx")
        self.sides = _Sides(path, self.out, langs)
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
            self.srclang = attrs.get("srclang") or None
        elif name == "tu":
            self.tu_line, self.tuvs = self.parser.CurrentLineNumber, []
        elif name == "tuv":
            self.lang = attrs.get("xml:lang") or attrs.get("lang") or ""
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
        declared = None if (self.srclang or "").lower() == "*all*" else self.srclang
        self.out.add(self.tu_line, *self.sides(self.tu_line, *self.tuvs, declared))

    def read(self) -> Bitext:
        if not os.path.isfile(self.path):
            raise InputError("no such file", self.path)
        try:
            self.parser.Parse(read_bytes(plain_copy(self.path), "TMX file"), True)
        except xml.parsers.expat.ExpatError as exc:
            raise InputError(f"not XML: {xml.parsers.expat.errors.messages[exc.code]} at "
                             f"column {exc.offset + 1} (a TMX file must be XML)", self.path,
                             exc.lineno) from None
        self.sides.done()
        return self.out.check()


def read_pairs(paths: Sequence[str] | str, format: str = "auto",
               langs: Optional[Sequence[str]] = None) -> Bitext:
    """The pairs of ``paths`` (one file, or a Moses pair), in file order, each the way round of
    ``langs`` (the model's ``(source, target)``) where the file names languages (module
    docstring)."""
    paths = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else \
        [os.fspath(p) for p in paths]
    fmt = pair_format(paths, format)
    if fmt == "moses":
        return read_moses(*paths)
    if fmt == "tsv":
        return read_tsv(paths[0])
    if fmt == "jsonl":
        return read_jsonl(paths[0], langs)
    return _TmxReader(paths[0], langs).read()
