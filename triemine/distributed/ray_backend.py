"""Ray actors as workers (``trie-mine --ray [ADDRESS|auto|local] [--workers N]``).

Ray is the optional extra ``triemine[ray]``; it is imported here only, when a Ray pool is made.

Each actor is a :class:`~triemine.distributed.worker.ShardWorker` (``num_cpus`` = threads per
worker; ``num_gpus=1`` with ``--device cuda``, i.e. one actor per GPU): it loads the model once
and memory-maps the trie file.  Payloads travel back through Ray's object store and are written
by the driver (:mod:`triemine.distributed.shards`), so workers need no write access to the
output; every other file of the job (the model, the corpora, the cached trie and priors under
``$TRIEMINE_CACHE``, which the actors are given, and the job's work directory ``OUT.work/``) is
read by the workers at the driver's path, so it must be on a file system every node sees.  When
the pool opens, a task pinned to every live node, and each actor when it starts, check that they
see a marker file the driver wrote in the cache: a node that does not stops the job with one line
naming the node and the directory, whether or not a worker would have been placed there.

Actors are created when there is work for them (:meth:`RayPool.reserve`, called before a
stage's first shard, and :meth:`RayPool.submit`): never more than ``workers``, nor more than the
largest stage so far has shards; a later stage of more shards adds actors, a nested ``with``
keeps the warm ones.

Dead workers and lost nodes: Ray neither restarts the actors nor retries their tasks; the pool
does.  A task whose actor died (killed, out of memory, its node lost) is a failed attempt of its
shard, which the shard loop gives to another worker (3 attempts); the dead actor is replaced by a
new one, which gets work only once it has started (on a cluster that lost a node it may never
start: the others finish the job).  When no worker has started for :data:`START_TIMEOUT_S` and
none is busy, the job stops with one line; the finished shards are recorded, so ``--resume``
goes on from there.

Connecting, addresses and token authentication: :mod:`triemine.distributed.ray_connect`.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import uuid
from typing import Dict, List, Optional, Tuple

from triemine.distributed.local import cpu_cores
from triemine.distributed.ray_connect import ANSI_ESCAPE, connect, first_line
from triemine.distributed.worker import FAULTS_ENV, ShardWorker
from triemine.errors import TrieMineError
from triemine.io import cache_root

log = logging.getLogger(__name__)

# how long the pool waits for a worker to start when none is busy (then: stop, --resume)
START_TIMEOUT_S = 180.0
NODE_CHECK_TIMEOUT_S = 60.0  # the nodes' check of the shared cache when the pool opens

SHARED_HELP = ("with --ray every node reads the model, the corpora, $TRIEMINE_CACHE and the job's "
               "work directory (OUT.work/) at the driver's paths: put them on a file system "
               "every node sees")


def sees(marker: str) -> Tuple[str, bool]:
    """``(this node's IP, whether the driver's ``marker`` file is seen here)``."""
    import ray
    return ray.util.get_node_ip_address(), os.path.exists(marker)


class RayShardWorker(ShardWorker):
    """A :class:`ShardWorker` that says where it runs."""

    def where(self, marker: str) -> Tuple[str, bool]:
        """:func:`sees`, run by this actor."""
        return sees(marker)


class RayPool:
    """At most ``workers`` Ray actors, created on demand; see the module docstring."""

    def __init__(self, address: str = "local", workers: Optional[int] = None, device: str = "cpu",
                 threads: int = 1, max_attempts: int = 3):
        if workers is not None and workers < 1:
            raise ValueError("workers must be >= 1")
        self.address = address
        self.workers = workers
        self.device = device
        self.threads = max(1, int(threads or 1))
        self.max_attempts = max_attempts
        self._ray = None
        self._cls = None
        self._depth = 0
        self._marker: Optional[str] = None
        self._actors: List[object] = []
        self._nodes: Dict[int, str] = {}                    # actor index -> its node's IP
        self._starting: Dict[object, int] = {}              # readiness ref -> actor index
        self._idle: List[int] = []
        self._queue: List[Tuple[int, object]] = []
        self._inflight: Dict[object, Tuple[int, int]] = {}  # ref -> (shard, actor index)
        self._start_failures = 0
        self.replaced = 0

    def options(self) -> dict:
        """The actor options (also what the tests check for ``--device cuda``)."""
        env = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads),
               "TRIEMINE_CACHE": str(cache_root())}  # the driver's caches, on every node
        for name in (FAULTS_ENV, "TRIEMINE_SHARED"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        return {"num_cpus": self.threads, "num_gpus": 1 if self.device.startswith("cuda") else 0,
                "max_restarts": 0, "max_task_retries": 0,  # the pool replaces and resubmits
                "runtime_env": {"env_vars": env}}

    def _start(self, i: int) -> None:
        """A new actor in slot ``i``; it gets work once :meth:`RayShardWorker.where` answers."""
        if self._cls is None:
            self._cls = self._ray.remote(RayShardWorker)
        actor = self._cls.options(**self.options()).remote(self.threads)
        if i == len(self._actors):
            self._actors.append(actor)
        else:
            self._actors[i] = actor
        self._starting[actor.where.remote(self._marker)] = i

    def __enter__(self):
        """Connect (:meth:`check`) and write the marker file the actors look for; no actor is
        created yet (:meth:`reserve`, :meth:`submit`).  Re-entrant: a nested ``with`` keeps the
        same warm actors."""
        self._depth += 1
        if self._depth == 1:
            self.check()
            marker = cache_root() / f".ray-driver-{uuid.uuid4().hex}"
            marker.touch()
            self._marker = str(marker)
            self._actors = []
            try:
                self._check_nodes()
            except BaseException:
                self.__exit__()
                raise
        return self

    def _check_nodes(self, timeout_s: float = NODE_CHECK_TIMEOUT_S) -> None:
        """Every live node sees the marker file: a task of no CPU pinned to each node.  A node
        that does not raises :class:`TrieMineError`; one that cannot run the task, or does not
        answer within ``timeout_s``, is left to its actors' own check."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        check = ray.remote(num_cpus=0, max_retries=0)(sees)
        refs = [check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    node["NodeID"], soft=False)).remote(self._marker)
                for node in ray.nodes() if node.get("Alive")]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for ref in ready:
            try:
                ip, seen = ray.get(ref)
            except ray.exceptions.RayError:
                continue
            if not seen:
                raise TrieMineError(self._unseen(ip))

    def _unseen(self, ip: str) -> str:
        return (f"--ray: the worker on node {ip} does not see {os.path.dirname(self._marker)} "
                f"(TRIEMINE_CACHE): {SHARED_HELP}")

    def reserve(self, tasks: int) -> None:
        """Have ``min(workers, tasks)`` actors created (all at once, before the first task of a
        stage of ``tasks`` shards; the pool must be open).  Actors already there, started or
        not, count: none is ever removed before ``__exit__``."""
        if self._marker is None:
            raise RuntimeError("reserve() outside 'with pool'")
        while len(self._actors) < min(self.workers, tasks):
            self._start(len(self._actors))

    def check(self) -> "RayPool":
        """Connect and size the pool to the cluster (an error when ``--device cuda`` finds no
        GPU); called by ``__enter__``, and early by the CLI to fail before any work."""
        if self._ray is not None:
            return self
        local_cpus = (self.workers or max(1, cpu_cores() // self.threads)) * self.threads
        self._ray = connect(self.address, local_cpus)
        resources = self._ray.cluster_resources()
        if self.device.startswith("cuda"):
            gpus = int(resources.get("GPU", 0))
            if gpus < 1:
                raise TrieMineError("--device cuda with --ray: the Ray cluster has no GPU")
            self.workers = min(self.workers or gpus, gpus)  # one actor per GPU
        elif self.workers is None:  # one actor per `threads` CPUs of the cluster
            self.workers = max(1, int(resources.get("CPU", 1)) // self.threads)
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth:
            return False
        for a in self._actors:
            if a is not None:
                with contextlib.suppress(Exception):  # already gone
                    self._ray.kill(a, no_restart=True)
        if self._marker is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._marker)
            self._marker = None
        self._actors, self._idle, self._inflight, self._queue = [], [], {}, []
        self._starting, self._nodes = {}, {}
        return False

    def attempts_used(self, error) -> int:
        return 1

    def warm(self, task) -> None:
        """Every actor loads what ``task`` needs, in parallel, before its first shard (an actor
        runs its calls in order; a failing load shows again, and is handled, in a shard)."""
        for a in self._actors:
            if a is not None:
                a.warm.remote(task)

    def submit(self, shard_id: int, task) -> None:
        self._queue.append((shard_id, task))
        self._dispatch()

    def _dispatch(self) -> None:
        free = len(self._idle) + len(self._starting)  # starting actors get work soon
        if len(self._queue) > free and len(self._actors) < self.workers:
            self.reserve(len(self._actors) + len(self._queue) - free)
        while self._queue and self._idle:
            shard_id, task = self._queue.pop(0)
            i = self._idle.pop(0)
            ref = self._actors[i].run.remote(task)
            self._inflight[ref] = (shard_id, i)

    def _started(self, ref) -> None:
        """An actor answered (or failed) its first call: it gets work, or is started again."""
        ray = self._ray
        i = self._starting.pop(ref)
        try:
            ip, seen = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self._start_failures += 1
            if self._start_failures > self.max_attempts * self.workers:
                raise TrieMineError(
                    f"--ray: the workers fail to start on the cluster: "
                    f"{_cause(exc)} (is the same triemine installed on every node?)"
                ) from None
            log.warning("--ray: a worker failed to start (%s); starting another", _cause(exc))
            self._start(i)
            return
        if not seen:
            raise TrieMineError(self._unseen(ip))
        self._nodes[i] = ip
        self._idle.append(i)

    def next_result(self):
        ray = self._ray
        waited = time.monotonic()
        while True:
            self._dispatch()
            if not self._inflight and not self._starting:
                raise RuntimeError("no task in flight")
            wait_s = None if self._inflight else START_TIMEOUT_S - (time.monotonic() - waited)
            if wait_s is not None and wait_s <= 0:
                raise TrieMineError(
                    f"--ray: no worker has started on the cluster for {START_TIMEOUT_S:g} s "
                    f"(nodes lost or busy: 'ray status'); the finished shards are recorded: "
                    f"rerun with --resume once the cluster has room")
            ready, _ = ray.wait(list(self._inflight) + list(self._starting), num_returns=1,
                                timeout=wait_s)
            if not ready:
                continue
            ref = ready[0]
            if ref in self._starting:
                self._started(ref)
                continue
            break
        shard_id, i = self._inflight.pop(ref)
        node = self._nodes.get(i, "?")
        try:
            value = ray.get(ref)
        except ray.exceptions.RayActorError as exc:  # the actor is dead: a new one in its slot
            with contextlib.suppress(Exception):
                ray.kill(self._actors[i], no_restart=True)
            self._nodes.pop(i, None)
            self._start(i)
            self.replaced += 1
            log.warning("--ray: the worker on node %s died holding shard %d (%s); the shard goes "
                        "to another worker", node, shard_id, _cause(exc))
            return shard_id, False, f"worker died on node {node} ({_cause(exc)})"
        except ray.exceptions.RayTaskError as exc:
            self._idle.append(i)
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            why = f"{type(cause).__name__}: {first_line(cause)}"
            if isinstance(cause, OSError) and getattr(cause, "filename", None):
                why += f" (on node {node}; {SHARED_HELP})"
            return shard_id, False, why
        except ray.exceptions.RayError as exc:  # its result lost with a node, say
            self._idle.append(i)
            return shard_id, False, _cause(exc)
        self._idle.append(i)
        return shard_id, True, value


def _cause(exc) -> str:
    """``Type: first line`` of a Ray error; for an actor that died in its creation task, the
    exception that killed it (the last ``...Error: ...`` line of Ray's text)."""
    lines = ANSI_ESCAPE.sub("", str(exc)).strip().splitlines()
    inner = [ln for ln in lines[1:] if _EXC_LINE.match(ln)]
    return inner[-1].strip() if inner else f"{type(exc).__name__}: {first_line(exc)}"


_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*:")
