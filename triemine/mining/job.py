"""The job driver: the pool, the model, then the configuration's stages in order.

A configuration's record lists its stages (``stages`` in ``triemine/config/records/<name>.json``,
:mod:`triemine.config.configurations`), each a name of :data:`STAGES`:

* ``dedup``: both corpora grouped into their distinct texts
(:func:`triemine.mining.dedup.unique_inputs`;
  nothing with ``--no-dedup``), so the stages after it read the unique corpora;
* the mining job's stages (:data:`triemine.mining.run.MINING`, their state kept in
  ``OUT.work/``): ``candidates`` (by generator, united), ``scores`` (exact, forced decoding),
  ``priors``, ``combination`` (the store complete, the combined score), ``finish`` (the TSV);
* ``trie_search``: the paper's trie search alone (:func:`triemine.decoding.driver.mine_to_tsv`);
* ``second_look``: the sources without a kept pair proposed candidates again, by the model's
  own translation (:func:`triemine.mining.second_look.second_look`; the TSV written again);
* ``dedup_map``: the job's rows mapped back to every original line
  (:func:`triemine.mining.dedup.expand_output`);
* ``selection``: the kept pairs chosen (:func:`triemine.mining.result.job_result`).

:func:`run_job` is what :func:`triemine.api.run` calls once the paths are checked and the
output locked.  Before any stage runs, each mining stage's check sees the columns the stages
listed before it write (:func:`triemine.mining.run.check_stages`: a combination needing a column
no stage writes is refused).  A stage is a function of the :class:`JobRun`: adding one is adding
it here (or to :data:`~triemine.mining.run.MINING`) and naming it in a record.
:func:`job_inputs` lists the files a job reads, for those checks.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from triemine.config.configurations import PAPER, configuration
from triemine.decoding.driver import mine_to_tsv
from triemine.models.model_dir import load_model_dir
from triemine.decoding.task import load_trie_for_dict
from triemine.distributed import check_workers, make_pool
from triemine.mining.dedup import Unique, expand_output, unique_inputs
from triemine.mining.options import MineOptions
from triemine.mining.result import MiningResult, job_result
from triemine.mining.run import MINING, Mining, check_stages, open_mining
from triemine.mining.second_look import second_look


@dataclass
class JobRun:
    """One job's state as its stages pass it on: its settings, model, pool and files; ``unique``
    once deduplicated; ``mining`` once a mining stage ran; ``summary`` once mined; ``result``
    once selected (``select``, ``saved`` and ``given``: :func:`job_result`'s)."""

    opts: MineOptions
    model: object
    source: str
    target: str
    output: str
    resume: bool
    progress: bool
    pool: object = None
    unique: Optional[Unique] = None
    mining: Optional[Mining] = None
    summary: Optional[dict] = None
    select: bool = False
    saved: Any = None
    given: Optional[Mapping[str, float]] = None
    result: Optional[MiningResult] = None

    def corpora(self):
        """``(source, target, TSV)`` the mining stages read and write: the unique corpora and
        the dedup folder's TSV once deduplicated."""
        if self.unique is None:
            return self.source, self.target, self.output
        u = self.unique
        return u.sides["source"].path, u.sides["target"].path, str(u.job_output)

    def mined(self) -> Mining:
        """The mining job's state, opened by its first stage (with the reverse model, if any;
        its stages kept in ``OUT.work/`` whatever TSV they write)."""
        if self.mining is None:
            opts = self.opts
            reverse = (load_model_dir(opts.reverse_model, device=opts.device)
                       if opts.reverse_model else None)
            self.mining = open_mining(self.model, *self.corpora(), opts, resume=self.resume,
                                      progress=self.progress, reverse_model=reverse,
                                      pool=self.pool if opts.sharded else None,
                                      work_dir=self.output + ".work")
        return self.mining


def _dedup(job: JobRun) -> None:
    d = job.opts.duplicates
    if d.dedup:
        job.unique = unique_inputs(job.source, job.target, job.output, case=d.dedup_case,
                                   punct=d.dedup_punct)


def _mining_stage(name: str) -> Callable[[JobRun], None]:
    """The job stage running the mining stage ``name`` (its summary once it has one)."""
    def run(job: JobRun) -> None:
        mining = job.mined()
        MINING[name].run(mining)
        job.summary = mining.summary
    return run


def _trie_search(job: JobRun) -> None:
    opts = job.opts
    trie = load_trie_for_dict(opts.trie, job.model.tgt_dict) if opts.trie else None
    job.summary = mine_to_tsv(job.model, *job.corpora(), search=opts.search, pool=job.pool,
                              trie=trie, device=opts.device, resume=job.resume,
                              debug=opts.debug, progress=job.progress).as_dict()


def _second_look(job: JobRun) -> None:
    mining = job.mined()
    second_look(mining, saved=job.saved, given=job.given)
    job.summary = mining.summary


def _dedup_map(job: JobRun) -> None:
    if job.unique is not None:
        job.summary = expand_output(job.unique, job.summary)


def _selection(job: JobRun) -> None:
    job.result = job_result(job.output, job.summary, select=job.select, saved=job.saved,
                            given=job.given or {}, every_pair=job.opts.duplicates.every_pair)


STAGES: Dict[str, Callable[[JobRun], None]] = {
    "dedup": _dedup, **{name: _mining_stage(name) for name in MINING},
    "trie_search": _trie_search, "second_look": _second_look, "dedup_map": _dedup_map,
    "selection": _selection}


def run_job(opts: MineOptions, model, source: str, target: str, output: str, *,
            resume: bool = False, progress: bool = False, select: bool = False, saved=None,
            given: Optional[Mapping[str, float]] = None) -> MiningResult:
    """Check the stages of the configuration's record (:func:`check_stages`), start the pool
    (``opts.pool``; with target shards an in-process one), load the model (``model``: a
    directory or a loaded model), run the stages in order (the pool open across them); returns
    the job's result (its summary; with ``select``, the pairs it keeps)."""
    stages = configuration(PAPER if opts.paper else opts.config).stages
    check_stages(stages, opts, opts.reverse_model is not None)
    job = JobRun(opts, model, source, target, output, resume, progress, pool=_pool(opts, model),
                 select=select, saved=saved, given=given)
    if isinstance(model, (str, os.PathLike)):
        # with Ray the driver only plans and merges: the actors hold the model on --device
        job.model = load_model_dir(model, target_spm=opts.target_spm,
                                   device="cpu" if opts.pool.ray is not None else opts.device)
    with job.pool if job.pool is not None else contextlib.nullcontext():  # one start of workers
        for name in stages:
            STAGES[name](job)
    return job.result if job.result is not None else \
        MiningResult(output, None, None, summary=job.summary)


def _pool(opts: MineOptions, model):
    """The job's pool (None: in this process), checked before the slow model load: the
    workers against this machine's cores and memory, a Ray cluster reached."""
    workers, ray = opts.pool.workers, opts.pool.ray
    if not (opts.sharded or opts.search.target_shards > 1):
        return None
    threads = int(os.environ.get("OMP_NUM_THREADS") or 1)
    if ray is None and workers:
        check_workers(workers, threads, _model_bytes(model, opts.reverse_model))
    pool = make_pool(workers, ray=ray, device=opts.device, threads=threads)
    if ray is not None:  # fail before the slow model load (no ray, no cluster, no GPU)
        pool.check()
        if ray == "local":  # this machine's cores and memory (a cluster's: Ray's)
            check_workers(pool.workers, threads, _model_bytes(model, opts.reverse_model))
    return pool


def _model_bytes(model, reverse_model) -> int:
    """The size of the checkpoint(s) a worker loads (:func:`triemine.distributed.check_workers`)."""
    total = 0
    for m in (model, reverse_model):
        where = m if isinstance(m, (str, os.PathLike)) else getattr(m, "path", None)
        if where is not None and os.path.isfile(os.path.join(where, "checkpoint.pt")):
            total += os.path.getsize(os.path.join(where, "checkpoint.pt"))
    return total


# mine()'s argument for each of trie-mine's flags that name files
ARGUMENTS = {"-o": "output", "--bitext": "bitext", "--source": "source", "--target": "target",
             "--model": "model", "--reverse-model": "reverse_model", "--trie": "trie",
             "--target-spm": "target_spm", "--thresholds": "thresholds",
             "--combination": "combination"}


def argument_name(flag: str, api: bool) -> str:
    """``flag`` as :func:`triemine.mine`'s argument (``api``) or as ``trie-mine``'s flag."""
    return ARGUMENTS.get(flag, flag) if api else flag


def job_inputs(opts: MineOptions, model, source, target, thresholds,
               api: bool = False) -> List[Tuple[str, str]]:
    """``(name, path)`` of every file the job ``opts`` reads, each named by
    :func:`argument_name`."""
    model_dir = model if isinstance(model, (str, os.PathLike)) else getattr(model, "path", None)
    return [(argument_name(flag, api), os.fspath(p)) for flag, p in (
        ("--source", source), ("--target", target), ("--model", model_dir),
        ("--reverse-model", opts.reverse_model), ("--trie", opts.trie),
        ("--target-spm", opts.target_spm), ("--thresholds", thresholds),
        ("--combination", opts.scores.combination if opts.scores.combination is not None
         and os.path.isfile(opts.scores.combination) else None)) if p is not None]


def inputs_of(inputs: List[Tuple[str, str]], flag: str) -> Optional[str]:
    """The path given as ``flag`` (or as its argument) among ``inputs``, else ``None``."""
    return next((p for f, p in inputs if f in (flag, ARGUMENTS.get(flag))), None)
