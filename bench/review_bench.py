#!/usr/bin/env python3
"""How good is this bitext, without gold (issue 71): the expected precision a run prints against
the true precision, and the reading sheet's interval against a simulated reader.

For each set's mining TSV of one configuration (default ``judge``) at its shipped cut:

* ``{set}_kept``, ``{set}_true_precision`` (kept pairs in the gold), ``{set}_expected_precision``
  (their mean ``prob``, what ``trie-mine`` prints) and ``{set}_precision_gap`` (expected minus
  true; goal: within 0.03), the same for the recall (``expected_recall``: of the candidates,
  each source's best ``prob`` the pairs it could have; ``true_recall``: of the gold);
* ``{set}_reader_coverage``: a simulated reader (the gold as the oracle) answers a sheet of
  ``--n`` pairs drawn as ``trie-mine-review`` draws them, for ``--seeds`` seeds; the share of
  seeds whose 95 % interval holds the true precision (goal: at least 0.9), and the mean width.

The sets: the BUCC sample and the transfer set, from the TSVs ``make demo`` writes
(``$TRIEMINE_CACHE/demo/<config>.sample.tsv``, ``<config>.transfer.tsv``; ``--sample``,
``--transfer`` name others). ``--quick``: 20 seeds, and where ``make demo`` has not run, a
slice of the sample (its first 40 gold sources and 40 others against their 40 gold targets and
1,500 other English lines) mined here. Last line: one JSON object.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from benchlib import machine  # noqa: E402

from triemine.io.paths import cache_root  # noqa: E402


def gold_pairs(path) -> set:
    from triemine.evaluation.bucc import read_gold
    return set(read_gold(path))


def measure(tsv, gold: set, n: int, seeds: int) -> dict:
    """The figures of one set (module docstring) from its mining TSV and gold pairs."""
    from triemine.evaluation.review import read_run
    from triemine.judging.quality import expected_quality

    run = read_run(tsv)
    truth = np.array([run.key(r) in gold for r in range(len(run.src_ids))], dtype=bool)
    kept = run.kept
    exp = expected_quality(run.prob[kept], run.best_prob_per_source())
    true_p = float(truth[kept].mean()) if len(kept) else float("nan")
    out = {"kept": int(len(kept)), "true_precision": round(true_p, 4),
           "expected_precision": round(exp["expected_precision"] or float("nan"), 4),
           "true_recall": round(float(truth[kept].sum()) / max(len(gold), 1), 4),
           "expected_recall": round(exp.get("expected_recall") or float("nan"), 4)}
    out["precision_gap"] = round(out["expected_precision"] - true_p, 4)
    out.update(benchlib.simulated_reader(run, gold.__contains__, true_p, n, seeds))
    return out


def quick_slice(work: Path, config: str) -> tuple:
    """A slice of the sample mined here (module docstring): ``(TSV, gold file)``."""
    import random

    shared = Path(os.environ.get("TRIEMINE_SHARED", benchlib.REPO.parent / "shared"))
    base = shared / "data" / "bucc2018" / "zh-en" / "zh-en.sample"
    gold = [tuple(ln.split("\t")) for ln in Path(f"{base}.gold").read_text().splitlines()
            if ln]
    zh = dict(ln.split("\t", 1) for ln in Path(f"{base}.zh").read_text().splitlines() if ln)
    en = dict(ln.split("\t", 1) for ln in Path(f"{base}.en").read_text().splitlines() if ln)
    gold = gold[:40]
    gold_src, gold_tgt = {s for s, _ in gold}, {t for _, t in gold}
    others = [z for z in zh if z not in {s for s, _ in gold}][:40]
    rng = random.Random(71)
    distract = rng.sample(sorted(t for t in en if t not in gold_tgt), 1500)
    src, tgt = work / "slice.zh", work / "slice.en"
    src.write_text("".join(f"{z}\t{zh[z]}\n" for z in sorted(gold_src) + others), "utf-8")
    tgt.write_text("".join(f"{t}\t{en[t]}\n" for t in sorted(gold_tgt) + distract), "utf-8")
    (work / "slice.gold").write_text("".join(f"{s}\t{t}\n" for s, t in gold), "utf-8")
    model = benchlib.shared_model_dir(None, "review_bench")
    out = work / f"{config}.slice.tsv"
    benchlib.mine_corpora(model, config, src, tgt, out)
    return out, work / "slice.gold"


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="20 seeds; a slice mined here where make demo has not run")
    ap.add_argument("--config", default="judge", help="the configuration whose TSVs are read")
    ap.add_argument("--sample", default=None, help="the sample's mining TSV")
    ap.add_argument("--transfer", default=None, help="the transfer set's mining TSV")
    ap.add_argument("--n", type=int, default=100, help="pairs a simulated sheet holds")
    ap.add_argument("--seeds", type=int, default=None, help="simulated readers (default 100)")
    args = ap.parse_args(argv)
    run = benchlib.start("review_bench", args)
    seeds = args.seeds or (20 if args.quick else 100)
    shared = Path(os.environ.get("TRIEMINE_SHARED", benchlib.REPO.parent / "shared"))
    demo = cache_root() / "demo"
    sets = {"sample": (args.sample or demo / f"{args.config}.sample.tsv",
                       shared / "data" / "bucc2018" / "zh-en" / "zh-en.sample.gold"),
            "transfer": (args.transfer or demo / f"{args.config}.transfer.tsv",
                         shared / "data" / "devsets" / "zh-en" / "zh-en.dev.gold")}
    report = {"bench": "review_bench", "quick": bool(args.quick), "machine": machine(),
              "threads": 1, "config": args.config, "n": args.n, "seeds": seeds,
              "cut": "the configuration's shipped cut"}
    with tempfile.TemporaryDirectory(prefix="review-bench-") as tmp:
        have = {k: v for k, v in sets.items() if Path(v[0]).is_file()}
        if not have:
            if not args.quick:
                raise SystemExit("review_bench: no mining TSV of the sample or the transfer set "
                                 f"(run make demo, or give --sample/--transfer): {sets}")
            have = {"slice": quick_slice(Path(tmp), args.config)}
        for name, (tsv, gold) in have.items():
            with benchlib.timer() as t:
                res = measure(tsv, gold_pairs(gold), args.n, seeds)
            report.update({f"{name}_{k}": v for k, v in res.items()})
            report[f"{name}_tsv"] = str(tsv)
            report[f"{name}_s"] = round(t.s, 2)
    gaps = [abs(v) for k, v in report.items() if k.endswith("_precision_gap")]
    cover = [v for k, v in report.items() if k.endswith("_reader_coverage")]
    report["goal_precision_gap_003"] = bool(gaps) and max(gaps) <= 0.03
    report["goal_reader_coverage_090"] = bool(cover) and min(cover) >= 0.9
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
