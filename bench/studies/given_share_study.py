#!/usr/bin/env python3
"""Issue 58: which share should ``prob`` of given pairs assume?

``trie-mine-score --config judge`` shifts the judge's log-odds to the share of clean pairs
that EM estimates from the run (``Judge.prob(z, "estimate")``).  On a scoring of the noise
kinds of training pairs no judge was fitted on (``--heldout``: ``scripts/train_judge.py --step
noise --noise-seed 50``, 16 % clean), the clean pairs are subsampled to a share of 16 / 8 / 4 /
2 % (``--draws`` seeded draws, every noise pair kept) and ``prob`` is taken at three shares: the
EM estimate, the judge's training share (no shift) and the draw's true share.  Per share: the
mean expected calibration error, precision and recall at ``prob >= 0.5``, and the EM estimate.
Last line: one JSON object.

    python bench/studies/given_share_study.py --heldout /tmp/h50
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench" / "studies"), str(ROOT / "scripts")]

SHARES = (0.16, 0.08, 0.04, 0.02)


def main() -> int:
    import train_judge as tj
    from fit_calibration import training_noisy_set

    from triemine.judging.model import load_judge
    from triemine.judging.prior import estimate_prior, shift_logit, sigmoid
    from triemine.scoring.calibration import ece

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heldout", type=Path, required=True)
    ap.add_argument("--heldout-seed", type=int, default=50)
    ap.add_argument("--heldout-pairs", type=int, default=400)
    ap.add_argument("--draws", type=int, default=30)
    args = ap.parse_args()

    judge = load_judge()
    ns = training_noisy_set(args.heldout_pairs, args.heldout_seed)
    z = judge.logit(tj.scored_columns(args.heldout / "noise.tsv")[0])
    y = np.asarray(ns.label)
    fin = np.isfinite(z)
    z, y = z[fin], y[fin]
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    report = {"pairs": int(len(y)), "clean": int(len(pos))}
    for share in SHARES:
        acc = {"estimate": [], "training": [], "true": []}
        em = []
        for d in range(args.draws):
            rng = np.random.default_rng(d)
            k = min(len(pos), int(round(len(neg) * share / (1 - share))))
            idx = np.r_[rng.choice(pos, k, replace=False), neg]
            zz, yy = z[idx], y[idx]
            em.append(estimate_prior(zz, judge.train_prior))
            for name, s in (("estimate", em[-1]), ("training", judge.train_prior),
                            ("true", yy.mean())):
                p = sigmoid(shift_logit(zz, judge.train_prior, s))
                kept = p >= 0.5
                tp = int((kept & (yy == 1)).sum())
                acc[name].append((ece(p, yy), tp / max(int(kept.sum()), 1), tp / yy.sum()))
        row = {"em_share": round(float(np.mean(em)), 4)}
        row.update({n: dict(zip(("ece", "P", "R"), (round(float(v), 3) for v in np.mean(a, 0))))
                    for n, a in acc.items()})
        report[f"{share:.0%}"] = row
        print(f"{share:.0%}", json.dumps(row), flush=True)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
