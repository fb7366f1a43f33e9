"""Unions of selections.

* CE ∪ Bicleaner: a pair is kept when ``ce_word <= t_ce`` **or** ``bicleaner >= t_bc``.
* Two translation directions: pairs mined l1→l2 and pairs mined l2→l1 (ids swapped back to
  ``(l1-id, l2-id)``) are merged into one set; a pair found in both directions counts once.
"""
from __future__ import annotations

from typing import Iterable, Set, Tuple

import numpy as np

from triemine.evaluation.bucc import Mined
from triemine.filtering.ce import CE_COLUMN, select_ce

Pair = Tuple[str, str]
BICLEANER_COLUMN = "bicleaner"


def select_bicleaner(mined: Mined, threshold: float) -> np.ndarray:
    """Mask of rows with ``bicleaner >= threshold`` (needs the column added by trie-mine-filter)."""
    return mined.col(BICLEANER_COLUMN) >= threshold


def select_ce_or_bicleaner(mined: Mined, ce_threshold: float, bicleaner_threshold: float,
                           ce_column: str = CE_COLUMN) -> np.ndarray:
    """Mask of the union of the CE and Bicleaner selections."""
    return select_ce(mined, ce_threshold, ce_column) | select_bicleaner(mined, bicleaner_threshold)


def union_directions(forward: Iterable[Pair], backward: Iterable[Pair]) -> Set[Pair]:
    """Union of l1→l2 pairs ``(l1, l2)`` and l2→l1 pairs given as mined ``(l2, l1)``."""
    out = set(forward)
    out.update((t, s) for s, t in backward)
    return out
