#!/usr/bin/env python3
"""BUCC zh-en mining benchmark: mine with trie-mine, evaluate with trie-mine-eval's pipeline.

* ``--quick``: a fixed slice of the shared BUCC zh-en sample: the first 20 gold zh sources and
  the first 20 non-gold zh sources in file order (40 sources), against the full English side
  (13,589 sentences in the trie), pre-expansion, beam 5. Needs the imported model
  (``<cache>/models/opus-mt-zh-en``, built by ``trie-mine-import``).
* full mode: all 8,624 zh sources (``--sources N`` to cap), ``--beam`` (default 10) and
  ``--mode pre|post``; ``--gold-sources G --other-sources O`` mines a gold-enriched slice instead
  (first G gold and first O non-gold zh sources in file order; precision is then higher than on
  the full sample, where only 3% of the zh sentences have a gold pair).

It reports P/R/F1 (strict; lenient too) with filter ``none`` and with a CE threshold tuned on the
slice's own gold (LASER style; optimistic, labelled), the wall time of mining, and the machine.
The last line printed is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchlib import machine  # noqa: E402  (bench/ is on sys.path when run as a script)
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(REPO))

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.tsv import read_mined  # noqa: E402
from triemine.evaluation.pipeline import Direction, evaluate  # noqa: E402
from triemine.evaluation.slices import write_bucc_slice  # noqa: E402
from triemine.paths import BUCC_ZH_EN, cache_root, shared_path  # noqa: E402


def make_slice(out_dir: Path, n_gold: int | None, n_other: int | None, cap: int | None):
    """Write zh-en.slice.{zh,en,gold} (BUCC layout); return (gold path, number of sources)."""
    return write_bucc_slice(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"), out_dir,
                            n_gold=n_gold, n_other=n_other, first=cap)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fixed 60-source slice, beam 5 (< 1 min after set-up)")
    ap.add_argument("--model", default=None, help="model dir (default <cache>/models/opus-mt-zh-en)")
    ap.add_argument("--mode", choices=["pre", "post"], default="pre")
    ap.add_argument("--beam", type=int, default=None, help="beam size (quick: 5, full: 10)")
    ap.add_argument("--sources", type=int, default=None, help="full mode: only the first N zh sources")
    ap.add_argument("--gold-sources", type=int, default=None, help="enriched slice: first G gold zh sources")
    ap.add_argument("--other-sources", type=int, default=None, help="enriched slice: first O non-gold zh sources")
    ap.add_argument("--nbest", type=int, default=1)
    ap.add_argument("--keep", default=None, help="keep the mined TSV and slice in this folder")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="extra trie-mine arguments")
    args = ap.parse_args(argv)

    model = Path(args.model) if args.model else cache_root() / "models" / "opus-mt-zh-en"
    if not (model / "checkpoint.pt").is_file():
        sys.exit(f"bucc_bench: no imported model at {model} (run trie-mine-import first, see README)")
    beam = args.beam or (5 if args.quick else 10)
    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bucc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    for f in ("zh-en.slice.zh", "zh-en.slice.en", "zh-en.slice.gold"):
        (work / f).unlink(missing_ok=True)
    if args.quick:
        gold, n_src = make_slice(work, 20, 20, None)
        slice_name = "first 20 gold + first 20 non-gold zh sources of zh-en.sample, full en side"
    elif args.gold_sources is not None or args.other_sources is not None:
        gold, n_src = make_slice(work, args.gold_sources or 0, args.other_sources or 0, None)
        slice_name = (f"first {args.gold_sources or 0} gold + first {args.other_sources or 0} non-gold zh "
                      "sources of zh-en.sample (gold-enriched), full en side")
    else:
        gold, n_src = make_slice(work, None, None, args.sources)
        slice_name = f"first {n_src} zh sources of zh-en.sample, full en side"
    out_tsv = work / f"mined.{args.mode}.b{beam}.tsv"
    cmd = [sys.executable, "-c", "import sys; from triemine.cli import mine_main; sys.exit(mine_main())",
           f"--{args.mode}-expansion", "--model", str(model), "--source", str(work / "zh-en.slice.zh"),
           "--target", str(work / "zh-en.slice.en"), "-o", str(out_tsv), "--beam", str(beam),
           "--nbest", str(args.nbest)] + list(args.extra)
    print("running: trie-mine", " ".join(cmd[3:]), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=str(REPO))
    seconds = time.perf_counter() - t0

    b = read_bucc(gold)
    mined = read_mined(out_tsv)
    res = {}
    for filt in ("none", "ce"):
        o = evaluate([Direction(mined)], b, filt)
        res[filt] = o
        print(o.signature("strict"))
        print(o.signature("lenient"))
    none, ce = res["none"], res["ce"]
    report = {
        "bench": "bucc_bench", "quick": bool(args.quick), "slice": slice_name,
        "mode": args.mode, "beam": beam, "nbest": args.nbest, "sources": n_src,
        "gold_pairs": len(b.gold), "rows": len(mined), "seconds": round(seconds, 2),
        "sources_per_second": round(n_src / seconds, 3),
        "P": round(none.strict.precision, 4), "R": round(none.strict.recall, 4), "F1": round(none.strict.f1, 4),
        "filter": "none",
        "lenient": none.lenient.as_dict(),
        "ce_tuned_on_slice_gold": {"threshold": ce.thresholds, **ce.strict.as_dict()},
        "machine": machine(),
        "threads": threads, "model": str(model),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
