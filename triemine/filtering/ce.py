"""Per-word cross-entropy filter.

The miner writes ``ce_word = -score / (words in the detokenised target + 1)`` where ``score`` is
the natural-log probability of the target given the source including EOS. Lower is better: a
pair is kept when ``ce_word <= threshold``. ``ce_token`` (per target token incl. EOS) can be used
the same way through ``column``.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from triemine.evaluation.bucc import Mined
from triemine.evaluation.metrics import PRF, apply_threshold, optimize_threshold

CE_COLUMN = "ce_word"


def select_ce(mined: Mined, threshold: float, column: str = CE_COLUMN) -> np.ndarray:
    """Mask of rows with ``column <= threshold``."""
    return apply_threshold(mined.col(column), threshold, higher_is_better=False)


def tune_ce(mined: Mined, correct: np.ndarray, n_gold: int, column: str = CE_COLUMN) -> Tuple[float, PRF]:
    """Best-F1 cross-entropy threshold on candidates whose gold status is ``correct``."""
    return optimize_threshold(mined.col(column), correct, n_gold, higher_is_better=False)
