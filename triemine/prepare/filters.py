"""The preparation step's line filters, each named once, in one registry.

A filter has a ``name`` (what ``--skip`` and the report use), what it ``drops`` (one sentence for
``--help`` and docs/prepare.md) and its ``params`` (fields of
:class:`~triemine.prepare.run.PrepareOptions`).  Its function takes a :class:`Batch` and returns
a boolean mask of the batch's lines it drops; the driver applies the filters in registry order
to the lines still kept, so each dropped line is counted once, under the first filter that drops
it.  ``markup`` also rewrites the lines it keeps (:func:`clean`) before the others see them.

Adding a filter is one function here with ``@register`` and its options in ``PrepareOptions``.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from triemine.prepare.scripts import LOGOGRAPHIC, LineStats, line_stats


@dataclass
class Batch:
    """A batch of lines as the filters see them: ``texts`` (after :func:`clean`), ``keep``
    (the lines no earlier filter dropped, and not empty in the input), ``opts`` (the
    :class:`~triemine.prepare.run.PrepareOptions`), ``counts`` (boilerplate: occurrences of
    each line's normalised text in the corpus, or ``None``) and ``extra``: what a filter leaves
    for the report (``lang``: the language each dropped line was identified as)."""

    texts: List[str]
    keep: np.ndarray
    opts: Any
    counts: Optional[np.ndarray] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    _stats: Optional[LineStats] = None

    @property
    def stats(self) -> LineStats:
        if self._stats is None:
            self._stats = line_stats(self.texts, self.opts.expected_scripts)
        return self._stats


@dataclass(frozen=True)
class LineFilter:
    name: str
    drops: str
    params: Tuple[str, ...]
    fn: Callable[[Batch], np.ndarray]


FILTERS: Dict[str, LineFilter] = {}


def register(name: str, drops: str, params: Tuple[str, ...] = ()):
    def deco(fn):
        FILTERS[name] = LineFilter(name, drops, params, fn)
        return fn
    return deco


# -- markup: the cleaning step ---------------------------------------------------------------
# none of these patterns matches a newline, so they run on a whole batch joined by newlines
TAG = re.compile(r"<!--[^\n]*?-->|</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>\n]*)?/?>")
URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"]+")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200d\u2028\u2029\ufeff\ufffe\uffff]")
# white space other than the plain space (made one), then runs of spaces (made one)
SPACE_LIKE = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
SPACES = re.compile("  +")


def _unescape(line: str) -> str:
    """``line`` with its HTML entities decoded; what they decode to that is no text (a
    newline, a tab, a control character) becomes a space."""
    return CONTROL.sub(" ", html.unescape(line).replace("\n", " ").replace("\t", " ")) \
        if "&" in line else line


def clean(texts: List[str], markup: bool = True) -> List[str]:
    """``texts`` with HTML tags and comments, URLs and e-mail addresses removed (``markup``),
    HTML entities decoded, control and zero-width characters removed and runs of white space
    made one space, trimmed; same length, one line each (a tab becomes a space)."""
    if not texts:
        return []
    joined = "\n".join(texts).replace("\t", " ")
    if markup and "<" in joined:
        joined = TAG.sub(" ", joined)
    if markup and ("://" in joined or "www." in joined):
        joined = URL.sub(" ", joined)
    joined = SPACE_LIKE.sub(" ", CONTROL.sub(" ", joined))
    if markup and ("&" in joined or "@" in joined):
        out = [_unescape(EMAIL.sub(" ", t) if "@" in t else t) for t in joined.split("\n")]
        joined = "\n".join(out)
    joined = SPACES.sub(" ", joined)
    if " " in joined:  # trim: one space at most is left at either end of a line
        joined = ("\n" + joined + "\n").replace("\n ", "\n").replace(" \n", "\n")[1:-1]
    return joined.split("\n")


@register("markup", "lines left empty once HTML tags, entities, URLs and control characters are "
          "removed (the kept lines are rewritten so)")
def _markup(b: Batch) -> np.ndarray:
    return np.fromiter((not t for t in b.texts), dtype=bool, count=len(b.texts))


@register("length", "lines with fewer than min_chars or more than max_chars characters (white "
          "space not counted), or fewer than min_words or more than max_words words",
          ("min_chars", "max_chars", "min_words", "max_words"))
def _length(b: Batch) -> np.ndarray:
    o, s = b.opts, b.stats
    drop = s.chars < o.min_chars
    if o.max_chars is not None:
        drop |= s.chars > o.max_chars
    if o.min_words:
        drop |= s.words < o.min_words
    if o.max_words is not None:
        drop |= s.words > o.max_words
    return drop


@register("boilerplate", "lines whose normalised text (case folded, digits as 0, white space "
          "collapsed) occurs more than boilerplate times in the corpus: menus, cookie notices",
          ("boilerplate",))
def _boilerplate(b: Batch) -> np.ndarray:
    return b.counts > b.opts.boilerplate


KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
# a label the identifier gives a line of the expected language, and when
CONFUSABLE = {("zh", "ja"): lambda text: KANA.search(text) is None}  # Han without kana


def identify(texts: List[str]) -> List[str]:
    """The language code CLD2 (pycld2, model inside its wheel) gives each text: ISO 639-1 in
    lower case (``zh``, also for ``zh-Hant``), ``un`` when it cannot tell."""
    import pycld2

    out = []
    for t in texts:
        try:
            code = pycld2.detect(t, isPlainText=True)[2][0][1]
        except pycld2.error:
            code = "un"
        out.append(code.split("-")[0].lower())
    return out


def lang_keeps(texts: List[str], lang: str):
    """``(keep, codes)``: which ``texts`` the ``lang`` filter keeps (identified as ``lang``, as
    a language :data:`CONFUSABLE` with it when the text allows, or not identified) and the code
    :func:`identify` gave each."""
    codes = identify(texts)
    keep = np.fromiter((c == lang or c == "un" or (
        (lang, c) in CONFUSABLE and CONFUSABLE[(lang, c)](t)) for t, c in zip(texts, codes)),
        dtype=bool, count=len(texts))
    return keep, codes


@register("lang", "lines identified (CLD2) as another language than --lang; lines it cannot tell "
          "are kept", ("lang",))
def _lang(b: Batch) -> np.ndarray:
    idx = np.flatnonzero(b.keep)
    texts = [b.texts[i] for i in idx]
    keep, codes = lang_keeps(texts, b.opts.lang)
    drop = np.zeros(len(b.texts), dtype=bool)
    drop[idx[~keep]] = True
    dropped_as = [c for c, k in zip(codes, keep) if not k]
    b.extra["lang"] = dropped_as
    b.extra["lang_identified"] = sum(c != "un" for c in codes)
    return drop


@register("script", "lines where less than min_script_share of the letters are in the expected "
          "scripts (--script, else the language's; for Han and Kana a foreign word counts as "
          "one letter), and lines without letters", ("expected_scripts", "min_script_share"))
def _script(b: Batch) -> np.ndarray:
    s = b.stats
    logographic = LOGOGRAPHIC.issuperset(b.opts.expected_scripts)
    foreign = s.other_runs if logographic else s.letters - s.in_script
    return (s.letters == 0) | (s.in_script < b.opts.min_script_share * (s.in_script + foreign))


def normalise(texts: List[str]) -> List[str]:
    """The boilerplate filter's key of each (cleaned) text: case folded, digits as ``0``."""
    return DIGITS.sub("0", "\n".join(texts).casefold()).split("\n")


DIGITS = re.compile(r"\d")
