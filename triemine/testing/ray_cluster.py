"""A Ray cluster of several nodes on this machine, started as users start one (``ray start``).

Shared by the tests (``tests/distributed/test_ray_cluster.py``) and the reliability benchmark
(``bench/reliability_bench.py``, the lost node).  Linux only (``/proc``; every address of
127.0.0.0/8 is the loopback interface there).

* Node ``k`` (0 the head) runs on the loopback address ``127.0.0.<k + 2>`` (Ray turns 127.0.0.1
  into the machine's network address, so the cluster would not be on loopback only), with its
  own CPUs and object store; node 1 also has the custom resource ``second``.
* Token authentication is on (``RAY_AUTH_MODE=token``, a token file in the cluster's folder);
  :meth:`LocalCluster.client_env` is the environment of a client that has the token.
* The nodes run this checkout of ``triemine`` (its folder first on ``PYTHONPATH``), with ``HOME``
  in the cluster's folder (so ``~/.ray/auth_token`` of the user is not read).
* :meth:`LocalCluster.stop` ends exactly the processes of this cluster: those whose command line
  names its temp folder and their descendants (never ``ray stop``, which ends every cluster of the
  machine); :meth:`LocalCluster.kill_node` SIGKILLs one node's raylet and what it started, as a
  lost machine would.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

import triemine


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (nothing listens there once this returns)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes() -> Dict[int, tuple]:
    """``pid -> (parent pid, command line, start time)`` of every live process in ``/proc``
    (the start time tells a process from a later one that got its pid)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if fields[0] != "Z":  # a zombie is gone already
            out[int(name)] = (int(fields[1]), cmd, int(fields[19]))
    return out


def _with_descendants(roots: Set[int], procs: Dict[int, tuple]) -> Set[int]:
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, (ppid, *_rest) in procs.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


class LocalCluster:
    """``nodes`` Ray nodes of ``cpus`` CPUs each under ``root`` (see the module docstring)."""

    def __init__(self, root: os.PathLike | str, nodes: int = 2, cpus: int = 1,
                 object_store_mb: int = 80, port: Optional[int] = None):
        self.root = Path(root)
        self.nodes, self.cpus, self.object_store_mb = nodes, cpus, object_store_mb
        self.port = port or free_loopback_port()
        self.temp = self.root / "ray"   # short: Ray's socket paths must fit in 107 bytes
        self.token_file = self.root / "token"
        self.home = self.root / "home"
        self.address = f"{self.ip(0)}:{self.port}"
        self._seen: Set[tuple] = set()   # (pid, start time) of every process seen

    @staticmethod
    def ip(node: int) -> str:
        return f"127.0.0.{node + 2}"

    def node_env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        repo = str(Path(triemine.__file__).resolve().parent.parent)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_file),
                   RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1",
                   HOME=str(self.home), OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([repo] + [p for p in
                                                        [os.environ.get("PYTHONPATH")] if p]))
        return env

    def client_env(self, **extra: str) -> dict:
        """A client's environment: the token file named, ``RAY_AUTH_MODE`` unset (detected),
        ``HOME`` in the cluster's folder; ``extra`` added (a value of None removes it)."""
        env = {k: v for k, v in self.node_env().items() if k != "RAY_AUTH_MODE"}
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def _ray(self, *args: str, prefix: Sequence[str] = ()) -> None:
        ray = Path(sys.executable).with_name("ray")
        cmd = [*prefix, str(ray) if ray.exists() else "ray", "start", *args,
               "--num-cpus", str(self.cpus),
               "--object-store-memory", str(self.object_store_mb << 20),
               "--disable-usage-stats"]
        r = subprocess.run(cmd, env=self.node_env(), capture_output=True, text=True, timeout=120)
        self._remember(self.pids())
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")

    def start(self) -> "LocalCluster":
        self.home.mkdir(parents=True, exist_ok=True)
        self.token_file.write_text(secrets.token_hex(32))
        self._ray("--head", "--node-ip-address", self.ip(0), "--port", str(self.port),
                  "--temp-dir", str(self.temp), "--include-dashboard", "false")
        for k in range(1, self.nodes):
            self.add_node(k)
        return self

    def add_node(self, node: int, prefix: Sequence[str] = ()) -> None:
        """Start node ``node`` (``127.0.0.<node + 2>``) and join it to the head; ``prefix``: a
        command that runs ``ray start ...`` (its remaining arguments), e.g. in a namespace."""
        self._ray("--address", self.address, "--node-ip-address", self.ip(node),
                  *(["--resources", '{"second": 1}'] if node == 1 else []), prefix=prefix)

    def pids(self) -> Set[int]:
        """This cluster's processes now (those naming its temp folder, and their children)."""
        procs = _processes()
        tag = str(self.temp)
        roots = {p for p, (_pp, cmd, _t) in procs.items() if tag in cmd and p != os.getpid()}
        return _with_descendants(roots, procs) - {os.getpid()}

    def raylet(self, node: int) -> Optional[int]:
        """The pid of node ``node``'s raylet (None when it is not running)."""
        flag = f"--node_ip_address={self.ip(node)}"
        for pid, (_pp, cmd, _t) in _processes().items():
            if str(self.temp) in cmd and flag in cmd.split() and "/raylet " in cmd:
                return pid
        return None

    def node_pids(self, node: int) -> Set[int]:
        """The pids of node ``node``'s raylet and the processes it started (its workers)."""
        pid = self.raylet(node)
        return set() if pid is None else _with_descendants({pid}, _processes())

    def kill_node_when_busy(self, node: int, started_log: Path, job, timeout_s: float = 300.0
                            ) -> List[int]:
        """:meth:`kill_node` once a process of node ``node`` has begun a shard: a line
        ``<shard> <pid>`` of ``started_log`` (the workers' fault hook,
        ``TRIEMINE_TEST_FAULTS``) names one of its pids, so that the node dies holding it (a
        shard lasts the hook's ``delay``). Returns ``[]`` when ``job`` (a ``Popen``) ended or
        ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        while job.poll() is None and time.monotonic() < deadline:
            try:
                started = {int(w[1]) for w in (ln.split() for ln in
                                               Path(started_log).read_text().splitlines())
                           if len(w) == 2}
            except (OSError, ValueError):
                started = set()
            if started & self.node_pids(node):
                return self.kill_node(node)
            time.sleep(0.02)
        return []

    def kill_node(self, node: int) -> List[int]:
        """SIGKILL node ``node``'s raylet and the processes it started (its workers): the
        machine is lost.  Returns the pids killed."""
        pid = self.raylet(node)
        if pid is None:
            return []
        procs = _processes()
        victims = sorted(_with_descendants({pid}, procs))
        self._remember(set(victims))
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return victims

    def stop(self, grace_s: float = 5.0) -> Set[int]:
        """SIGTERM, then SIGKILL after ``grace_s``, every process of this cluster (see
        :meth:`pids`; also the ones seen earlier that are still alive).  Returns those that
        remain (none, unless a process cannot be killed)."""
        procs = _processes()
        mine = self.pids() | {p for p, t in self._seen if p in procs and procs[p][2] == t}
        self._signal(mine, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self._alive(mine):
            time.sleep(0.1)
        left = self._alive(mine | self.pids())
        self._signal(left, signal.SIGKILL)
        time.sleep(0.2)
        return self._alive(left)

    def _remember(self, pids: Set[int]) -> None:
        procs = _processes()
        self._seen |= {(p, procs[p][2]) for p in pids if p in procs}

    @staticmethod
    def _signal(pids: Set[int], sig: int) -> None:
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass

    @staticmethod
    def _alive(pids: Set[int]) -> Set[int]:
        procs = _processes()
        return {p for p in pids if p in procs}

    def __enter__(self) -> "LocalCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False
