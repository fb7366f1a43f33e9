"""What a mining job hands back: every scored candidate, the selection and the pairs it keeps
(:class:`MiningResult`, what :func:`triemine.mine` returns), and :func:`job_result`, the step
that chooses them once the job has written its TSV.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from triemine.io import check_distinct, check_uncompressed, Mined, read_mined, write_mined
from triemine.errors import InputError
from triemine.filtering import formats
from triemine.filtering.selection import Selection, choose, configuration_of, write_pairs
from triemine.judging.quality import best_per_source, expected_quality, is_floor
from triemine.mining.dedup import expand_rows, side_maps

# below this many lines on a side, a shipped threshold is applied with a warning (the ratio
# margin's neighbourhoods, which the threshold was tuned with, need corpora of some size)
SMALL_CORPUS = 1000
logger = logging.getLogger("triemine.api")  # the warning's name, as trie-mine prints it


@dataclass(frozen=True)
class Pair:
    """One kept pair: ids, texts and the score that ranked it."""

    src_id: str
    tgt_id: str
    src: str
    tgt: str
    score: float


@dataclass
class MiningResult:
    """What :func:`triemine.mine` returns: every scored candidate, the selection and the pairs it
    keeps."""

    output: str
    candidates: Optional[Mined]  # None when run without selecting (the CLI without --bitext)
    selection: Optional[Selection]
    kept: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    summary: Dict[str, object] = field(default_factory=dict)
    inputs: List[Tuple[str, str]] = field(default_factory=list)  # what the job read
    # the kept rows with one row per (source id, target id) of their duplicates (every_pair)
    expanded: Optional[Mined] = None

    def kept_rows(self) -> Mined:
        """The kept rows, in order (with ``every_pair``: one per id pair of their texts)."""
        return self.expanded if self.expanded is not None else self.candidates.take(self.kept)

    @property
    def pairs(self) -> List[Pair]:
        m = self.kept_rows()
        score = m.col(self.selection.rank_by) if self.selection is not None else m.col("score")
        return [Pair(m.src_ids[i], m.tgt_ids[i], m.src[i], m.tgt[i], float(score[i]))
                for i in range(len(m))]

    def write_bitext(self, path, format: str = formats.DEFAULT, src_lang: Optional[str] = None,
                     tgt_lang: Optional[str] = None) -> int:
        """The kept pairs written to ``path`` in bitext ``format`` (default ``tsv``: ``src
        text<TAB>tgt text`` lines; ``moses``, ``tmx``, ``jsonl``, ``hf``:
        :data:`triemine.filtering.formats.FORMATS`), atomically, compressed when ``path`` ends
        in ``.gz``/``.xz``/``.zst``; how many.  The languages default to the model's.  An
        :class:`InputError` when a file it writes is one of the job's inputs or its output."""
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"path: expected a file path, got {type(path).__name__}")
        langs = formats.languages(self.candidates.meta, src_lang, tgt_lang)
        for label, out, kind in formats.outputs("path", format, path, langs):
            self._check_output(label, out, kind)
        formats.check_output(format, path, langs)
        rows = self.kept_rows()
        return write_pairs(rows, np.arange(len(rows)), path, format, *langs)

    def write_tsv(self, path) -> None:
        """The kept rows as a mining TSV, with every column of the candidates (and its
        ``.meta.json``); refused like :meth:`write_bitext`."""
        self._check_output("path", path, sides=True)
        check_uncompressed([("path", path)])
        write_mined(self.kept_rows(), os.fspath(path))

    def _check_output(self, label: str, path, sides: bool = False) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"{label}: expected a file path, got {type(path).__name__}")
        check_distinct([(label, path, sides)],
                       self.inputs + [("output", self.output, True)] * bool(self.output))


def job_result(output: str, summary: dict, *, select: bool, saved,
               given: Mapping[str, float], every_pair: bool = False) -> MiningResult:
    """The result of a job that wrote the mining TSV ``output`` and returned ``summary``; with
    ``select``, its candidates read back and the kept pairs chosen
    (:func:`triemine.filtering.selection.choose`: ``given`` thresholds over ``saved``, a
    thresholds file's, over the shipped default; ``every_pair``: one kept row per id pair of
    the duplicates), ``kept`` and ``selection`` added to ``summary``, and a warning when a
    shipped threshold is applied to corpora under :data:`SMALL_CORPUS` lines a side."""
    result = MiningResult(output, None, None, summary=summary)
    if select:
        result.candidates = mined = read_mined(output)
        result.selection = choose(mined, saved=saved, given=given)
        result.kept = result.selection.keep(mined)
        if every_pair:  # the kept pairs of texts, one row per id pair
            result.expanded = expand_rows(mined.take(result.kept), *side_maps(output),
                                          every_pair=True)
        summary.update(kept=len(result.kept_rows()), selection=result.selection.text(),
                       expected=expected_of(mined, result.kept))
        small = min(int(summary.get("sources", 0)), int(summary.get("targets", 0)))
        if "shipped default" in result.selection.source and small < SMALL_CORPUS:
            logger.warning("the shipped threshold was tuned on corpora of thousands of sentences "
                           "a side; with %d lines the margins have few neighbours and unrelated "
                           "pairs can pass: check the kept pairs, or give a threshold", small)
    return result


def expected_of(mined: Mined, kept: np.ndarray) -> dict:
    """What the ``prob`` of the rows ``kept`` of ``mined`` promises
    (:func:`triemine.judging.quality.expected_quality`, with every source's best ``prob`` for
    the recall: a recall of the candidates), marked ``calibrated``, with the share of
    translations the run's judge estimated (``density``, where it did) and whether that share
    makes the figures a floor (``floor``, :func:`~triemine.judging.quality.is_floor`);
    ``{"calibrated": False, "why": ...}`` for a TSV whose configuration writes no calibrated
    ``prob``."""
    if "prob" not in mined.numeric:
        name = configuration_of(mined.meta) or "of this TSV"
        return {"calibrated": False, "why": f"configuration {name} writes no calibrated prob"}
    prob = mined.col("prob")
    out = {"calibrated": True,
           **expected_quality(prob[kept], best_per_source(mined.src_ids, prob)),
           "assumes": "prob calibrated; recall of the candidates: a source has at most one "
                      "translation, its best-prob candidate"}
    if mined.meta.get("density") is not None:
        out["density"] = mined.meta["density"]
        out["floor"] = is_floor(mined.meta["density"])
    return out
