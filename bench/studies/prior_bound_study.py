#!/usr/bin/env python3
"""Issue 58, cost where nothing can pass: how many targets' priors could the exact stage skip?

The exact stage scores every candidate pair and, once per distinct target, the target's prior
(forced decoding from the empty source). A candidate whose judge log-odds stays under the cut
whatever its prior is needs no prior. For each given ``judge`` TSV this bounds each candidate's
log-odds by the shipped judge's largest over a grid of per-token priors (``prior / n_tokens``,
``n_tokens`` read back as ``-score / ce_token``) spanning the training build's range
(``--work``) widened by 0.5 nats, with ``prior`` and ``pmi`` recomputed and every other feature
as scored; a candidate is hopeless when that bound is under the log-odds of ``prob = 0.5`` at a
share of one half (any run whose share is at most one half keeps none of them), less
``--margin``. Per TSV: the share of hopeless candidates, the priors still needed (distinct
targets of the others) and the largest real ``prob`` (at a share of one half) among the
hopeless. Last line: one JSON object.

    python bench/studies/prior_bound_study.py --work /tmp/big DENSITY_WORK/judge/*/mined.tsv
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]


def per_token_prior(cols) -> tuple:
    """``(n_tokens, prior / n_tokens)`` of each row of the judge's ``cols``."""
    n = np.round(-cols["score"] / cols["ce_token"])
    return n, cols["prior"] / n


def main() -> int:
    from triemine.io import read_mined
    from triemine.judging.model import load_judge
    from triemine.judging.train import mined_columns

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="the judge's training build")
    ap.add_argument("--margin", type=float, nargs="*", default=[0.0, 2.0])
    ap.add_argument("--grid", type=int, default=80)
    ap.add_argument("tsv", nargs="+", type=Path)
    args = ap.parse_args()

    judge = load_judge()
    cut = float(np.log(judge.train_prior / (1 - judge.train_prior)))
    _, rate = per_token_prior(mined_columns(read_mined(args.work / "mined.tsv")))
    grid = np.linspace(rate.min() - 0.5, rate.max() + 0.5, args.grid)
    report = {"per_token_prior_range": [round(float(rate.min()), 3),
                                        round(float(rate.max()), 3)]}
    for path in args.tsv:
        m = read_mined(path)
        cols = mined_columns(m)
        n, _ = per_token_prior(cols)
        z = judge.logit(cols)
        bound = np.full(len(z), -np.inf)
        for g in grid:
            prior = g * n
            bound = np.fmax(bound, judge.logit({**cols, "prior": prior,
                                                "pmi": (cols["score"] - prior) / n}))
        name = path.parent.name if path.name == "mined.tsv" else path.name
        row = {"candidates": len(z), "priors": int(np.unique(m.tgt_ids).size),
               "bound_under_real": int((bound < z - 1e-6).sum())}
        for margin in args.margin:
            hopeless = bound < cut - margin
            worst = z[hopeless].max() - cut if hopeless.any() else -np.inf
            row[f"margin {margin:g}"] = {
                "hopeless": round(float(hopeless.mean()), 3),
                "priors_needed": int(np.unique(np.asarray(m.tgt_ids)[~hopeless]).size),
                "largest_prob_hopeless": round(float(1 / (1 + np.exp(-worst))), 4)}
        report[name] = row
        print(name, json.dumps(row), flush=True)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
