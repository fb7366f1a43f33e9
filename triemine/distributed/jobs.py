"""The sharded jobs: the trie search of a source corpus, and exact scores of candidate pairs.

Both plan their shards on the single-process run's own batch boundaries, so the merged output is
byte-identical to :func:`triemine.decoding.driver.mine_to_tsv` / the scores of
:func:`triemine.mining.features.exact_scores` with the same settings and threads per process.
"""
from __future__ import annotations

import hashlib
import io
import logging
import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from triemine.decoding.fingerprint import model_fingerprint
from triemine.distributed.shards import Shard, ShardStore, execute, plan_shards, total
from triemine.distributed.worker import ModelSpec, ScoreShardTask, TrieShardTask
from triemine.errors import InputError

logger = logging.getLogger(__name__)

SHARDS_SUFFIX = ".shards"
DEFAULT_SHARD_SOURCES = 256   # trie search: at least this many sources per shard
SCORE_CHUNK = 2000            # exact_scores' default chunk: a scoring shard is whole chunks


def model_spec(model, device: str = "cpu") -> ModelSpec:
    spm = getattr(model, "target_spm_path", None)
    return ModelSpec(os.path.abspath(model.path), os.path.abspath(spm) if spm else None, device)


def _progress(total_n: int, initial: int, desc: str, unit: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total_n, initial=initial, desc=desc, unit=unit, disable=not enabled,
                dynamic_ncols=True)


# -- the trie search -----------------------------------------------------------------------------

def mine_to_tsv_sharded(model, source_path, target_path, out_path, pool, mode: str = "pre",
                        beam: int = 90, nbest: Optional[int] = None,
                        batch_size: Optional[int] = None,
                        max_tokens: Optional[int] = None, device: str = "cpu", trie=None,
                        trie_nbest: int = 1, resume: bool = False, debug: bool = False,
                        progress: bool = False, prior_weight: float = 0.0,
                        with_prior: bool = False, target_shards: int = 1,
                        shard_sources: int = DEFAULT_SHARD_SOURCES, sort_window: Optional[int] = None,
                        max_length: Optional[int] = None):
    """:func:`triemine.decoding.driver.mine_to_tsv` on a pool (:func:`triemine.distributed.make_pool`).

    Shards: groups of consecutive blocks of the single-process plan holding at least
    ``shard_sources`` sources; their outputs and manifest live in ``OUT.shards/``.  With
    ``target_shards`` K > 1 the target corpus is split into K line ranges, each with its own
    trie; every source is searched in each and its matches merged by score (the ``beam`` best).
    """
    from triemine.decoding.batching import SORT_WINDOW, plan_blocks, resolve_batch_size
    from triemine.decoding.driver import (MineSummary, _meta, read_mining_corpora,
                                          search_settings)
    from triemine.decoding.matches import PRIOR_COLUMNS
    from triemine.decoding.runner import encode_sources, long_targets
    from triemine.decoding.trie_cache import check_trie_fits, get_trie, target_shard_tries
    from triemine.tsv import header_line, write_meta, write_progress

    src, tgt = read_mining_corpora(source_path, target_path)
    if target_shards > 1:
        if trie is not None:
            raise InputError("--target-shards builds one trie per target range: it cannot use "
                             "a prebuilt trie", getattr(trie, "path", None))
        tries = target_shard_tries(model, target_path, target_shards, trie_nbest, progress)
    else:
        if trie is None:
            trie = get_trie(model, target_path, trie_nbest, progress=progress)
        if getattr(trie, "path", None) is None:
            raise InputError("a sharded search needs the trie as a file (workers memory-map it)")
        check_trie_fits(trie, len(tgt), target_path)
        tries = [(trie, 0)]
    with_prior = bool(with_prior or prior_weight)
    if with_prior:  # computed once here, stored beside each trie; workers only read them
        from triemine.scoring.prior import get_node_priors
        for t, _ in tries:
            get_node_priors(model, t, progress=progress)
    encoded, skipped = encode_sources(model, src.texts, source_path, max_length)  # warns once
    skipped_long = {"source": len(skipped),
                    "target": int(long_targets(model, tgt.texts, max_length).sum())}
    sort_window = SORT_WINDOW if sort_window is None else sort_window
    batch_size = resolve_batch_size(batch_size, beam)
    plan = plan_blocks([0 if e is None else len(e) for e in encoded], batch_size, max_tokens,
                       sort_window)
    shards = plan_shards([s for s, _ in plan], len(src), shard_sources)
    out_path = Path(out_path)
    settings = search_settings(model, source_path, target_path, len(src), mode, beam, nbest,
                               batch_size, max_tokens, prior_weight, with_prior, sort_window,
                               max_length)
    key = dict(settings, target_shards=target_shards,
               tries=[[os.path.basename(t.path), off] for t, off in tries],
               source_sha256=_sha(source_path), shard_sources=shard_sources)
    store = ShardStore(Path(str(out_path) + SHARDS_SUFFIX), key, shards, resume=resume,
                       ext="tsv", unit="sources")
    write_meta(out_path, dict(_meta(model, settings, trie_nbest), skipped_long=skipped_long))
    spec = model_spec(model, device)
    trie_files = tuple((os.path.abspath(t.path), off) for t, off in tries)

    def make_task(s: Shard) -> TrieShardTask:
        return TrieShardTask(s.id, spec, os.path.abspath(source_path),
                             os.path.abspath(target_path), s.start, s.end, trie_files, mode, beam,
                             nbest, batch_size, max_tokens, prior_weight, with_prior, debug,
                             sort_window, max_length)
    reused = sum(len(store.by_id[i]) for i in store.reused)
    with _progress(len(src), reused, f"mine ({mode}, shards)", "sent", progress) as bar:
        computed = execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
    header = header_line(PRIOR_COLUMNS if with_prior else ())
    size = store.merge_to(out_path, (header + "\n").encode("utf-8"))
    write_progress(out_path, settings, len(src), size)
    entries = store.entries()
    return MineSummary(sources=len(src), decoded=sum(len(store.by_id[i]) for i in computed),
                       rows=total(entries, "rows"), sources_with_matches=total(entries, "with_matches"),
                       skipped_long=skipped_long,
                       resumed_from=reused,
                       trie_path=";".join(t.path for t, _ in tries)), _shard_stats(store, computed)


def _sha(path) -> str:
    from triemine.paths import file_sha256
    return file_sha256(path)


def _shard_stats(store: ShardStore, computed: Sequence[int]) -> dict:
    """Counts, and the CPU seconds each worker process spent on this run's shards."""
    cpu: dict = {}
    for i in computed:
        e = store.done[str(i)]
        cpu[str(e.get("pid"))] = round(cpu.get(str(e.get("pid")), 0.0) + e.get("cpu_s", 0.0), 3)
    return {"shards": len(store.shards), "shards_computed": len(computed),
            "shards_reused": len(store.reused), "shard_dir": str(store.dir),
            "worker_cpu_s": cpu}


# -- exact scores --------------------------------------------------------------------------------

def exact_scores_sharded(model, cands, source_path, target_path, work_dir: Path, pool,
                         progress: bool = False, reverse: bool = False, device: str = "cpu",
                         resume: bool = True, chunk: int = SCORE_CHUNK,
                         precision: str = "fp32"):
    """:func:`triemine.mining.features.exact_scores` with the pairs to score cut into shards
    of whole chunks (``chunk`` pairs: the function's own chunking, 2000 in the mining job), so
    every pair gets the very bits the single-process run computes.  Shards live in
    ``work_dir/scores[_rev].shards/``.  Returns ``(candidates, shard statistics)``."""
    suffix = "_rev" if reverse else ""
    score = cands.col("score" + suffix).copy()
    ntok = cands.col("n_tokens" + suffix).copy()
    todo = np.flatnonzero(np.isnan(score))
    if not len(todo):
        return (cands.with_columns(**{"score" + suffix: score, "n_tokens" + suffix: ntok}),
                {"shards": 0, "shards_computed": 0, "shards_reused": 0})
    shards = plan_shards(range(0, len(todo), chunk), len(todo), chunk)
    src_idx, tgt_idx = cands.src[todo], cands.tgt[todo]
    h = hashlib.sha256(src_idx.tobytes())
    h.update(tgt_idx.tobytes())
    key = {"model": model_fingerprint(model), "source": _sha(source_path),
           "target": _sha(target_path), "pairs": h.hexdigest(), "reverse": reverse,
           "chunk": chunk, "precision": precision}
    store = ShardStore(Path(work_dir) / f"scores{suffix}{SHARDS_SUFFIX}", key, shards,
                       resume=resume, ext="npy", unit="pairs")
    spec = model_spec(model, device)

    def make_task(s: Shard) -> ScoreShardTask:
        return ScoreShardTask(s.id, spec, os.path.abspath(source_path),
                              os.path.abspath(target_path),
                              tuple(src_idx[s.start:s.end].tolist()),
                              tuple(tgt_idx[s.start:s.end].tolist()), chunk, reverse,
                              precision)
    reused = sum(len(store.by_id[i]) for i in store.reused)
    desc = "exact scores (shards" + (", reverse)" if reverse else ")")
    with _progress(len(todo), reused, desc, "pair", progress) as bar:
        computed = execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
    parts = [np.load(io.BytesIO(store.read(s.id))) for s in store.shards]
    arr = np.concatenate(parts, axis=1)
    score[todo] = arr[0]
    ntok[todo] = arr[1]
    return (cands.with_columns(**{"score" + suffix: score, "n_tokens" + suffix: ntok}),
            _shard_stats(store, computed))
