"""The second look: the sources the first pass leaves without a kept pair get candidates from a
second generator, judged as every candidate is.

    the mining TSV (finished) -> the job's selection (its rule, filter and threshold, as the
      ``selection`` stage applies them) -> the sources and the targets without a kept pair
    -> :class:`~triemine.mining.generators.TranslationKnn`'s candidates among them
       (``OUT.work/look/``: its files, ``mt_knn.cols``)
    -> the pairs not yet candidates, with every margin space's features, through the job's own
       ``scores`` and ``priors`` stages (``look/candidates.cols``)
    -> united with the first pass's candidates (``look.cols``, marked scored; a pair the second
       look proposed again keeps its values and gains the origin bit)
    -> the TSV written again (the judge's share of translations pinned to the first pass's),
       then the job's ``selection`` over every candidate.

One-to-one stays one-to-one, and a kept pair of the first pass stays kept: every new pair joins
a source and a target no kept pair holds, so the greedy pass over the united candidates keeps
what it kept and at most adds.  Each step keeps its files, so a killed job resumes where it was
(``--resume``) with the same bytes, and the steps that run in shards (translation, embedding,
kNN, exact scores) give the same bytes with any number of workers.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from triemine.errors import InputError
from triemine.filtering.selection import choose
from triemine.io import atomic_write, read_mined
from triemine.mining.candidates import CandidateSet
from triemine.mining.columns import ColumnStore
from triemine.mining.finish import CANDIDATES, SCORED
from triemine.mining.generators import REGISTRY, origin_counts
from triemine.mining.run import (Mining, _empty_mask, finish_stage, priors_stage, scores_stage,
                                 unite)
from triemine.mining.stages import stage, stage_dir

logger = logging.getLogger(__name__)

GENERATOR = "mt_knn"  # the second look's generator
LOOK = "look"         # its folder in the job's work folder, and the united store's name
FIRST_PASS = "first_pass.key"  # in that folder: the first pass its files were made for


def second_look(m: Mining, saved=None, given: Optional[Mapping[str, float]] = None) -> None:
    """The second look of the finished job ``m`` (module docstring; nothing unless its
    ``second_look`` setting is on, ``--second-look``), its TSV written again; ``saved``,
    ``given``: the job's thresholds (:func:`~triemine.filtering.selection.choose`'s).
    ``m.summary`` gains ``second_look`` (sources without a kept pair, targets free, pairs
    proposed, new pairs) and
    ``kept_by_generator`` (the kept pairs each generator proposed: a pair may count for
    several).  When the job's selection cannot be made (no threshold for its filter), a
    warning and no second look."""
    job = m.job
    if not job.opts.look.second_look:
        return
    where = stage_dir(job.work, LOOK)
    try:
        kept = _kept(m, saved, given)
    except InputError as exc:
        logger.warning("no second look: %s", exc)
        return
    key = _first_pass_key(m.scored, kept)
    _forget_other_first_pass(job.work, where, key)
    united = ColumnStore.open(where)
    if united is None or SCORED not in united.done:
        united = _look(m, kept, where, key)
    m.look = json.loads((job.work / LOOK / "counts.json").read_text())
    m.scored = united
    finish_stage(m)
    kept = _kept(m, saved, given)
    m.summary["kept_by_generator"] = origin_counts(np.bincount(
        m.scored.mapped("origin")[kept].astype(np.int64), minlength=256))


def _kept(m: Mining, saved, given) -> np.ndarray:
    """The rows of the finished TSV the job's selection keeps (rows of ``m.scored``: the TSV
    has one row per candidate, in the store's order)."""
    mined = read_mined(str(m.out_path))
    return choose(mined, saved=saved, given=dict(given or {})).keep(mined)


def _first_pass_key(first: ColumnStore, kept: np.ndarray) -> str:
    """A digest of the pairs the first pass keeps (rows ``kept`` of ``first``): what the second
    look's stages depend on beyond the job's own resume key (the judge, the thresholds
    given)."""
    pairs = np.stack([np.asarray(first.mapped("src"))[kept],
                      np.asarray(first.mapped("tgt"))[kept]]).astype("<i8")
    return hashlib.blake2b(pairs.tobytes(), digest_size=16).hexdigest()


def _forget_other_first_pass(work: Path, where: Path, key: str) -> None:
    """Removes the second look's files (``work/look/``, ``where``) when they were made for a
    first pass that kept other pairs (another judge file, other thresholds): they are made
    again; files of the same first pass are kept, so a killed look resumes."""
    folder = work / LOOK
    mark = folder / FIRST_PASS
    if not folder.exists() and not where.exists():
        return
    if mark.is_file() and mark.read_text(encoding="utf-8").strip() == key:
        return
    logger.info("the first pass keeps other pairs than when the second look ran: it runs again")
    for path in (folder, where):
        shutil.rmtree(path, ignore_errors=True)


def _look(m: Mining, kept: np.ndarray, where: Path, key: str) -> ColumnStore:
    """The united, scored candidates of the second look (module docstring) at ``where``, for
    the first pass of :func:`_first_pass_key` ``key``."""
    job, first = m.job, m.scored
    folder = job.work / LOOK
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / FIRST_PASS, key.encode(), "second look's first pass")
    sub = replace(job, work=folder, seconds={})
    sources = ~(_empty_mask(job.src) | _mask(job.long_src, len(job.src)))
    targets = ~(_empty_mask(job.tgt) | _mask(job.long_tgt, len(job.tgt)))
    sources[first.mapped("src")[kept]] = False
    targets[first.mapped("tgt")[kept]] = False
    gen = REGISTRY[GENERATOR]
    proposed = stage(folder, GENERATOR, lambda: gen.propose(
        sub, np.flatnonzero(sources), targets, folder,
        tgt_emb=job.work / f"emb.{job.opts.neighbours.encoder}.tgt.npy"))
    pairs = proposed.block(0, len(proposed))
    known = _known(first, pairs.src, pairs.tgt)
    again_job = replace(job, seconds=sub.seconds)  # the first pass's spaces, reused
    spaces = [space for name in job.opts.candidates
              for _store, space in [REGISTRY[name].run(again_job)] if space is not None]

    def new_pairs() -> CandidateSet:
        new = pairs.take(np.flatnonzero(~known))
        for space in spaces:
            new = space.fill_features(new)
        return new
    # its priors stay out of the shared cache: they depend on the first pass's cut, and a later
    # job (another cut, a resumed one) must get the bits a fresh job gets
    look = Mining(sub, m.out_path, m.reverse_model,
                  store=stage(folder, CANDIDATES, new_pairs), keep_priors=False)
    scores_stage(look)
    priors_stage(look)
    counts = {"unpaired_sources": int(sources.sum()), "free_targets": int(targets.sum()),
              "proposed": len(pairs), "new": int((~known).sum())}
    atomic_write(folder / "counts.json", json.dumps(counts).encode(), "second look's counts")
    job.seconds.update({f"look_{k}": v for k, v in sub.seconds.items()})
    again = stage(folder, "again", lambda: pairs.take(np.flatnonzero(known)))
    none = np.zeros(len(job.src), dtype=bool), np.zeros(len(job.tgt), dtype=bool)
    return unite(where, [first, look.store, again], [], *none).mark(SCORED)


def _mask(skip, n: int) -> np.ndarray:
    return skip if skip is not None else np.zeros(n, dtype=bool)


def _known(store: ColumnStore, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """Whether each pair ``(src[i], tgt[i])`` is a row of ``store`` (sorted by source, then
    target): each source's rows found by binary search, its targets compared at once."""
    if not len(src) or not len(store):
        return np.zeros(len(src), dtype=bool)
    s_col, t_col = store.mapped("src"), store.mapped("tgt")
    lo = np.searchsorted(s_col, src, side="left")
    hi = np.searchsorted(s_col, src, side="right")
    span = int((hi - lo).max())
    if span == 0:
        return np.zeros(len(src), dtype=bool)
    rows = lo[:, None] + np.arange(span)[None, :]
    inside = rows < hi[:, None]
    hit = inside & (np.asarray(t_col)[np.minimum(rows, len(store) - 1)] == tgt[:, None])
    return hit.any(axis=1)
