"""BUCC evaluation of mined pairs: candidates, filters, thresholds (tuned or fixed), folds.

Rules (stated in the docs too):

1. **Selection rule** (:data:`triemine.filtering.registry.RULES`): ``best-per-source`` (default)
   keeps, for every source, the row with the best ``rank_by`` value (default ``ce_word``, lowest
   wins; ties: earliest row), as LASER's ``bucc.py`` scores one best candidate per source;
   ``one-to-one`` keeps rows greedily from best to worst, each source and target at most once.
2. **Filter** the candidates (:mod:`triemine.filtering.registry`): ``none`` keeps all; a score
   name keeps the rows passing its threshold (``ce`` = ``ce_word <= t``, ``pmi >= t``, ...);
   ``a+b`` keeps the union of two selections (e.g. ``ce+bicleaner``).
3. **Thresholds** are either tuned for best strict F1 on a gold set (LASER style) or read from a
   JSON file written earlier with ``save_thresholds``; the signature always says which.
4. **Two directions** (l1→l2 and l2→l1 TSVs): each direction gets its own candidates and
   thresholds; the selected pairs are merged with ids in ``(l1-id, l2-id)`` order.
5. **Folds**: with ``folds=k`` the l1 (source-language) ids of the corpus are split into k
   seeded folds; thresholds are tuned on k-1 folds (their candidates and gold pairs) and applied
   to the held-out fold. The pooled held-out scores estimate performance on unseen data.
6. **Choices** (:func:`evaluate_choosing`): when a score has a free setting chosen on the gold
   (a combination's weight from a grid), its held-out estimate makes that choice again inside
   each training fold, like the threshold.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from triemine.io import META_SUFFIX, Mined, read_mined, write_output
from triemine.errors import InputError
from triemine.evaluation.bucc import BuccSet, _lang_of, check_mined_ids, read_bucc
from triemine.evaluation import report
from triemine.evaluation.metrics import (Pair, describe, fold_of, gold_mask, same_text_ids,
                                          score_pairs, score_pairs_lenient)
from triemine.filtering import registry
from triemine.filtering.rules import PRF
from triemine.filtering.selection import (default_selection, load_thresholds, mined_prob,
                                          shipped_thresholds, write_thresholds)

SHIPPED_CUT = "shipped"  # --thresholds shipped: the cut the TSV's configuration ships


@dataclass
class Direction:
    """One mining TSV and whether its sources are the gold set's l2 side (reverse direction)."""

    mined: Mined
    reverse: bool = False

    @property
    def label(self) -> str:
        meta = self.mined.meta
        s = _lang_of(str(meta["source"])) if meta.get("source") else None
        t = _lang_of(str(meta["target"])) if meta.get("target") else None
        return f"{s}-{t}" if s and t else ("l2-l1" if self.reverse else "l1-l2")


@dataclass
class Outcome:
    """What one evaluation produced; ``signature()`` is the one-line summary."""

    filter: str
    rank_by: str
    thresholds: Dict[str, Dict[str, float]]  # direction label -> {column: value}
    rule: str
    threshold_source: str  # "tuned-on:<gold>", "fixed:<file>", "shipped:<configuration>", "none"
    strict: PRF
    lenient: PRF
    directions: List[str]
    meta: Dict[str, object]
    folds: List[Tuple[int, Dict[str, Dict[str, float]], PRF, PRF]] = field(default_factory=list)
    heldout_strict: Optional[PRF] = None
    heldout_lenient: Optional[PRF] = None
    candidates: int = 0
    fold_train: List[PRF] = field(default_factory=list)  # per fold: tuned F1 on its training part
    chosen: Optional[str] = None  # evaluate_choosing: the variant chosen on the whole gold
    fold_chosen: List[str] = field(default_factory=list)  # ... and inside each training fold

    def threshold_text(self, thresholds: Optional[Dict[str, Dict[str, float]]] = None) -> str:
        thresholds = self.thresholds if thresholds is None else thresholds
        if self.filter == "none":
            return "none"
        return ",".join(
            (f"{d}:" if len(thresholds) > 1 else "") + registry.threshold_text(self.filter, th)
            for d, th in thresholds.items()
        )

    def signature(self, match: str = "strict", scores: Optional[PRF] = None) -> str:
        scores = scores or (self.strict if match == "strict" else self.lenient)
        m = self.meta
        src = "" if self.filter == "none" else f"({self.threshold_source})"
        return (f"model={m.get('model', 'unknown')}|dir={'+'.join(self.directions)}|"
                f"mode={m.get('mode', 'unknown')}|beam={m.get('beam', 'unknown')}|"
                f"rule={self.rule}|rank={self.rank_by}|filter={self.filter}|"
                f"threshold={self.threshold_text()}{src}|"
                f"match={match}|{scores.short()}")

    def lines(self, gold_path: str, thresholds_path: Optional[str] = None) -> List[str]:
        """What ``trie-mine-eval`` prints: where the thresholds came from, the candidates, strict
        and lenient scores, and each fold's held-out scores."""
        if self.filter == "none":
            out = ["thresholds: none (filter=none keeps every candidate)"]
        elif self.threshold_source.startswith("fixed:"):
            out = [f"thresholds: fixed, read from {thresholds_path}: {self.threshold_text()}"]
        elif self.threshold_source.startswith("shipped:"):
            out = [f"thresholds: the shipped cut of the TSV's "
                   f"{self.threshold_source[len('shipped:'):]} (chosen without this gold unless "
                   f"it is the gold that cut was tuned on): {self.threshold_text()}"]
        else:
            out = [f"thresholds: tuned for best strict F1 on {gold_path} "
                   f"(optimistic: same gold as scored): {self.threshold_text()}"]
        out += [f"candidates ({self.rule}, ranked by {self.rank_by}): {self.candidates}",
                describe(self.strict, "strict  (ids must equal a gold pair; identical lines are "
                                      "one)"),
                describe(self.lenient, "lenient (also accepts a pair textually identical to a "
                                       "gold pair)")]
        if self.folds:
            k = len(self.folds)
            out += [describe(s, f"fold {f} held-out strict [{self.threshold_text(th)}]")
                    for f, th, s, _ in self.folds]
            out += [describe(self.heldout_strict, f"{k}-fold pooled held-out strict"),
                    describe(self.heldout_lenient, f"{k}-fold pooled held-out lenient")]
        return out

    def as_dict(self) -> Dict[str, object]:
        out: Dict[str, object] = {
            "filter": self.filter, "rule": self.rule, "rank_by": self.rank_by,
            "thresholds": self.thresholds,
            "threshold_source": self.threshold_source, "directions": self.directions,
            "strict": self.strict.as_dict(), "lenient": self.lenient.as_dict(),
            "candidates": self.candidates,
            "model": self.meta.get("model"), "mode": self.meta.get("mode"),
                                  "beam": self.meta.get("beam"),
        }
        if self.folds:
            out["folds"] = [{"fold": f, "thresholds": th, "strict": s.as_dict(),
                             "lenient": l.as_dict()}
                            for f, th, s, l in self.folds]
            out["heldout_strict"] = self.heldout_strict.as_dict() if self.heldout_strict else None
            out["heldout_lenient"] = (
                self.heldout_lenient.as_dict() if self.heldout_lenient else None
            )
        return out


def candidates(mined: Mined, rank_by: str = "ce_word", rule: str = "best-per-source") -> Mined:
    """The rows selection rule ``rule`` keeps, ranked by ``rank_by`` (module docstring, rule 1)."""
    return mined.take(registry.apply_rule(mined, rule, rank_by))


def _oriented(cands: Mined, reverse: bool) -> Tuple[List[str], List[str]]:
    """(l1 ids, l2 ids) of the candidates."""
    return (cands.tgt_ids, cands.src_ids) if reverse else (cands.src_ids, cands.tgt_ids)


def evaluate(directions: Sequence[Direction], bucc: BuccSet, filt: str = "none",
             rank_by: str = "ce_word", thresholds: Optional[Dict[str, Dict[str, float]]] = None,
             thresholds_source: Optional[str] = None, folds: int = 0, seed: int = 1234,
             rule: str = "best-per-source") -> Outcome:
    """Evaluate one or two directions against ``bucc`` (see module docstring).

    ``thresholds=None`` tunes on ``bucc.gold``; otherwise the given per-direction thresholds are
    applied unchanged (``thresholds_source`` names where they came from).
    """
    scores = registry.filter_scores(filt)
    registry.get_score(rank_by)
    if rule not in registry.RULES:
        raise InputError(
            f"unknown selection rule {rule!r} (choose from {', '.join(registry.RULES)})"
        )
    if not 1 <= len(directions) <= 2:
        raise InputError("give one or two mining TSVs (one per translation direction)")
    if folds == 1 or folds < 0:
        raise InputError("folds must be 0 (no cross-validation) or at least 2")
    labels: List[str] = []
    cands: List[Mined] = []
    for d in directions:
        for sc in scores:
            d.mined.col(sc.name)  # clear error when the column is missing
        src, tgt = (bucc.tgt, bucc.src) if d.reverse else (bucc.src, bucc.tgt)
        check_mined_ids(d.mined, src, tgt)
        lab = d.label
        if lab in ("l1-l2", "l2-l1"):  # no sidecar: name the direction from the BUCC set
            lab = f"{bucc.l2}-{bucc.l1}" if d.reverse else f"{bucc.l1}-{bucc.l2}"
        labels.append(lab)
        cands.append(candidates(d.mined, rank_by, rule))
    if len(set(labels)) != len(labels):
        labels = [f"{l}#{i + 1}" for i, l in enumerate(labels)]
    meta = _merged_meta([d.mined.meta for d in directions])
    same = _SameText(bucc, [d.mined.meta for d in directions])
    gold, oriented = same.gold, same.oriented

    def gold_flags(c: Mined, reverse: bool, gold_set: Set[Pair]) -> np.ndarray:
        l1, l2 = oriented(c, reverse)
        return gold_mask(l1, l2, gold_set)

    def selected_pairs(ths: Dict[str, Dict[str, float]], row_filter=None) -> Set[Pair]:
        out: Set[Pair] = set()
        for lab, c, d in zip(labels, cands, directions):
            keep = registry.select(c, filt, ths.get(lab, {}))
            if row_filter is not None:
                keep &= row_filter(c, d.reverse)
            l1, l2 = oriented(c, d.reverse)
            out.update((l1[i], l2[i]) for i in np.flatnonzero(keep))
        return out

    src_text, tgt_text = bucc.src.text_of, bucc.tgt.text_of
    if thresholds is None:
        ths = {lab: registry.tune(c, filt, gold_flags(c, d.reverse, gold), len(gold))
               for lab, c, d in zip(labels, cands, directions)}
        source = f"tuned-on:{os.path.basename(bucc.gold_path)}"
    else:
        ths = _match_thresholds(thresholds, labels, filt)
        source = thresholds_source or "fixed"
    if filt == "none":
        source = "none"
    pairs = selected_pairs(ths)
    out = Outcome(filt, rank_by, ths, rule, source, score_pairs(pairs, gold),
                  score_pairs_lenient(pairs, gold, src_text, tgt_text), labels, meta,
                  candidates=sum(len(c) for c in cands))

    if folds >= 2:
        assign = fold_of([], bucc.src.ids, folds, seed)
        fold_l1 = lambda c, reverse: np.fromiter((assign.get(i,
                                                             -1) for i in oriented(c, reverse)[0]),  # noqa: E731
                                                 dtype=np.int64, count=len(c))
        cand_folds = [fold_l1(c, d.reverse) for c, d in zip(cands, directions)]
        held_s, held_l = PRF(0, 0, 0), PRF(0, 0, 0)
        for f in range(folds):
            gold_in = {p for p in gold if assign[p[0]] == f}
            gold_out = gold - gold_in
            if thresholds is None:
                fths = {}
                for lab, c, d, cf in zip(labels, cands, directions, cand_folds):
                    sub = c.take(np.flatnonzero(cf != f))
                    fths[lab] = registry.tune(sub, filt, gold_flags(sub, d.reverse, gold_out),
                                              len(gold_out))
            else:
                fths = ths
            by_fold = {id(c): cf == f for c, cf in zip(cands, cand_folds)}
            fpairs = selected_pairs(fths, row_filter=lambda c, _r: by_fold[id(c)])
            out.fold_train.append(score_pairs(
                selected_pairs(fths, row_filter=lambda c, _r: ~by_fold[id(c)]), gold_out))
            s = score_pairs(fpairs, gold_in)
            l = score_pairs_lenient(fpairs, gold_in, src_text, tgt_text)
            out.folds.append((f, fths, s, l))
            held_s, held_l = held_s + s, held_l + l
        out.heldout_strict, out.heldout_lenient = held_s, held_l
    return out


def evaluate_choosing(variants: Mapping[str, Sequence[Direction]], bucc: BuccSet, filt: str,
                      rank_by: str, folds: int = 2, seed: int = 1234,
                      rule: str = "best-per-source") -> Outcome:
    """Choose one of several variants of a score (e.g. a combination's weight from a grid) by
    tuned F1, with a held-out estimate that makes the choice inside each training fold.

    ``variants``: label -> directions, in order of preference (ties go to the first).  Returns
    the chosen variant's :class:`Outcome` (``chosen`` names it; its thresholds and tuned scores
    are the whole gold's), whose held-out scores and ``folds`` are, fold by fold, those of the
    variant with the best tuned F1 on that fold's training part (``fold_chosen``): the choice
    never sees the fold it is scored on.
    """
    if not variants:
        raise InputError("no variants to choose from")
    if folds < 2:
        raise InputError("choosing a variant needs folds >= 2 for its held-out estimate")
    outs = {k: evaluate(dirs, bucc, filt, rank_by, folds=folds, seed=seed, rule=rule)
            for k, dirs in variants.items()}
    chosen = max(outs, key=lambda k: outs[k].strict.f1)  # max keeps the first of equals
    picks = [max(outs, key=lambda k: outs[k].fold_train[f].f1) for f in range(folds)]
    folds_out = [outs[k].folds[f] for f, k in enumerate(picks)]
    train = [outs[k].fold_train[f] for f, k in enumerate(picks)]
    out = outs[chosen]
    out.chosen, out.fold_chosen, out.folds, out.fold_train = chosen, picks, folds_out, train
    out.heldout_strict, out.heldout_lenient = PRF(0, 0, 0), PRF(0, 0, 0)
    for fold in folds_out:
        out.heldout_strict += fold[2]
        out.heldout_lenient += fold[3]
    return out


def evaluate_combination(mined: Mined, comb, bucc: BuccSet, folds: int = 2, seed: int = 1234,
                         rule: str = "one-to-one") -> Outcome:
    """:func:`evaluate_choosing` over the variants of a combination
    (:meth:`triemine.judging.combination.Combination.variants`, one per weight it was chosen from),
    each recomputing the ``combined`` column from the rows' own columns; selected by ``rule`` and
    thresholded on ``combined``, as the mining job's TSVs are."""
    variants = {label: [Direction(mined.with_column("combined", c(mined.numeric)))]
                for label, c in comb.variants().items()}
    return evaluate_choosing(variants, bucc, "combined", "combined", folds=folds, seed=seed,
                             rule=rule)


class _SameText:
    """A BUCC set's ids with textually identical lines as one line (strict scores, metrics
    module docstring), under the deduplication rule the TSVs were mined with (their
    ``.meta.json``'s ``dedup``; else the job's default rule).  ``gold``: the gold pairs so
    mapped; :meth:`oriented`: a TSV's (l1 ids, l2 ids) so mapped."""

    def __init__(self, bucc: BuccSet, metas: Sequence[Dict[str, object]]):
        rule = {"case": False, "punct": False}
        for m in metas:
            d = m.get("dedup")
            if isinstance(d, dict) and isinstance(d.get("rule"), dict):
                rule = {k: bool(d["rule"].get(k)) for k in rule}
                break
        self.l1 = same_text_ids(bucc.src.ids, bucc.src.texts, **rule)
        self.l2 = same_text_ids(bucc.tgt.ids, bucc.tgt.texts, **rule)
        self.gold: Set[Pair] = {(self.l1.get(a, a), self.l2.get(b, b)) for a, b in bucc.gold}

    def oriented(self, c: Mined, reverse: bool) -> Tuple[List[str], List[str]]:
        l1, l2 = _oriented(c, reverse)
        return [self.l1.get(i, i) for i in l1], [self.l2.get(i, i) for i in l2]


def _merged_meta(metas: Sequence[Dict[str, object]]) -> Dict[str, object]:
    out: Dict[str, object] = {}
    for key in ("model", "mode", "beam", "nbest"):
        vals = [str(m[key]) for m in metas if m.get(key) is not None]
        uniq = list(dict.fromkeys(vals))
        if uniq:
            out[key] = "+".join(uniq)
    if "model" in out:
        out["model"] = "+".join(
            os.path.basename(str(m).rstrip("/")) for m in str(out["model"]).split("+")
        )
    combs = [m.get("combination") for m in metas]
    if combs and combs[0] is not None and all(c == combs[0] for c in combs):
        out["combination"] = combs[0]  # a saved threshold records what it belongs to
    return out


def _match_thresholds(thresholds: Dict[str, Dict[str, float]], labels: Sequence[str],
                      filt: str) -> Dict[str, Dict[str, float]]:
    if filt == "none":
        return {lab: {} for lab in labels}
    out = {}
    for i, lab in enumerate(labels):
        th = thresholds.get(lab)
        if th is None and len(thresholds) == len(labels):
            th = list(thresholds.values())[i]  # same order as when they were saved
        if th is None:
            raise InputError(
                f"no thresholds for direction {lab} (have {', '.join(thresholds) or 'none'})"
            )
        out[lab] = registry.check_thresholds(filt, th)
    return out


def save_thresholds(outcome: Outcome, path: os.PathLike | str) -> None:
    """Store the chosen thresholds (and the scores they gave) as a small JSON file."""
    data = {"filter": outcome.filter, "rule": outcome.rule,
            "rank_by": outcome.rank_by, "thresholds": outcome.thresholds,
            "source": outcome.threshold_source,
            "scores_where_chosen": outcome.strict.as_dict(), "signature": outcome.signature()}
    comb = outcome.meta.get("combination")
    if comb is not None:  # what a shipped default threshold belongs to (filtering.selection)
        data["combination"] = comb
    write_thresholds(data, path)


def evaluate_files(mined: Sequence[str], gold: str, src_corpus: Optional[str] = None,
                   tgt_corpus: Optional[str] = None, *, filt: Optional[str] = None,
                   rank_by: Optional[str] = None, rule: Optional[str] = None,
                   thresholds: Optional[str] = None, folds: int = 0, seed: int = 1234
                   ) -> Tuple[Outcome, List[Direction], BuccSet]:
    """``trie-mine-eval``: read one or two mining TSVs (l1->l2, then l2->l1) and a BUCC gold set,
    select as the TSVs' job does unless told otherwise (:func:`default_selection`), and tune
    the thresholds on the gold or apply the fixed ones of a ``thresholds`` file.  A first TSV
    without its ``.meta.json`` sidecar is refused (:class:`InputError`) unless ``rule``,
    ``rank_by``, ``filt`` or ``thresholds`` says how to select."""
    bucc = read_bucc(gold, src_corpus, tgt_corpus)
    dirs = [Direction(read_mined(p), reverse=(i == 1)) for i, p in enumerate(mined)]
    shipped = thresholds == SHIPPED_CUT
    saved = shipped_thresholds(dirs[0].mined.meta, mined[0]) if shipped else \
        load_thresholds(thresholds) if thresholds else None
    told = saved is not None or any(x is not None for x in (rule, rank_by, filt))
    if not told and not os.path.isfile(os.fspath(mined[0]) + META_SUFFIX):
        raise InputError(f"has no {META_SUFFIX} sidecar, which names the job that wrote it and "
                         "so how its pairs are selected: give --rule, --rank-by or --filter "
                         "(e.g. --rule one-to-one --rank-by combined), or --thresholds",
                         mined[0])
    d_rule, d_rank, d_filt = default_selection(dirs[0].mined, saved)
    rule, rank_by, filt = rule or d_rule, rank_by or d_rank, filt or d_filt
    fixed = source = None
    if saved is not None:
        if saved.filter != filt:
            raise InputError(f"thresholds are for filter {saved.filter}, not {filt}", thresholds)
        fixed, source = saved.thresholds, (f"shipped:{saved.path}" if shipped
                                           else f"fixed:{thresholds}")
    out = evaluate(dirs, bucc, filt, rank_by, fixed, source, folds, seed, rule=rule)
    return out, dirs, bucc


def report_data(out: Outcome, direction: Direction, bucc: BuccSet,
                title: str) -> "report.ReportData":
    """The plain data of :mod:`triemine.evaluation.report` (plots, HTML page) for one direction
    of an evaluation: its candidates with their gold flags, the threshold and the summary."""
    score = (registry.filter_scores(out.filter) or [registry.get_score(out.rank_by)])[0]
    c = candidates(direction.mined, out.rank_by, out.rule)
    same = _SameText(bucc, [direction.mined.meta])
    gold = gold_mask(*same.oriented(c, direction.reverse), same.gold)
    summary = [describe(out.strict, "strict"), describe(out.lenient, "lenient")]
    if out.folds:
        summary.append(describe(out.heldout_strict, f"{len(out.folds)}-fold held-out strict"))
    return report.ReportData(
        score=score.name, higher_is_better=score.higher_is_better,
        threshold=None if out.filter == "none" else
        out.thresholds[out.directions[0]].get(score.name),
        signature=out.signature("strict"), n_gold=len(same.gold), title=title,
        summary=summary,
        candidates=[report.Candidate(c.src_ids[i], c.tgt_ids[i], c.src[i], c.tgt[i],
                                     {k: float(v[i]) for k, v in c.numeric.items()},
                                     bool(gold[i])) for i in range(len(c))],
        prob=mined_prob(c), density=direction.mined.meta.get("density"))


def write_outcome(out: Outcome, dirs: Sequence[Direction], bucc: BuccSet, mined: Sequence[str],
                  *, thresholds: Optional[str] = None, save: Optional[str] = None,
                  json_path: Optional[str] = None, plot: Optional[str] = None,
                  html: Optional[str] = None) -> None:
    """``trie-mine-eval``'s outputs of :func:`evaluate_files`' ``(out, dirs, bucc)`` for the
    TSVs ``mined`` (``thresholds``: the fixed thresholds file used, if any): the result lines
    and the signatures on stdout; with ``save`` the thresholds file
    (:func:`save_thresholds`), with ``json_path`` every number as JSON, with ``plot`` the PNG
    plots in that folder, with ``html`` the report page; each file written is said on stdout."""
    for line in out.lines(bucc.gold_path, thresholds):
        print(line)
    if save:
        save_thresholds(out, save)
        print(f"thresholds saved to {save}")
    if json_path:
        write_output(json_path, (json.dumps(out.as_dict(), indent=1) + "\n").encode(),
                     "JSON report", hint="")
    print(out.signature("strict"))
    print(out.signature("lenient"))
    if out.folds:
        print(out.signature("heldout-strict", out.heldout_strict))
    if plot or html:
        data = report_data(out, dirs[0], bucc, title=f"trie-mine-eval {' '.join(mined)}")
        if plot:
            for path in report.write_plots(data, plot):
                print(f"plot written: {path}")
        if html:
            print(f"report written: {report.write_report(data, html)}")
