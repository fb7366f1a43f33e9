#!/usr/bin/env python3
"""Fit a combined score's normalisation on a mining TSV (no gold labels) and write its JSON.

The shipped combinations (triemine/mining/data/*.json) were fitted with this script on the
candidates of the BUCC zh-en sample, as bench/bucc_bench.py mines them::

    python scripts/fit_combination.py WORK/combined.zh-en.sample.tsv --name combined \\
        --features use_margin,ce_token,pmi --weights 1,-1,1 -o triemine/mining/data/combined.json

Weights are not learnt: each feature counts once (its sign so that higher means more parallel);
only each feature's mean and standard deviation over the candidates are fitted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triemine.mining.combine import Combination  # noqa: E402
from triemine.tsv import read_mined  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tsv", help="mining TSV whose candidates define the normalisation")
    ap.add_argument("--name", required=True)
    ap.add_argument("--features", required=True, help="comma-separated score columns")
    ap.add_argument("--weights", required=True, help="comma-separated weights, one per feature")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    feats = args.features.split(",")
    weights = [float(w) for w in args.weights.split(",")]
    mined = read_mined(args.tsv)
    comb = Combination(args.name, feats, weights).fit(
        {f: mined.col(f) for f in feats}, f"{len(mined)} candidates of {Path(args.tsv).name}")
    comb.save(args.output)
    print(f"wrote {args.output}: {comb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
