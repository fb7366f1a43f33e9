#!/usr/bin/env python3
"""Compare the results of two benchmark records of each bench: the measurements that do not
depend on the machine's speed (counts, scores, F1, sizes, checksums), field by field.

Usage::

    python scripts/compare_records.py --before COMMIT [--after COMMIT] [--quick] [BENCH ...]

For each bench (default: every ``bench/results/*.jsonl``), the newest record whose commit is
``--before`` or one of its ancestors and the newest record of ``--after`` (default: the newest
record) are compared; fields whose names say they are times, rates or memory (``*_s``,
``seconds``, ``per_s``, ``rss``, ``load``, ``_ns``, ``a_over_b`` ...) are left out, as are
paths of temporary folders. Prints one line per bench
(``same``, or the differing fields) and, last, one JSON object; exits 1 when a bench differs.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMING = re.compile(r"(^|_)(s|ns|ms|sec|secs|seconds|wall|time|times|rate|per_s|speed|speedup|"
                    r"rss|mb|mib|gb|bytes_per_s|load|loadavg|cpu|date|throughput|ratio|"
                    r"elapsed|peak|tflops|gflops|pairs_per_s|lines_per_s)($|_)|_s$|/s|_over_|"
                    r"cores_per|bytes_per")
TEMP = re.compile(r"^/tmp/|/tmp/")  # a temporary folder's name is no result


def _ancestors(commit: str) -> set:
    out = subprocess.run(["git", "rev-list", commit], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return set(out)


def _flat(x, prefix=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if TIMING.search(str(k).lower()):
                continue
            yield from _flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _flat(v, f"{prefix}[{i}]")
    elif not (isinstance(x, str) and TEMP.search(x)):
        yield prefix, x


def compare(path: Path, before: set, after, quick: bool):
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    records = [r for r in records if bool(r.get("quick")) == quick]
    old = [r for r in records if r.get("commit") in before]
    new = [r for r in records if (after is None or r.get("commit") in after)
           and r.get("commit") not in before]
    if not old or not new:
        return None
    a, b = dict(_flat(old[-1].get("results", {}))), dict(_flat(new[-1].get("results", {})))
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return {"before": old[-1]["commit"][:12], "after": new[-1]["commit"][:12],
            "fields": len(set(a) | set(b)), "differ": diff}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benches", nargs="*")
    ap.add_argument("--before", required=True)
    ap.add_argument("--after")
    ap.add_argument("--quick", action="store_true", help="compare --quick records")
    args = ap.parse_args(argv)
    before = _ancestors(args.before)
    after = _ancestors(args.after) if args.after else None
    paths = [ROOT / "bench" / "results" / f"{b}.jsonl" for b in args.benches] or \
        sorted((ROOT / "bench" / "results").glob("*.jsonl"))
    out, bad = {}, False
    for p in paths:
        res = compare(p, before, after, args.quick)
        out[p.stem] = res
        if res is None:
            print(f"{p.stem}: no pair of records to compare")
        elif res["differ"]:
            bad = True
            print(f"{p.stem}: {len(res['differ'])} of {res['fields']} fields differ: "
                  f"{', '.join(res['differ'][:8])}")
        else:
            print(f"{p.stem}: same ({res['fields']} fields, {res['before']} -> {res['after']})")
    print(json.dumps(out))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
