"""``trie-mine --ray ADDRESS`` against a cluster started as users start one: ``ray start --head``
and a second node (``ray start --address``), both with token authentication, on loopback
addresses only (127.0.0.2 and 127.0.0.3: :mod:`triemine.testing.ray_cluster`).

The default job and ``--config paper`` give the one-process bytes on two nodes; every way of
failing to connect (no token, a wrong token, ``RAY_AUTH_MODE`` set wrong, a port where no Ray
answers) is one line and exit 2; a node lost mid-job (its raylet and workers SIGKILLed) loses
nothing.  The cluster is stopped by its own processes (never ``ray stop``, which would stop
other clusters of the machine).  One node of 1 CPU each: the two 1-CPU actors of a job can only
be on different nodes (the lost-node test sees the second node's worker die).  The lost-node
test is last: the cluster has one node after it.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from triemine.cli import mine_main
from triemine.testing.tiny_model import synthetic_pairs
from triemine.testing.ray_cluster import LocalCluster, free_loopback_port

pytestmark = pytest.mark.cluster

JOBS = {"default": (),
        "paper": ("--config", "paper", "--beam", "5", "--batch-size", "2", "--sort-window", "2")}
SHARDS = {"default": (), "paper": ("--shard-size", "8")}  # the search in 8 shards, not one


@pytest.fixture(scope="module")
def cluster():
    root = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # Ray's socket paths must stay short
    c = LocalCluster(root, nodes=2, cpus=1)
    try:
        c.start()
        yield c
    finally:
        left = c.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not left and not c.pids()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("rc-inputs")
    pairs = synthetic_pairs(60, seed=31, min_len=3)
    src, tgt = d / "f.src", d / "f.tgt"
    src.write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(b + "\n" for _, b in pairs[::2]) +
                   "".join(b + "\n" for _, b in synthetic_pairs(240, seed=32)), encoding="utf-8")
    return src, tgt


def _args(model_dir, src, tgt, out, job, *extra):
    return ["--model", str(model_dir), "--source", str(src), "--target", str(tgt), "-o",
            str(out), "-q", *JOBS[job], *extra]


@pytest.fixture(scope="module")
def one_process(tiny_model_dir, inputs, tmp_path_factory):
    """Each job's output in this process, without Ray."""
    d = tmp_path_factory.mktemp("rc-one")
    src, tgt = inputs
    mp = pytest.MonkeyPatch()
    mp.setenv("TRIEMINE_CACHE", str(d / "cache"))
    mp.setenv("OMP_NUM_THREADS", "1")
    try:
        for job in JOBS:
            assert mine_main(_args(tiny_model_dir, src, tgt, d / f"{job}.tsv", job)) == 0
    finally:
        mp.undo()
    return {job: (d / f"{job}.tsv").read_bytes() for job in JOBS}


def _cli(env, args, timeout=300):
    """``trie-mine ARGS`` as a user runs it (a process of its own, ``env``)."""
    return subprocess.run([sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
                           "sys.exit(mine_main(sys.argv[1:]))", *args],
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("job", list(JOBS))
def test_a_job_on_two_nodes_of_a_token_cluster_gives_the_one_process_bytes(
        cluster, tiny_model_dir, inputs, one_process, tmp_path, job):
    assert cluster.raylet(0) and cluster.raylet(1)  # both nodes up
    src, tgt = inputs
    out = tmp_path / f"{job}.tsv"
    # RAY_AUTH_MODE unset: the job finds that the cluster needs a token, and the token file
    r = _cli(cluster.client_env(TRIEMINE_CACHE=str(tmp_path / "cache")),
             _args(tiny_model_dir, src, tgt, out, job, "--ray", cluster.address, *SHARDS[job]))
    assert r.returncode == 0, r.stderr[-3000:]
    assert out.read_bytes() == one_process[job]


def _refused(cluster, tiny_model_dir, inputs, tmp_path, address=None, **env):
    src, tgt = inputs
    out = tmp_path / "refused.tsv"
    r = _cli(cluster.client_env(TRIEMINE_CACHE=str(tmp_path / "cache"), **env),
             _args(tiny_model_dir, src, tgt, out, "paper", "--ray", address or cluster.address),
             timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert not out.exists()
    assert lines[0].startswith(f"trie-mine: error: --ray {address or cluster.address}: ")
    return lines[0]


def test_a_token_cluster_refuses_in_one_line_what_to_set(cluster, tiny_model_dir, inputs,
                                                        tmp_path):
    token_help = "RAY_AUTH_TOKEN to the cluster's token or RAY_AUTH_TOKEN_PATH"
    line = _refused(cluster, tiny_model_dir, inputs, tmp_path, RAY_AUTH_TOKEN_PATH=None)
    assert "requires token authentication and no token was found" in line and token_help in line
    line = _refused(cluster, tiny_model_dir, inputs, tmp_path, RAY_AUTH_TOKEN="not-the-token")
    assert "refused the authentication token from RAY_AUTH_TOKEN" in line and token_help in line
    line = _refused(cluster, tiny_model_dir, inputs, tmp_path, RAY_AUTH_MODE="token",
                    RAY_AUTH_TOKEN_PATH=None)
    assert "RAY_AUTH_MODE=token and no token was found" in line
    line = _refused(cluster, tiny_model_dir, inputs, tmp_path, RAY_AUTH_MODE="disabled")
    assert "requires token authentication but RAY_AUTH_MODE=disabled" in line


def test_a_port_where_no_ray_answers_is_one_line(cluster, tiny_model_dir, inputs, tmp_path):
    with socket.socket() as s:  # accepts connections (the kernel's backlog), never answers
        s.bind(("127.0.0.1", free_loopback_port()))
        s.listen(4)
        address = "127.0.0.1:%d" % s.getsockname()[1]
        line = _refused(cluster, tiny_model_dir, inputs, tmp_path, address=address)
    assert "no Ray cluster answered there" in line


def test_a_node_lost_mid_job_loses_nothing(cluster, tiny_model_dir, inputs, one_process,
                                           tmp_path):
    """The default job; node 1's raylet and workers SIGKILLed while its worker holds a shard:
    the shard goes to the head's worker and the output is the one-process bytes."""
    src, tgt = inputs
    faults = tmp_path / "faults"
    faults.mkdir()
    log = faults / "computed.log"
    out = tmp_path / "lost.tsv"
    env = cluster.client_env(TRIEMINE_CACHE=str(tmp_path / "cache"),
                             TRIEMINE_TEST_FAULTS=json.dumps({"dir": str(faults), "delay": 2.0}))
    cmd = [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
           "sys.exit(mine_main(sys.argv[1:]))",
           *_args(tiny_model_dir, src, tgt, out, "default", "--ray", cluster.address)]
    with subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True) as job:
        killed = cluster.kill_node_when_busy(1, faults / "started.log", job)
        _, err = job.communicate(timeout=300)
    assert killed and cluster.raylet(1) is None
    assert job.returncode == 0, err[-3000:]
    assert out.read_bytes() == one_process["default"]
    assert "the worker on node 127.0.0.3 died holding shard" in err, err[-3000:]
    assert os.path.getsize(log) > 0
