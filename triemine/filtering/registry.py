"""Scores, filters and selection rules, each named once.

* A **score** is a numeric column of the mining TSV (:mod:`triemine.io.tsv`) with a direction:
  ``ce_word`` (lower is better), ``pmi``, ``bicleaner``, ``use_margin``, ``combined`` (higher is
  better), ... Modules that add a column register it with :func:`register_score`.
* A **filter** keeps a candidate when at least one of its scores passes its threshold.  Its name
  is ``none``, one score name, or two joined by ``+`` (a union, e.g. ``ce+bicleaner``); ``ce`` is
  the paper's name for ``ce_word``.
* A **selection rule** chooses the candidates a filter sees: ``best-per-source`` (LASER's
  ``bucc.py`` and the paper: each source keeps its best row by the ranking score) or
  ``one-to-one`` (greedy: rows from best to worst, each source and each target used once).

``trie-mine-eval``, ``trie-mine-filter`` and the mining pipeline all use these functions, so a
rule changes in one place.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Tuple

import numpy as np

from triemine.errors import InputError
from triemine.filtering.rules import best_per_source, one_to_one, optimize_threshold, optimize_union


@dataclass(frozen=True)
class Score:
    name: str
    higher_is_better: bool
    description: str

    def passes(self, values: np.ndarray, threshold: float) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        return values >= threshold if self.higher_is_better else values <= threshold

    def text(self, threshold: float) -> str:
        return f"{self.name}{'>=' if self.higher_is_better else '<='}{threshold:.4f}"


SCORES: Dict[str, Score] = {}
ALIASES = {"ce": "ce_word"}


def register_score(name: str, higher_is_better: bool, description: str) -> Score:
    """Name a numeric column once (registering the same definition again is a no-op)."""
    score = Score(name, bool(higher_is_better), description)
    old = SCORES.get(name)
    if old is not None and old.higher_is_better != score.higher_is_better:
        raise ValueError(f"score {name!r} is already registered with the other direction")
    SCORES[name] = score
    return score


register_score("score", True, "log P(target | source), natural log, EOS included")
register_score("ce_word", False,
               "-score / (words of the target + 1): the paper's per-word cross-entropy")
register_score("ce_token", False, "-score / target tokens (EOS included)")
register_score("prior", True, "log P(target | empty source): the decoder's language model alone")
register_score("pmi", True,
               "(score - prior) / target tokens: per-token pointwise mutual information")
register_score("ce_token_rev", False,
               "-log P(source | target) / source tokens, with a reverse model")
register_score("dual_ce", False,
               "dual conditional cross-entropy |H(y|x) - H(x|y)| + (H(y|x) + H(x|y)) / 2")
register_score("bicleaner", True,
               "Bicleaner 0.17 classifier probability (trie-mine-filter --bicleaner)")
register_score("chrf", True, "chrF of the target against the MT model's translation (sacrebleu)")
register_score(
    "numerals",
    True,
    "agreement of the numbers written in digits (1 = no disagreement; triemine.mining.features)",
)
register_score("combined", True,
               "the pipeline's fixed combination of features (triemine.judging.combination)")
register_score("uncovered", False, "the share of the source's pieces that receive under half a "
               "unit of the decoder's cross-attention from the target")
register_score("eos_lp", True, "the log-probability of the target's end of sentence given "
               "the source and the target (low: the target stops before the translation does)")
register_score("tok_min_lp", True, "the least log-probability of a target token given the "
               "source and the tokens before it (EOS left out)")
register_score("judge", True, "the judge's log-odds that the pair is a translation "
               "(triemine.judging.model)")
register_score("prob", True, "the calibrated probability that the pair is a translation: the "
               "judge's, shifted to --density (--config judge), or a curve of combined")
for _space, _what in (("use", "multilingual USE v3"), ("e5", "multilingual-e5-small"),
                      ("ret", "TF-IDF of the MT model's own translation")):
    register_score(f"{_space}_cos", True, f"cosine of the pair in the {_what} space")
    register_score(f"{_space}_margin", True, f"LASER's ratio margin (k=4) in the {_what} space")


def get_score(name: str) -> Score:
    name = ALIASES.get(name, name)
    if name not in SCORES:
        raise InputError(f"unknown score {name!r} (known: {', '.join(sorted(SCORES))}, or the "
                         f"aliases {', '.join(sorted(ALIASES))})")
    return SCORES[name]


def filter_scores(spec: str) -> Tuple[Score, ...]:
    """The scores of filter ``spec`` (``none``: no score; at most two, joined by ``+``)."""
    if spec == "none":
        return ()
    parts = spec.split("+")
    if not 1 <= len(parts) <= 2 or any(not p for p in parts):
        raise InputError(f"bad filter {spec!r}: 'none', a score name, or two joined by '+'")
    scores = tuple(get_score(p) for p in parts)
    if len(scores) == 2 and scores[0].name == scores[1].name:
        raise InputError(f"bad filter {spec!r}: the same score twice")
    return scores


def check_thresholds(spec: str, thresholds: Mapping[str, object], where=None) -> Dict[str, float]:
    """The thresholds filter ``spec`` needs, as finite floats keyed by score name."""
    out = {}
    for sc in filter_scores(spec):
        v = thresholds.get(sc.name)
        if v is None:
            v = next(
                (thresholds[a] for a, n in ALIASES.items() if n == sc.name and a in thresholds),
                None,
            )
        if v is None:
            raise InputError(f"filter {spec} needs a threshold for {sc.name}", where)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise InputError(f"threshold for {sc.name} must be a finite number, got {v!r}", where)
        out[sc.name] = float(v)
    return out


def select(mined, spec: str, thresholds: Mapping[str, float]) -> np.ndarray:
    """Mask of the rows that filter ``spec`` keeps (union of its scores' selections)."""
    scores = filter_scores(spec)
    if not scores:
        return np.ones(len(mined), dtype=bool)
    keep = np.zeros(len(mined), dtype=bool)
    for sc in scores:
        keep |= sc.passes(mined.col(sc.name), thresholds[sc.name])
    return keep


def tune(mined, spec: str, correct: np.ndarray, n_gold: int) -> Dict[str, float]:
    """Best-F1 thresholds of filter ``spec`` on rows whose gold status is ``correct``."""
    scores = filter_scores(spec)
    if not scores:
        return {}
    if len(scores) == 1:
        sc = scores[0]
        t, _ = optimize_threshold(mined.col(sc.name), correct, n_gold, sc.higher_is_better)
        return {sc.name: t}
    a, b = scores  # optimize_union wants (lower-is-better, higher-is-better): orient by sign
    sa = 1.0 if not a.higher_is_better else -1.0
    sb = 1.0 if b.higher_is_better else -1.0
    ta, tb, _ = optimize_union(sa * mined.col(a.name), sb * mined.col(b.name), correct, n_gold)
    return {a.name: sa * ta, b.name: sb * tb}


def named_thresholds(pairs) -> Dict[str, float]:
    """``{score name: value}`` of ``(name or alias, value)`` pairs, leaving out ``None`` values."""
    return {get_score(name).name: float(v) for name, v in pairs if v is not None}


def threshold_text(spec: str, thresholds: Mapping[str, float]) -> str:
    return " or ".join(sc.text(thresholds[sc.name]) for sc in filter_scores(spec)) or "none"


# -- selection rules -----------------------------------------------------------------------------

RULES: Dict[str, Callable[..., np.ndarray]] = {
    "best-per-source": lambda mined, values, hib: best_per_source(mined.src_ids, values, hib),
    "one-to-one": lambda mined, values, hib: one_to_one(mined.src_ids, mined.tgt_ids, values, hib),
}


def apply_rule(mined, rule: str, rank_by: str) -> np.ndarray:
    """Row indices (in row order) that selection rule ``rule`` keeps, ranking by ``rank_by``."""
    if rule not in RULES:
        raise InputError(f"unknown selection rule {rule!r} (choose from {', '.join(RULES)})")
    sc = get_score(rank_by)
    return RULES[rule](mined, mined.col(sc.name), sc.higher_is_better)
