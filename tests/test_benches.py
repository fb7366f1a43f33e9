"""The benchmarks that drive the job's own functions with stand-ins run on a small input, so a
change to those functions' interfaces fails here rather than in a long measurement (the
generation mode of bench/finish_bench.py once passed a stand-in for the job that lacked
``Job.model_pool``)."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_finish_bench_generation_runs_every_stage_of_the_job_on_a_small_input(tmp_path):
    res = subprocess.run([sys.executable, str(REPO / "bench" / "finish_bench.py"), "--generation",
                          "3000", "--work", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    (run,) = out["runs"]
    assert out["mode"] == "generation"
    for stage in ("generate", "unite", "scores", "priors", "finish"):
        assert run["stages"][stage]["wall_s"] >= 0, stage
    assert run["candidates"] >= 3000  # 2 a source and 1 a target, less the repeats
