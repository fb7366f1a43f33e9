"""Issue 59: does the second look keep pairs where there is nothing to find?

The clean bench's unrelated corpora (``bench/clean_bench.py``'s ``unrelated`` part: the BUCC
sample's Chinese sentences without a gold pair against de-en English lines drawn by
``clean_bench_draw``), mined by a configuration with and without its second look at its shipped
cut (:func:`triemine.api.run`, as ``benchlib.mine_corpora``).  Printed: the pairs kept each way,
the second look's counts and seconds; the last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402


def main() -> None:
    from triemine.api import MineOptions, run as run_job
    from triemine.evaluation.splits import clean_bench_draw

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="combined")
    ap.add_argument("--sources", type=int, default=600)
    ap.add_argument("--targets", type=int, default=14000)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default=None)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sp, tp = work / "unrelated.zh", work / "unrelated.en"
    benchlib.write_corpus(sp, benchlib.bucc_unpaired_sources()[:args.sources])
    benchlib.write_corpus(tp, benchlib.de_en_rows(clean_bench_draw(args.targets).tolist()))
    model = benchlib.shared_model(args.model, "second_look_unrelated")
    out = {"config": args.config, "sources": args.sources, "targets": args.targets}
    for look in (False, True):
        t0 = time.perf_counter()
        res = run_job(MineOptions.of(args.config, second_look=look), model, str(sp), str(tp),
                      str(work / f"look{int(look)}.tsv"), select=True, resume=True)
        key = "with" if look else "without"
        out[key] = {"kept": len(res.kept_rows()), "wall_s": round(time.perf_counter() - t0, 1),
                    "candidates": res.summary["candidates"],
                    **{k: res.summary[k] for k in ("second_look", "kept_by_generator")
                       if k in res.summary},
                    "kept_pairs": [[p.src_id, p.tgt_id, p.src, p.tgt] for p in res.pairs]}
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
