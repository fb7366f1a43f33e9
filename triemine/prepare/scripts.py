"""Per-line character statistics of a batch, computed on code points with numpy.

A batch of lines is joined with ``\\n`` and read as UTF-32 code points; one lookup table
(``0x110000`` bytes, built once per set of scripts) gives each code point's class bits:
:data:`LETTER` (Unicode category L* or M*: letters and the marks Indic scripts need),
:data:`IN_SCRIPT` (in one of the expected scripts' blocks, :data:`SCRIPTS`), :data:`SPACE`.
:func:`line_stats` sums them per line, so the ``length`` and ``script`` filters look at every
character of a batch without a Python loop over characters.
"""
from __future__ import annotations

import functools
import sys
import unicodedata
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

import numpy as np

from triemine.errors import InputError

LETTER, IN_SCRIPT, SPACE = 1, 2, 4

# Unicode blocks of each script (inclusive code point ranges)
SCRIPTS: Dict[str, Tuple[Tuple[int, int], ...]] = {
    "Han": ((0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B),
            (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F),
            (0x30000, 0x3134F)),
    "Latin": ((0x41, 0x5A), (0x61, 0x7A), (0xAA, 0xAA), (0xBA, 0xBA), (0xC0, 0x24F),
              (0x250, 0x2AF), (0x1E00, 0x1EFF), (0x2C60, 0x2C7F), (0xA720, 0xA7FF),
              (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x300, 0x36F)),
    "Cyrillic": ((0x400, 0x52F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F)),
    "Greek": ((0x370, 0x3FF), (0x1F00, 0x1FFF)),
    "Arabic": ((0x600, 0x6FF), (0x750, 0x77F), (0x8A0, 0x8FF), (0xFB50, 0xFDFF),
               (0xFE70, 0xFEFF)),
    "Hebrew": ((0x590, 0x5FF), (0xFB1D, 0xFB4F)),
    "Devanagari": ((0x900, 0x97F), (0xA8E0, 0xA8FF)),
    "Thai": ((0xE00, 0xE7F),),
    "Hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF)),
    "Kana": ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)),
}

# the scripts a language's text is written in (``script`` filter's default for --lang)
LANG_SCRIPTS: Dict[str, Tuple[str, ...]] = {
    "zh": ("Han",), "ja": ("Han", "Kana"), "ko": ("Hangul", "Han"),
    **{c: ("Latin",) for c in "en de fr es it pt nl sv da no nb fi et pl cs sk sl hr bs ro hu "
       "tr lt lv is ga cy eu ca gl id ms vi sq mt af sw tl".split()},
    **{c: ("Cyrillic",) for c in "ru uk bg be sr mk kk ky mn tg".split()},
    "el": ("Greek",), "ar": ("Arabic",), "fa": ("Arabic",), "ur": ("Arabic",),
    "he": ("Hebrew",), "yi": ("Hebrew",), "hi": ("Devanagari",), "mr": ("Devanagari",),
    "ne": ("Devanagari",), "th": ("Thai",),
}


# scripts whose one character is about a word: a line's foreign words count one unit each
# against them, not one per letter (a Chinese sentence naming "Formox" is Chinese)
LOGOGRAPHIC = frozenset({"Han", "Kana"})


def scripts_for(lang: str, given: Sequence[str] = ()) -> Tuple[str, ...]:
    """The expected scripts: ``given`` (names of :data:`SCRIPTS`) or ``lang``'s; an
    :class:`InputError` for an unknown script name or a language without a default."""
    if given:
        bad = [s for s in given if s not in SCRIPTS]
        if bad:
            raise InputError(f"unknown script {bad[0]!r} (known: {', '.join(SCRIPTS)})")
        return tuple(given)
    if lang not in LANG_SCRIPTS:
        raise InputError(f"no default script for language {lang!r}: name it with --script "
                         f"(known: {', '.join(SCRIPTS)}) or skip the script filter")
    return LANG_SCRIPTS[lang]


@functools.lru_cache(maxsize=1)
def _letter_space_table() -> np.ndarray:
    table = np.zeros(sys.maxunicode + 1, dtype=np.uint8)
    cat = unicodedata.category
    for cp in range(sys.maxunicode + 1):
        c = cat(chr(cp))
        if c[0] in "LM":
            table[cp] = LETTER
        elif c[0] == "Z" or chr(cp).isspace():
            table[cp] = SPACE
    table[[9, 10, 11, 12, 13, 0x1C, 0x1D, 0x1E, 0x1F, 0x85]] = SPACE
    return table


@functools.lru_cache(maxsize=16)
def class_table(scripts: Tuple[str, ...]) -> np.ndarray:
    """The class bits of every code point for the expected ``scripts`` (read-only)."""
    table = _letter_space_table().copy()
    for name in scripts:
        for lo, hi in SCRIPTS[name]:
            seg = table[lo:hi + 1]
            seg[(seg & LETTER) > 0] |= IN_SCRIPT
    table.flags.writeable = False
    return table


@dataclass
class LineStats:
    """Per-line counts of a batch (arrays of the batch's length, int64): ``chars`` (characters
    other than white space), ``words`` (runs of them), ``letters``, ``in_script`` (letters of
    the expected scripts), ``other_runs`` (runs of letters not in them: the foreign words)."""

    chars: np.ndarray
    words: np.ndarray
    letters: np.ndarray
    in_script: np.ndarray
    other_runs: np.ndarray


def line_stats(texts: Sequence[str], scripts: Tuple[str, ...]) -> LineStats:
    """:class:`LineStats` of ``texts`` (lines without newlines) for the expected ``scripts``."""
    n = len(texts)
    cps = np.frombuffer("\n".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cls = class_table(tuple(scripts))[np.minimum(cps, sys.maxunicode)]
    line = np.cumsum(cps == 10)  # the line each code point is in (a newline: the next one)
    space = (cls & SPACE) > 0
    solid = ~space
    start = solid.copy()
    start[1:] &= space[:-1]

    def per_line(mask):
        return np.bincount(line[mask], minlength=n)[:n].astype(np.int64)

    letters = (cls & LETTER) > 0
    other = letters & ((cls & IN_SCRIPT) == 0)
    other_start = other.copy()
    other_start[1:] &= ~other[:-1]
    return LineStats(per_line(solid), per_line(start), per_line(letters),
                     per_line((cls & IN_SCRIPT) > 0), per_line(other_start))
