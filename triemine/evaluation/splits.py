"""Which shared text the benchmarks measure on, so that nothing that learns is fitted on it.

The shared data's roles (``../shared``, :mod:`triemine.io.paths`):

* measured on only: the BUCC zh-en sample, the transfer set (``devsets/zh-en/zh-en.dev.*``) and
  the English lines of ``parallel/de-en/train.en`` that the benchmarks draw
  (:func:`reserved_english`);
* fitted on: ``devsets/zh-en/train.{zh,en}`` and the other English lines of
  ``parallel/de-en/train.en`` (:func:`training_english`).

The de-en English side holds WMT news of the same years as the zh-en data, among them other
translations of some of the same stories: comparable text, the hardest distractors a judge
meets.  Every draw here is seeded, so the benchmarks and the training scripts agree on it
without sharing a file.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, FrozenSet, List, Tuple

import numpy as np

from triemine.io import DEVSET_ZH_EN, PARALLEL_DE_EN, PARALLEL_ZH_EN, shared_path

CLEAN_BENCH_SEED = 49     # bench/clean_bench.py's unrelated English lines
DENSITY_BENCH_SEED = 58   # bench/density_bench.py's second unrelated pair
DRAW = 14000              # English lines in each draw


@lru_cache(maxsize=1)
def de_en_english() -> Tuple[str, ...]:
    """The lines of ``parallel/de-en/train.en`` (``str.splitlines``, as the benchmarks read
    them)."""
    return tuple(shared_path(*PARALLEL_DE_EN, "train.en").read_text(encoding="utf-8")
                 .splitlines())


@lru_cache(maxsize=1)
def transfer_english() -> FrozenSet[str]:
    """The texts of the transfer set's English side (``zh-en.dev.en``, ``id<TAB>text``)."""
    lines = shared_path(*DEVSET_ZH_EN, "zh-en.dev.en").read_text(encoding="utf-8").splitlines()
    return frozenset(line.split("\t", 1)[1].strip() for line in lines if "\t" in line)


def clean_bench_draw(n: int = DRAW) -> np.ndarray:
    """Sorted line numbers (0-based) of the de-en English lines ``bench/clean_bench.py``'s
    unrelated part mines against (``n`` of them, seed :data:`CLEAN_BENCH_SEED`)."""
    rng = np.random.default_rng(CLEAN_BENCH_SEED)
    return np.sort(rng.choice(len(de_en_english()), size=n, replace=False))


@lru_cache(maxsize=1)
def density_bench_draw() -> np.ndarray:
    """Sorted line numbers of :data:`DRAW` de-en English lines, none in the transfer set's
    English nor in :func:`clean_bench_draw`, seed :data:`DENSITY_BENCH_SEED`: the English side
    of the density benchmark's second unrelated pair."""
    en = de_en_english()
    taken = set(clean_bench_draw().tolist())
    dev = transfer_english()
    free = np.array([i for i, t in enumerate(en) if i not in taken and t.strip() not in dev],
                    dtype=np.int64)
    rng = np.random.default_rng(DENSITY_BENCH_SEED)
    return np.sort(rng.choice(free, size=DRAW, replace=False))


@lru_cache(maxsize=1)
def reserved_english() -> FrozenSet[str]:
    """Every English text a benchmark measures on: the transfer set's English and the texts of
    both draws (stripped)."""
    en = de_en_english()
    drawn = np.concatenate([clean_bench_draw(), density_bench_draw()])
    return transfer_english() | frozenset(en[i].strip() for i in drawn.tolist())


def training_english() -> List[Tuple[int, str]]:
    """``(line number, text)`` of the distinct, non-empty de-en English texts that no benchmark
    measures on (:func:`reserved_english`), in line order: the English a judge may be fitted
    against."""
    reserved, seen, out = reserved_english(), set(), []
    for i, t in enumerate(de_en_english()):
        t = t.strip()
        if t and t not in reserved and t not in seen:
            seen.add(t)
            out.append((i, t))
    return out


@lru_cache(maxsize=1)
def zh_en_references() -> Dict[str, str]:
    """``{Chinese text: its English}`` of ``parallel/zh-en/train`` (the first English of a
    repeated Chinese text): the reference of every transfer-set source, paired or not."""
    zh = shared_path(*PARALLEL_ZH_EN, "train.zh").read_text(encoding="utf-8")
    en = shared_path(*PARALLEL_ZH_EN, "train.en").read_text(encoding="utf-8")
    out: Dict[str, str] = {}
    for s, t in zip(zh.split("\n"), en.split("\n")):
        out.setdefault(s.strip(), t.strip())
    return out
