#!/usr/bin/env python3
"""Fit a combined score's normalisation on a mining TSV (no gold labels) and write its JSON.

The shipped combinations (the ``combination`` of the ``zsum`` judge files
``triemine/judging/{combined,mt-only}.json`` and of ``triemine/config/records/judge.json``) were
fitted with this script on the candidates of the BUCC zh-en sample, as bench/bucc_bench.py
mines them::

    python scripts/fit_combination.py WORK/combined.zh-en.sample.tsv --name combined \\
        --features use_margin,ce_token,pmi,numerals --weights 1,-1,1,0 \\
        --choose numerals=0,0.1,0.2,0.3,0.5,0.75,1,1.5 \\
        --gold ../shared/data/bucc2018/zh-en/zh-en.sample.gold -o combined.json

Weights are set by hand (each feature once, its sign so that higher means more parallel) and
only each feature's mean and standard deviation over the candidates are fitted, without gold.
``--choose FEATURE=w1,w2,...`` is the one exception: that feature's weight is chosen among the
listed values by tuned one-to-one F1 on ``--gold`` (ties: the first listed), the values are kept
in the JSON (``choices``), and the printed held-out F1 makes the choice inside each training fold
(``evaluate_combination``), as bench/bucc_bench.py reports it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.evaluation.metrics import describe  # noqa: E402
from triemine.evaluation.pipeline import evaluate_combination  # noqa: E402
from triemine.judging.combination import Combination  # noqa: E402
from triemine.io.tsv import read_mined  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tsv", help="mining TSV whose candidates define the normalisation")
    ap.add_argument("--name", required=True)
    ap.add_argument("--features", required=True, help="comma-separated score columns")
    ap.add_argument("--weights", required=True, help="comma-separated weights, one per feature")
    ap.add_argument("--choose", help="FEATURE=w1,w2,...: choose this feature's weight on --gold")
    ap.add_argument("--gold", help="BUCC gold file of the TSV's corpora (with --choose)")
    ap.add_argument("--folds", type=int, default=2, help="folds of the printed held-out estimate")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    feats = args.features.split(",")
    weights = [float(w) for w in args.weights.split(",")]
    choices = {}
    if args.choose:
        if not args.gold:
            ap.error("--choose needs --gold")
        feature, _, grid = args.choose.partition("=")
        try:
            values = [float(w) for w in grid.split(",")]
        except ValueError:
            ap.error(f"--choose wants FEATURE=w1,w2,... (got {args.choose!r})")
        if feature not in feats or len(set(values)) != len(values):
            ap.error("--choose: a feature of --features and distinct weights")
        choices = {feature: values}
    mined = read_mined(args.tsv)
    comb = Combination(args.name, feats, weights, choices=choices).fit(
        {f: mined.col(f) for f in feats}, f"{len(mined)} candidates of {Path(args.tsv).name}")
    if choices:
        out = evaluate_combination(mined, comb, read_bucc(args.gold), folds=args.folds)
        (feature, grid), = choices.items()
        comb = comb.variants()[out.chosen]
        chosen = comb.weights[comb.features.index(feature)]
        comb.fitted_on += (f"; {feature} weight {chosen:g} chosen among {grid} by tuned one-to-one "
                           f"F1 on {Path(args.gold).name} ({out.strict.f1:.4f}; {args.folds}-fold "
                           f"held-out with the choice inside the training folds "
                           f"{out.heldout_strict.f1:.4f}, folds chose {out.fold_chosen})")
        print(describe(out.strict, f"tuned, {out.chosen}"))
        print(describe(out.heldout_strict, f"{args.folds}-fold held-out, chosen per fold "
                                           f"{out.fold_chosen}"))
    comb.save(args.output)
    print(f"wrote {args.output}: {comb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
