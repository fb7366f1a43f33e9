"""Pools on one machine: in the calling process, or N worker processes (``--workers N``).

:class:`ProcessPool` starts N ``spawn`` processes (a fresh interpreter each: no fork of a
process whose OpenMP runtime is already running), each with one
:class:`~triemine.distributed.worker.ShardWorker` that loads the model once and memory-maps the
cached trie file, so the trie's pages are shared by all of them.  The driver hands each idle
worker one task at a time over a pipe and watches every worker's process sentinel: a worker
that dies (killed, out of memory) is noticed at once, its task is reported as a failed attempt
(the shard loop resubmits it) and a new worker takes its place.  Workers die with the driver
(``PR_SET_PDEATHSIG`` on Linux), so a killed driver leaves no orphan computing.
"""
from __future__ import annotations

import collections
import logging
import multiprocessing
import os
import signal
import warnings
from multiprocessing.connection import wait
from typing import Deque, List, Optional, Tuple

from triemine.distributed.worker import ShardWorker


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _die_with_parent() -> None:
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _describe(exc: BaseException) -> str:
    import traceback
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _child_main(conn, threads: Optional[int], parent: int) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the driver died before we could ask to die with it
        os._exit(1)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["MKL_NUM_THREADS"] = str(threads)
    # A spawned child has no logging set up: before fairseq's import sets INFO (and hydra its
    # DEBUG lines), the driver's rule: our warnings and errors only, by logger name.
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(torch|hydra|fairseq)\.")
    worker = ShardWorker(threads)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        shard_id, task = msg
        try:
            result = (shard_id, True, worker.run(task) if shard_id is not None
                      else worker.warm(task))
        except BaseException as exc:  # noqa: BLE001 - reported to the driver, which decides
            result = (shard_id, False, _describe(exc))
        try:
            conn.send(result)
        except (EOFError, OSError):
            return


class InlinePool:
    """Runs each task in the calling process (no parallelism; same code path as the workers).

    A task runs when its result is asked for (:meth:`next_result`), not when it is submitted, so
    the driver records each shard before the next one runs: one shard's payload in memory at a
    time, and a killed run keeps every shard finished before it.  ``loaded``: what the caller
    has loaded already (a model), by its resource spec (:mod:`triemine.distributed.tasks`;
    e.g. :class:`~triemine.decoding.model_spec.ModelSpec`), which the tasks use instead of
    loading it again."""

    def __init__(self, max_attempts: int = 3, loaded: Optional[dict] = None):
        self.max_attempts = max_attempts
        self._loaded = dict(loaded or {})  # {resource: what this process has loaded}
        self._worker = None
        self._queue: Deque[Tuple[int, object]] = collections.deque()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def attempts_used(self, _error) -> int:
        return 1

    def submit(self, shard_id: int, task) -> None:
        self._queue.append((shard_id, task))

    def next_result(self):
        shard_id, task = self._queue.popleft()
        try:
            return shard_id, True, self._shard_worker().run(task)
        except Exception as exc:  # noqa: BLE001
            return shard_id, False, _describe(exc)

    def warm(self, task) -> None:
        self._shard_worker().warm(task)

    def _shard_worker(self) -> ShardWorker:
        if self._worker is None:
            self._worker = ShardWorker()
            for resource, obj in self._loaded.items():
                self._worker.adopt(resource, obj)
        return self._worker


class _Proc:
    def __init__(self, ctx, threads):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_child_main, args=(child, threads, os.getpid()),
                                daemon=True, name="triemine-worker")
        self.proc.start()
        child.close()
        self.task: Optional[int] = None


class ProcessPool:
    """``workers`` local processes; see the module docstring."""

    def __init__(self, workers: int, threads: Optional[int] = 1, device: str = "cpu",
                 max_attempts: int = 3):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers
        self.threads = threads
        self.device = device
        self.max_attempts = max_attempts
        self._ctx = multiprocessing.get_context("spawn")
        self._procs: List[_Proc] = []
        self._queue: Deque[Tuple[int, object]] = collections.deque()
        self._depth = 0
        self.deaths = 0

    def __enter__(self):
        """Open the pool (re-entrant: a nested ``with`` keeps the same warm workers).  Workers
        start when there is work for them (:meth:`reserve`, :meth:`submit`): never more than
        ``workers``, nor more than the largest stage has shards."""
        self._depth += 1
        if self._depth == 1:
            self._procs = []
        return self

    def reserve(self, tasks: int) -> None:
        """Have ``min(workers, tasks)`` workers started (all at once, before the first task of
        a stage of ``tasks`` shards)."""
        while len(self._procs) < min(self.workers, tasks):
            self._procs.append(_Proc(self._ctx, self.threads))

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth:
            return False
        for p in self._procs:
            try:
                p.conn.send(None)
            except (OSError, ValueError):
                pass
        for p in self._procs:
            p.proc.join(timeout=10)
            if p.proc.is_alive():
                p.proc.kill()
                p.proc.join()
            p.conn.close()
        self._procs = []
        return False

    def attempts_used(self, _error) -> int:
        return 1

    def submit(self, shard_id: int, task) -> None:
        self._queue.append((shard_id, task))
        self._dispatch()

    def warm(self, task) -> None:
        """Every idle worker loads what ``task`` needs, all at once (start-up then happens in
        parallel, before the first shard; a worker that dies here is simply replaced)."""
        waiting = {}
        for p in self._procs:
            if p.task is None:
                try:
                    p.conn.send((None, task))
                    waiting[p.conn] = p
                    p.task = -1
                except (OSError, ValueError):
                    pass
        while waiting:
            handles = dict(waiting)
            handles.update({p.proc.sentinel: p for p in waiting.values()})
            for ready in wait(list(handles)):
                p = handles[ready]
                if p.conn not in waiting:
                    continue
                if ready is p.conn:
                    try:
                        p.conn.recv()
                    except (EOFError, OSError):
                        continue
                    p.task = None
                else:
                    self._replace_dead(p)
                del waiting[p.conn]

    def _dispatch(self) -> None:
        idle = sum(p.task is None for p in self._procs)
        if len(self._queue) > idle and len(self._procs) < self.workers:
            self.reserve(len(self._procs) + len(self._queue) - idle)
        for p in self._procs:
            if not self._queue:
                return
            if p.task is None:
                shard_id, task = self._queue.popleft()
                p.task = shard_id
                try:
                    p.conn.send((shard_id, task))
                except (OSError, ValueError):  # dead already: the sentinel will tell
                    pass

    def next_result(self):
        while True:
            self._dispatch()
            busy = [p for p in self._procs if p.task is not None]
            if not busy:
                raise RuntimeError("no task in flight")
            handles = {}
            for p in busy:
                handles[p.conn] = p
                handles[p.proc.sentinel] = p
            for ready in wait(list(handles)):
                p = handles[ready]
                if ready is p.conn:
                    try:
                        shard_id, ok, value = p.conn.recv()
                    except (EOFError, OSError):
                        continue  # the sentinel reports the death
                    p.task = None
                    return shard_id, ok, value
                return self._replace_dead(p)

    def _replace_dead(self, p: _Proc):
        p.proc.join()
        code = p.proc.exitcode
        shard_id = p.task
        p.conn.close()
        self.deaths += 1
        i = self._procs.index(p)
        self._procs[i] = _Proc(self._ctx, self.threads)
        how = (f"killed by signal {-code}" if code is not None and code < 0
               else f"exit status {code}")
        return shard_id, False, f"worker process {p.proc.pid} died ({how})"
