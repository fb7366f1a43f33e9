"""Each configuration's one judge, and the one answer to "what is this TSV cut on, and where".

A configuration record (:mod:`triemine.config.configurations`) names its judge under ``judge``
(and the judge of given pairs, ``trie-mine-score``'s, under ``pairs_judge`` where it has one
of its own): ``file`` (relative to the folder holding the ``triemine`` package) and
``fingerprint``.  The file is a learned judge (:class:`~triemine.judging.model.Judge`: kinds
``logistic``, ``trees``, ``blend``) or a fixed combination (:class:`~triemine.judging.zsum.ZSum`:
kind ``zsum``); either states its score column (``prob``; ``combined``, or ``judge`` for given
pairs) and its cut.  :func:`configuration_judge`
reads and checks it (a file whose fingerprint is not the record's is refused, naming both).
The paper's configuration has no judge: its record's ``thresholds`` is its cut.

:func:`tsv_cut` is the one function that decides, from a mining TSV's sidecar, the
configuration that wrote it, how its rows are selected (rule, ranking, filter), its default cut
(or why it has none: a custom ``--combination``, no configuration named, none shipped) and the
curve giving ``prob`` of its score; :func:`configuration_cut` the same for a configuration
before any TSV exists (``trie-mine --min-prob``).  Selection, filtering, evaluation and the
mining job read these; nothing else decides a TSV's score column or default cut.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple, Union

from triemine.config.configurations import NAMES, PAPER, configuration
from triemine.errors import InputError
from triemine.io import read_json
from triemine.judging.calibration import Calibration
from triemine.judging.combination import Combination
from triemine.judging.model import Judge
from triemine.judging.zsum import COLUMN as ZSUM_COLUMN
from triemine.judging.zsum import KIND as ZSUM
from triemine.judging.zsum import ZSum

ROOT = Path(__file__).resolve().parent.parent.parent  # the folder holding the package
AnyJudge = Union[Judge, ZSum]


def read_any_judge(path) -> AnyJudge:
    """The judge file ``path`` of any kind (a ``zsum`` file by :meth:`ZSum.of`, any other by
    :meth:`Judge.of`); an :class:`InputError` naming ``path``."""
    if os.path.isfile(path):
        data = read_json(path, "judge file")
        if isinstance(data, dict) and data.get("kind") == ZSUM:
            return ZSum.load(path)
    return Judge.load(path)   # also the refusal of a missing file or a folder, naming it


USES = ("mined", "pairs")   # mined candidates (the record's judge); given pairs (pairs_judge)


def _entry(name: str, use: str) -> Optional[dict]:
    """Configuration ``name``'s record entry naming its judge for ``use`` (:data:`USES`)."""
    if use not in USES:
        raise ValueError(f"use must be one of {USES}")
    rec = configuration(name)
    return rec.judge if use == "mined" else rec.pairs_judge


@lru_cache(maxsize=None)
def configuration_judge(name: str, use: str = "mined") -> Optional[AnyJudge]:
    """The judge configuration ``name``'s record names for ``use`` (:data:`USES`; module
    docstring), None for one without (the paper's; ``pairs`` of a record without
    ``pairs_judge``); an :class:`InputError` naming the record for an entry that is not
    ``{"file", "fingerprint"}``, and the file when its fingerprint is not the record's."""
    entry = _entry(name, use)
    if entry is None:
        return None
    where = f"configuration {name}" + ("" if use == "mined" else " pairs_judge")
    if not isinstance(entry, dict) or sorted(entry) != ["file", "fingerprint"] or \
            not all(isinstance(v, str) and v for v in entry.values()):
        raise InputError("its judge must be {\"file\", \"fingerprint\"}", where)
    path = ROOT / entry["file"]
    judge = read_any_judge(path)
    if judge.fingerprint() != entry["fingerprint"]:
        raise InputError(f"the judge file's fingerprint {judge.fingerprint()} is not the one "
                         f"configuration {name} names ({entry['fingerprint']})", str(path))
    if use == "mined" and isinstance(judge, ZSum) and judge.column != ZSUM_COLUMN:
        raise InputError(f"a mining job's zsum judge writes the column {ZSUM_COLUMN!r}, not "
                         f"{judge.column!r}", str(path))
    return judge


def judge_file(name: str, use: str = "mined") -> str:
    """The resolved path of configuration ``name``'s judge file for ``use`` (it must have
    one)."""
    return os.path.abspath(ROOT / _entry(name, use)["file"])


def judge_record(name: str, use: str = "mined") -> Dict[str, str]:
    """A run record's entry for configuration ``name``'s shipped judge for ``use``: its
    ``fingerprint`` and resolved ``path``, as the learned judge's entry is."""
    return {"fingerprint": configuration_judge(name, use).fingerprint(),
            "path": judge_file(name, use)}


def learned(name: str) -> bool:
    """Whether configuration ``name``'s judge is a learned one (``--judge``, ``--density``
    apply)."""
    return isinstance(configuration_judge(name), Judge)


def zsum_judge(name: str) -> Optional[ZSum]:
    """Configuration ``name``'s judge when it is a fixed combination, else None."""
    judge = configuration_judge(name)
    return judge if isinstance(judge, ZSum) else None


def judge_only(flag: str, config: str) -> InputError:
    """The refusal of ``flag``, a setting only a learned judge reads, in a job of configuration
    ``config``, which has none (it would be ignored): naming the configurations that have one."""
    judged = [n for n in NAMES if learned(n)]
    return InputError(f"{flag} applies to a configuration with a learned judge (--config "
                      f"{' or '.join(judged)}), not --config {config}")


def shipped_combination_fields(name: str) -> Optional[dict]:
    """The fields of the combination configuration ``name``'s jobs write as ``combined``: its
    ``zsum`` judge's, else its record's ``combination`` (a learned judge's feature); None for
    a configuration without one."""
    z = zsum_judge(name)
    return asdict(z.combination) if z is not None else configuration(name).combination


def combination_names() -> Tuple[str, ...]:
    """The configurations that ship a combined score (its name is the configuration's)."""
    return tuple(n for n in NAMES if shipped_combination_fields(n) is not None)


def shipped(name: str) -> Combination:
    """The combination of configuration ``name`` (:func:`shipped_combination_fields`), fitted
    on the BUCC zh-en sample's candidates and shipped with the package; an
    :class:`InputError` for a name that ships none."""
    known = combination_names()
    if name not in known:
        raise InputError(f"no shipped combination {name!r} (known: {', '.join(known) or 'none'})")
    return Combination.of(shipped_combination_fields(name), f"configuration {name}")


def shipped_calibration(config: str, use: str) -> Calibration:
    """The curve configuration ``config``'s ``zsum`` judge for ``use`` (:data:`USES`) ships:
    ``mined``, ``prob`` of ``combined``; ``pairs``, ``prob`` of the given-pairs judge's column
    (``judge``), with that judge's combination as the curve's ``combination``; an
    :class:`InputError` when it ships none."""
    z = configuration_judge(config, use)
    if not isinstance(z, ZSum) or z.curve is None:
        raise InputError(f"configuration {config!r} ships no calibrated probability for {use}")
    if use == "mined":
        return z.curve
    return Calibration(z.curve.a, z.curve.b, z.column, z.curve.fitted_on,
                       asdict(z.combination))


@dataclass(frozen=True)
class Cut:
    """How a mining TSV (or a configuration's job) is cut (module docstring).

    ``config``: the configuration named (None: none); ``selection``: its ``(rule, rank_by,
    filter)`` (None when the sidecar names neither a mining job nor the paper's search);
    ``thresholds``: the default cut as a thresholds file holds it (per direction, ``{score:
    value}``), None when there is none, ``problem`` then saying why; ``combination``: the
    fields of the combination the cut belongs to (None: the paper's); ``curve``: ``prob`` of
    the score column (a ``zsum`` judge's curve, only for its own combination); ``learned``:
    the judge is learned (its ``prob`` is the column ``prob``); ``source``: where the cut comes
    from."""

    config: Optional[str]
    selection: Optional[Tuple[str, str, str]]
    thresholds: Optional[Dict[str, Dict[str, float]]]
    problem: Optional[str] = None
    combination: Optional[dict] = None
    curve: Optional[Calibration] = None
    learned: bool = False
    source: str = ""


def configuration_cut(name: str) -> Cut:
    """The cut of configuration ``name``'s own job (its shipped combination)."""
    rec = configuration(name)
    judge = configuration_judge(name)
    sel = rec.selection.as_tuple()
    comb = shipped_combination_fields(name)
    if judge is None:
        th = rec.thresholds
        return Cut(name, sel, None if th is None else dict(th["thresholds"]),
                   None if th is not None else f"configuration {name!r} ships no default "
                   "threshold", comb, None, False, "" if th is None else str(th.get("source")))
    cut = judge.cut
    if cut is None:
        return Cut(name, sel, None, f"configuration {name!r} ships no default threshold", comb,
                   judge.curve if isinstance(judge, ZSum) else None)
    th = {str(cut["direction"]): {judge.column: float(cut["value"])}}
    return Cut(name, sel, th, None, comb, None if isinstance(judge, Judge) else judge.curve,
               isinstance(judge, Judge), str(cut["source"]))


def configuration_of(meta: Mapping[str, object]) -> Optional[str]:
    """The shipped configuration a TSV's sidecar describes: its combination's name for the
    mining job, ``paper`` for the plain trie search, ``None`` when the sidecar says neither."""
    comb = meta.get("combination")
    if isinstance(comb, dict) and isinstance(comb.get("name"), str):
        return comb["name"]
    if "pipeline" not in meta and meta.get("mode") in ("pre", "post"):
        return PAPER
    return None


def tsv_selection(meta: Mapping[str, object], have) -> Tuple[str, str, str]:
    """``(rule, rank_by, filter)`` a mining TSV whose sidecar is ``meta`` and whose numeric
    columns are ``have`` is evaluated or filtered with by default: a mining job's TSV with a
    ``combined`` column as its configuration's (:func:`tsv_cut`), or by ``combined`` as the
    ``combined`` configuration's when the TSV lacks its own ranking or filter column; any other
    as the paper's trie search (best row per source by ``ce_word``), with no filter."""
    if "pipeline" in meta and "combined" in have:
        own = tsv_cut(meta).selection
        if own[1] in have and own[2] in have:
            return own
        return configuration("combined").selection.as_tuple()
    rule, rank_by, _ = configuration(PAPER).selection.as_tuple()
    return rule, rank_by, "none"


def tsv_cut(meta: Mapping[str, object]) -> Cut:
    """The cut of the mining TSV whose sidecar is ``meta`` (module docstring): a mining job's
    TSV is selected as its configuration's (one of no configuration as ``combined``'s); its
    default cut and curve are its configuration's when the TSV's combination is the one they
    belong to, else there are none (``problem`` says why)."""
    name = configuration_of(meta)
    mining = "pipeline" in meta
    if name is None or name not in NAMES:
        sel = configuration("combined").selection.as_tuple() if mining else None
        why = ("the sidecar names no known configuration" if name is None else
               f"configuration {name!r} ships no default threshold")
        return Cut(name, sel, None, why)
    own = configuration_cut(name)
    if not mining and name != PAPER:
        own = Cut(name, None, own.thresholds, own.problem, own.combination, own.curve,
                  own.learned, own.source)
    if own.combination is not None and meta.get("combination") != own.combination:
        return Cut(name, own.selection, None,
                   f"the TSV's combination {name!r} is not the shipped one its default "
                   "threshold was tuned for (another --combination file)",
                   own.combination, None, own.learned)
    return own
