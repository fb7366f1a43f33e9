"""The preparation driver: read a raw corpus a batch at a time, clean and filter each line, write
every line back in place (a dropped line as an empty one), report what each filter dropped.

:func:`prepare` makes one pass over the input (two with the ``boilerplate`` filter, whose first
pass counts each line's normalised text by 64-bit hash, :class:`HashCounts`); it holds one batch
of lines, the hash table of the boilerplate filter (16 bytes per distinct line) and the report,
never the corpus.  The output has as many lines as the input: line ``i`` of the output is line
``i`` of the input cleaned (:func:`~triemine.prepare.filters.clean`), or empty when a filter
dropped it; a BUCC TSV line keeps its id (``id<TAB>`` with an empty text), so the mining job's
line numbers and ids are the input's.
"""
from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from triemine.io import check_distinct, tsv_votes, write_output
from triemine.errors import InputError
from triemine.prepare.filters import FILTERS, Batch, clean, normalise
from triemine.prepare.scripts import scripts_for
from triemine.prepare.textio import open_output, read_batches

EXAMPLE_CHARS = 200
# lines the language filter must have identified before its early check (a corpus wholly in
# another language is refused then, not at its end)
EARLY_CHECK = 10000


def check_language(code, flag: str) -> str:
    """``code`` as a language CLD2 knows (ISO 639-1, case-insensitive: ``EN`` is ``en``), lower
    case; else an :class:`InputError` naming ``flag`` and the codes CLD2 knows."""
    import pycld2

    known = sorted({c.split("-")[0].lower() for _, c in pycld2.LANGUAGES} - {"un", "xx"})
    lang = code.strip().lower() if isinstance(code, str) else code
    if lang not in known:
        raise InputError(f"unknown language {code!r} for {flag} (ISO 639-1 codes CLD2 "
                         f"knows: {', '.join(c for c in known if len(c) == 2)})")
    return lang


@dataclass
class PrepareOptions:
    """The filters' parameters (docs/prepare.md).  ``lang``: the expected language (ISO 639-1,
    as CLD2 knows it); ``skip``: names of filters not to run; ``boilerplate``: ``None`` (off) or
    the most times a normalised line may occur; ``max_other_lang``: the largest share of the
    lines the language filter identified that may be in another language before the input is
    refused as not in ``lang``."""

    lang: str
    scripts: Tuple[str, ...] = ()
    min_script_share: float = 0.5
    min_chars: int = 1
    max_chars: Optional[int] = 2000
    min_words: int = 0
    max_words: Optional[int] = None
    boilerplate: Optional[int] = None
    skip: Tuple[str, ...] = ()
    format: str = "auto"
    max_other_lang: float = 0.5
    batch_lines: int = 10000
    examples: int = 5
    expected_scripts: Tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self):
        self.lang = check_language(self.lang, "--lang")
        bad = [s for s in self.skip if s not in FILTERS]
        if bad:
            raise InputError(f"unknown filter {bad[0]!r} (filters: {', '.join(FILTERS)})")
        if self.format not in ("auto", "plain", "tsv"):
            raise InputError(f"unknown format {self.format!r} (auto, plain or tsv)")
        for name in ("min_chars", "min_words", "batch_lines", "examples"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < (
                    1 if name == "batch_lines" else 0):
                raise InputError(f"{name} must be a whole number >= 0 (batch_lines >= 1)")
        for name in ("max_chars", "max_words"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise InputError(f"{name} (--{name.replace('_', '-')}) must be a whole number "
                                 ">= 1 (or none)")
        if self.max_chars is not None and self.max_chars < self.min_chars:
            raise InputError(f"max_chars ({self.max_chars}) is below min_chars "
                             f"({self.min_chars}): every line would be dropped")
        if self.max_words is not None and self.max_words < self.min_words:
            raise InputError(f"max_words ({self.max_words}) is below min_words "
                             f"({self.min_words}): every line would be dropped")
        if not 0.0 <= self.min_script_share <= 1.0 or not 0.0 <= self.max_other_lang <= 1.0:
            raise InputError("min_script_share and max_other_lang are shares between 0 and 1")
        if self.boilerplate is not None and self.boilerplate < 1:
            raise InputError("boilerplate must be >= 1 (the most times a line may occur)")
        self.scripts = tuple(self.scripts)
        self.skip = tuple(self.skip)
        if "script" in self.active() or self.scripts:
            self.expected_scripts = scripts_for(self.lang, self.scripts)

    def active(self) -> List[str]:
        """The filters that run, in order."""
        return [n for n in FILTERS if n not in self.skip
                and (n != "boilerplate" or self.boilerplate is not None)]


class HashCounts:
    """Occurrences of 64-bit hashes, counted in numpy: :meth:`add` batches, then :meth:`of`."""

    FLUSH = 1 << 21

    def __init__(self):
        self.keys = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self._pending: List[np.ndarray] = []
        self._n = 0

    def add(self, hashes: np.ndarray) -> None:
        self._pending.append(np.asarray(hashes, dtype=np.int64))
        self._n += len(hashes)
        if self._n >= self.FLUSH:
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        new = np.concatenate(self._pending)
        self._pending, self._n = [], 0
        keys = np.concatenate([self.keys, new])
        weights = np.concatenate([self.counts, np.ones(len(new), dtype=np.int64)])
        self.keys, inverse = np.unique(keys, return_inverse=True)
        self.counts = np.bincount(inverse.ravel(), weights=weights).astype(np.int64)

    def of(self, hashes: np.ndarray) -> np.ndarray:
        """How many times each of ``hashes`` was added (0 for one never added)."""
        self._merge()
        hashes = np.asarray(hashes, dtype=np.int64)
        if not len(self.keys):
            return np.zeros(len(hashes), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        return np.where(self.keys[at] == hashes, self.counts[at], 0)


def _hashes(texts: List[str]) -> np.ndarray:
    return np.fromiter((hash(k) for k in normalise(texts)), dtype=np.int64, count=len(texts))


@dataclass
class _Lines:
    """A batch decoded and split: ``heads`` (TSV ids, else ``None``), ``raw`` texts, ``bad``:
    ``{index: reason}`` of lines that are not UTF-8 or (TSV) have no tab."""

    heads: Optional[List[str]]
    raw: List[str]
    bad: Dict[int, str]


def _decode(raw: List[bytes], fmt: str) -> _Lines:
    bad: Dict[int, str] = {}
    try:
        texts = b"\n".join(raw).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        texts = []
        for i, ln in enumerate(raw):
            try:
                texts.append(ln.decode("utf-8"))
            except UnicodeDecodeError as exc:
                texts.append("")
                bad[i] = f"invalid UTF-8 at byte {exc.start} of the line"
    if fmt != "tsv":
        return _Lines(None, texts, bad)
    heads, body = [], []
    for i, ln in enumerate(texts):
        head, tab, text = ln.partition("\t")
        if not tab and ln.strip():
            bad.setdefault(i, "no tab: TSV lines must be id<TAB>sentence")
            head, text = "", ""
        heads.append(head)
        body.append(text)
    return _Lines(heads, body, bad)


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


class _Report:
    """Counts and examples, per filter and of the bad lines, kept while the batches go by."""

    def __init__(self, opts: PrepareOptions):
        self.opts = opts
        self.lines = self.empty = self.kept = self.rewritten = self.identified = 0
        self.dropped = {n: 0 for n in opts.active()}
        self.examples: Dict[str, List[list]] = {n: [] for n in ["input"] + opts.active()}
        self.bad_lines = 0
        self.other_lang: Counter = Counter()

    def example(self, name: str, line: int, text: str) -> None:
        if len(self.examples[name]) < self.opts.examples:
            self.examples[name].append([line, text[:EXAMPLE_CHARS]])

    def filters(self) -> Dict[str, Any]:
        return {n: {"dropped": self.dropped[n], "drops": FILTERS[n].drops,
                    "params": {p: _plain(getattr(self.opts, p)) for p in FILTERS[n].params},
                    "examples": self.examples[n]} for n in self.opts.active()}

    def summary(self, path) -> str:
        dropped = ", ".join(f"{n} {c}" for n, c in self.dropped.items())
        bad = f", bad lines {self.bad_lines}" if self.bad_lines else ""
        return (f"{path}: kept {self.kept} of {self.lines - self.empty} non-empty lines "
                f"(dropped: {dropped}{bad}; {self.rewritten} rewritten by markup)")


def _filter_batch(lines: _Lines, first: int, opts: PrepareOptions, counts: Optional[HashCounts],
                  rep: _Report) -> List[str]:
    """The output lines of one batch (line numbers from ``first``), counted into ``rep``."""
    n = len(lines.raw)
    for i, why in lines.bad.items():
        rep.example("input", first + i, why)
    rep.bad_lines += len(lines.bad)
    active = opts.active()
    texts = clean(lines.raw) if "markup" in active else list(lines.raw)
    keep = np.fromiter((bool(t.strip()) for t in lines.raw), dtype=bool, count=n)
    keep[list(lines.bad)] = False
    rep.lines += n
    rep.empty += n - int(keep.sum()) - len(lines.bad)
    batch = Batch(texts, keep.copy(), opts)
    if counts is not None:
        batch.counts = counts.of(_hashes(texts))
    for name, drop in _apply(batch, active):
        rep.dropped[name] += int(drop.sum())
        for i in np.flatnonzero(drop)[:max(0, opts.examples - len(rep.examples[name]))]:
            rep.example(name, first + int(i), lines.raw[i])
    rep.other_lang.update(batch.extra.get("lang", ()))
    rep.identified += batch.extra.get("lang_identified", 0)
    rep.kept += int(batch.keep.sum())
    rep.rewritten += sum(texts[i] != lines.raw[i] for i in np.flatnonzero(batch.keep))
    out = [t if k else "" for t, k in zip(texts, batch.keep)]
    if lines.heads is not None:
        out = [f"{h}\t{t}" if h else "" for h, t in zip(lines.heads, out)]
    return out


def _apply(batch: Batch, active: List[str]):
    """Run the filters ``active`` in order on ``batch``: yields ``(name, drop)`` (the lines that
    filter drops among those still kept), then removes them from ``batch.keep``."""
    for name in active:
        drop = FILTERS[name].fn(batch) & batch.keep
        yield name, drop
        batch.keep &= ~drop


def rule_keeps(texts: List[str], lang: str, **options) -> np.ndarray:
    """Which of ``texts`` (one line each) every per-line filter of ``trie-mine-prepare`` keeps
    (``markup``, ``length``, ``lang``, ``script``; ``options``: :class:`PrepareOptions` fields,
    its defaults otherwise), as a bool array of ``len(texts)``; an empty text is not kept. The
    ``boilerplate`` filter, a count over a whole corpus, is not applied. Raises
    :class:`InputError` for an unknown ``lang`` or option value."""
    opts = PrepareOptions(lang=lang, **options)
    active = [n for n in opts.active() if n != "boilerplate"]
    cleaned = clean(texts) if "markup" in active else list(texts)
    keep = np.fromiter((bool(t.strip()) for t in texts), dtype=bool, count=len(texts))
    batch = Batch(cleaned, keep, opts)
    for _ in _apply(batch, active):
        pass
    return batch.keep


def _batches(path, opts: PrepareOptions):
    """``(first line number, format, decoded batch)`` of ``path``; format ``auto`` is fixed by
    the first batch: TSV when most of its non-blank lines look like ``id<TAB>text``, else plain
    text (raw text with some tabs is plain text here: :func:`clean` makes them spaces, so the
    mining job's ``auto`` reads the output as plain text too)."""
    fmt, first = opts.format, 1
    for raw in read_batches(path, opts.batch_lines):
        if first == 1 and raw and raw[0].startswith(b"\xef\xbb\xbf"):
            raw[0] = raw[0][3:]
        if fmt == "auto":
            probe = [ln.decode("utf-8", "replace") for ln in raw]
            looks, non_blank = tsv_votes(probe)
            fmt = "tsv" if 2 * looks > non_blank else "plain"  # a tab in raw text: a space
        yield first, fmt, _decode(raw, fmt)
        first += len(raw)


def _count_pass(path, opts: PrepareOptions) -> HashCounts:
    counts = HashCounts()
    markup = "markup" in opts.active()
    for _, _, lines in _batches(path, opts):
        texts = clean(lines.raw) if markup else lines.raw
        live = [t for t in texts if t.strip()]
        counts.add(_hashes(live))
    return counts


def _check_language(path, opts: PrepareOptions, rep: _Report, at_least: int) -> None:
    other = sum(rep.other_lang.values())
    if rep.identified >= at_least and other > opts.max_other_lang * rep.identified:
        top = ", ".join(f"{c} {n}" for c, n in rep.other_lang.most_common(3))
        raise InputError(f"{other} of the {rep.identified} lines whose language CLD2 could tell "
                         f"are not {opts.lang!r} (most: {top}): not a {opts.lang} corpus? "
                         "(check --lang, or raise --max-other-lang)", path)


def prepare(input, output, lang: str, report=None, **options) -> Dict[str, Any]:
    """Prepare the raw corpus ``input`` (plain text or ``id<TAB>text``; plain, ``.gz``, ``.xz``
    or ``.zst``) for mining into ``output`` (compressed by its name's ending), and return the
    report (also written as JSON to ``report`` when given).  ``options``: the fields of
    :class:`PrepareOptions`.  Raises :class:`InputError` naming the file for an unreadable or
    corrupt input, an unknown option, an input with no text, one whose lines the filters all
    drop (with each filter's count) and one mostly in another language; the output is then
    left as it was."""
    fields = {f.name for f in dataclasses.fields(PrepareOptions) if f.init}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise InputError(f"unknown option {unknown[0]!r} (options: {', '.join(sorted(fields))})")
    opts = PrepareOptions(lang=lang, **options)
    check_distinct([("output", output), ("report", report)], [("input", input)])
    counts = _count_pass(input, opts) if "boilerplate" in opts.active() else None
    rep = _Report(opts)
    fmt = opts.format
    checked = False
    with open_output(output) as out:
        for first, fmt, lines in _batches(input, opts):
            out.write(("\n".join(_filter_batch(lines, first, opts, counts, rep)) + "\n")
                      .encode("utf-8"))
            if not checked and rep.identified >= EARLY_CHECK:
                _check_language(input, opts, rep, EARLY_CHECK)
                checked = True
        _check_language(input, opts, rep, 1)
        if rep.lines - rep.empty - rep.bad_lines <= 0:
            raise InputError("no text: every line is empty" + (
                f" or bad ({rep.bad_lines} bad lines, e.g. line {rep.examples['input'][0][0]}: "
                f"{rep.examples['input'][0][1]})" if rep.bad_lines else ""), input)
        if rep.kept == 0:
            counted = ", ".join(f"{n} {c}" for n, c in rep.dropped.items())
            raise InputError(f"the filters dropped every line ({counted}): check --lang and "
                             "the filters' thresholds", input)
    result = {"input": os.fspath(input), "output": os.fspath(output), "lang": opts.lang,
              "report": None if report is None else os.fspath(report),
              "format": fmt, "lines": rep.lines, "empty_in_input": rep.empty,
              "bad_lines": rep.bad_lines, "bad_line_examples": rep.examples["input"],
              "kept": rep.kept, "rewritten": rep.rewritten,
              "filters": rep.filters(), "lang_dropped_as": dict(rep.other_lang.most_common()),
              "summary": rep.summary(input)}
    if report is not None:
        import json
        text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
        write_output(report, text.encode("utf-8"), "report", hint="")  # compressed by its name
    return result
