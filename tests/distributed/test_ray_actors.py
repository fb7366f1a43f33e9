"""Ray actors give the single-process bytes after an actor dies, report a shard that always
fails by id and are created for the shards a stage has. Ray runs as one local cluster per
module (2 CPUs, on 127.0.0.1, no dashboard, usage statistics off); nothing reaches another
machine.

Tiny synthetic model (tests/conftest.py); the corpora, the single-process reference and the
environment: tests/distributed/conftest.py.
"""
import json
import os
import re

import numpy as np
import pytest

from triemine.cli import mine_main

from helpers import computed_shards, fault_env, paper_args

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("shard_env")]


# -- Ray
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray cluster for the module: 2 CPUs, 127.0.0.1 only, no dashboard."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only (read at import)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, address="local")
    assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in ray.nodes())
    yield ray
    ray.shutdown()


def test_ray_actors_give_the_single_process_bytes_after_an_actor_dies(
        ray_cluster, tiny_model_dir, corpora, single, tmp_path, monkeypatch, capsys):
    src, tgt = corpora
    d, _ = fault_env(tmp_path, monkeypatch, kill=[2])  # the actor SIGKILLs itself in shard 2
    out = tmp_path / "ray.tsv"
    rc = mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(out), "--ray", "--workers", "2",
                          "--shard-size", "8"))
    assert rc == 0, capsys.readouterr().err
    assert out.read_bytes() == single.read_bytes()
    assert (d / "killed-2").exists() and sorted(computed_shards(d)) == list(range(6))


def test_ray_reports_a_shard_that_always_fails_by_id(ray_cluster, tiny_model_dir, corpora,
                                                    tmp_path, monkeypatch, capsys):
    src, tgt = corpora
    d, _ = fault_env(tmp_path, monkeypatch, fail=[3])
    out = tmp_path / "fail.tsv"
    rc = mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(out), "--ray", "local",
                          "--workers", "2", "--shard-size", "8"))
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "1 shard(s) failed" in err
    assert re.search(r"shard 3 \(sources \d+-\d+\) failed 3 time\(s\): RuntimeError: "
                     r"injected failure of shard 3", err), err
    assert "Traceback" not in err
    assert sorted(computed_shards(d)) == [0, 1, 2, 4, 5]  # the others are done and recorded
    manifest = json.loads((tmp_path / "fail.tsv.shards" / "manifest.json").read_text())
    assert sorted(manifest["done"]) == ["0", "1", "2", "4", "5"]


def _count_actors(monkeypatch):
    """The actors every RayPool creates from now on (a list that grows with each one)."""
    from triemine.distributed.ray_backend import RayPool

    made = []
    real = RayPool._start
    monkeypatch.setattr(RayPool, "_start", lambda self, i: (made.append(i), real(self, i))[1])
    return made


def test_ray_actors_are_created_for_the_shards_a_stage_has(ray_cluster, tiny_model, corpora,
                                                           tmp_path, monkeypatch):
    """``workers=4``: opening the pool creates no actor, a stage of one shard one, a later stage
    of two shards one more, a nested ``with`` keeps them and a stage of 6 shards adds actors up
    to 4 (two of which cannot start on the 2 CPUs: the others do the work); every stage gives
    the one-process bits."""
    from triemine.io.corpus import read_corpus
    from triemine.mining.score_shards import forced_scores_sharded
    from triemine.distributed.ray_backend import RayPool
    from triemine.mining.features import forced_scores

    made = _count_actors(monkeypatch)
    src, tgt = corpora
    s, t = read_corpus(src), read_corpus(tgt)
    idx = np.arange(12, dtype=np.int64)

    def stage(pool, chunk):
        ref = forced_scores(tiny_model, idx, idx, s.texts, t.texts, chunk=chunk)
        work = tmp_path / f"w{len(list(tmp_path.glob('w*')))}"  # a new job each time
        got = forced_scores_sharded(tiny_model, idx, idx, src, tgt, work, pool, chunk=chunk)
        assert got[2]["shards"] == 12 // chunk and got[2]["shards_computed"] == 12 // chunk
        assert got[0].tobytes() == ref[0].tobytes() and got[1].tobytes() == ref[1].tobytes()

    pool = RayPool("local", workers=4)
    with pool:
        assert made == [] and pool.workers == 4
        stage(pool, 12)
        assert len(made) == len(pool._actors) == 1
        stage(pool, 6)
        assert len(made) == len(pool._actors) == 2
        with pool:
            stage(pool, 12)
            assert len(made) == 2
            stage(pool, 2)
            assert len(made) == len(pool._actors) == 4 and pool.replaced == 0
        assert len(pool._actors) == 4
    assert pool._actors == [] and len(made) == 4


def test_ray_local_with_more_workers_than_cores_warns_and_starts_what_the_shards_need(
        ray_cluster, tiny_model_dir, corpora, single, tmp_path, monkeypatch, caplog):
    """``--ray local --workers 64`` on a job of one search shard: the warning of the local
    pool, one actor, the one-process bytes."""
    made = _count_actors(monkeypatch)
    src, tgt = corpora
    out = tmp_path / "many.tsv"
    with caplog.at_level("WARNING"):
        rc = mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(out), "--ray", "local",
                              "--workers", "64", "--shard-size", "48"))
    assert rc == 0 and out.read_bytes() == single.read_bytes()
    assert len(made) == 1
    assert any(re.search(r"--workers 64: 64 x 1 threads on \d+ cores", r.getMessage())
               for r in caplog.records), caplog.text
