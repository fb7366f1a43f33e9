"""Precision, recall and F1 of mined pairs against a gold set (BUCC style).

* ``strict`` scores count a predicted pair as correct only when its ids are a gold pair, where
  lines with the same text under the mining job's deduplication rule
  (:func:`triemine.mining.dedup.normalise`) are one line (:func:`same_text_ids`): the job mines
  each distinct text once and writes it under its first line's id, so a gold pair naming a later
  copy is found when its text pair is kept.
* ``lenient`` scores (clearly labelled wherever printed) also accept a pair whose source *text*
  and target *text* equal those of a gold pair: BUCC repeats some sentences under several ids
  while the gold names one pairing. Matching is one-to-one per text pair, so a lenient count never
  exceeds the number of predictions nor the number of gold pairs.

Scores are :class:`~triemine.filtering.rules.PRF` counts; the selection rules and the F1-optimal
threshold search live in :mod:`triemine.filtering.rules` (evaluation uses filtering, never the
other way round).
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, Iterable, Optional, Sequence, Set, Tuple

import numpy as np

from triemine.filtering.rules import PRF
from triemine.mining.dedup import digests, group_lines

Pair = Tuple[str, str]


def same_text_ids(ids: Sequence[str], texts: Sequence[str], case: bool = False,
                  punct: bool = False) -> Dict[str, str]:
    """``{id: first id}`` for every line of ``ids`` whose text (under the deduplication rule
    with ``case`` and ``punct``) an earlier line has: the id of that text's first line in
    corpus order.  Lines not in the map are their own first line; empty texts are never
    mapped."""
    groups = group_lines(*digests(texts, case, punct))
    out: Dict[str, str] = {}
    for r in np.flatnonzero(groups.counts > 1):
        lines = groups.lines[groups.offsets[r]:groups.offsets[r + 1]]
        first = ids[int(lines[0])]
        out.update((ids[int(i)], first) for i in lines[1:])
    return out


def score_pairs(predicted: Iterable[Pair], gold: Iterable[Pair]) -> PRF:
    """Strict scores: a prediction is correct when its (source id, target id) is a gold pair."""
    pred = set(predicted)
    gold_set = set(gold)
    return PRF(len(pred & gold_set), len(pred), len(gold_set))


def score_pairs_lenient(predicted: Iterable[Pair], gold: Iterable[Pair],
                        src_text: Callable[[str], str], tgt_text: Callable[[str], str]) -> PRF:
    """Lenient scores: a prediction is also correct when its texts equal a gold pair's texts.

    Each gold pair can validate at most one prediction (one-to-one per text pair).
    """
    pred = set(predicted)
    gold_set = set(gold)
    pred_keys = Counter((src_text(s), tgt_text(t)) for s, t in pred)
    gold_keys = Counter((src_text(s), tgt_text(t)) for s, t in gold_set)
    correct = sum(min(n, gold_keys[k]) for k, n in pred_keys.items() if k in gold_keys)
    return PRF(correct, len(pred), len(gold_set))


def gold_mask(src_ids: Sequence[str], tgt_ids: Sequence[str], gold: Set[Pair]) -> np.ndarray:
    return np.fromiter(((s, t) in gold for s, t in zip(src_ids, tgt_ids)), dtype=bool,
                       count=len(src_ids))


def fold_of(ids: Sequence[str], all_ids: Sequence[str], folds: int,
            seed: int = 1234) -> Dict[str, int]:
    """Deterministic assignment of corpus ids to ``folds`` folds (seeded permutation)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(all_ids))
    assign = {all_ids[j]: int(k % folds) for k, j in enumerate(perm)}
    missing = [i for i in ids if i not in assign]
    if missing:
        raise KeyError(missing[0])
    return assign


def describe(scores: PRF, label: Optional[str] = None) -> str:
    head = f"{label}: " if label else ""
    return (f"{head}P={scores.precision:.4f} R={scores.recall:.4f} F1={scores.f1:.4f} "
            f"(correct={scores.correct} predicted={scores.predicted} gold={scores.gold})")
