"""The share of translations a judge was fitted at, above a margin floor.

A mining job drops the candidates whose ratio margin is under its floor (``--min-margin``)
before the exact stage.  The judge's posterior of a candidate above the floor is the one it
was fitted to give (the floor is a function of a feature), but the share its probability is
shifted from (:mod:`triemine.judging.prior`) must be the share among the rows the judge was
fitted on that the same floor keeps: the mined training candidates at or above it, and every
other row (given pairs, never floored).  A judge file states that as ``floors``
(:class:`Floors`): the mined training rows counted on a grid of margins, and the other rows;
:meth:`Floors.share` reads the share at a floor.  A judge without ``floors`` has one share,
its ``train_prior``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import List, Optional

import numpy as np

STEP = 0.001   # the grid's resolution: a floor is read at the first edge at or above it
TOP = 1.40     # the grid's last edge; the last bin holds every margin at or above it
MAX_LOST = 0.002  # the share of the translations the judge keeps a chosen floor may drop
CHOICES = 0.005   # a floor is chosen among the mined floor and its steps of 0.005, 10 of them


@dataclass(frozen=True)
class Floors:
    """Counts of a judge's training rows by margin: ``feature`` (the margin column the floor
    cuts, ``use_margin``), ``low`` (the floor the training candidates were mined at: none is
    under it), ``step``; ``rows[i]`` and ``positives[i]`` count the mined rows with a margin in
    ``[low + i * step, low + (i + 1) * step)`` (the last bin unbounded above), ``kept[i]``
    (optional) the positives of that bin the judge keeps (its probability at or above its cut
    at the candidates' own share), ``other_rows`` and ``other_positives`` the rows no floor
    applies to.  A ``ValueError`` for counts that are not non-negative integers, positives over
    rows, kept over positives, unequal lengths or no rows."""

    feature: str
    low: float
    step: float
    rows: List[int]
    positives: List[int]
    other_rows: int = 0
    other_positives: int = 0
    kept: List[int] = field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.feature, str) or not self.feature:
            raise ValueError("floors need the margin feature they cut")
        for v in (self.low, self.step):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"floors' low and step must be finite numbers, got {v!r}")
        if self.step <= 0:
            raise ValueError("floors' step must be positive")
        counts = list(self.rows) + list(self.positives) + list(self.kept) + [
            self.other_rows, self.other_positives]
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
            raise ValueError("floors' counts must be non-negative integers")
        if len(self.rows) != len(self.positives) or not self.rows:
            raise ValueError("floors need one count of rows and of positives a bin")
        if any(p > n for p, n in zip(self.positives, self.rows)) or \
                self.other_positives > self.other_rows:
            raise ValueError("floors count more positives than rows")
        if self.kept and (len(self.kept) != len(self.rows) or
                          any(k > p for k, p in zip(self.kept, self.positives))):
            raise ValueError("floors' kept needs one count a bin, at most its positives")
        if not 0 < sum(self.positives) + self.other_positives < sum(self.rows) + \
                self.other_rows:
            raise ValueError("floors need positive and negative rows")

    @classmethod
    def count(cls, margins, labels, low: float, feature: str = "use_margin",
              other_rows: int = 0, other_positives: int = 0, step: float = STEP,
              top: float = TOP, kept=None) -> "Floors":
        """The floors of mined training rows with ``margins`` and 0/1 ``labels`` (one each),
        mined at the floor ``low``, on the grid ``low, low + step, ...`` up to ``top``;
        ``kept`` (optional, 0/1 one a row): whether the judge keeps the row.  A ``ValueError``
        for a margin under ``low`` or not finite."""
        m = np.asarray(margins, dtype=np.float64)
        y = np.asarray(labels, dtype=np.int64)
        if m.shape != y.shape or not np.isfinite(m).all() or (m < low).any():
            raise ValueError(f"every mined row needs a finite margin at or above {low}")
        bins = max(1, int(round((top - low) / step)) + 1)
        idx = np.minimum(((m - low) / step + 1e-9).astype(np.int64), bins - 1)

        def per_bin(w):
            return np.bincount(idx, weights=w, minlength=bins).astype(np.int64).tolist()
        k = [] if kept is None else per_bin(y * (np.asarray(kept, dtype=np.int64) > 0))
        return cls(feature, float(low), float(step), np.bincount(idx, minlength=bins).tolist(),
                   per_bin(y), int(other_rows), int(other_positives), k)

    def first_bin(self, floor: Optional[float]) -> int:
        """The first bin a job at ``floor`` keeps: the one starting at the first edge at or
        above it (0 at or under ``low``, or None)."""
        if floor is None or floor <= self.low:
            return 0
        return min(len(self.rows), int(math.ceil((floor - self.low) / self.step - 1e-9)))

    def share(self, floor: Optional[float]) -> float:
        """The share of positives among the rows a job at ``floor`` keeps: the mined ones
        from :meth:`first_bin` on and every other row."""
        i = self.first_bin(floor)
        n = sum(self.rows[i:]) + self.other_rows
        return (sum(self.positives[i:]) + self.other_positives) / n if n else 0.0

    def lost(self, floor: Optional[float]) -> float:
        """The share of the mined training positives the judge keeps (``kept``; every
        positive without it) that a job at ``floor`` drops: the recall it costs there."""
        pos = self.kept or self.positives
        return sum(pos[:self.first_bin(floor)]) / max(1, sum(pos))

    def grid(self) -> List[float]:
        """The floors :meth:`choose` chooses among: ``low`` and 10 steps of 0.005 above
        it."""
        return [round(self.low + CHOICES * i, 3) for i in range(11)]

    def choose(self, max_lost: float = MAX_LOST) -> float:
        """The highest floor of :meth:`grid` that drops at most ``max_lost`` of the
        translations the judge keeps (:meth:`lost`; ``low`` when none above it does)."""
        return max(f for f in self.grid() if f == self.grid()[0] or self.lost(f) <= max_lost)

    def as_dict(self) -> dict:
        """The fields; ``kept`` only when counted."""
        d = asdict(self)
        if not d["kept"]:
            del d["kept"]
        return d
