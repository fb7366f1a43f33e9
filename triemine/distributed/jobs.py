"""The sharded exact scores of candidate pairs, and what the sharded jobs share.

The sharded trie search is :func:`triemine.decoding.driver.mine_to_tsv` given a pool.  Both plan
their shards on the single-process run's own boundaries (blocks of the search, chunks of
:func:`triemine.mining.features.exact_scores`), so the merged output is byte-identical to the
single-process one with the same settings and threads per process.
"""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from triemine.decoding.fingerprint import model_fingerprint
from triemine.distributed.shards import Shard, ShardStore, execute, plan_shards
from triemine.distributed.worker import ModelSpec, ScoreShardTask
from triemine.mining.features import SCORE_CHUNK
from triemine.paths import file_sha256

SHARDS_SUFFIX = ".shards"


def model_spec(model, device: str = "cpu") -> ModelSpec:
    spm = getattr(model, "target_spm_path", None)
    return ModelSpec(os.path.abspath(model.path), os.path.abspath(spm) if spm else None, device)


def progress_bar(total_n: int, initial: int, desc: str, unit: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total_n, initial=initial, desc=desc, unit=unit, disable=not enabled,
                dynamic_ncols=True)


def shard_stats(store: ShardStore, computed: Sequence[int]) -> dict:
    """Counts, and the CPU seconds each worker process spent on this run's shards."""
    cpu: dict = {}
    for i in computed:
        e = store.done[str(i)]
        cpu[str(e.get("pid"))] = round(cpu.get(str(e.get("pid")), 0.0) + e.get("cpu_s", 0.0), 3)
    return {"shards": len(store.shards), "shards_computed": len(computed),
            "shards_reused": len(store.reused), "shard_dir": str(store.dir),
            "worker_cpu_s": cpu}


def forced_scores_sharded(model, src_idx: np.ndarray, tgt_idx: np.ndarray, source_path,
                          target_path, work_dir: Path, pool, *, name: str = "scores",
                          reverse: bool = False,
                          progress: bool = False, desc: str = "exact scores", device: str = "cpu",
                          resume: bool = True, chunk: int = SCORE_CHUNK, precision: str = "fp32",
                          stale: str = "refuse"):
    """:func:`triemine.mining.features.forced_scores` with the pairs cut into shards of whole
    chunks (``chunk`` pairs: the function's own chunking), so every pair gets the very bits the
    single-process run computes.  ``src_idx`` indexes the model's input lines (the target corpus
    with ``reverse``; ``-1`` the empty source).  Shards live in ``work_dir/<name>.shards/``.
    ``stale``: what a manifest of other pairs does (:class:`~triemine.distributed.shards.ShardStore`).
    Returns ``(score, n_tokens, shard statistics)``."""
    src_idx = np.asarray(src_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    n = len(src_idx)
    if not n:
        return np.zeros(0), np.zeros(0), {"shards": 0, "shards_computed": 0, "shards_reused": 0}
    shards = plan_shards(range(0, n, chunk), n, chunk)
    h = hashlib.sha256(src_idx.tobytes())
    h.update(tgt_idx.tobytes())
    key = {"model": model_fingerprint(model), "source": file_sha256(source_path),
           "target": file_sha256(target_path), "pairs": h.hexdigest(), "reverse": reverse,
           "chunk": chunk, "precision": precision}
    store = ShardStore(Path(work_dir) / f"{name}{SHARDS_SUFFIX}", key, shards,
                       resume=resume, ext="npy", unit="pairs", stale=stale)
    spec = model_spec(model, device)

    def make_task(s: Shard) -> ScoreShardTask:
        return ScoreShardTask(s.id, spec, os.path.abspath(source_path),
                              os.path.abspath(target_path),
                              tuple(src_idx[s.start:s.end].tolist()),
                              tuple(tgt_idx[s.start:s.end].tolist()), chunk=chunk,
                              reverse=reverse, precision=precision)
    reused = sum(len(store.by_id[i]) for i in store.reused)
    with progress_bar(n, reused, desc + " (shards)", "pair", progress) as bar:
        computed = execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
    arr = np.concatenate([np.load(io.BytesIO(store.read(s.id))) for s in store.shards], axis=1)
    return arr[0], arr[1], shard_stats(store, computed)


def exact_scores_sharded(model, cands, source_path, target_path, work_dir: Path, pool,
                         progress: bool = False, reverse: bool = False, device: str = "cpu",
                         resume: bool = True, chunk: int = SCORE_CHUNK,
                         precision: str = "fp32"):
    """:func:`triemine.mining.features.exact_scores` on a pool (:func:`forced_scores_sharded`),
    shards in ``work_dir/scores[_rev].shards/``.  Returns ``(candidates, shard statistics)``."""
    suffix = "_rev" if reverse else ""
    score = cands.col_or_nan("score" + suffix).copy()
    ntok = cands.col_or_nan("n_tokens" + suffix).copy()
    todo = np.flatnonzero(np.isnan(score))
    in_idx, out_idx = (cands.tgt[todo], cands.src[todo]) if reverse else \
        (cands.src[todo], cands.tgt[todo])
    score[todo], ntok[todo], stats = forced_scores_sharded(
        model, in_idx, out_idx, source_path, target_path, work_dir, pool, name="scores" + suffix,
        reverse=reverse, progress=progress, device=device, resume=resume, chunk=chunk,
        precision=precision, desc="exact scores" + (" (reverse)" if reverse else ""))
    return (cands.with_columns(**{"score" + suffix: score, "n_tokens" + suffix: ntok}), stats)
