"""The mining job: candidates from one or more generators, exact MT scores, one combined score.

    source corpus, target corpus
      -> candidates: trie search matches | encoder kNN (ratio margin) | MT translation retrieval
      -> union; every pair gets every generator's features (cosines, margins)
      -> exact log P(y|x) by forced decoding for pairs the search did not score; priors (optional)
      -> derived scores (ce_word, ce_token, pmi, numerals) and the fixed ``combined`` score
      -> the mining TSV (:mod:`triemine.io.tsv`): every candidate with all its columns

Selection (one-to-one) and the cut are the configuration's judge's (its score column and cut,
:func:`triemine.judging.shipped.tsv_cut`), applied by ``--bitext``, ``trie-mine-eval``, -filter.

Each stage stores its result in ``OUT.tsv.work/`` as it finishes (the trie search and the exact
scores also within the stage, batch by batch), so ``resume=True`` continues an interrupted job
without recomputing or losing anything; the TSV is written atomically at the end.  The
candidates are column stores (:mod:`triemine.mining.columns`): each generator's, then the
job's (``candidates.cols``), which the exact scores and priors add their columns to; every
stage reads and writes them a range of sources or a block of rows at a time, so the driver
holds one block of candidates, not the set.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Set

import numpy as np

from triemine.io import (atomic_write, dumps_sealed, older_key, open_pair, read_sealed,
                         skipped_counts)
from triemine.decoding import lengths
from triemine.models.fingerprint import model_fingerprint
from triemine.embedding.knn import search_arithmetic
from triemine.distributed.stage import stage_key
from triemine.errors import DamagedFile, InputError
from triemine.mining.candidates import CandidateSet
from triemine.judging.combination import Combination
from triemine.judging.shipped import shipped
from triemine.mining.features import (PRIOR, ScoreJob, derivable, prior_range,
                                      prior_table)
from triemine.mining.score_shards import forced_score_shards
from triemine.mining.columns import ColumnStore, write_store
from triemine.mining.finish import (CANDIDATES, SCORED, check_judge, finish_tsv, judge_adder,
                                    load_scored)
from triemine.mining.generators import REGISTRY, Job, origin_counts
from triemine.mining.stages import cache_dir, stage_dir
from triemine.mining.options import MineOptions
from triemine.scoring import forced_scoring
from triemine.scoring.rows import JUDGE_ROWS
from triemine.config.settings import key_of

logger = logging.getLogger(__name__)

UNITE_SOURCES = 1 << 18  # sources a range of the union of the candidates (one range's: tens of MB)


def _work(out_path: Path) -> Path:
    return Path(str(out_path) + ".work")


def _settings_digest(model, source, target, opts: MineOptions) -> dict:
    """The job's resume key (:func:`~triemine.distributed.stage.stage_key`): the model, the
    corpora's contents, every setting of the tree but the transient ones (:func:`key_of`), the
    arithmetic of its scores, length rule and kNN search on its device (other code, faiss or
    device: other last bits) and, with coverage on, the rows the exact pass adds
    (:data:`triemine.scoring.rows.JUDGE_ROWS`: a job stored with other rows lacks columns)."""
    bf16 = (opts.precision, opts.device) == ("bf16", "cpu")  # its tiles' version; fp32 as was
    arithmetic = {"scores": forced_scoring().arithmetic("cpu", "bf16") if bf16 else
                  forced_scoring().ARITHMETIC, "lengths": lengths.LENGTH_RULE,
                  "knn": search_arithmetic(opts.device)}
    rows = {"exact_rows": list(JUDGE_ROWS)} if opts.scores.coverage else {}
    return json.loads(json.dumps(stage_key(
        {"model": model_fingerprint(model), "config": key_of(opts), "arithmetic": arithmetic,
         **rows}, {"source": source, "target": target})))


def _what_differs(old, new: dict, source, target) -> str:
    """The parts of a resume key (:func:`_settings_digest`) that differ between ``old`` and
    ``new``, named for the user: the corpora by path, the settings by name."""
    old = old if isinstance(old, dict) else {}
    parts = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key in ("source", "target"):
            parts.append(f"the {key} corpus's content ({source if key == 'source' else target})")
        elif key == "config" and isinstance(a, dict) and isinstance(b, dict):
            names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            parts.append(f"the settings {', '.join(names)}")
        elif key == "arithmetic":
            parts.append("the arithmetic of the scores or the kNN search (code, library or "
                         "device)")
        else:
            parts.append(f"the {key.replace('_', ' ')}")
    return "; ".join(parts) or "the settings"


@dataclass
class Mining:
    """The mining job's state as its stages (:data:`MINING`) pass it on: the generators' job
    (model, corpora, settings, work folder, pool), where the TSV goes, the reverse model; the
    job's candidate store once its candidates are in (``store``), marked complete once every
    column the TSV needs is (``scored``; a resumed job that had scored them starts there), the
    combination and the summary once finished."""

    job: Job
    out_path: Path
    reverse_model: Any = None
    store: Optional[ColumnStore] = None
    scored: Optional[ColumnStore] = None
    comb: Optional[Combination] = None
    summary: Optional[dict] = None
    density: Optional[float] = None  # the judge's share of translations, once finished
    look: Optional[dict] = None      # the second look's counts, once it ran
    keep_priors: bool = True         # its priors go to the shared cache (not the second look's)


def open_mining(model, source_path, target_path, out_path, opts: MineOptions, *,
                resume: bool = False, progress: bool = False, reverse_model=None, pool=None,
                work_dir=None) -> Mining:
    """The mining job's state before its first stage: both corpora opened, the lines too long
    to score found (and warned about), the work folder (``work_dir``, default ``out_path +
    ".work"``) kept, started over or refused by the job's key (:func:`_open_work`)."""
    src, tgt = open_pair(source_path, target_path)
    long_src, long_tgt = _too_long(model, reverse_model, src, tgt, opts.search.max_length)
    work = Path(work_dir) if work_dir is not None else _work(Path(out_path))
    settings = _settings_digest(model, source_path, target_path, opts)
    if reverse_model is not None:
        settings["reverse_model"] = model_fingerprint(reverse_model)
    _open_work(work, settings, resume, source_path, target_path)
    job = Job(model, src, tgt, source_path, target_path, opts, work, device=opts.device,
              progress=progress, pool=pool, long_src=long_src, long_tgt=long_tgt)
    return Mining(job, Path(out_path), reverse_model, scored=load_scored(work))


def _open_work(work: Path, settings: dict, resume: bool, source_path, target_path) -> None:
    """Keep ``work`` (with ``resume``, when its key is ``settings``), or start it over (without
    ``resume``; a damaged key or one of an older key version, with a warning); a resumed job of
    another key is refused, naming what changed.  Its key is written before any stage."""
    settings_file = work / "settings.json"
    if work.is_dir():
        try:  # written atomically before any stage: missing means nothing was computed yet
            old = read_sealed(settings_file, "job settings")
        except OSError:
            old = None
        except DamagedFile as exc:  # nothing in the directory can be trusted: start over
            if resume:
                logger.warning("%s; cannot resume from it: starting the job over", exc)
            old = None
        if resume and older_key(old, work, "its stages"):
            old = None
        if resume and old is not None and old != settings:
            what = _what_differs(old, settings, source_path, target_path)
            raise InputError(f"cannot resume, changed since the interrupted run: {what} (run "
                             "without --resume to start over)", settings_file)
        if not resume or old != settings:
            shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    atomic_write(settings_file, dumps_sealed(settings), "job settings")


def candidates_stage(m: Mining) -> None:
    """Every generator's candidates, united, without the empty and too-long lines' pairs."""
    if m.scored is None:
        src, tgt = m.job.src, m.job.tgt
        m.store = _candidates(m.job, _empty_mask(src) | m.job.long_src,
                              _empty_mask(tgt) | m.job.long_tgt)


def scores_stage(m: Mining) -> None:
    """The exact scores (:func:`_scores`; both directions with a reverse model)."""
    if m.scored is None:
        with m.job.timed("scoring"):
            m.store = _scores(m.job, m.store, m.job.model)
            if m.reverse_model is not None:
                m.store = _scores(m.job, m.store, m.reverse_model, reverse=True)


def priors_stage(m: Mining) -> None:
    """The targets' priors (:func:`_priors`), when the configuration asks for them."""
    if m.scored is None:
        with m.job.timed("priors"):
            m.store = _priors(m.job, m.store, keep=m.keep_priors)


def combination_stage(m: Mining) -> None:
    """The store marked complete (``scored``: a resumed job starts here) and the combined
    score's :class:`Combination` (checked against the columns before any stage ran,
    :func:`check_stages`)."""
    if m.scored is None:
        m.scored = m.store.mark(SCORED)
    m.comb = load_combination(m.job.opts)


def finish_stage(m: Mining) -> None:
    """The mining TSV (:func:`~triemine.mining.finish.finish_tsv`: the derived scores and
    ``combined`` a block at a time) and the job's summary."""
    job, opts, model = m.job, m.job.opts, m.job.model
    src, tgt, source_path, target_path = job.src, job.tgt, job.source_path, job.target_path
    skipped = lengths.skipped_summary(job.long_src, job.long_tgt)
    with job.timed("finish"):
        judge, m.density, judged = judge_adder(opts, m.scored, src, tgt, m.comb, m.density)
        density = m.density
        origins = finish_tsv(m.out_path, m.scored, src, tgt, m.comb, meta={
            "model": Path(model.path).name, "model_path": os.path.abspath(model.path),
            "source": os.path.abspath(source_path), "target": os.path.abspath(target_path),
            "mode": "+".join(opts.candidates),
            "beam": opts.search.beam if "trie" in opts.candidates else "-",
            "pipeline": key_of(opts), "combination": asdict(m.comb), "skipped_long": skipped,
            "skipped_bad": skipped_counts(src, tgt), **({"density": density} if density
                                                        else {}),
            **({"judge": judged} if judged else {}),
            **({"second_look": m.look} if m.look is not None else {})}, judge=judge)
    m.summary = {"sources": len(src), "targets": len(tgt), "candidates": len(m.scored),
                 "by_generator": origin_counts(origins), "skipped_long": skipped,
                 "skipped_bad": skipped_counts(src, tgt),
                 "stage_s": job.seconds, "output": str(m.out_path),
                 **({"second_look": m.look} if m.look is not None else {})}


def load_combination(opts: MineOptions) -> Combination:
    """The job's combined score: ``opts.scores.combination``, a file or a shipped name."""
    name = opts.scores.combination
    return Combination.load(name) if os.path.isfile(name) else shipped(name)


def _score_columns(opts: MineOptions, reverse: bool) -> Set[str]:
    return {c for r in [ScoreJob.of()] + [ScoreJob.of(reverse=True)] * reverse
            for c in (r.score, r.n_tokens)} | (set(JUDGE_ROWS) if opts.scores.coverage else set())


@dataclass(frozen=True)
class MiningStage:
    """One stage of the mining job: ``run(mining)``; ``columns(opts, reverse)``: the columns it
    writes to every candidate (``reverse``: with a reverse model), which the stages after it
    may read; ``check(opts, have)``: before any stage runs, given ``have``, the columns of the
    stages listed before it and every score derived from them."""

    run: Callable[[Mining], None]
    columns: Callable[[MineOptions, bool], Set[str]] = lambda opts, reverse: set()
    check: Optional[Callable[[MineOptions, Set[str]], None]] = None


def check_combination(opts: MineOptions, have: Set[str],
                      comb: Optional[Combination] = None) -> None:
    """Refuse the job's combination (``comb``, default :func:`load_combination`) when it needs
    a column not in ``have``."""
    comb = comb if comb is not None else load_combination(opts)
    missing = [f for f in comb.features if f not in have]
    if missing:
        raise InputError(f"combination {comb.name} needs {', '.join(missing)}, which candidates "
                         f"{','.join(opts.candidates)} with encoder {opts.neighbours.encoder} "
                         "do not produce "
                         "(choose another --combination or --config)")


# the mining job's stages, by the names a configuration's record lists them under
MINING: Dict[str, MiningStage] = {
    "candidates": MiningStage(candidates_stage, lambda opts, _r: set().union(
        *(REGISTRY[n].columns(opts) for n in opts.candidates))),
    "scores": MiningStage(scores_stage, _score_columns),
    "priors": MiningStage(priors_stage, lambda opts, _r: {PRIOR} if opts.scores.priors
                          else set()),
    "combination": MiningStage(combination_stage, check=check_combination),
    "finish": MiningStage(finish_stage, check=check_judge),
}
MINE = tuple(MINING)  # in order


def check_stages(names: Sequence[str], opts: MineOptions, reverse: bool) -> None:
    """Every mining stage's ``check`` of the stage list ``names`` (others are skipped), each
    given :func:`available` of the stages listed before it, before any work."""
    for i, name in enumerate(names):
        if name in MINING and MINING[name].check is not None:
            MINING[name].check(opts, available(names[:i], opts, reverse))


def available(names: Sequence[str], opts: MineOptions, reverse: bool) -> Set[str]:
    """The columns the mining stages of ``names`` write (:attr:`MiningStage.columns`; others
    are skipped) and the scores derived from them (:func:`~triemine.mining.features.derivable`)."""
    return derivable(set().union(*(MINING[n].columns(opts, reverse) for n in names
                                   if n in MINING)))


def mine_pipeline(model, source_path, target_path, out_path, opts: MineOptions,
                  resume: bool = False, progress: bool = False, reverse_model=None,
                  pool=None, work_dir=None,
                  after: Optional[Callable[[Mining], None]] = None) -> dict:
    """Run the mining stages (:data:`MINE`; module docstring) of the job ``opts`` describes
    (``opts.device``, its trie search's ``shard_sources`` and ``target_shards``); returns a
    summary dict.

    ``reverse_model`` (a model translating the target language into the source language) adds
    log P(x|y) of every pair and the dual conditional cross-entropy ``dual_ce``.

    ``pool`` (:func:`triemine.distributed.make_pool`: worker processes or Ray actors) runs the
    stages in deterministic shards (:mod:`triemine.distributed`): the sentence embeddings and
    their kNN, the trie search per source shard (``shard_sources``; ``target_shards`` tries),
    the exact scores of the candidate pairs and the targets' priors; the output is
    byte-identical to the run without a pool.  ``work_dir``: where the stages are kept
    (default ``out_path + ".work"``); ``after(mining)``: a stage run after them with the pool
    open (e.g. :func:`triemine.mining.second_look.second_look`).
    """
    check_stages(MINE, opts, reverse_model is not None)
    m = open_mining(model, source_path, target_path, out_path, opts, resume=resume,
                    progress=progress, reverse_model=reverse_model, pool=pool, work_dir=work_dir)
    with pool if pool is not None else contextlib.nullcontext():  # one start of the workers
        for name in MINE:
            MINING[name].run(m)
        if after is not None:
            after(m)
    return m.summary


def _candidates(job: Job, skip_src: np.ndarray, skip_tgt: np.ndarray) -> ColumnStore:
    """Every generator's candidates, united, without the skipped lines' pairs, each pair with
    every margin space's features: the job's store (``candidates.cols``, :func:`unite`)."""
    stores, spaces = [], []
    for name in job.opts.candidates:
        store, space = REGISTRY[name].run(job)
        stores.append(store)
        spaces += [space] if space is not None else []
    where = stage_dir(job.work, CANDIDATES)
    united = ColumnStore.open(where)
    if united is not None and CANDIDATES in united.done:
        return united
    return unite(where, stores, spaces, skip_src, skip_tgt)


def unite(where: Path, stores, spaces, skip_src: np.ndarray,
          skip_tgt: np.ndarray) -> ColumnStore:
    """The union of the generators' ``stores`` (:meth:`CandidateSet.union`), without the pairs
    of the ``skip_src``/``skip_tgt`` lines, every pair with every margin space's features,
    written to a new store at ``where`` a range of ``UNITE_SOURCES`` sources at a time: the
    stores are sorted by source, so a range's rows are one slice of each, and the ranges'
    unions, one after the other, are the union."""
    # the columns in the order the union and the spaces' features add them
    columns = list(dict.fromkeys([c for st in stores for c in st.columns] +
                                 [c for sp in spaces for c in sp.columns]))

    def ranges():
        for a in range(0, len(skip_src), UNITE_SOURCES):
            b = a + UNITE_SOURCES
            cands = CandidateSet.empty()
            for st in stores:
                cands = cands.union(st.block(st.first_row_of_source(a),
                                             st.first_row_of_source(b)))
            keep = ~skip_src[cands.src] & ~skip_tgt[cands.tgt]
            if not keep.all():  # a copy only when a pair goes
                cands = cands.take(np.flatnonzero(keep))
            for space in spaces:  # every pair gets every space's features
                cands = space.fill_features(cands)
            # a generator with no pair in the range still has its columns (NaN), as the union
            # of the whole sets gives them to the other generators' pairs
            yield cands.with_columns(**{c: np.full(len(cands), np.nan) for c in columns
                                        if c not in cands.columns})
    return write_store(where, ranges(), columns, done=(CANDIDATES,))


def _scores(job: Job, store: ColumnStore, model, reverse: bool = False) -> ColumnStore:
    """``score`` and ``n_tokens`` (``_rev``: log P(x|y) by the reverse model) where missing
    (NaN; the trie search's pairs have them; with ``--coverage``-on configurations also
    :data:`triemine.scoring.rows.JUDGE_ROWS`: ``uncovered``, the share of the source's pieces the
    target leaves uncovered, and the target's EOS and least token log-probabilities, from the
    same pass, NaN for the pairs the trie search scored), by forced decoding in shards of whole
    chunks (:func:`triemine.mining.score_shards.forced_score_shards`) on the job's pool or in this
    process (:meth:`Job.model_pool`), merged into the store's columns a block at a time."""

    rules = ScoreJob.of(reverse)
    stage, names = rules.name, [rules.score, rules.n_tokens]
    todo_dir = job.work / f"{stage}.todo.cols"
    if stage in store.done:
        shutil.rmtree(todo_dir, ignore_errors=True)  # a job killed before it removed it
        return store
    pairs = store
    if names[0] in store.columns:  # only the pairs without a score: their own small store
        pairs = write_store(todo_dir, (
            CandidateSet(c.src[m], c.tgt[m], c.origin[m]) for c in store.blocks()
            for m in [np.isnan(c.col(names[0]))]), [])
        if not len(pairs) and names[1] in store.columns:  # nothing to score, nothing to write
            shutil.rmtree(todo_dir, ignore_errors=True)
            return store.mark(stage)
    coverage = job.opts.scores.coverage and not reverse
    names += list(JUDGE_ROWS) * coverage
    # the pairs memory-mapped, each shard's read when its task is made
    in_idx, out_idx = rules.sides(pairs.mapped("src"), pairs.mapped("tgt"))
    parts, _ = forced_score_shards(model, in_idx, out_idx, job.source_path, job.target_path,
                                   job.work, job.model_pool(model), name=stage, reverse=reverse,
                                   progress=job.progress, desc=rules.desc, device=job.device,
                                   precision=job.opts.precision, coverage=coverage)
    rows = _Rows(parts)

    def merged():  # the computed rows, in order, go to the NaN rows of each block
        for a, b in store.bounds():
            have = {n: (store.rows(n, a, b) if n in store.columns else np.full(b - a, np.nan))
                    for n in names}
            todo = np.flatnonzero(np.isnan(have[names[0]]))
            for n, vals in zip(names, rows.take(len(todo))):
                have[n][todo] = vals
            yield have
    scored = store.put_columns(names, merged(), stage)
    rows.check_done(stage)
    if pairs is not store:
        shutil.rmtree(pairs.dir, ignore_errors=True)
    return scored


class _Rows:
    """The rows of a stream of column tuples (``(score, n_tokens)`` a shard), taken ``n`` at a
    time whatever the shards' lengths."""

    def __init__(self, parts):
        self.parts, self.buf = iter(parts), None

    def take(self, n: int):
        out, got = [], 0
        while got < n:
            if self.buf is None or not len(self.buf[0]):
                self.buf = next(self.parts, None)
                if self.buf is None:
                    raise RuntimeError("fewer computed rows than pairs to score")
            m = min(n - got, len(self.buf[0]))
            out.append(tuple(c[:m] for c in self.buf))
            self.buf = tuple(c[m:] for c in self.buf)
            got += m
        if not out:
            return (np.zeros(0), np.zeros(0))
        return tuple(np.concatenate(cols) for cols in zip(*out))

    def check_done(self, what: str) -> None:
        """Every row taken (a stream of other pairs is an error, never a silent cut)."""
        if (self.buf is not None and len(self.buf[0])) or next(self.parts, None) is not None:
            raise RuntimeError(f"{what}: more computed rows than pairs to score")


def _priors(job: Job, store: ColumnStore, keep: bool = True) -> ColumnStore:
    """The ``prior`` column (where no generator gave one), when the configuration asks for it:
    the targets' priors table (:func:`triemine.mining.features.prior_table`) for every
    candidate's target, computed where not cached, in shards; added to the cache with ``keep``."""
    if not job.opts.scores.priors or "priors" in store.done:
        return store
    lines = np.zeros(len(job.tgt), dtype=bool)  # every candidate's target (one byte a line)
    for a, b in store.bounds():
        lines[store.rows("tgt", a, b)] = True

    pool = job.model_pool(job.model)

    def sharded(need):  # one range's priors in shards: pairs with the empty source (-1, a
        # view, not an array of it); what is left to compute depends on the shared cache, so
        # other lines start over; the scores go to one array as each shard is read
        part = prior_range(need[0])  # the range's shards apart from the others'
        parts, _ = forced_score_shards(job.model, np.broadcast_to(np.int64(-1), len(need)),
                                       need, job.source_path, job.target_path, job.work,
                                       pool, name=f"priors.{part}" if part else "priors",
                                       desc="priors", stale="restart", progress=job.progress,
                                       device=job.device, precision=job.opts.precision)
        out, a = np.empty(len(need)), 0
        for score, _ntok in parts:
            out[a:a + len(score)] = score
            a += len(score)
        return out
    table = prior_table(job.model, job.tgt.texts, lines, trie=job.trie,
                        node_prior=job.node_prior, cache_dir=cache_dir("priors"),
                        progress=job.progress, scores=sharded, work=job.work, device=job.device,
                        precision=job.opts.precision, keep=keep)

    def blocks():
        for a, b in store.bounds():
            have = store.rows("prior", a, b) if "prior" in store.columns else \
                np.full(b - a, np.nan)
            yield {PRIOR: np.where(np.isnan(have), table[store.rows("tgt", a, b)], have)}
    return store.put_columns([PRIOR], blocks(), "priors")


def _empty_mask(corpus) -> np.ndarray:
    mask = np.zeros(len(corpus), dtype=bool)
    mask[np.asarray(corpus.empty_lines, dtype=np.int64) - 1] = True
    return mask


def _too_long(model, reverse_model, src, tgt, max_length: Optional[int]):
    """The source and target lines this job skips as too long (:mod:`triemine.decoding.lengths`):
    over the model's limits, the reverse model's (which reads the target side) or ``max_length``;
    the counts are warned about once here."""
    lim = lengths.LengthLimits.of(model, max_length)
    long_src = lengths.too_long(model, src.texts, "source", lim)
    long_tgt = lengths.too_long(model, tgt.texts, "target", lim)
    if reverse_model is not None:
        rlim = lengths.LengthLimits.of(reverse_model, max_length)
        long_src |= lengths.too_long(reverse_model, src.texts, "target", rlim)
        long_tgt |= lengths.too_long(reverse_model, tgt.texts, "source", rlim)
    lengths.report(long_src, src.path, "source", lim.source)
    lengths.report(long_tgt, tgt.path, "target", lim.target)
    return long_src, long_tgt
