#!/usr/bin/env python3
"""Reliability: damaged inputs never crash, an interrupted run resumes exactly, concurrent runs
agree.

Measurements (issue 9 and later; ``--only`` names them), each a count that must be 0 (or true);
each family's module says what it measures and how:

* ``tries``, ``text``, ``digest``: damaged trie files and text inputs given to the tools, the
  content digests' cost (:mod:`reliability_files`);
* ``kill``, ``job_kill``, ``concurrent``, ``faults``, ``damage``: ``trie-mine`` SIGKILLed and
  resumed, two runs at once on one cache, the sharded default job's faults, damaged caches and
  work files (:mod:`reliability_jobs`);
* ``trust``: what the tools write, refuse and read back (:mod:`reliability_trust`);
* ``judge``: the learned judge given hostile input (:mod:`reliability_judge`);
* ``ray_cluster``: a Ray cluster started with ``ray start`` (:mod:`reliability_ray`).

``--quick`` (about a minute on an idle box once the tiny model is cached; most of it is starting
``trie-mine`` processes): 1,000 trie files, 250 text files, 2 kills of each configuration while
mining 100 sources, a 500-line target for the concurrent runs; ``faults``, ``damage`` and
``ray_cluster`` run in the full mode only. Full: 10,000 trie files, 2,000 text files, 20 kills
of each over 400 sources, a 5,000-line target. Last line: one JSON object.
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import benchlib  # noqa: E402
from benchlib import cached_tiny_model, machine  # noqa: E402
from reliability_files import bench_digest, bench_text, bench_tries  # noqa: E402
from reliability_jobs import bench_concurrent, bench_damage, bench_faults, bench_kill  # noqa: E402
from reliability_judge import bench_judge  # noqa: E402
from reliability_ray import bench_ray_cluster  # noqa: E402
from reliability_trust import bench_trust  # noqa: E402


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="fewer files and kills (about 1 min)")
    ap.add_argument("--trie-files", type=int, default=None)
    ap.add_argument("--text-files", type=int, default=None)
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--only", default=None,
                    help="comma-separated measurements to run (tries, text, kill, job_kill, "
                         "concurrent, faults, digest, damage, trust, judge, ray_cluster); the "
                         "others are reported as not run")
    args = ap.parse_args(argv)
    run = benchlib.start("reliability_bench", args)
    n_trie = args.trie_files or (1000 if args.quick else 10000)
    n_text = args.text_files or (250 if args.quick else 2000)
    kills = args.kills if args.kills is not None else (2 if args.quick else 20)
    rng = random.Random(args.seed)
    import torch
    torch.set_num_threads(1)
    from triemine.models.model_dir import load_model_dir

    t0 = run.elapsed()
    model_dir, trained_s = cached_tiny_model()
    model = load_model_dir(model_dir)
    report = {"bench": "reliability_bench", "quick": bool(args.quick), "seed": args.seed,
              "machine": machine(), "threads": 1, "tiny_model_trained_s": trained_s}
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        work = Path(tmp)
        for name, fn in (("tries", lambda: bench_tries(model, work, n_trie, rng)),
                         ("text", lambda: bench_text(work, n_text, rng)),
                         ("kill", lambda: bench_kill(model_dir, work, kills, rng,
                                                     100 if args.quick else 400)),
                         ("job_kill", lambda: bench_kill(model_dir, work, kills, rng,
                                                         100 if args.quick else 400, "job")),
                         ("concurrent", lambda: bench_concurrent(model_dir, work,
                                                                 500 if args.quick else 5000)),
                         ("faults", lambda: bench_faults(model_dir, work)
                          if not args.quick else {"faults": "not run in --quick (about 80 s)"}),
                         ("digest", lambda: bench_digest(work, 256 if args.quick else 1024)),
                         ("damage", lambda: bench_damage(model_dir, work, rng)
                          if not args.quick else {"damage": "not run in --quick"}),
                         ("trust", lambda: bench_trust(model_dir, work, quick=args.quick)),
                         ("judge", lambda: bench_judge(model_dir, work, quick=args.quick)),
                         ("ray_cluster", lambda: bench_ray_cluster(model_dir, work)
                          if not args.quick else
                          {"ray_cluster": "not run in --quick (about a minute)"})):
            if args.only and name not in args.only.split(","):
                report[name] = "not run (--only)"
                continue
            with benchlib.timer() as t:
                res = fn()
            res[f"{name}_s"] = round(t.s, 2)
            print(json.dumps(res, ensure_ascii=False), file=sys.stderr, flush=True)
            report.update(res)
    report["seconds"] = round(run.elapsed() - t0, 2)
    goals = {"tries": lambda r: r["trie_crashes"] == 0,
             "text": lambda r: r["text_tracebacks"] == 0 and r["text_bad_exit_codes"] == 0,
             "kill": lambda r: r["rows_lost"] == 0 and r["rows_duplicated"] == 0 and r["identical"],
             "job_kill": lambda r: (r["job_rows_lost"] == 0 and r["job_rows_duplicated"] == 0
                                    and r["job_identical"]),
             "concurrent": lambda r: (r["concurrent_exit_codes"] == [0, 0] and
                                      r["concurrent_cached_tries"] == 1 and
                                      r["concurrent_identical"]),
             "faults": lambda r: r.get("faults_handled") == r.get("faults_measured"),
             "digest": lambda r: True,
             "damage": lambda r: (r.get("damage_silent_wrong") == 0
                                  and r.get("damage_tracebacks") == 0
                                  and r.get("damage_rows_lost") == 0
                                  and r.get("damage_configs_run") == r.get("damage_configs")),
             "trust": lambda r: (r["trust_silent_wrong"] == 0 and r["trust_traceback"] == 0
                                 and r["trust_hang"] == 0
                                 and r["trust_inputs_overwritten"] == 0
                                 and r["trust_rows_lost"] == 0),

             "judge": lambda r: (r["judge_silent_wrong"] == 0 and r["judge_traceback"] == 0
                                 and r["judge_late"] == 0
                                 and r["judge_inputs_overwritten"] == 0),
             "ray_cluster": lambda r: (r["ray_connect_failures_clean"] == 1 and
                                       r["ray_unshared_cache"] != 0 and  # or not measured
                                       r["ray_connect_failure_s"] <= 30 and
                                       r["ray_node_lost"] == 1 and
                                       r["ray_cluster_left_processes"] == 0)}
    report["ok"] = all(ok(report) for name, ok in goals.items()
                       if not str(report.get(name, "")).startswith("not run"))
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
