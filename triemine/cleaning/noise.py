"""Noisy bitext made from clean pairs: what the ``pairs`` calibration is fitted on and what
``bench/clean_bench.py`` measures, one home for both.

Given clean pairs ``(src[i], tgt[i])`` (and each target's next sentence in its document),
:func:`noisy_set` returns the clean pairs (label 1) and, per :data:`KINDS` (label 0):

* ``misaligned``: ``src[i]`` with another pair's target (a random derangement);
* ``partial``: ``src[i]`` with the first half of ``tgt[i]``'s words (at least one word dropped);
* ``neighbour``: ``src[i]`` with the next sentence of its document;
* ``copy``: ``src[i]`` as its own target;
* ``other_lang``: ``src[i]`` with a sentence of another language (``foreign``, e.g. German);
* ``number``: ``tgt[i]`` with one non-zero digit changed (only pairs whose target has one).

Pairs are drawn with ``numpy.random.default_rng(seed)``: the same inputs and seed give the same set.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

KINDS = ("misaligned", "partial", "neighbour", "copy", "other_lang", "number")
CLEAN = "clean"
_DIGIT = re.compile(r"[1-9]")


@dataclass
class NoisySet:
    """``src``, ``tgt``, ``kind`` (:data:`CLEAN` or one of :data:`KINDS`) and ``label`` (1 clean,
    0 noise) of every pair, clean pairs first, then each kind in :data:`KINDS` order."""

    src: List[str]
    tgt: List[str]
    kind: List[str]

    @property
    def label(self) -> np.ndarray:
        return np.array([k == CLEAN for k in self.kind], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.src)


def half(text: str) -> Optional[str]:
    """The first half of ``text``'s words (rounded down), or None for a text of under 2 words."""
    words = text.split()
    if len(words) < 2:
        return None
    return " ".join(words[:len(words) // 2])


def change_number(text: str, rng) -> Optional[str]:
    """``text`` with one of its non-zero digits (chosen by ``rng``) replaced by another non-zero
    digit; None when it has none."""
    spots = [m.start() for m in _DIGIT.finditer(text)]
    if not spots:
        return None
    at = spots[int(rng.integers(len(spots)))]
    new = str((int(text[at]) + int(rng.integers(1, 9)) - 1) % 9 + 1)
    return text[:at] + new + text[at + 1:]


def noisy_set(src: Sequence[str], tgt: Sequence[str], foreign: Sequence[str], *,
              following: Optional[Sequence[Optional[str]]] = None,
              per_kind: Optional[int] = None, seed: int = 20261127,
              kinds: Sequence[str] = KINDS) -> NoisySet:
    """The clean pairs and ``per_kind`` noisy pairs of each kind (default: as many as clean
    pairs; ``number``, ``partial`` and ``neighbour`` only from the pairs that allow them, so
    possibly fewer).  ``src``/``tgt`` are aligned clean pairs; ``following[i]`` the sentence
    after ``tgt[i]`` in its document (None: none; default: ``tgt[i + 1]``, pairs in document
    order); ``foreign`` the other language's sentences."""
    if len(src) != len(tgt) or len(src) < 2:
        raise ValueError("need at least two aligned clean pairs")
    rng = np.random.default_rng(seed)
    n = len(src)
    per_kind = n if per_kind is None else per_kind
    if following is None:
        following = list(tgt[1:]) + [None]
    elif len(following) != n:
        raise ValueError("one following sentence (or None) per pair")
    out = NoisySet(list(src), list(tgt), [CLEAN] * n)
    for kind in kinds:
        order = rng.permutation(n).tolist()
        made = 0
        for i in order:
            if made >= per_kind:
                break
            t = _noisy_target(kind, i, src, tgt, following, foreign, rng)
            if t is None or t == tgt[i]:
                continue
            out.src.append(src[i])
            out.tgt.append(t)
            out.kind.append(kind)
            made += 1
    return out


def _noisy_target(kind: str, i: int, src, tgt, following, foreign, rng) -> Optional[str]:
    n = len(src)
    if kind == "misaligned":
        j = (i + 1 + int(rng.integers(n - 1))) % n
        return tgt[j]
    if kind == "partial":
        return half(tgt[i])
    if kind == "neighbour":
        return following[i]
    if kind == "copy":
        return src[i]
    if kind == "other_lang":
        return foreign[int(rng.integers(len(foreign)))]
    if kind == "number":
        return change_number(tgt[i], rng)
    raise ValueError(f"unknown noise kind {kind!r} (choose from {', '.join(KINDS)})")
