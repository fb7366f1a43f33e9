"""Worker processes give the single-process output byte for byte (a killed worker is retried, a
killed driver resumes from the manifest); options that do not apply; target shards merge the
matches of several tries.

Tiny synthetic model (tests/conftest.py); the corpora, the single-process reference and the
environment: tests/distributed/conftest.py.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from triemine.cli import mine_main
from triemine.distributed import plan_shards
from triemine.distributed.shards import read_done
from triemine.distributed.local import InlinePool
from triemine.distributed.worker import FAULTS_ENV
from triemine.errors import InputError

from helpers import computed_shards, fault_env, paper_args

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("shard_env")]


# -- worker processes
# -------------------------------------------------------------------------------

def test_workers_give_the_single_process_bytes_even_when_a_worker_is_killed(
        tiny_model_dir, corpora, single, tmp_path, monkeypatch, capsys):
    """--workers 2: the merged TSV (and its meta sidecar) equal the single-process run's; the
    worker that SIGKILLs itself in the middle of shard 1 is replaced and the shard redone."""
    src, tgt = corpora
    d, _ = fault_env(tmp_path, monkeypatch, kill=[1])
    out = tmp_path / "workers.tsv"
    capsys.readouterr()
    rc = mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(out), "--workers", "2",
                          "--shard-size", "8"))
    assert rc == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["shards"] == 6 and summary["shards_computed"] == 6
    assert out.read_bytes() == single.read_bytes()
    meta = lambda p: json.loads(open(str(p) + ".meta.json").read())  # noqa: E731
    assert meta(out) == meta(single)
    assert (d / "killed-1").exists()  # the worker did die in shard 1 ...
    assert sorted(computed_shards(d)) == list(range(6))  # ... and every shard was computed once
    manifest = json.loads((tmp_path / "workers.tsv.shards" / "manifest.json").read_text())
    assert manifest["done"]["1"]["attempts"] == 2
    assert len({e["pid"] for e in manifest["done"].values()}) >= 2


def test_killed_driver_resumes_from_the_manifest(tiny_model_dir, corpora, single, tmp_path):
    """SIGKILL of the trie-mine process (its workers die with it); --resume redoes only the
    shards the manifest lacks, and the output is the single-process output."""
    src, tgt = corpora
    d, spec = fault_env(tmp_path, delay=0.4)
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    env[FAULTS_ENV] = spec
    out = tmp_path / "killed.tsv"
    cmd = [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
           "sys.exit(mine_main(sys.argv[1:]))",
           *paper_args(tiny_model_dir, src, tgt, "-o", str(out), "--workers", "2",
                   "--shard-size", "4")]
    manifest = tmp_path / "killed.tsv.shards" / "manifest.json"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    before = {}
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        before = read_done(manifest.parent)  # the manifest and its log
        if len(before) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_done(manifest.parent)
    assert len(before) >= 3 and not out.exists()
    first_run = computed_shards(d)
    time.sleep(1.0)  # workers die with their driver (PR_SET_PDEATHSIG): nothing more computed
    assert computed_shards(d) == first_run
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stderr.strip().splitlines()[-1])
    assert summary["shards_reused"] == len(before)
    assert summary["shards_computed"] == summary["shards"] - len(before) > 0
    after = json.loads(manifest.read_text())["done"]
    for k, entry in before.items():  # finished shards were not redone
        assert after[k]["finished"] == entry["finished"]
    second_run = computed_shards(d)[len(first_run):]
    assert not set(second_run) & {int(k) for k in before}
    assert out.read_bytes() == single.read_bytes()


def test_mining_job_scores_on_workers_identically(tiny_model_dir, corpora, tmp_path, capsys):
    """--config mt-only: the exact scores of the candidate pairs, computed by two worker
    processes, give the single-process TSV byte for byte."""
    src, tgt = corpora
    base = ["--config", "mt-only", "--model", str(tiny_model_dir), "--source", str(src),
            "--target", str(tgt), "-q"]
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(base + ["-o", str(one)]) == 0
    assert mine_main(base + ["-o", str(two), "--workers", "2"]) == 0, capsys.readouterr().err
    assert one.read_bytes() == two.read_bytes()
    assert (tmp_path / "two.tsv.work" / "scores.shards" / "manifest.json").is_file()


def test_scoring_shards_are_whole_chunks_and_bitwise_equal(tiny_model, corpora, tmp_path):
    from triemine.io.corpus import read_corpus
    from triemine.mining.score_shards import exact_scores_sharded
    from triemine.distributed.local import InlinePool
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.features import exact_scores

    src, tgt = corpora
    s, t = read_corpus(src), read_corpus(tgt)
    rng = np.random.default_rng(0)
    ok = [i for i in range(len(s)) if s.texts[i]]
    pairs = np.unique(np.stack([rng.choice(ok, 300), rng.integers(0, len(t), 300)], 1), axis=0)
    score = np.full(len(pairs), np.nan)
    score[::7] = -1.5  # already scored (e.g. by the trie search): skipped, kept
    cands = CandidateSet(pairs[:, 0], pairs[:, 1], np.ones(len(pairs)), {"score": score})
    ref = exact_scores(tiny_model, cands, s.texts, t.texts, chunk=40)
    got, stats = exact_scores_sharded(tiny_model, cands, src, tgt, tmp_path / "w", InlinePool(),
                                      chunk=40)
    assert stats["shards"] == -(-int(np.isnan(score).sum()) // 40)
    assert got.col("score").tobytes() == ref.col("score").tobytes()
    assert got.col("n_tokens").tobytes() == ref.col("n_tokens").tobytes()


def test_the_searchs_line_columns_name_the_corpus_lines_in_every_shard(tiny_model, corpora,
                                                                       tmp_path):
    """The line columns the mining job's trie generator reads (``src_line``, ``tgt_line``) are
    each row's corpus lines in one process and in shards of a few sources alike."""
    from triemine.decoding.driver import mine_to_tsv
    from triemine.decoding.settings import SearchSettings
    from triemine.io.tsv import read_mined

    src, tgt = corpora
    search = SearchSettings(beam=3, batch_size=2, sort_window=2, token_counts=True,
                            line_numbers=True, shard_sources=4)
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    mine_to_tsv(tiny_model, src, tgt, one, search=search)
    mine_to_tsv(tiny_model, src, tgt, two, search=search, pool=InlinePool())
    assert one.read_bytes() == two.read_bytes()
    assert len(json.loads((tmp_path / "two.tsv.shards" / "manifest.json").read_text(
        encoding="utf-8"))["done"]) > 4
    m = read_mined(two)
    lines = src.read_text(encoding="utf-8").splitlines()
    targets = tgt.read_text(encoding="utf-8").splitlines()
    assert len(m) > 10 and m.columns[-2:] == ["src_line", "tgt_line"]
    assert [lines[int(i) - 1].split("\t")[0] for i in m.col("src_line")] == m.src_ids
    assert [targets[int(i) - 1].split("\t")[0] for i in m.col("tgt_line")] == m.tgt_ids


def test_priors_on_shards_are_the_single_process_bits_and_restart_on_other_lines(
        tiny_model, corpora, tmp_path):
    """The targets' priors are pairs with the empty source (-1) on the same sharded path as the
    exact scores: whole chunks, the single process's bits.  A later run that needs other lines
    (a shared cache filled in between) starts the shards over instead of refusing to resume."""
    from triemine.io.corpus import read_corpus
    from triemine.mining.score_shards import forced_scores_sharded
    from triemine.distributed.local import InlinePool
    from triemine.mining.features import forced_scores

    src, tgt = corpora
    t = read_corpus(tgt)
    need = np.arange(len(t), dtype=np.int64)
    empty = np.full(len(need), -1)
    ref, ntok = forced_scores(tiny_model, empty, need, [], t.texts, chunk=10)
    got, got_ntok, stats = forced_scores_sharded(tiny_model, empty, need, src, tgt,
                                                 tmp_path / "w", InlinePool(), name="priors",
                                                 chunk=10, stale="restart")
    assert stats["shards"] == -(-len(need) // 10) and stats["shards_computed"] == stats["shards"]
    assert got.tobytes() == ref.tobytes() and got_ntok.tobytes() == ntok.tobytes()
    assert np.all(ref < 0)
    # the same lines again: every shard reused
    _, _, again = forced_scores_sharded(tiny_model, empty, need, src, tgt, tmp_path / "w",
                                        InlinePool(), name="priors", chunk=10, stale="restart")
    assert again["shards_reused"] == again["shards"] and again["shards_computed"] == 0
    # fewer lines left to compute: started over, right values for the new lines
    part, _, over = forced_scores_sharded(tiny_model, empty[:15], need[5:20], src, tgt,
                                          tmp_path / "w", InlinePool(), name="priors",
                                          chunk=10, stale="restart")
    assert over["shards_reused"] == 0 and over["shards_computed"] == 2
    np.testing.assert_allclose(part, ref[5:20], rtol=0, atol=1e-4)
    # the exact scores' stores still refuse to resume another set of pairs
    with pytest.raises(InputError, match="cannot resume"):
        forced_scores_sharded(tiny_model, empty[:15], need[:15], src, tgt, tmp_path / "w",
                              InlinePool(), name="priors", chunk=10)


def _mt_only_one_and_two_workers(model_dir, corpora, tmp_path, monkeypatch):
    """``mt-only`` in one process and on 2 workers, each with an empty cache: both TSVs."""
    src, tgt = corpora
    base = ["--config", "mt-only", "--model", str(model_dir), "--source", str(src),
            "--target", str(tgt), "-q"]
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-one"))
    assert mine_main(base + ["-o", str(one)]) == 0
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-two"))
    assert mine_main(base + ["-o", str(two), "--workers", "2"]) == 0
    return one, two


def test_mining_job_computes_priors_on_workers_with_an_empty_cache(tiny_model_dir, corpora,
                                                                     tmp_path, monkeypatch):
    """With --workers the targets' priors are computed by the workers too (nothing cached), and
    the TSV is the single process's, byte for byte."""
    one, two = _mt_only_one_and_two_workers(tiny_model_dir, corpora, tmp_path, monkeypatch)
    manifest = json.loads((tmp_path / "two.tsv.work" / "priors.shards" / "manifest.json")
                          .read_text(encoding="utf-8"))
    assert manifest["done"] and os.getpid() not in {e["pid"] for e in manifest["done"].values()}
    assert one.read_bytes() == two.read_bytes()


def test_a_target_corpus_of_several_prior_ranges_gives_the_same_tsv_on_workers(
        tiny_model_dir, corpora, tmp_path, monkeypatch):
    """A target corpus of several PRIOR_RANGE ranges: the driver finds and computes the priors a
    range at a time, each range a sharded job of its own on the workers, and the TSV is the
    single process's (the same ranges, the same chunks), byte for byte; the cache holds them."""
    from triemine.mining import features

    monkeypatch.setattr(features, "PRIOR_RANGE", 16)  # 48 target lines: 3 ranges
    one, two = _mt_only_one_and_two_workers(tiny_model_dir, corpora, tmp_path, monkeypatch)
    assert one.read_bytes() == two.read_bytes()
    work = tmp_path / "two.tsv.work"
    done = sorted(p.name for p in work.iterdir() if p.name.startswith("priors"))
    assert done == ["priors.1.shards", "priors.2.shards", "priors.shards"]
    for name in done:
        assert json.loads((work / name / "manifest.json").read_text(encoding="utf-8"))["done"]
    (cached,) = (tmp_path / "cache-two" / "priors").iterdir()
    assert np.isfinite(np.load(cached)).sum() > 32  # lines of every range


def test_a_small_scoring_job_is_cut_into_shards_for_several_workers():
    """1,198 pairs were one 2,000-pair chunk, one shard: two workers scored them at 0.94x of
    one (haystack_bench --quick); a chunk is now a quarter of a smaller job, at least 256."""
    from triemine.mining.features import MIN_SCORE_CHUNK, SCORE_CHUNK, score_chunk

    assert score_chunk(1198) == 300 and len(plan_shards(range(0, 1198, 300), 1198, 300)) == 4
    assert score_chunk(6842) == 1711 and score_chunk(10 ** 6) == SCORE_CHUNK == 2000
    assert score_chunk(1) == MIN_SCORE_CHUNK == 256


# -- options and errors
# ------------------------------------------------------------------------------

def test_options_that_do_not_apply_are_refused(tiny_model_dir, corpora, tmp_path, capsys):
    src, tgt = corpora
    out = str(tmp_path / "x.tsv")
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-o", out]
    for argv, msg in ((["--config", "mt-only", "--target-shards", "2"], "--target-shards applies"),
                      (["--config", "mt-only", "--workers", "2", "--shard-size", "5"],
                       "--shard-size applies"),
                      (["--config", "paper", "--shard-size", "5"], "--shard-size applies"),
                      (["--config", "paper", "--workers", "0"], "--workers must be >= 1"),
                      (["--config", "paper", "--workers", "2", "--debug"], "not with --workers"),
                      (["--config", "paper", "--target-shards", "0"], "--target-shards must")):
        with pytest.raises(SystemExit) as exc:
            mine_main(base + argv)
        assert exc.value.code == 2
        assert msg in capsys.readouterr().err


def test_single_machine_path_imports_without_ray_and_names_the_extra(tiny_model_dir, corpora,
                                                                       tmp_path, monkeypatch,
                                                                       capsys):
    code = ("import sys; import triemine.cli, triemine.distributed, triemine.mining.score_shards, "
            "triemine.distributed.local, triemine.mining.run; assert 'ray' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    src, tgt = corpora
    rc = mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(tmp_path / "r.tsv"), "--ray"))
    err = capsys.readouterr().err
    assert rc == 2 and "triemine[ray]" in err and "Traceback" not in err


def test_cuda_actors_ask_for_one_gpu_each_and_need_a_gpu():
    from triemine.distributed import make_pool

    pool = make_pool(2, ray="local", device="cuda")
    assert pool.options()["num_gpus"] == 1 and pool.options()["num_cpus"] == 1
    assert make_pool(2, ray="local").options()["num_gpus"] == 0
    # an actor's one GPU is its cuda: a device index is refused before any work
    from triemine.api import MineOptions
    from triemine.errors import InputError

    with pytest.raises(InputError, match="--device cuda:1 with --ray"):
        MineOptions.of(ray="local", device="cuda:1").check()
    MineOptions.of(ray="local", device="cuda").check()


# -- target shards
# ------------------------------------------------------------------------------------

def test_merge_matches_unites_lines_orders_by_score_and_keeps_the_beam():
    from triemine.decoding.matches import Match
    from triemine.decoding.shards import merge_matches

    def m(tokens, score, lines):
        return Match(0, 0, tuple(lines), tuple(tokens), score, len(tokens), -score / len(tokens),
                     0.0, "")
    merged = merge_matches([[m([5, 2], -1.0, [3]), m([6, 7, 2], -6.0, [1])],
                            [m([5, 2], -1.0, [30]), m([8, 2], -0.5, [40])]], beam=2)
    assert [x.tokens for x in merged] == [(8, 2), (5, 2)]
    assert merged[1].tgt_line_ids == (3, 30) and [x.rank for x in merged] == [0, 1]


def test_target_shards_find_at_least_what_one_trie_finds_with_a_wide_beam(
        tiny_model_dir, corpora, tmp_path):
    """Two tries, each searched with its own beam: with a beam as wide as the corpus, every
    pair the one trie finds is found again with the same score (and more: each half's beam
    explores what the whole trie's beam pruned), with the target ids of the whole corpus."""
    from triemine.io.tsv import read_mined

    src, tgt = corpora
    outs = {}
    for k in (1, 2):
        out = tmp_path / f"k{k}.tsv"
        assert mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(out), "--beam", "48",
                                "--target-shards", str(k))) == 0
        outs[k] = read_mined(out)
    rows = {k: {(a, b): s for a, b, s in zip(m.src_ids, m.tgt_ids, m.col("score"))}
            for k, m in outs.items()}
    assert rows[1].keys() <= rows[2].keys() and len(rows[2]) > len(rows[1]) > 48
    assert all(abs(rows[1][key] - rows[2][key]) < 1e-4 for key in rows[1])
    tgt_text = dict(line.rstrip("\n").split("\t") for line in open(tgt, encoding="utf-8"))
    m = outs[2]
    assert all(tgt_text[i] == t for i, t in zip(m.tgt_ids, m.tgt))
    # line 2's sentence is also lines 5 and 40 (the other half): one match, all three ids
    assert {b for (a, b) in rows[2] if a == "s2"} >= {"t2", "t5", "t40"}
