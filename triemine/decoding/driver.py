"""The trie search of a source corpus into a mining TSV: the one driver, in this process or in
shards on a pool.

:func:`mine_to_tsv` is what ``trie-mine --config paper`` and the mining job's ``trie`` generator
run.  It streams the mining TSV (header, then one row per (match, target line id), sources in
input order) and keeps the sidecars ``OUT.tsv.meta.json`` and ``OUT.tsv.progress``
(:mod:`triemine.io.tsv`):

* without a pool, in this process, flushed per block
  (:func:`~triemine.decoding.batching.plan_blocks`); ``resume=True`` continues an interrupted run
  from the last complete block without losing or duplicating rows;
* with a pool (:func:`triemine.distributed.make_pool`), in shards of whole blocks of the same plan
  recorded in ``OUT.tsv.shards/`` (:mod:`triemine.distributed.shards`), merged at the end: the
  same bytes as without one (same settings, same threads per process).

Both write the same sidecars, keyed by :func:`search_key`.  Sources over the model's positions or
``max_length`` are skipped, and so are rows of targets over ``max_length``; both counts are
``skipped_long`` in the summary and the ``.meta.json``.  Empty source lines produce no rows but
count as done.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from triemine.io import (count_rows, crc32_range, open_pair, prepare_resume, skipped_counts,
                         write_meta, write_progress)
from triemine.decoding.batching import plan_blocks
from triemine.decoding.matches import match_rows
from triemine.decoding.model_spec import model_spec
from triemine.decoding.runner import long_targets, mine_batches, source_lengths
from triemine.decoding.settings import SearchSettings
from triemine.decoding.shards import TrieShardTask
from triemine.decoding.trie_cache import check_trie_fits, get_trie, target_shard_tries
from triemine.distributed import make_pool
from triemine.distributed.shards import SHARDS_SUFFIX, total
from triemine.models.fingerprint import model_fingerprint
from triemine.decoding.lengths import LENGTH_RULE
from triemine.distributed.stage import Stage, StageRun, run_stage, stage_key
from triemine.errors import InputError
from triemine.scoring.prior import get_node_priors
from triemine.config.settings import key_of


@dataclass
class MineSummary:
    sources: int
    decoded: int
    rows: int
    sources_with_matches: int
    skipped_long: dict  # {"source": n, "target": m}: lines too long for the model, skipped
    skipped_bad: dict   # {"source": n, "target": m}: bad lines (triemine.io.corpus), skipped
    resumed_from: int
    trie_path: Optional[str]
    shards: Optional[dict] = None  # with a pool: shard counts, directory, workers' CPU seconds

    def as_dict(self) -> dict:
        """The run summary ``trie-mine`` prints: the fields, and the shard statistics flat."""
        out = asdict(self)
        out.update(out.pop("shards") or {})
        return out


@dataclass
class _Run:
    """What both forms of the driver prepare alike."""

    src: object                     # triemine.io.corpus.Corpus
    tgt: object
    tries: List[Tuple[object, int]]  # (trie, first target line) per target shard
    node_prior: Optional[np.ndarray]
    lengths: np.ndarray             # tokens of each source (0: empty or skipped as too long)
    skip_tgt: np.ndarray
    skipped_long: dict
    skipped_bad: dict
    key: dict                       # search_key
    header: str
    search: SearchSettings          # the caller's, with this job's blocks (for_job)


def mine_to_tsv(model, source_path, target_path, out_path, *,
                search: SearchSettings = SearchSettings(), pool=None, trie=None,
                device: str = "cpu", resume: bool = False, debug: bool = False,
                progress: bool = False, stop_after_blocks: Optional[int] = None) -> MineSummary:
    """Mine ``source_path`` against ``target_path`` and write the mining TSV to ``out_path``.

    ``search``: the settings (their defaults are the paper's search; off the CPU the device's
    batches, :meth:`SearchSettings.on_device`); ``search.priors`` computes
    the trie's node priors once (:mod:`triemine.scoring.prior`, cached beside the trie) and adds
    the columns ``prior`` and ``pmi``.  ``pool``: run in shards on it (``search.target_shards``
    > 1 without a pool: in shards in this process); ``trie``: a loaded trie instead of the
    cached one.  ``stop_after_blocks`` (in this process only) stops after that many blocks, as
    an interrupted run would.
    """
    search = search.on_device(device)  # a GPU's larger batches, unless told
    if pool is None and search.target_shards > 1:
        pool = make_pool(0)
    if pool is not None and stop_after_blocks is not None:
        raise ValueError("stop_after_blocks applies to the search in this process (no pool)")
    run = _prepare(model, source_path, target_path, search, trie, pool is not None, progress)
    search = run.search
    meta = _meta(model, run, search)
    if pool is None:
        write_meta(out_path, meta)
        summary = _in_process(model, run, search, Path(out_path), device=device, resume=resume,
                              debug=debug, progress=progress, stop_after_blocks=stop_after_blocks)
    else:
        summary = _in_shards(model, run, search, Path(out_path), pool, source_path, target_path,
                             device=device, resume=resume, debug=debug, progress=progress)
    if stop_after_blocks is None or summary.resumed_from + summary.decoded == len(run.src):
        write_meta(out_path, dict(meta, rows=count_rows(out_path)))  # finished: its rows
    return summary


def search_key(model, search: SearchSettings, source_path, target_path, n_sources: int) -> dict:
    """What the search's output depends on, as ``OUT.tsv.progress`` and the shard manifest
    record it and a resumed run checks it: the model, the corpora (their paths and contents),
    their length rule and every setting of ``search`` but the transient ones."""
    return stage_key({"model": model_fingerprint(model), "source": os.path.abspath(source_path),
                      "target": os.path.abspath(target_path), "n_sources": n_sources,
                      "lengths": LENGTH_RULE, **key_of(search)},
                     {"source_sha256": source_path, "target_sha256": target_path})


def _prepare(model, source_path, target_path, search: SearchSettings, trie, sharded: bool,
             progress: bool) -> _Run:
    src, tgt = open_pair(source_path, target_path)
    if search.target_shards > 1:
        if trie is not None:
            raise InputError("--target-shards builds one trie per target range: it cannot use "
                             "a prebuilt trie", getattr(trie, "path", None))
        tries = target_shard_tries(model, target_path, search.target_shards, search.trie_nbest,
                                   progress)
    else:
        if trie is None:
            trie = get_trie(model, target_path, search.trie_nbest, progress=progress)
        if sharded and getattr(trie, "path", None) is None:
            raise InputError("a sharded search needs the trie as a file (workers memory-map it)")
        check_trie_fits(trie, len(tgt), target_path)
        tries = [(trie, 0)]
    node_prior = None
    if search.priors:  # computed once here, stored beside each trie; workers only read them
        priors = [get_node_priors(model, t, progress=progress) for t, _ in tries]
        node_prior = priors[0] if len(priors) == 1 else None  # the in-process search's
    lengths, skipped = source_lengths(model, src.texts, source_path, search.max_length)
    search = search.for_job(int(np.count_nonzero(lengths)))
    skip_tgt = long_targets(model, tgt.texts, search.max_length)
    return _Run(src, tgt, tries, node_prior, lengths, skip_tgt,
                {"source": len(skipped), "target": int(skip_tgt.sum())}, skipped_counts(src, tgt),
                search_key(model, search, source_path, target_path, len(src)),
                "\t".join(search.columns), search)


def _in_process(model, run: _Run, search: SearchSettings, out_path: Path, *, device: str,
                resume: bool, debug: bool, progress: bool,
                stop_after_blocks: Optional[int]) -> MineSummary:
    resumed = prepare_resume(out_path, run.key, run.header) \
        if resume and out_path.exists() else None
    if resumed is not None:
        start, crc = resumed
        f = open(out_path, "r+b")
        f.seek(0, os.SEEK_END)
    else:
        start, head = 0, (run.header + "\n").encode("utf-8")
        f = open(out_path, "wb")
        f.write(head)
        crc = zlib.crc32(head)
    src, tgt = run.src, run.tgt
    trie = run.tries[0][0]
    with f:
        f.flush()
        write_progress(out_path, run.key, start, f.tell(), crc)
        rows = decoded = with_matches = blocks = 0
        for s, e, results in mine_batches(model, src.texts, trie, search, device=device,
                                          debug=debug, start=start, progress=progress,
                                          lengths=run.lengths, node_prior=run.node_prior):
            flat = [m for ms in results for m in ms]
            text = match_rows(flat, search.columns, src.ids, src.texts, tgt.ids, tgt.texts,
                              run.skip_tgt)
            data = text.encode("utf-8")
            f.write(data)
            f.flush()
            crc = zlib.crc32(data, crc)
            write_progress(out_path, run.key, e, f.tell(), crc)
            rows += text.count("\n")
            decoded += e - s
            with_matches += sum(1 for ms in results if ms)
            blocks += 1
            if stop_after_blocks is not None and blocks >= stop_after_blocks:
                break
    return MineSummary(sources=len(src), decoded=decoded, rows=rows,
                       sources_with_matches=with_matches, skipped_long=run.skipped_long,
                       skipped_bad=run.skipped_bad,
                       resumed_from=start, trie_path=getattr(trie, "path", None))


def _in_shards(model, run: _Run, search: SearchSettings, out_path: Path, pool, source_path,
               target_path, *, device: str, resume: bool, debug: bool,
               progress: bool) -> MineSummary:
    """Shards: groups of consecutive blocks of the one-process plan holding at least
    ``search.shard_size(n)`` sources, in ``OUT.shards/``; with target shards each source's
    matches of every trie merged (:func:`triemine.decoding.shards.merge_matches`)."""
    n = len(run.src)
    plan = plan_blocks(run.lengths, search.sources_per_batch, search.max_tokens,
                       search.sort_window, search.sources_per_block)
    key = dict(run.key, tries=[[os.path.basename(t.path), off] for t, off in run.tries])
    write_meta(out_path, _meta(model, run, search))
    spec, trie_files = model_spec(model, device), tuple((os.path.abspath(t.path), off)
                                                        for t, off in run.tries)
    source, target = os.path.abspath(source_path), os.path.abspath(target_path)
    ran = run_stage(Stage(
        f"mine ({search.mode}, shards)", Path(str(out_path) + SHARDS_SUFFIX), key,
        ([s for s, _ in plan], n, search.shard_size(n)),
        lambda s: TrieShardTask(shard=s.id, model=spec, source=source, target=target,
                                start=s.start, end=s.end, tries=trie_files, search=search,
                                debug=debug),
        unit="sources", bar_unit="sent", ext="tsv",
        resume=resume, progress=progress, task=TrieShardTask), pool)
    size = ran.merge_to(out_path, (run.header + "\n").encode("utf-8"))
    with open(out_path, "rb") as f:
        write_progress(out_path, run.key, n, size, crc32_range(f, 0, size))
    return _sharded_summary(run, ran)


def _sharded_summary(run: _Run, ran: StageRun) -> MineSummary:
    """The summary of a search run in shards (``ran``: its :class:`StageRun`)."""
    entries = ran.store.entries()
    return MineSummary(sources=len(run.src), decoded=ran.computed_items(),
                       rows=total(entries, "rows"),
                       sources_with_matches=total(entries, "with_matches"),
                       skipped_long=run.skipped_long, skipped_bad=run.skipped_bad,
                       resumed_from=ran.reused_items(),
                       trie_path=";".join(t.path for t, _ in run.tries),
                       shards=ran.stats())


def _meta(model, run: _Run, search: SearchSettings) -> dict:
    """What produced the TSV, for evaluation signatures (``OUT.tsv.meta.json``)."""
    model_path = getattr(model, "path", None)
    spm = getattr(model, "target_spm_path", None)
    return {"model": Path(model_path).name if model_path is not None else None,
            "model_path": os.path.abspath(model_path) if model_path is not None else None,
            "source": run.key["source"], "target": run.key["target"], "mode": search.mode,
            "beam": search.beam, "nbest": search.nbest, "trie_nbest": search.trie_nbest,
            "prior_weight": search.prior_weight,
            "target_spm": os.path.abspath(spm) if spm is not None else None,
            "skipped_long": run.skipped_long, "skipped_bad": run.skipped_bad,
            "rows": None}  # while the run appends rows (triemine.io.tsv.check_rows)
