"""What a judge's calibrated ``prob`` promises of the pairs a run keeps, without gold: the
expected number of true pairs, precision and recall (:func:`expected_quality`), and the line a
tool prints of it (:func:`describe`).  The mining job's and ``trie-mine-score``'s summaries
carry it (``expected``); ``trie-mine-review --labels`` prints it beside what a reader counted.

Pure functions of numbers (numpy and the standard library only).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

# below this estimated share of translations among a run's candidates, the kept pairs' mean
# prob has fallen short of their true precision on every set measured, by more the lower the
# share (0.05 at 10 %, 0.2 at 1 %): there the expected figures are a floor; see
# docs/decisions.md#expected-precision-is-a-floor-where-few-candidates-are-translations
LOW_SHARE = 0.15


def _probabilities(values, name: str) -> np.ndarray:
    """``values`` as a 1-D float64 array of numbers in [0, 1]; ``ValueError`` naming ``name``."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D sequence, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise ValueError(f"{name}: every value must be a probability in [0, 1]")
    return arr


def expected_quality(prob_kept: Sequence[float],
                     best_prob_per_source: Optional[Sequence[float]] = None) -> Dict[str, object]:
    """The quality the kept pairs' calibrated probabilities promise.

    ``prob_kept``: ``prob`` of every kept pair (1-D, values in [0, 1]).
    ``best_prob_per_source``: optional, for every source sentence of the run (those with a kept
    pair and those without), the highest ``prob`` among its candidates.

    Returns ``{"kept": n, "expected_true": sum of prob_kept, "expected_precision": its mean
    (None when nothing is kept)}``, and with ``best_prob_per_source`` also
    ``"expected_findable"`` (its sum) and ``"expected_recall"`` = expected_true /
    expected_findable (None when that sum is 0).

    Assumes ``prob`` is calibrated: a pair of probability p is a translation with chance p,
    independently of the others. The recall also assumes a source has at most one translation
    among its candidates and that, when it has one, it is its best-``prob`` candidate, so the
    expected number of sources a perfect selection could pair is the sum of their best ``prob``;
    candidates the run never generated are outside it (a recall of the candidates, not of the
    corpora). Raises ``ValueError`` for a value outside [0, 1], a non-finite one or a shape
    that is not 1-D."""
    prob = _probabilities(prob_kept, "prob_kept")
    n = int(prob.size)
    true = float(prob.sum())
    out: Dict[str, object] = {"kept": n, "expected_true": true,
                              "expected_precision": true / n if n else None}
    if best_prob_per_source is not None:
        findable = float(_probabilities(best_prob_per_source, "best_prob_per_source").sum())
        out["expected_findable"] = findable
        out["expected_recall"] = true / findable if findable > 0 else None
    return out


def best_per_source(src_ids: Sequence[str], prob) -> np.ndarray:
    """The highest finite ``prob`` of each distinct source of ``src_ids`` (one id a row, the
    rows' ``prob`` beside them; 0 for a source without one), in sorted order of the ids: the
    ``best_prob_per_source`` of :func:`expected_quality`."""
    p = np.asarray(prob, dtype=np.float64)
    _, source = np.unique(np.asarray(src_ids, dtype=object), return_inverse=True)
    best = np.zeros(int(source.max()) + 1 if len(source) else 0)
    ok = np.isfinite(p)
    np.maximum.at(best, source[ok], p[ok])
    return best


def is_floor(share: Optional[float]) -> bool:
    """Whether a run whose judge estimated ``share`` (the share of translations among its
    candidates; None: not estimated) gets expected figures that are a floor (:data:`LOW_SHARE`)."""
    return share is not None and share < LOW_SHARE


def describe(expected: Dict[str, object]) -> str:
    """One line of :func:`expected_quality`'s result (or of a summary's ``expected`` entry
    saying why there is none: ``{"calibrated": False, "why": ...}``); ``"floor": True`` in it
    (a run at a low share, :func:`is_floor`) says "at least" and where to read the number."""
    if not expected.get("calibrated", True):
        return f"expected quality: none ({expected.get('why')})"
    if not expected.get("kept"):
        return "expected quality: nothing kept"
    floor = bool(expected.get("floor"))
    least = "at least " if floor else ""
    out = (f"expected quality: {least}{expected['expected_true']:.1f} true pairs of "
           f"{expected['kept']} kept (precision {least}{expected['expected_precision']:.3f}")
    if expected.get("expected_recall") is not None and not floor:
        out += f", recall {expected['expected_recall']:.3f} of the candidates'"
    if floor:
        return out + (f"; few candidates are translations (estimated share "
                      f"{expected['density']:.3f}), where prob under-states precision: "
                      "trie-mine-review reads a sample for the number)")
    return out + "; assumes a calibrated prob)"
