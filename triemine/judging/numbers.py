"""Numbers of a Chinese source and an English target read as values, for the given-pairs judge.

The mining job's ``numerals`` (:func:`triemine.mining.features.numeral_agreement`) compares the
non-zero digits of both sides and says nothing when a side has none; a Chinese source often
writes its numbers in characters (三, 十五, 两千, 百分之五) or with a scale (5万 = 50,000,
2.5亿 = 250 million), so a changed number in the English was invisible.  Here both sides' numbers
are values:

* :func:`source_values`: every number of the source: digit runs (after NFKC, so full-width
  digits count; ``1,000`` and ``2.5`` read whole), each also times a scale character right after
  it (十 百 千 万 亿, 万亿); runs of Chinese numerals (``三千五百万`` = 35,000,000,
  ``两千`` = 2,000, ``二零一五`` = 2015 digit by digit); ``百分之五`` is 5;
* :func:`target_numbers`: each number the target writes in digits (``50,000``, ``2.5``), with its
  value times a scale word right after it (thousand, million, billion, trillion);
* :func:`number_match`: the share of the target's numbers whose value (or scaled value) is one of
  the source's values; 1.0 when the target writes no number in digits (no evidence);
* :func:`decades`: a decade of a numbered century written as its first year (20世纪90年代 is
  1990年代, "the 1990s"), for both checks: the mining job's ``numerals`` reads the rewritten
  text too.

The check is one-sided on purpose: a source's extra values (一 in 一起, 万 in 万一) can only hide
a change, never flag a faithful translation.
"""
from __future__ import annotations

import re
import unicodedata
from typing import List, Set, Tuple

import numpy as np

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5,
           "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_SCALES = {"万": 10 ** 4, "萬": 10 ** 4, "亿": 10 ** 8, "億": 10 ** 8}
_CN_RUN = re.compile("[" + "".join(_DIGITS) + "".join(_UNITS) + "".join(_SCALES) + "]+")
_NUMBER = re.compile(r"\d+(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_SRC_SCALE = re.compile(r"\s*[多余]?\s*(万亿|萬億|千万|百万|十万|[十百千万亿萬億])")
_CN_DECIMAL = re.compile("([" + "".join(_DIGITS) + "".join(_UNITS) + "]+)点([" +
                         "".join(_DIGITS) + "]+)")
_TGT_SCALE = re.compile(r"\s*(thousand|million|billion|trillion)\b", re.IGNORECASE)
_WORD_SCALE = {"thousand": 10 ** 3, "million": 10 ** 6, "billion": 10 ** 9, "trillion": 10 ** 12}
_CHAR_SCALE = {"十": 10, "百": 100, "千": 1000, "万": 10 ** 4, "萬": 10 ** 4, "亿": 10 ** 8,
               "億": 10 ** 8, "万亿": 10 ** 12, "萬億": 10 ** 12, "千万": 10 ** 7,
               "百万": 10 ** 6, "十万": 10 ** 5}


_CN_NUMBER = "(\\d+|[" + "".join(_DIGITS) + "".join(_UNITS) + "]+)"
# 20世纪90年代, 二十世纪九十年代, 上世纪50年代, 上个世纪五十年代: a decade of a numbered century
_DECADE = re.compile("(?:" + _CN_NUMBER + "世纪|上个?世纪)" + _CN_NUMBER + "年代")
_BARE_DECADE = re.compile(r"(?<![\d世])(\d0)年代")  # 90年代: also read as 1990


def _number(text: str) -> int:
    return int(text) if text.isdigit() else chinese_numeral(text)


def decades(text: str) -> str:
    """``text`` (NFKC-normalised first) with each decade of a numbered century written as its
    first year followed by 年代: ``20世纪90年代`` and ``二十世纪九十年代`` become ``1990年代``
    (century ``c``, decade ``d``: year ``100 * (c - 1) + d``); ``上世纪50年代`` (the last
    century's) ``1950年代``.  A decade that is not a multiple of ten below 100, or a century
    of 0, leaves the words as they are.  Other text is returned unchanged (a cheap check when
    it holds no 年代)."""
    text = unicodedata.normalize("NFKC", text)
    if "年代" not in text:
        return text

    def year(m: re.Match) -> str:
        century = _number(m.group(1)) if m.group(1) else 20
        decade = _number(m.group(2))
        if century < 1 or decade % 10 or not 0 <= decade < 100:
            return m.group()
        return f"{100 * (century - 1) + decade}年代"
    return _DECADE.sub(year, text)


def chinese_numeral(run: str) -> int:
    """The value of a run of Chinese numeral characters: ``十五`` 15, ``二十一`` 21,
    ``两千`` 2000, ``三千五百万`` 35,000,000, ``一万零五`` 10,005, ``一万亿`` 10^12,
    ``二零一五`` 2015 (a run of two or more digit characters without a unit is read digit by
    digit, as years are written).

    Raises:
        ValueError: a character that is not a Chinese numeral.
    """
    if len(run) > 1 and all(c in _DIGITS for c in run):
        return int("".join(str(_DIGITS[c]) for c in run))
    done, wan, section, digit = 0, 0, 0, None  # above 亿, 万 groups below it, under 万
    for c in run:
        if c in _DIGITS:
            digit = _DIGITS[c]
        elif c in _UNITS:
            section += (1 if digit is None else digit) * _UNITS[c]
            digit = None
        elif _SCALES.get(c) == 10 ** 4:
            wan += (section + (digit or 0) or 1) * 10 ** 4
            section, digit = 0, None
        elif c in _SCALES:
            done += (wan + section + (digit or 0) or 1) * 10 ** 8
            wan, section, digit = 0, 0, None
        else:
            raise ValueError(f"not a Chinese numeral: {c!r}")
    return done + wan + section + (digit or 0)


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def source_values(src: str) -> Set[float]:
    """Every value a number of ``src`` may stand for (module docstring)."""
    text = decades(src).replace("百分之", "")
    out: Set[float] = set()
    for m in _BARE_DECADE.finditer(text):  # 90年代: the 1990s too
        out.add(1900.0 + int(m.group(1)))
    for m in _NUMBER.finditer(text):
        v = _value(m.group())
        out.add(v)
        scale = _SRC_SCALE.match(text, m.end())
        if scale:
            out.add(v * _CHAR_SCALE[scale.group(1)])
    for m in _CN_DECIMAL.finditer(text):  # 十二点九 = 12.9
        out.add(chinese_numeral(m.group(1)) + float("0." + "".join(
            str(_DIGITS[c]) for c in m.group(2))))
    for m in _CN_RUN.finditer(text):
        run = m.group()
        out.add(float(chinese_numeral(run)))
        for part in re.split("[" + "".join(_UNITS) + "".join(_SCALES) + "]", run):
            if len(part) > 1:  # 二零一五年 and 三四个: also each digit
                out.update(float(_DIGITS[c]) for c in part)
    return out


def target_numbers(tgt: str) -> List[Tuple[float, ...]]:
    """The numbers ``tgt`` writes in digits, each as the values it may stand for: itself and,
    before a scale word, itself times the scale."""
    text = unicodedata.normalize("NFKC", tgt)
    out = []
    for m in _NUMBER.finditer(text):
        v = _value(m.group())
        scale = _TGT_SCALE.match(text, m.end())
        out.append((v, v * _WORD_SCALE[scale.group(1).lower()]) if scale else (v,))
    return out


def number_match(src: str, tgt: str) -> float:
    """The share of ``tgt``'s numbers in digits that stand for a value of ``src``'s numbers
    (module docstring); 1.0 when ``tgt`` has none."""
    nums = target_numbers(tgt)
    if not nums:
        return 1.0
    have = source_values(src)
    hit = sum(any(_close(v, have) for v in vals) for vals in nums)
    return hit / len(nums)


def _close(v: float, have: Set[float]) -> bool:
    return v in have or any(abs(v - h) <= 1e-9 * max(1.0, abs(h)) for h in have)


def number_matches(src: List[str], tgt: List[str]) -> np.ndarray:
    """:func:`number_match` of each pair ``(src[i], tgt[i])``, float64."""
    return np.fromiter((number_match(s, t) for s, t in zip(src, tgt)), dtype=np.float64,
                       count=len(tgt))
