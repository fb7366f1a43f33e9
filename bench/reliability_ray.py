"""The reliability bench's Ray family (issue 42, full mode only: about a minute,
:func:`bench_ray_cluster`): a Ray cluster started with ``ray start``, two nodes with token
authentication on loopback addresses; ``--ray ADDRESS`` with no cluster, no token, a wrong
token, a silent port: one line, exit 2, ``ray_connect_failure_s`` at most 30; a node SIGKILLed
mid-job: ``ray_node_lost`` 1 when the output is the uninterrupted bytes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import REPO
from reliability_jobs import clean_refusal, job_env, mine_cmd, synthetic_corpora


def bench_ray_cluster(model_dir, work: Path, n_sources: int = 60) -> dict:
    """A Ray cluster started as users start one (``ray start --head`` and a second node, token
    authentication, loopback addresses: :class:`triemine.testing.ray_cluster.LocalCluster`),
    about a minute:

    * ``ray_connect_failures``: ``trie-mine --ray ADDRESS`` with no cluster there, no token, a
      wrong token, and a port where nothing answers: each exit 2 with one line, in seconds
      (``ray_connect_failure_s``; the goal is 30 s at most);
    * ``ray_unshared_cache`` (root only): a third node that does not see the driver's cache
      (:func:`_ray_unshared_cache`): the job stops at once with one line naming it;
    * ``ray_node_lost``: the default job with ``--ray ADDRESS``, each shard made to last 2 s;
      once one is done, node 2's raylet and workers are SIGKILLed: the job finishes on the head
      with the uninterrupted run's bytes, the shard the node held redone (1 when all of it).
    The cluster's processes are stopped by pid, not by ``ray stop`` (other clusters live on)."""
    import socket

    from triemine.testing.ray_cluster import LocalCluster, free_loopback_port

    src, tgt = synthetic_corpora(work / "r", n_sources, 31, 240, 32)
    ref = work / "r-ref.tsv"
    subprocess.run(mine_cmd(model_dir, src, tgt, ref, config="default"), check=True,
                   env=job_env(work / "r-cache"), stderr=subprocess.DEVNULL)
    res: dict = {}
    root = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # Ray's socket paths must stay short
    cluster = LocalCluster(root, nodes=2, cpus=1)
    try:
        t = time.perf_counter()
        cluster.start()
        res["ray_cluster_start_s"] = round(time.perf_counter() - t, 2)

        def run(address, **env):
            out = work / "r-refused.tsv"
            e = dict(cluster.client_env(**env), TRIEMINE_CACHE=str(work / "r-cache"),
                     PYTHONPATH=str(REPO))
            t0 = time.perf_counter()
            p = subprocess.run(mine_cmd(model_dir, src, tgt, out, ("--ray", address),
                                        config="default"), env=e, capture_output=True,
                               text=True, timeout=120)
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            return (p.returncode == 2 and len(lines) == 1 and not out.exists(),
                    round(time.perf_counter() - t0, 2), lines[-1][:200] if lines else "")

        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(4)
            cases = {"no_cluster": (f"127.0.0.1:{free_loopback_port()}", {}),
                     "no_token": (cluster.address, {"RAY_AUTH_TOKEN_PATH": None}),
                     "wrong_token": (cluster.address, {"RAY_AUTH_TOKEN": "not-the-token"}),
                     "silent_port": ("127.0.0.1:%d" % silent.getsockname()[1], {})}
            outcomes = {name: run(address, **env) for name, (address, env) in cases.items()}
        res["ray_connect_failures"] = {k: {"one_line_exit_2": ok, "s": s, "line": line}
                                       for k, (ok, s, line) in outcomes.items()}
        res["ray_connect_failure_s"] = max(s for _ok, s, _line in outcomes.values())
        res["ray_connect_failures_clean"] = int(all(ok for ok, _s, _l in outcomes.values()))
        res.update(_ray_unshared_cache(cluster, model_dir, src, tgt, work))

        faults = work / "r-faults"
        faults.mkdir(exist_ok=True)
        out = work / "r-lost.tsv"
        env = dict(cluster.client_env(), TRIEMINE_CACHE=str(work / "r-cache-lost"),
                   PYTHONPATH=str(REPO),
                   TRIEMINE_TEST_FAULTS=json.dumps({"dir": str(faults), "delay": 2.0}))
        t = time.perf_counter()
        job = subprocess.Popen(mine_cmd(model_dir, src, tgt, out, ("--ray", cluster.address),
                                        config="default"), env=env, stderr=subprocess.PIPE,
                               text=True)
        killed = cluster.kill_node_when_busy(1, faults / "started.log", job)
        _, err = job.communicate(timeout=600)
        res["ray_node_lost_s"] = round(time.perf_counter() - t, 2)
        res["ray_node_lost_killed_pids"] = len(killed)
        res["ray_node_lost_exit"] = job.returncode
        res["ray_node_lost_redone"] = err.count("died holding shard")
        res["ray_node_lost"] = int(bool(killed) and job.returncode == 0 and out.is_file()
                                   and out.read_bytes() == ref.read_bytes()
                                   and res["ray_node_lost_redone"] > 0)
        if not res["ray_node_lost"]:
            res["ray_node_lost_stderr"] = err[-1500:]
    finally:
        res["ray_cluster_left_processes"] = len(cluster.stop())
        shutil.rmtree(root, ignore_errors=True)
    return res


def _ray_unshared_cache(cluster, model_dir, src, tgt, work: Path) -> dict:
    """A third node that does not see the driver's cache (``ray_unshared_cache`` 1 when the
    job stops with one line naming the node and the directory): started in a mount namespace
    where the cache is an empty tmpfs (root only), lost again afterwards."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return {"ray_unshared_cache": "not measured: a mount namespace needs root"}
    cache = work / "r-cache-hidden"
    cache.mkdir(exist_ok=True)
    hide = ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs none "{cache}" && exec "$@"', "sh"]
    try:
        cluster.add_node(2, prefix=hide)
    except RuntimeError as exc:
        return {"ray_unshared_cache": f"not measured: {str(exc).splitlines()[0][:200]}"}
    try:
        out = work / "r-unshared.tsv"
        env = dict(cluster.client_env(), TRIEMINE_CACHE=str(cache), PYTHONPATH=str(REPO))
        t = time.perf_counter()
        p = subprocess.run(mine_cmd(model_dir, src, tgt, out, ("--ray", cluster.address),
                                    config="default"), env=env, capture_output=True,
                           text=True, timeout=300)
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        return {"ray_unshared_cache_s": round(time.perf_counter() - t, 2),
                "ray_unshared_cache_line": last[:300],
                "ray_unshared_cache": int(clean_refusal(p) and not out.exists() and
                                          f"node {cluster.ip(2)} does not see {cache}" in last)}
    finally:
        cluster.kill_node(2)
