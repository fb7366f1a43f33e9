"""The reading sheet of a run (``trie-mine-review``): which pairs a person reads, and its identity.

A **run** (:func:`read_run`) is a mining TSV of ``trie-mine`` with a ``prob`` column (its kept
pairs: the ones the run's own selection keeps, :func:`triemine.filtering.selection.choose`) or
a scores TSV of ``trie-mine-score`` (columns ``line id src tgt status ... prob kept``; kept
where ``kept`` is 1).  A pair's **key** is ``(src_id, tgt_id)`` in a mining TSV and ``(line,
id)`` (the input line and the pair's id) in a scores TSV.

A **sheet** (:func:`draw`) is what the reader is shown:

* ``n`` kept pairs drawn **stratified by prob**: the kept pairs, sorted by ``prob`` (ties by
  row), are cut into up to :data:`STRATA` strata of equal size (fewer when fewer kept pairs or
  a smaller ``n`` ask for it: at most ``n // MIN_PER_STRATUM``), and each stratum gives its
  proportional share of the ``n`` (largest remainders first, at least :data:`MIN_PER_STRATUM`),
  drawn uniformly without replacement; every kept pair when ``n`` is at least their number;
* ``below`` pairs **just below the cut**: the highest-``prob`` pairs not kept (ties by row) that
  lost to no kept pair, i.e. in a mining TSV whose source and target are in no kept pair (a row
  that lost the one-to-one competition to a kept rival is not below the cut);
* in an order shuffled by the same ``seed``; each pair records its stratum (1 = the lowest
  ``prob``; ``"below"``) and the sheet every stratum's size among the kept pairs, so that
  answers are weighted back to the whole kept set (:mod:`triemine.evaluation.review_answers`).

The sheet's **fingerprint** (:func:`fingerprint`) is the BLAKE2b digest (8 bytes, hex) of the
run's identity (its sidecar, less the ``bitext`` key a later bitext adds; its kind), the drawing
parameters, the strata and every drawn pair's key, texts, ``prob`` and stratum: the page keeps
its answers under it and the exported answers carry it, so answers are never counted against
another run, or against this run changed since.  A pair that occurs on several rows (a key
twice in a mining TSV, the same two texts on several lines of a scores TSV) is one pair of
the kept set, drawn at most once (its first row).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from triemine.judging.quality import best_per_source
from triemine.errors import InputError
from triemine.filtering.selection import choose
from triemine.io import open_binary, plain_copy, read_mined, read_text

N = 100               # pairs drawn from the kept ones by default
BELOW = 10            # pairs just below the cut by default
SEED = 0              # the default seed of the draw and the shuffle
STRATA = 5            # the most strata of the kept pairs
MIN_PER_STRATUM = 2   # pairs drawn from every stratum at least (when it holds them)
SHEET_VERSION = 1     # of the fingerprint's contents
BELOW_STRATUM = "below"
SCORES_COLUMNS = ("line", "id", "src", "tgt", "status", "prob", "kept")
NO_PROB = ("has no prob column: trie-mine-review reads every pair's calibrated probability (a "
           "mining TSV of a configuration that writes prob, or a scores TSV of trie-mine-score)")


@dataclass
class Run:
    """The rows of a run: keys, texts, ``prob`` (NaN for a pair a scores TSV did not score),
    the kept rows (indices, row order) and, for a mining TSV, every source's best ``prob``."""

    path: str
    kind: str                      # "mining" or "scores"
    src_ids: List[str]
    tgt_ids: List[str]
    src: List[str]
    tgt: List[str]
    prob: np.ndarray
    kept: np.ndarray
    meta: Dict[str, object] = field(default_factory=dict)

    def key(self, row: int) -> Tuple[str, str]:
        return self.src_ids[row], self.tgt_ids[row]

    def pair(self, row: int) -> Tuple[str, str]:
        """What makes a row one pair of the bitext: its key in a mining TSV, its two texts in a
        scores TSV (whose bitext holds each kept pair of texts once)."""
        return self.key(row) if self.kind == "mining" else (self.src[row], self.tgt[row])

    def best_prob_per_source(self) -> Optional[np.ndarray]:
        """The highest ``prob`` of every source's rows (a mining TSV's sources,
        :func:`triemine.judging.quality.best_per_source`), else None."""
        if self.kind != "mining":
            return None
        return best_per_source(self.src_ids, self.prob)


def _header_of(path: str) -> List[str]:
    """The column names of the file's first line."""
    with open_binary(plain_copy(path), "TSV") as f:
        first = f.readline()
    try:
        return first.decode("utf-8").lstrip("\ufeff").rstrip("\r\n").split("\t")
    except UnicodeDecodeError:
        raise InputError("invalid UTF-8 in the header line", path, 1) from None


def read_run(path) -> Run:
    """The run in ``path``: a mining TSV (a header naming ``src_id``) or a scores TSV (a header
    naming ``line`` and ``status``), plain or compressed. :class:`InputError` (one line) for
    a file that is neither, one without ``prob``, or whatever the readers refuse (bad rows, a
    mining TSV whose selection has no threshold)."""
    path = os.fspath(path)
    columns = _header_of(path)
    if "src_id" in columns:
        if "prob" not in columns:
            raise InputError(NO_PROB, path, 1)
        mined = read_mined(path)
        kept = np.asarray(choose(mined).keep(mined), dtype=np.int64)
        return Run(path, "mining", mined.src_ids, mined.tgt_ids, mined.src, mined.tgt,
                   mined.col("prob"), kept, dict(mined.meta))
    if "line" in columns and "status" in columns:
        return _read_scores(path, columns)
    raise InputError("neither a mining TSV (header src_id tgt_id ... src tgt) nor a scores TSV "
                     "of trie-mine-score (header line id src tgt status ... prob kept)", path, 1)


def _read_scores(path: str, columns: List[str]) -> Run:
    """A scores TSV of ``trie-mine-score``: ``prob`` may be ``nan`` (a pair not scored, never
    kept); ``kept`` is 0 or 1."""
    if "prob" not in columns:
        raise InputError(NO_PROB, path, 1)
    missing = [c for c in SCORES_COLUMNS if c not in columns]
    if missing:
        raise InputError(f"scores TSV header lacks column(s) {', '.join(missing)}", path, 1)
    pos = {c: columns.index(c) for c in SCORES_COLUMNS}
    lines = read_text(plain_copy(path), "scores TSV").split("\n")
    cols: Dict[str, list] = {c: [] for c in SCORES_COLUMNS}
    for no, line in enumerate(lines[1:], 2):
        line = line.rstrip("\r")
        if not line:
            if no < len(lines):
                raise InputError("empty line", path, no)
            continue
        cells = line.split("\t")
        if len(cells) != len(columns):
            raise InputError(f"expected {len(columns)} tab-separated columns, got {len(cells)}",
                             path, no)
        for c in SCORES_COLUMNS:
            cols[c].append(cells[pos[c]])
        for c in ("prob", "kept"):
            try:
                cols[c][-1] = float(cols[c][-1])
            except ValueError:
                raise InputError(f"column {c}: not a number: {cols[c][-1]!r}", path, no) from None
        p, k = cols["prob"][-1], cols["kept"][-1]
        if k not in (0.0, 1.0):
            raise InputError(f"column kept: expected 0 or 1, got {k}", path, no)
        if math.isnan(p) and k:
            raise InputError("a pair without prob (nan: not scored) is kept", path, no)
        if not math.isnan(p) and not 0 <= p <= 1:
            raise InputError(f"column prob: {p} is not a probability in [0, 1]", path, no)
    kept = np.flatnonzero(np.asarray(cols["kept"], dtype=np.float64) == 1.0)
    return Run(path, "scores", cols["line"], cols["id"], cols["src"], cols["tgt"],
               np.asarray(cols["prob"], dtype=np.float64), kept.astype(np.int64), {})


@dataclass
class Sheet:
    """What the reader is shown: the drawn pairs in their shuffled order (each a dict of
    ``src_id tgt_id src tgt prob stratum``), the strata of the kept pairs (each ``{"stratum",
    "low", "high", "size", "drawn"}``: its prob range, its size in the kept set, the pairs drawn
    from it), the drawing parameters and the fingerprint."""

    run: str                # the run's file name
    kind: str
    n: int
    seed: int
    below: int
    kept: int               # kept pairs of the run (each pair once: Run.pair)
    expected_precision: Optional[float]
    strata: List[dict]
    pairs: List[dict]
    fingerprint: str = ""

    def params(self) -> Dict[str, int]:
        return {"n": self.n, "seed": self.seed, "below": self.below}

    def keys(self) -> Dict[Tuple[str, str], dict]:
        return {(p["src_id"], p["tgt_id"]): p for p in self.pairs}


def _first_of_pairs(run: Run, rows: Sequence[int]) -> np.ndarray:
    """``rows`` (in order) without a row of the same pair (:meth:`Run.pair`) as an earlier one."""
    seen, out = set(), []
    for r in rows:
        k = run.pair(int(r))
        if k not in seen:
            seen.add(k)
            out.append(int(r))
    return np.asarray(out, dtype=np.int64)


def kept_rows(run: Run) -> np.ndarray:
    """The kept rows a sheet draws from: every kept pair once (its first kept row), row order."""
    return _first_of_pairs(run, run.kept)


def allocate(sizes: Sequence[int], total: int, least: int = MIN_PER_STRATUM) -> List[int]:
    """``total`` (<= sum of ``sizes``) draws shared among strata of ``sizes``: proportional,
    the largest remainders first, at least ``min(least, size)`` each (taken from the strata
    furthest above their share when the minimums overshoot), never more than a stratum holds."""
    sizes = [int(s) for s in sizes]
    whole = sum(sizes)
    if not whole or total <= 0:
        return [0] * len(sizes)
    quota = [total * s / whole for s in sizes]
    take = [max(min(least, s), min(s, math.floor(q))) for s, q in zip(sizes, quota)]
    while sum(take) < total:
        h = max((i for i in range(len(sizes)) if take[i] < sizes[i]),
                key=lambda i: (quota[i] - take[i], -i))
        take[h] += 1
    while sum(take) > total:
        h = max((i for i in range(len(sizes)) if take[i] > min(least, sizes[i])),
                key=lambda i: (take[i] - quota[i], -i))
        take[h] -= 1
    return take


def below_cut(run: Run, kept: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` highest-``prob`` rows not kept (ties by row) that lost to no kept pair:
    a finite ``prob``, a pair no kept row is (:meth:`Run.pair`) and, in a mining TSV, a source
    and a target no kept row has; each pair once."""
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    kept_pairs = {run.pair(int(r)) for r in kept}
    used_src = {run.src_ids[int(r)] for r in kept} if run.kind == "mining" else set()
    used_tgt = {run.tgt_ids[int(r)] for r in kept} if run.kind == "mining" else set()
    is_kept = np.zeros(len(run.prob), dtype=bool)
    is_kept[kept] = True
    rows = np.flatnonzero(~is_kept & np.isfinite(run.prob))
    rows = rows[np.lexsort((rows, -run.prob[rows]))]
    free = [r for r in rows.tolist() if run.pair(r) not in kept_pairs
            and run.src_ids[r] not in used_src and run.tgt_ids[r] not in used_tgt]
    return _first_of_pairs(run, free)[:count]


def draw(run: Run, n: int = N, seed: int = SEED, below: int = BELOW) -> Sheet:
    """The sheet of ``run`` (module docstring): ``n`` (>= 1) kept pairs stratified by ``prob``
    and ``below`` (>= 0) pairs just below the cut, shuffled, all by ``seed``; the same
    arguments give the same sheet. ``ValueError`` for ``n < 1`` or ``below < 0``."""
    if n < 1 or below < 0:
        raise ValueError(f"expected n >= 1 and below >= 0, got n={n}, below={below}")
    rng = np.random.default_rng(seed)
    kept = kept_rows(run)
    prob = run.prob
    order = kept[np.lexsort((kept, prob[kept]))]
    k = min(STRATA, len(order), max(1, n // MIN_PER_STRATUM))
    groups = np.array_split(order, k) if len(order) else []
    take = allocate([len(g) for g in groups], min(n, len(order)))
    strata, drawn = [], []
    for h, (group, t) in enumerate(zip(groups, take), 1):
        strata.append({"stratum": h, "low": float(prob[group[0]]),
                       "high": float(prob[group[-1]]), "size": int(len(group)), "drawn": int(t)})
        drawn += [(int(r), h) for r in np.sort(rng.choice(group, size=t, replace=False))]
    drawn += [(int(r), BELOW_STRATUM) for r in below_cut(run, kept, below)]
    pairs = [{"src_id": run.src_ids[r], "tgt_id": run.tgt_ids[r], "src": run.src[r],
              "tgt": run.tgt[r], "prob": float(prob[r]), "stratum": h}
             for r, h in (drawn[i] for i in rng.permutation(len(drawn)))]
    sheet = Sheet(os.path.basename(run.path), run.kind, int(n), int(seed), int(below),
                  len(kept), float(prob[kept].mean()) if len(kept) else None, strata, pairs)
    sheet.fingerprint = fingerprint(run, sheet)
    return sheet


def fingerprint(run: Run, sheet: Sheet) -> str:
    """The sheet's fingerprint (module docstring): 16 hex digits."""
    identity = {k: v for k, v in run.meta.items() if k != "bitext"}
    body = {"version": SHEET_VERSION, "kind": run.kind, "meta": identity,
            "params": sheet.params(), "kept": sheet.kept, "strata": sheet.strata,
            "pairs": [[p["src_id"], p["tgt_id"], p["src"], p["tgt"], p["prob"], p["stratum"]]
                      for p in sheet.pairs]}
    text = json.dumps(body, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()
