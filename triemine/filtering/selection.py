"""Which mined pairs to keep: the selection of a mining TSV, its thresholds, the shipped defaults.

A **selection** is a rule (``none``, ``best-per-source``, ``one-to-one``: which rows compete),
the score ranking them, a filter (:mod:`triemine.filtering.registry`) and its thresholds.  Where
the thresholds come from, in order of precedence:

1. given by the user (``--threshold NAME=VALUE``, ``--ce-max``, ...), over
2. a thresholds file (``--thresholds``, written by ``trie-mine-eval --save-thresholds``), else
3. the **shipped default** of the configuration that wrote the TSV: its judge's cut (``combined
   >= value`` of a fixed combination, tuned on the BUCC 2018 zh-en sample; ``prob >= 0.5`` of a
   learned judge) or the paper's record's threshold, as
   :func:`triemine.judging.shipped.tsv_cut` (the one function deciding a TSV's score column and
   default cut) finds it.  The ``combined`` score is a fixed combination of features
   (:mod:`triemine.judging.zsum`), so its threshold means the same on other data.  A shipped
   threshold belongs to the exact combination it was tuned for: a TSV written with another
   combination (a custom ``--combination`` file), or a configuration without a shipped cut,
   has no default and is refused rather than kept whole.

``SELECTION`` is each configuration's record's selection, as a table; the thresholds file
format is here too (:func:`load_thresholds`, :func:`write_thresholds`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from triemine.config.configurations import NAMES, configuration
from triemine.errors import InputError
from triemine.filtering import formats, registry
from triemine.io import META_SUFFIX, read_json, write_text
from triemine.judging.shipped import (configuration_cut, configuration_of, learned,
                                      shipped_calibration, tsv_cut, tsv_selection)

THRESHOLDS_VERSION = 1
# how each configuration's TSV is selected and thresholded: (rule, rank_by, filter), from the
# configurations' records
SELECTION = {name: configuration(name).selection.as_tuple() for name in NAMES}


@dataclass
class SavedThresholds:
    """A thresholds file: the filter, its per-direction thresholds, how candidates were chosen."""

    filter: str
    thresholds: Dict[str, Dict[str, float]]
    rule: str = "best-per-source"
    rank_by: str = "ce_word"
    combination: Optional[dict] = None  # the combination a shipped threshold was tuned for
    path: Optional[str] = None


def load_thresholds(path: os.PathLike | str) -> SavedThresholds:
    """Read a thresholds file; every value must be a finite number."""
    path = os.fspath(path)
    return thresholds_of(read_json(path, "thresholds file"), path)


def thresholds_of(data, path: str) -> SavedThresholds:
    """A thresholds file's contents checked (:func:`load_thresholds`); errors name ``path``."""
    if not isinstance(data, dict) or data.get("version") != THRESHOLDS_VERSION or \
            not isinstance(data.get("thresholds"), dict) or not isinstance(data.get("filter"), str):
        raise InputError(f"not a trie-mine thresholds file (version {THRESHOLDS_VERSION})", path)
    filt = data["filter"]
    try:
        registry.filter_scores(filt)
    except InputError as exc:
        raise InputError(exc.problem, path) from None
    rule = data.get("rule", "best-per-source")
    rank_by = data.get("rank_by", "ce_word")
    if rule not in registry.RULES:
        raise InputError(f"unknown selection rule {rule!r}", path)
    if not isinstance(rank_by, str):
        raise InputError("rank_by must be a score name", path)
    comb = data.get("combination")
    if comb is not None and not isinstance(comb, dict):
        raise InputError("combination must be an object", path)
    ths: Dict[str, Dict[str, float]] = {}
    for d, th in data["thresholds"].items():
        if not isinstance(th, dict):
            raise InputError(f"thresholds for {d} must be an object", path)
        ths[d] = registry.check_thresholds(filt, th, path) if filt != "none" else {}
    if filt != "none" and not ths:
        raise InputError("no thresholds in the file", path)
    return SavedThresholds(filt, ths, rule, rank_by, comb, path)


def write_thresholds(data: Mapping[str, object], path: os.PathLike | str) -> None:
    """Write a thresholds file (``data`` without the version, which is added)."""
    write_text(path, json.dumps(dict(data, version=THRESHOLDS_VERSION), indent=1,
                                sort_keys=True) + "\n", "thresholds file", hint="")


def shipped_default(name: str) -> Optional[SavedThresholds]:
    """Configuration ``name``'s shipped cut (:func:`triemine.judging.shipped.configuration_cut`:
    its judge's, the paper's record's) as a thresholds file holds it, with its selection and
    combination; ``None`` when it ships none."""
    cut = configuration_cut(name)
    return None if cut.thresholds is None else _saved(cut)


def _saved(cut) -> SavedThresholds:
    rule, rank_by, filt = configuration(cut.config).selection.as_tuple()
    return thresholds_of({"version": THRESHOLDS_VERSION, "thresholds": cut.thresholds,
                          "rule": rule, "rank_by": rank_by, "filter": filt,
                          "combination": cut.combination}, f"configuration {cut.config}")


def shipped_thresholds(meta: Mapping[str, object], where: Optional[str] = None) -> SavedThresholds:
    """The shipped default thresholds for the TSV whose sidecar is ``meta`` (module docstring,
    :func:`triemine.judging.shipped.tsv_cut`); an :class:`InputError` naming ``where`` (the
    TSV) when there is none."""
    cut = tsv_cut(meta)
    how = ("give thresholds: --threshold NAME=VALUE, or --thresholds FILE from "
           "trie-mine-eval --save-thresholds on a gold set")
    if cut.config is None and where is not None and \
            not os.path.isfile(os.fspath(where) + META_SUFFIX):
        raise InputError(f"no shipped default threshold: the TSV has no {META_SUFFIX} sidecar "
                         f"to name the job that wrote it; {how}", where)
    if cut.thresholds is None:
        problem = cut.problem or f"configuration {cut.config!r} ships no default threshold"
        raise InputError(("no shipped default threshold: " if cut.config is None else "")
                         + f"{problem}; {how}", where)
    return _saved(cut)


@dataclass
class Selection:
    """How to keep rows of one TSV: rule, ranking, filter, thresholds, and where they came from."""

    rule: str
    rank_by: str
    filter: str
    thresholds: Dict[str, float] = field(default_factory=dict)
    source: str = "given"

    def text(self) -> str:
        return (f"rule={self.rule} filter={self.filter} "
                f"thresholds={registry.threshold_text(self.filter, self.thresholds)} "
                f"({self.source})")

    def keep(self, mined) -> np.ndarray:
        """Row indices (in row order) that pass the rule and the filter."""
        rows = np.arange(len(mined))
        if self.rule != "none":
            rows = registry.apply_rule(mined, self.rule, self.rank_by)
        return rows[registry.select(mined.take(rows), self.filter, self.thresholds)]


def default_selection(mined, saved: Optional[SavedThresholds] = None) -> Tuple[str, str, str]:
    """``(rule, rank_by, filter)`` a mining TSV is evaluated or filtered with unless the user says
    otherwise: a thresholds file's own; else its configuration's
    (:func:`triemine.judging.shipped.tsv_selection`: for a learned judge's TSV one-to-one by
    ``prob`` filtered by ``prob``, for a fixed combination's, or one lacking its own columns,
    one-to-one by ``combined`` filtered by ``combined``); else the paper's best row per source
    by ``ce_word``, no filter (the paper's CE filter is asked for by name).  A TSV whose sidecar
    says the job wrote a ``combined`` column that is no longer there is refused, never
    evaluated by another rule."""
    if saved is not None:
        return saved.rule, saved.rank_by, saved.filter
    _check_combined(mined)
    return tsv_selection(mined.meta, mined.numeric)


def _check_combined(mined) -> None:
    """Refuse a TSV whose sidecar says the job wrote a ``combined`` column that is not there."""
    if "combination" in mined.meta and "combined" not in mined.numeric:
        raise InputError("the job that wrote this TSV wrote a 'combined' column (its sidecar "
                         "names the combination), but the TSV has none: was it removed? Give "
                         "--rule, --rank-by and --filter with thresholds to select by other "
                         "columns", mined.path)


def choose(mined, *, saved: Optional[SavedThresholds] = None, index: int = 0,
           given: Optional[Mapping[str, float]] = None, filt: Optional[str] = None,
           rule: Optional[str] = None, rank_by: Optional[str] = None,
           given_as: str = "given") -> Selection:
    """The selection for the ``index``-th TSV (0: l1->l2, 1: l2->l1) of a filter run.

    ``given`` thresholds override ``saved`` ones (``given_as``: how the selection's text names
    where they came from); with neither (and ``filt`` not ``none``) the shipped default of the
    TSV's configuration is used, or the TSV is refused."""
    given = dict(given or {})
    source = given_as
    if saved is None and not given and filt != "none":  # the shipped default
        _check_combined(mined)
        try:
            saved = shipped_thresholds(mined.meta, mined.path)
        except InputError as exc:
            if filt is None:
                raise
            names = ", ".join(sc.name for sc in registry.filter_scores(filt))
            raise InputError(f"filter {filt} needs a threshold for {names} ({exc.problem})") \
                from None
        name = configuration_of(mined.meta)
        source = (f"no thresholds given: the shipped default for {name}, "
                  + ("the judge's probability cut, tuned on no gold" if learned(name)
                     else "tuned on the BUCC sample"))
        if filt is not None and registry.filter_scores(filt) != registry.filter_scores(
            saved.filter
        ):
            raise InputError(f"no threshold for filter {filt}: the shipped default is for "
                             f"{saved.filter}; give --threshold NAME=VALUE or --thresholds",
                             mined.path)
    elif saved is not None:
        source = f"from {saved.path}" + (", some given" if given else "")
    if filt is None:
        filt = saved.filter if saved is not None else ("+".join(given) if given else "none")
    if saved is None:  # thresholds given for the job's own filter: its selection too
        own = tsv_cut(mined.meta).selection
        if own is not None and registry.filter_scores(own[2]) == registry.filter_scores(filt):
            rule, rank_by = rule or own[0], rank_by or own[1]
    if rule is None:
        rule = saved.rule if saved is not None else "none"
    if rank_by is None:
        rank_by = saved.rank_by if saved is not None else None
    scores = registry.filter_scores(filt)
    unused = set(given) - {sc.name for sc in scores}
    if unused:
        raise InputError(f"threshold(s) for {', '.join(sorted(unused))} given but filter {filt} "
                         "does not use them")
    th: Dict[str, float] = {}
    if saved is not None and filt != "none":
        vals = list(saved.thresholds.values())
        if index >= len(vals):
            raise InputError(f"no thresholds for input {index + 1}", saved.path)
        th.update(vals[index])
    th.update(given)
    th = registry.check_thresholds(filt, th) if filt != "none" else {}
    rank_by = rank_by or (scores[0].name if scores else "ce_word")
    return Selection(rule, rank_by, filt, th, source if filt != "none" else "no filter")


def write_bitext(pairs, path: os.PathLike | str, format: str = formats.DEFAULT,
                 src_lang: Optional[str] = None, tgt_lang: Optional[str] = None,
                 meta: Optional[Mapping[str, object]] = None) -> int:
    """``pairs`` written to ``path`` in bitext format ``format`` (a name of
    :data:`triemine.filtering.formats.FORMATS`; default ``tsv``: ``l1 text<TAB>l2 text``
    lines), atomically, compressed when ``path`` ends in ``.gz``/``.xz``/``.zst``; the number
    written.  ``pairs``: a :class:`~triemine.filtering.formats.Pairs` (:func:`write_pairs`,
    :func:`write_union`) or ``(l1 text, l2 text)`` tuples (no ids, no scores).  The languages
    (for ``moses``, ``tmx``, ``hf``): ``src_lang``/``tgt_lang``, else those of the model
    directory ``meta`` (a mining TSV's sidecar) records (:func:`formats.languages`)."""
    fmt = formats.get_format(format)
    if not isinstance(pairs, formats.Pairs):
        pairs = formats.from_texts(pairs)
    langs = formats.languages(meta, src_lang, tgt_lang) if fmt.languages else \
        formats.DEFAULT_LANGS
    return formats.write(pairs, path, format, langs)


def write_pairs(mined, kept_rows, path: os.PathLike | str, fmt: str = formats.DEFAULT,
                src_lang: Optional[str] = None, tgt_lang: Optional[str] = None) -> int:
    """The rows ``kept_rows`` (0-based indices, in that order) of the mining TSV ``mined`` (a
    :class:`~triemine.io.tsv.Mined`) as a bitext (:func:`write_bitext`), with their ids and every
    score column; the languages default to those of the model ``mined.meta`` names."""
    return write_bitext(formats.from_mined(mined, kept_rows), path, fmt, src_lang, tgt_lang,
                        mined.meta)


def write_union(kept: Sequence, path: os.PathLike | str, fmt: str = formats.DEFAULT,
                src_lang: Optional[str] = None, tgt_lang: Optional[str] = None) -> int:
    """The union of the kept rows of the l1->l2 TSV ``kept[0]`` and the l2->l1 TSV ``kept[1]``
    (``trie-mine-filter --second``; each a :class:`~triemine.io.tsv.Mined` of the rows kept),
    each ``(l1 id, l2 id)`` once (:func:`formats.union`), as a bitext (:func:`write_bitext`)."""
    parts = [(m, k == 1) for k, m in enumerate(kept)]
    return write_bitext(formats.union(parts), path, fmt, src_lang, tgt_lang, kept[0].meta)


def mined_calibration(meta: Mapping[str, object]):
    """The calibrated probability (:class:`triemine.judging.calibration.Calibration`) of the
    ``combined`` column of the mining TSV whose sidecar is ``meta``: its configuration's ``zsum``
    judge's curve, when it has one and the TSV's combination is the judge's; else None."""
    return tsv_cut(meta).curve


def mined_prob(mined) -> Optional[np.ndarray]:
    """``prob`` of every row of a :class:`~triemine.io.tsv.Mined`: its ``prob`` column, else
    :func:`mined_calibration` of its ``combined`` column, or None when it has neither."""
    if "prob" in mined.numeric:
        return mined.col("prob")
    cal = mined_calibration(mined.meta)
    if cal is None or cal.score not in mined.numeric:
        return None
    return cal(mined.col(cal.score))


def min_prob_threshold(meta: Mapping[str, object], prob: float, where=None) -> Tuple[str, float]:
    """``(score, value)``: the threshold that keeps the rows with ``prob >= prob``: ``prob``
    itself for a TSV of a configuration with a learned judge (its ``prob`` is the judge's),
    else the curve's score (:meth:`~triemine.judging.calibration.Calibration.threshold`); an
    :class:`InputError` naming ``where`` when the TSV's configuration ships neither."""
    cut = tsv_cut(meta)
    if cut.learned:
        return "prob", float(prob)
    if cut.curve is None:
        raise InputError("--min-prob needs the calibrated probability of a shipped configuration "
                         "with its own combination (this TSV has none): give --threshold", where)
    return cut.curve.score, cut.curve.threshold(prob)


def min_prob_cut(config: str, combination: str, prob,
                 name: str = "--min-prob") -> Tuple[str, float]:
    """``(score, value)``: the threshold that keeps the mined pairs with ``prob >= prob`` in a
    job of configuration ``config``: ``prob`` itself where the configuration has a learned
    judge (its ``prob`` is the judge's), else the ``combined`` threshold of the curve of the
    shipped ``combination``'s judge (:func:`triemine.judging.shipped.configuration_cut`); an
    :class:`InputError` naming ``name`` when ``prob`` is not a number in (0, 1) or the
    combination ships no curve."""
    if (isinstance(prob, bool) or not isinstance(prob, (int, float, np.integer, np.floating))
            or not 0 < prob < 1):
        raise InputError(f"{name}: expected a number in (0, 1), got {prob!r}")
    if learned(config):
        return "prob", float(prob)
    try:
        return "combined", shipped_calibration(combination, "mined").threshold(prob)
    except (InputError, ValueError) as exc:
        raise InputError(f"{name}: {getattr(exc, 'problem', exc)}") from None
