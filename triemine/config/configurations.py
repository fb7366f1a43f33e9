"""The named configurations: one record each, the one place a configuration is defined.

A record (``triemine/config/records/<name>.json``, shipped with the package) holds everything that
makes a configuration:

* ``generators``: the candidate generators the job runs (``["trie"]`` alone is the paper's trie
  search, :mod:`triemine.decoding.driver`; any other set is the mining job,
  :mod:`triemine.mining.run`);
* ``stages``: the job's stages in order, names of :data:`triemine.mining.job.STAGES` (the
  paper's: the trie search, the selection; the mining job's: deduplication, candidates, exact
  scores, priors, the combination, the TSV, the rows mapped back to the original lines, the
  selection);
* ``settings``: the values this configuration gives fields of the settings tree
  (:class:`triemine.mining.options.MineOptions`), by field name, e.g. ``{"beam": 5}``; a field not
  named keeps its declared default;
* ``selection``: how its mining TSV is selected (``rule``, ``rank_by``) and filtered (``filter``);
* ``judge`` (every configuration but the paper's): the one judge the job's TSV is cut by,
  ``{"file", "fingerprint"}``: a judge file (relative to the folder holding the package) and its
  fingerprint.  The file states the judge's score column and its cut: the learned judge's
  (``prob >= 0.5``; :mod:`triemine.judging.model`) or a fixed combination's (kind ``zsum``:
  ``combined``, its probability curve and the cut tuned on the BUCC sample;
  :mod:`triemine.judging.zsum`); :mod:`triemine.judging.shipped` reads and checks it;
* ``combination`` (optional): with a learned judge, the fixed combination the job writes as the
  feature ``combined`` (:class:`triemine.judging.combination.Combination`'s fields);
* ``thresholds`` (the paper's, which has no judge): the shipped default threshold, tuned on the
  BUCC 2018 zh-en sample: a thresholds file's ``thresholds`` (per direction), ``source``,
  ``signature`` and ``scores_where_chosen``;
* ``pairs_judge`` (optional): the judge of given pairs (``trie-mine-score``), named as
  ``judge`` is: a ``zsum`` file writing the column ``judge`` and its ``prob``.

The job, ``trie-mine``, ``trie-mine-eval``/``-filter`` and the API all read the records
through :func:`configuration`; nothing else names a configuration's parts.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from triemine.errors import InputError
from triemine.io import read_json

RECORDS = Path(__file__).resolve().parent / "records"
RECORD_VERSION = 1
DEFAULT = "judge"   # the configuration trie-mine, trie-mine-score and the API run unless told
PAPER = "paper"        # the paper's trie search alone (selected best per source by ce_word)
NAMES = ("combined", "judge", "mt-only", PAPER)  # in the order the CLI lists them


@dataclass(frozen=True)
class Selection:
    """How a configuration's TSV is selected: which rows compete (``rule``), the score ranking
    them (``rank_by``) and the filter its threshold applies to (``filter``)."""

    rule: str
    rank_by: str
    filter: str

    def as_tuple(self) -> Tuple[str, str, str]:
        return self.rule, self.rank_by, self.filter


@dataclass(frozen=True)
class Configuration:
    """One named configuration (module docstring); ``settings`` maps field names of the
    settings tree to this configuration's values."""

    name: str
    help: str
    generators: Tuple[str, ...]
    stages: Tuple[str, ...]
    settings: Mapping[str, Any]
    selection: Selection
    combination: Optional[Dict[str, Any]]
    thresholds: Optional[Dict[str, Any]]
    judge: Optional[Dict[str, Any]] = None
    pairs_judge: Optional[Dict[str, Any]] = None

    @property
    def paper(self) -> bool:
        """The plain trie search, not the mining job."""
        return self.generators == ("trie",)


@lru_cache(maxsize=None)
def configuration(name: str) -> Configuration:
    """The record of configuration ``name``; an :class:`InputError` naming the known ones for
    an unknown name, and naming the file for a record that is not one."""
    if not isinstance(name, str) or name not in NAMES:
        raise InputError(f"unknown configuration {name!r} (choose from {', '.join(NAMES)})")
    path = RECORDS / f"{name}.json"
    data = read_json(path, "configuration record")
    try:
        if data.get("version") != RECORD_VERSION or data.get("name") != name:
            raise ValueError(f"version {RECORD_VERSION} record of {name!r} expected")
        return Configuration(name=name, help=str(data["help"]),
                             generators=tuple(data["generators"]),
                             stages=tuple(data["stages"]),
                             settings=dict(data["settings"]),
                             selection=Selection(**data["selection"]),
                             combination=data.get("combination"),
                             thresholds=data.get("thresholds"),
                             judge=data.get("judge"), pairs_judge=data.get("pairs_judge"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"not a configuration record ({exc})", str(path)) from None
