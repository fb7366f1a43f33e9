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

Addresses: ``local`` starts a private single-node cluster on 127.0.0.1 (CPUs = workers x
threads, no dashboard; usage statistics are off for every address); ``auto`` joins the cluster
this machine belongs to (``ray start --head`` / ``RAY_ADDRESS``); anything else (``HOST:PORT``,
``ray://HOST:PORT``) is passed to ``ray.init``.  When this process already has Ray initialised,
that session is used.

Token authentication (a cluster started by ``ray start`` uses it when a token exists on the
head): the driver asks the cluster's GCS first.  When it refuses a client without a token and
``RAY_AUTH_MODE`` is unset, the job turns token authentication on for itself with the token Ray
finds (``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``).  No
token, a refused token or ``RAY_AUTH_MODE=disabled`` against such a cluster, nothing listening,
something else listening: each stops within :data:`PROBE_TIMEOUT_S` + :data:`GCS_TIMEOUT_S`
with one line (:class:`RayUnavailable`, exit 2) saying what to set.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import uuid
from typing import Dict, List, Optional, Tuple

from triemine.distributed.worker import ShardWorker
from triemine.errors import TrieMineError

EXTRA = "triemine[ray]"

log = logging.getLogger(__name__)

# how long to wait for a Ray address to accept a connection: Ray itself retries for minutes
PROBE_TIMEOUT_S = 10.0
# how long to wait for the GCS behind an open port to answer (Ray itself waits 40 s or more)
GCS_TIMEOUT_S = 8.0
# how long the pool waits for a worker to start when none is busy (then: stop, --resume)
START_TIMEOUT_S = 180.0
NODE_CHECK_TIMEOUT_S = 60.0  # the nodes' check of the shared cache when the pool opens

TOKEN_HELP = ("set RAY_AUTH_TOKEN to the cluster's token or RAY_AUTH_TOKEN_PATH to a file holding "
              "it (default ~/.ray/auth_token; 'ray get-auth-token' on the head prints it)")
SHARED_HELP = ("with --ray every node reads the model, the corpora, $TRIEMINE_CACHE and the job's "
               "work directory (OUT.work/) at the driver's paths: put them on a file system "
               "every node sees")


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
    """Initialise Ray for ``address`` (see the module docstring) unless it already is.

    Raises :class:`RayUnavailable` (one line) when the cluster cannot be reached or refuses
    this client's authentication."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never phone home
    if address == "local":
        # a private single-node cluster: every Ray process on the loopback address (read by ray
        # when it is imported; otherwise Ray binds the machine's own IP)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    gcs = _auto_address() if address == "auto" else address
    if gcs is not None and address != "local":
        probe(address if gcs == address else f"{address} ({gcs})", gcs)
        if not gcs.startswith("ray://"):  # Ray Client's server is no GCS
            check_gcs(address, gcs)
    kwargs = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        if address == "local":
            ray.init(address="local", num_cpus=num_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        hint = ("; start one with 'ray start --head' or set RAY_ADDRESS"
                if address == "auto" and gcs is None else "")
        raise RayUnavailable(f"--ray {address}: cannot connect: {_first_line(exc)}{hint}") from None
    return ray


def _auto_address() -> Optional[str]:
    """The address ``auto`` stands for (``RAY_ADDRESS``, else the latest ``ray start`` on this
    machine), or None when Ray finds none (or its lookup is not there)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
        return canonicalize_bootstrap_address("auto")
    except Exception:  # noqa: BLE001 - Ray's own ray.init("auto") reports it then
        return None


def split_address(address: str) -> Tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``, ``[IPv6]:PORT`` or ``ray://HOST:PORT``."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayUnavailable(f"--ray {address}: not a Ray address (HOST:PORT, ray://HOST:PORT, "
                             "auto or local)")
    return host, int(port)


def probe(address: str, target: Optional[str] = None, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast, with one clear line, when nothing accepts connections at a Ray ``address``
    (``target``: the address to try, when ``address`` names it otherwise): ``ray.init`` would
    otherwise wait for minutes with only its own warnings."""
    host, port = split_address(target or address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise RayUnavailable(f"--ray {address}: no Ray cluster reachable there ({why}); start "
                             "one with 'ray start --head', or use --ray local") from None


def _gcs_answer(gcs: str, timeout: float):
    """What the GCS at ``gcs`` answers a client of this process's authentication settings:
    None (it accepted), the exception it raised, or ``TimeoutError`` when it did not answer in
    ``timeout`` s.  Ray's own warnings (stderr of its C++ core) are silenced meanwhile."""
    from ray._raylet import GcsClient

    result: list = []

    def ask():
        try:
            GcsClient(address=gcs)
            result.append(None)
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            result.append(exc)

    thread = threading.Thread(target=ask, daemon=True)  # a GCS that never answers: left behind
    with _stderr_silenced():
        thread.start()
        thread.join(timeout)
    return result[0] if result else TimeoutError()


@contextlib.contextmanager
def _stderr_silenced():
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _token_found() -> bool:
    from ray._raylet import AuthenticationTokenLoader
    return bool(AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True))


def _token_source() -> str:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    return "~/.ray/auth_token"


def _enable_token_auth() -> None:
    """Token authentication for this process (what Ray itself does for ``auto``)."""
    from ray._raylet import AuthenticationTokenLoader, Config
    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def check_gcs(address: str, gcs: str, timeout: float = GCS_TIMEOUT_S) -> None:
    """Ask the GCS at ``gcs`` (the address ``--ray address`` stands for) for its cluster id
    with this process's authentication settings: turn token authentication on when the cluster
    needs it, ``RAY_AUTH_MODE`` is unset and a token is found; otherwise raise
    :class:`RayUnavailable` with one line that says what to set.  Skipped (Ray's own errors
    then) when this Ray has no token authentication."""
    where = f"--ray {address}" + (f" ({gcs})" if gcs != address else "")
    mode = os.environ.get("RAY_AUTH_MODE", "").strip().lower()
    try:
        from ray.exceptions import AuthenticationError
        if mode == "token" and not _token_found():  # Ray's core would abort the process
            raise RayUnavailable(f"{where}: RAY_AUTH_MODE=token and no token was found: "
                                 f"{TOKEN_HELP}")
        answer = _gcs_answer(gcs, timeout)
    except ImportError:
        return
    if isinstance(answer, AuthenticationError) and not mode:
        if not _token_found():
            raise RayUnavailable(f"{where}: the cluster requires token authentication and no "
                                 f"token was found: {TOKEN_HELP}")
        _enable_token_auth()
        answer = _gcs_answer(gcs, timeout)
    if answer is None:
        return
    if isinstance(answer, AuthenticationError):
        if mode not in ("", "token"):
            raise RayUnavailable(f"{where}: the cluster requires token authentication but "
                                 f"RAY_AUTH_MODE={os.environ['RAY_AUTH_MODE']}: unset it or set "
                                 f"RAY_AUTH_MODE=token, and {TOKEN_HELP}")
        raise RayUnavailable(f"{where}: the cluster refused the authentication token from "
                             f"{_token_source()} (not the token it was started with): "
                             f"{TOKEN_HELP}")
    if isinstance(answer, TimeoutError):
        raise RayUnavailable(f"{where}: no Ray cluster answered there within {timeout:g} s "
                             "(is it the port of 'ray start --head', default 6379?)")
    raise RayUnavailable(f"{where}: cannot connect: {_first_line(answer)}")


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
        from triemine.distributed.worker import FAULTS_ENV
        from triemine.paths import cache_root

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
            from triemine.paths import cache_root
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
        from triemine.distributed.local import cpu_cores

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
                raise TrieMineError(f"--ray: the workers fail to start on the cluster: "
                                    f"{_cause(exc)} (is the same triemine installed on every node?)") from None
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
            why = f"{type(cause).__name__}: {_first_line(cause)}"
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
    lines = _ANSI.sub("", str(exc)).strip().splitlines()
    inner = [ln for ln in lines[1:] if _EXC_LINE.match(ln)]
    return inner[-1].strip() if inner else f"{type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc) -> str:
    text = _ANSI.sub("", str(exc)).strip().splitlines()
    return text[0] if text else ""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*:")
