"""Scale-out: deterministic shards, a manifest, and two engines that run them.

One mechanism, used by every backend (:mod:`triemine.distributed.shards`):

* the work is cut into **deterministic shards**: contiguous ranges of sources (the trie search,
  cut on :func:`triemine.decoding.batching.plan_blocks` boundaries) or of candidate pairs (exact
  scoring, cut on the chunk boundaries of :func:`triemine.mining.features.forced_scores`), so a
  shard computes exactly the batches the single-process run computes and its rows are
  byte-identical to them;
* a shard's output is returned by the worker, written atomically by the driver (tmp +
  ``os.replace``) and only then recorded in the **manifest** (a synced line of
  ``manifest.log``, folded into ``manifest.json``, written atomically, when a run ends); a run
  interrupted at any moment resumes by redoing only the shards the manifest does not hold;
* the merged output is the shards' outputs concatenated in shard order;
* a shard that fails is retried (``max_attempts``); one that keeps failing is reported by id with
  its error (:class:`ShardFailures`), never dropped.

Engines (a *pool* runs any task of :mod:`triemine.distributed.tasks` on a
:class:`~triemine.distributed.worker.ShardWorker`):

* :class:`triemine.distributed.local.InlinePool`: in the calling process (``--target-shards``
  without workers);
* :class:`triemine.distributed.local.ProcessPool`: ``--workers N`` local processes, each loading
  the model once and memory-mapping the one cached trie file; a dead child is noticed and
  replaced;
* :class:`triemine.distributed.ray_backend.RayPool`: ``--ray [ADDRESS]``, one Ray actor per
  worker (``num_gpus=1`` each with ``--device cuda``), Ray's actor restarts and task retries for
  dead workers.  Ray is the optional extra ``triemine[ray]`` and imported only here.

The one runner (:mod:`triemine.distributed.stage`): a stage describes itself as a
:class:`~triemine.distributed.stage.Stage` (task class, plan, settings, inputs) and
:func:`~triemine.distributed.stage.run_stages` builds its key, opens its store (the resume
decision), shows its progress, runs it on the pool and hands back its shards to merge.

What is sharded (each stage's task and driver live beside the stage; this package only runs
them): the trie search (:func:`triemine.decoding.driver.mine_to_tsv` given a pool, also with
``--target-shards K``), sentence embeddings and their exact kNN
(:func:`triemine.embedding.embed_shards.embed_corpora`,
:func:`triemine.embedding.knn_shards.knn_searches`: both corpora's shards, and both directions'
cells, queued together), the exact scoring of candidate pairs and the targets' priors
(:func:`triemine.mining.score_shards.forced_score_shards`), the MT translations of retrieval
(:func:`triemine.mining.translate_shards.cached_translations`).  See ``docs/scale.md``.
"""
import logging

from triemine.distributed.local import InlinePool, ProcessPool, cpu_cores
from triemine.distributed.ray_backend import RayPool
from triemine.distributed.shards import (Shard, ShardFailures, ShardStore, execute, execute_all,
                                         plan_shards)

__all__ = ["Shard", "ShardFailures", "ShardStore", "execute", "execute_all", "plan_shards",
           "make_pool", "check_workers"]

# what one local worker needs besides its model: the interpreter, torch, buffers
WORKER_OVERHEAD = 256 << 20


def worker_memory(model_bytes: int) -> int:
    """The memory one local worker is counted to need: twice its checkpoint files' size (the
    loaded state and the model built from it, while it loads) plus :data:`WORKER_OVERHEAD`."""
    return 2 * int(model_bytes) + WORKER_OVERHEAD


def _available_memory() -> int:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes; 0 when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check_workers(workers: int, threads: int, model_bytes: int) -> None:
    """Warn (one line) when ``workers`` local processes (or ``--ray local`` actors) of
    ``threads`` threads each are more than this machine's cores, or need more memory
    (:func:`worker_memory` each) than it has available.  The pools start no more workers than a
    stage has shards (:meth:`~triemine.distributed.local.ProcessPool.reserve`,
    :meth:`~triemine.distributed.ray_backend.RayPool.reserve`), so this is the most they start."""
    cores = cpu_cores()
    need, have = workers * worker_memory(model_bytes), _available_memory()
    problems = []
    if workers * max(1, threads) > cores:
        problems.append(f"{workers} x {max(1, threads)} threads on {cores} cores")
    if have and need > have:
        problems.append(f"about {need / 2**30:.1f} GiB for their models "
                        f"({worker_memory(model_bytes) / 2**30:.2f} GiB each), "
                        f"{have / 2**30:.1f} GiB available")
    if problems:
        logging.getLogger(__name__).warning(
            "--workers %d: %s; the workers will compete (pass fewer)", workers,
            "; ".join(problems))


def make_pool(workers: int | None = 0, ray: str | None = None, device: str = "cpu",
              threads: int = 1, max_attempts: int = 3):
    """The pool for ``workers`` local processes (0 or None: in this process), or Ray actors
    when ``ray`` names a cluster (``local``, ``auto`` or an address; ``workers`` None: one actor
    per ``threads`` CPUs of the cluster, or per GPU with ``device`` cuda)."""
    if ray is not None:
        return RayPool(ray, workers=workers or None, device=device, threads=threads,
                       max_attempts=max_attempts)
    if not workers:
        return InlinePool(max_attempts=max_attempts)
    return ProcessPool(workers, threads=threads, device=device, max_attempts=max_attempts)
