"""The benchmarks that drive the job's own functions with stand-ins run on a small input, so a
change to those functions' interfaces fails here rather than in a long measurement (the
generation mode of bench/finish_bench.py once passed a stand-in for the job that lacked
``Job.model_pool``)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECORD_KEYS = {"bench", "commit", "dirty", "date", "machine", "threads", "quick", "command",
               "results", "wall_s", "peak_rss_mb"}

TOY_BENCH = """
import subprocess, sys
sys.path.insert(0, {bench!r})
import benchlib

ap = benchlib.parser(__doc__, quick="fewer")
ap.add_argument("--n", type=int, default=1)
args = ap.parse_args()
run = benchlib.start("toy_bench", args)
with benchlib.timer() as t:  # a child that holds 96 MiB for a moment
    subprocess.run([sys.executable, "-c", "b = bytearray(96 << 20); import time; time.sleep(1.5)"],
                   check=True)
sys.exit(run.finish({{"n": args.n, "child_s": t.s}}))
"""


@pytest.mark.cluster
def test_finish_bench_generation_runs_every_stage_of_the_job_on_a_small_input(tmp_path):
    results = tmp_path / "results"
    res = subprocess.run([sys.executable, str(REPO / "bench" / "finish_bench.py"), "--generation",
                          "3000", "--work", str(tmp_path), "--record"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=600,
                         env=dict(os.environ, TRIEMINE_BENCH_RESULTS=str(results)))
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    (record,) = [json.loads(line) for line in (results / "finish_bench.jsonl").open()]
    assert record["bench"] == "finish_bench" and record["results"] == out
    (run,) = out["runs"]
    assert out["mode"] == "generation"
    for stage in ("generate", "unite", "scores", "priors", "finish"):
        assert run["stages"][stage]["wall_s"] >= 0, stage
    assert run["candidates"] >= 3000  # 2 a source and 1 a target, less the repeats


@pytest.mark.cluster
def test_gpu_bench_quick_runs_every_stage_on_torchs_cpu_device_with_parity():
    """bench/gpu_bench.py --quick: every stage through the package's off-CPU code paths on
    torch's CPU device ("cpu:0"), each compared with one CPU thread's results."""
    res = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_bench.py"), "--quick"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["device"] == "cpu:0"
    st = out["stages"]
    assert set(st) == {"scores", "priors", "trie", "translate", "knn", "knn_job", "knn_cell"}
    assert not any("error" in v for v in st.values())
    for name in ("scores", "priors"):
        assert st[name]["cpu_one_thread"]["max_diff_vs_gpu_fp32_nats"] < 1e-3
        assert st[name]["gpu_fp32_best_per_s"] > 0
        # the job's half precision at every batch shape, with its rate and its distance from fp32
        bf = st[name]["bf16"]
        assert bf["best_per_s"] > 0 and bf[bf["best"]]["tflop_per_s"] > 0
        assert 0 < bf[bf["best"]]["max_diff_vs_first_nats"] < 1.0
        assert "fp16 runs on a GPU only" in st[name]["fp16"]["refused"]
    kept = [
        v["rows_kept_from_fp32"] for k, v in st["trie"]["bf16"].items() if k.startswith("batch_")
    ]
    assert kept and all(0.5 < x <= 1.0 for x in kept)
    assert st["trie"]["cpu_one_thread"]["rows_identical_to_gpu"] is True
    assert st["translate"]["cpu_one_thread"]["identical_to_gpu"] == 1.0
    assert st["knn"]["cpu_one_thread"]["ids_identical_to_gpu_fp32"] is True
    assert st["knn_job"]["cpu_check"]["ids_identical"] == [True, True]


@pytest.mark.integration
def test_gpu_bench_packs_a_model_whose_rounded_weights_load_and_score_alike(tmp_path, monkeypatch):
    """--pack-model's rounding: each weight within half a step of its group's scale, tied
    tensors stored once, and the rebuilt directory loads and scores close to the original (here
    the tiny model, every tensor of which is rounded)."""
    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    import gpu_bench
    from triemine.models.model_dir import load_model_dir
    from triemine.testing.tiny_model import synthetic_pairs
    from triemine.scoring.forced import ForcedScorer

    from benchlib import cached_tiny_model

    w = np.random.default_rng(0).standard_normal((7, 100)).astype(np.float32)
    q, scales = gpu_bench._round(w, 6)
    back = gpu_bench._unround(q, scales, w.shape)
    step = np.repeat(scales.astype(np.float32), gpu_bench.PACK_GROUP)[:w.size].reshape(w.shape)
    assert (np.abs(back - w) <= step / 2 + 1e-6).all() and np.abs(q).max() <= 31
    monkeypatch.setattr(gpu_bench, "PACK_MIN_NUMEL", 16)
    tiny = cached_tiny_model()[0]
    info = gpu_bench.pack_model(tiny, tmp_path / "pack", 8)
    assert info["rounded_tensors"] > 0
    rebuilt = gpu_bench.unpack_model(tmp_path / "pack", tmp_path / "model")
    pairs = synthetic_pairs(8, seed=3)
    scores = []
    for d in (tiny, rebuilt):
        m = load_model_dir(d)
        s = [m.encode_source(a) for a, _ in pairs]
        t = [m.encode_target(b) for _, b in pairs]
        scores.append(ForcedScorer(m).score_pairs(s, t, np.arange(8), np.arange(8)))
    assert np.abs(scores[0] - scores[1]).max() < 0.5  # 8 bits: close, not equal
    assert not np.array_equal(scores[0], scores[1])


def _toy(tmp_path, *args, **env):
    script = tmp_path / "toy_bench.py"
    script.write_text(TOY_BENCH.format(bench=str(REPO / "bench")), encoding="utf-8")
    res = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300,
                         env=dict(os.environ, OMP_NUM_THREADS="1", **env))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.cluster
def test_harness_appends_a_record_with_the_runs_facts_where_it_is_told(tmp_path):
    """--record appends one JSON line to <results>/<bench>.jsonl ($TRIEMINE_BENCH_RESULTS, or
    --results-dir over it) holding the printed results, the commit, the threads, the machine and
    the peak memory of the child processes; without --record nothing is written."""
    sys.path.insert(0, str(REPO / "bench"))
    import benchlib

    results = tmp_path / "results"
    out = _toy(tmp_path, "--n", "3", TRIEMINE_BENCH_RESULTS=str(results))
    assert out["n"] == 3 and not results.exists()
    out = _toy(tmp_path, "--n", "3", "--record", TRIEMINE_BENCH_RESULTS=str(results))
    _toy(tmp_path, "--quick", "--record", TRIEMINE_BENCH_RESULTS=str(results))
    lines = (results / "toy_bench.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2  # appended, not overwritten
    full, quick = (json.loads(line) for line in lines)
    assert RECORD_KEYS <= set(full)
    assert full["bench"] == "toy_bench" and full["results"] == out
    assert (full["quick"], quick["quick"]) == (False, True)
    assert full["command"][-3:] == ["--n", "3", "--record"]
    assert (full["commit"], full["dirty"]) == benchlib.git_state(REPO)
    assert full["threads"]["OMP_NUM_THREADS"] == "1"
    assert full["machine"]["cores"] == os.cpu_count() and isinstance(full["machine"]["gpus"], list)
    assert full["peak_rss_mb"]["children"] >= 96  # the child's 96 MiB, after it was waited for
    assert full["wall_s"] + 0.01 >= out["child_s"] > 1.4  # wall_s is rounded to 0.01 s
    elsewhere = tmp_path / "elsewhere"
    _toy(tmp_path, "--record", "--results-dir", str(elsewhere), TRIEMINE_BENCH_RESULTS=str(results))
    assert (elsewhere / "toy_bench.jsonl").is_file()
    assert len((results / "toy_bench.jsonl").read_text(encoding="utf-8").splitlines()) == 2


@pytest.mark.cluster
def test_harness_says_when_it_is_not_in_a_git_checkout(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO / "bench"))
    import benchlib

    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert benchlib.git_state(tmp_path) == (None, None)


def test_haystack_quick_set_slices_the_sample_keeping_each_sources_gold_target(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    import haystack_bench

    gold = haystack_bench.build_set(tmp_path, 500, 5, 5)
    en = (tmp_path / "zh-en.haystack.en").read_text(encoding="utf-8").splitlines()
    zh = (tmp_path / "zh-en.haystack.zh").read_text(encoding="utf-8").splitlines()
    pairs = [line.split("\t") for line in gold.read_text(encoding="utf-8").splitlines()]
    en_ids = [line.split("\t", 1)[0] for line in en]
    assert len(en) == 500 == len(set(en_ids)) and len(zh) == 10
    assert len(pairs) == 5 and {t for _, t in pairs} <= set(en_ids)
    assert {s for s, _ in pairs} <= {line.split("\t", 1)[0] for line in zh}
    assert not any(i.startswith("en-9") for i in en_ids)  # no distractor below the sample's size


def test_clean_bench_says_what_any_cut_of_a_score_can_reach():
    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    import clean_bench

    label = np.array([1, 1, 0, 1, 0, 0, 1, 0])
    score = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, np.nan, 0.1])  # NaN: rejected, ranked last
    got = clean_bench.reachable(score, label, p_goal=0.97, r_goal=0.75)
    assert got == {"best_P_at_R>=0.75": 0.75, "best_R_at_P>=0.97": 0.5,
                   "one_cut_reaches_both": False}
    assert clean_bench.reachable(np.array([3.0, 2.0, 1.0]), np.array([1, 1, 0]),
                                 p_goal=1.0, r_goal=1.0)["one_cut_reaches_both"]
