"""Ray actors as workers (``trie-mine --ray [ADDRESS|auto|local] [--workers N]``).

Ray is the optional extra ``triemine[ray]``; it is imported here only, when a Ray pool is made.

Each actor is a :class:`~triemine.distributed.worker.ShardWorker` (``num_cpus`` = threads per
worker; ``num_gpus=1`` with ``--device cuda``, i.e. one actor per GPU): it loads the model once
and memory-maps the trie file, whose path must be the same on every node (a shared filesystem;
the page cache keeps one copy per node for all its actors).  Payloads travel back through Ray's
object store and are written by the driver (:mod:`triemine.distributed.shards`), so workers need
no write access to the output.

Dead workers: actors are created with ``max_restarts`` and ``max_task_retries``, so Ray restarts
an actor that died (killed, node lost) and reruns its task; an exception inside a task comes back
as a failed attempt and the shard loop resubmits it.  When Ray gives up on an actor the pool
replaces it and the shard counts as having used all its attempts.

Addresses: ``local`` starts a private single-node cluster on 127.0.0.1 (CPUs = workers x
threads, no dashboard; usage statistics are off for every address); ``auto`` joins the cluster this machine belongs to
(``ray start --head`` / ``RAY_ADDRESS``); anything else (``HOST:PORT``, ``ray://HOST:PORT``) is
passed to ``ray.init``.  When this process already has Ray initialised, that session is used.
"""
from __future__ import annotations

import os
import socket
from typing import Dict, List, Optional, Tuple

from triemine.errors import TrieMineError

EXTRA = "triemine[ray]"


class RayUnavailable(TrieMineError):
    pass


def import_ray():
    """``ray``, or a clear error naming the extra that installs it."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        raise RayUnavailable(f"--ray needs the Ray package, which is not installed ({exc}); "
                             f"install the optional extra: pip install -e '.[ray]' (or "
                             f"pip install '{EXTRA}')") from None
    return ray


def connect(address: str, num_cpus: int):
    """Initialise Ray for ``address`` (see the module docstring) unless it already is."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never phone home
    if address == "local":
        # a private single-node cluster: every Ray process on the loopback address (read by ray
        # when it is imported; otherwise Ray binds the machine's own IP)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if address not in ("local", "auto"):
        probe(address)
    kwargs = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    if address == "local":
        ray.init(address="local", num_cpus=num_cpus, **kwargs)
    else:
        ray.init(address=address, **kwargs)
    return ray


# how long to wait for a Ray address to accept a connection: Ray itself retries for minutes
PROBE_TIMEOUT_S = 10.0


def split_address(address: str) -> Tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``, ``[IPv6]:PORT`` or ``ray://HOST:PORT``."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayUnavailable(f"--ray {address}: not a Ray address (HOST:PORT, ray://HOST:PORT, "
                             "auto or local)")
    return host, int(port)


def probe(address: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast, with one clear line, when nothing accepts connections at a Ray ``address``:
    ``ray.init`` would otherwise wait for minutes with only its own warnings."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise RayUnavailable(f"--ray {address}: no Ray cluster reachable there ({why}); start "
                             "one with 'ray start --head', or use --ray local") from None


class RayPool:
    """``workers`` Ray actors; see the module docstring."""

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
        self._actors: List[object] = []
        self._idle: List[int] = []
        self._queue: List[Tuple[int, object]] = []
        self._inflight: Dict[object, Tuple[int, int]] = {}   # ref -> (shard, actor index)
        self.replaced = 0

    def options(self) -> dict:
        """The actor options (also what the tests check for ``--device cuda``)."""
        from triemine.distributed.worker import FAULTS_ENV

        env = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}
        if os.environ.get(FAULTS_ENV):
            env[FAULTS_ENV] = os.environ[FAULTS_ENV]
        return {"num_cpus": self.threads, "num_gpus": 1 if self.device.startswith("cuda") else 0,
                "max_restarts": self.max_attempts - 1,
                "max_task_retries": self.max_attempts - 1,
                "runtime_env": {"env_vars": env}}

    def _new_actor(self):
        from triemine.distributed.worker import ShardWorker

        if self._cls is None:
            self._cls = self._ray.remote(ShardWorker)
        return self._cls.options(**self.options()).remote(self.threads)

    def __enter__(self):
        """Create the actors (re-entrant: a nested ``with`` keeps the same warm actors)."""
        self._depth += 1
        if self._depth == 1:
            self.check()
            self._actors = [self._new_actor() for _ in range(self.workers)]
            self._idle = list(range(self.workers))
        return self

    def check(self) -> "RayPool":
        """Connect and size the pool to the cluster (an error when ``--device cuda`` finds no
        GPU); called by ``__enter__``, and early by the CLI to fail before any work."""
        if self._ray is not None:
            return self
        local_cpus = (self.workers or max(1, (os.cpu_count() or 1) // self.threads)) * self.threads
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
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._actors, self._idle, self._inflight, self._queue = [], [], {}, []
        return False

    def attempts_used(self, error) -> int:
        return self.max_attempts if str(error).startswith("worker died") else 1

    def warm(self, task) -> None:
        """Every actor loads what ``task`` needs, in parallel, before the first shard."""
        try:
            self._ray.get([a.warm.remote(task) for a in self._actors])
        except self._ray.exceptions.RayError:
            pass  # a failing actor shows again, and is handled, when it runs a shard

    def submit(self, shard_id: int, task) -> None:
        self._queue.append((shard_id, task))
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue and self._idle:
            shard_id, task = self._queue.pop(0)
            i = self._idle.pop(0)
            ref = self._actors[i].run.remote(task)
            self._inflight[ref] = (shard_id, i)

    def next_result(self):
        ray = self._ray
        self._dispatch()
        if not self._inflight:
            raise RuntimeError("no task in flight")
        ready, _ = ray.wait(list(self._inflight), num_returns=1)
        ref = ready[0]
        shard_id, i = self._inflight.pop(ref)
        try:
            value = ray.get(ref)
        except ray.exceptions.RayActorError as exc:  # Ray's restarts and retries are spent
            self._actors[i] = self._new_actor()
            self.replaced += 1
            self._idle.append(i)
            return shard_id, False, f"worker died ({type(exc).__name__}: {_first_line(exc)})"
        except ray.exceptions.RayTaskError as exc:
            self._idle.append(i)
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            return shard_id, False, f"{type(cause).__name__}: {_first_line(cause)}"
        self._idle.append(i)
        return shard_id, True, value


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""
