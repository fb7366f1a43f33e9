#!/usr/bin/env python3
"""Issue 58: how much should the noise kinds weigh among the judge's training rows?

Reads a training build of ``scripts/train_judge.py`` (``--work``: its mined candidates and
its scored noise kinds) and, with ``--more``, a second scoring of the noise kinds made from
more training pairs (``scripts/train_judge.py --step noise --noise 800 --work DIR``).  Arms
of the shipped kind (``blend``), all on the same mined candidates:

* ``shipped``: the build's noise rows, each weighing 1 (the shipped judge's rows; the report
  gives each arm's largest logit gap to the package's judge on the mined candidates);
* ``weight W`` (each of ``--weights``): the build's noise rows, each weighing ``W``;
* ``more``: the ``--more`` noise rows, each weighing 1.

For each arm: the density draws of ``judge_kinds_study`` (P / R / F1 at ``prob >= 0.5`` after
the EM shift, at 27 / 10 / 3 / 1 %) on the mined candidates by 5-fold cross-fitting by source
(the arm's noise rows in every fold's training rows, less those whose Chinese is a held-out
source's); the given-pairs figures (ROC AUC of clean pairs against all noise and each kind,
P / R at ``prob >= 0.5`` with the share estimated as ``trie-mine-score`` does, expected
calibration error) on ``--heldout``, a scoring of the noise kinds of other training pairs
(``scripts/train_judge.py --step noise --noise-seed 50``), by the arm fitted without any row
whose Chinese is among them; and, fitted on all of its rows, transfer figures: the same on
the noisy transfer set of ``clean_bench`` (``--noisy``: the TSV its ``--config judge`` run
wrote) and the ``--bucc`` / ``--density`` TSVs counted as ``token_study`` counts them.
Last line: one JSON object.

    python bench/studies/noise_share_study.py --work /tmp/big --more /tmp/n800 \\
        --heldout /tmp/h50 --noisy CLEAN_WORK/noisy.tsv --bucc sample=TSV:GOLD \\
        --density DENSITY_WORK/judge
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "studies"),
                str(ROOT / "scripts")]


def main() -> int:
    import crossfit as cf
    import train_judge as tj
    import decoy_calibration as dc
    import judge_kinds_study as jk

    from triemine.judging.features import MINED_FEATURES
    from triemine.judging.model import load_judge

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--more", type=Path)
    ap.add_argument("--weights", type=float, nargs="*", default=[2.0])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seed", type=int, default=58)
    ap.add_argument("--heldout", type=Path, help="a noise scoring no arm trains on")
    ap.add_argument("--heldout-seed", type=int, default=50)
    ap.add_argument("--heldout-pairs", type=int, default=400)
    ap.add_argument("--noisy", type=Path)
    ap.add_argument("--bucc", action="append", default=[], help="NAME=TSV:GOLD")
    ap.add_argument("--density", type=Path)
    args = ap.parse_args()

    base = cf.read_rows(args.work)
    fold = cf.source_folds(base.mined, args.seed)
    if args.heldout:
        from fit_calibration import training_noisy_set

        hns = training_noisy_set(args.heldout_pairs, args.heldout_seed)
        hcols = tj.scored_columns(args.heldout / "noise.tsv")[0]
    if args.noisy:
        import clean_bench as cb

        tns, tcols = cb.transfer_noisy_set(1000), tj.scored_columns(args.noisy)[0]
    arms = {"shipped": (base, 1.0)}
    arms.update({f"weight {w:g}": (base, w) for w in args.weights})
    if args.more:
        arms["more"] = (cf.read_rows(args.work, args.more), 1.0)
    report = {"mined_rows": len(base.ym), "mined_positives": int(base.ym.sum())}
    judges, cm = {}, base.cm
    for arm, (rows, w) in arms.items():
        z, prior = cf.crossfit(rows, fold, MINED_FEATURES, w)
        judges[arm] = rows.everything(MINED_FEATURES, w)
        report[arm] = {
            "max_logit_gap_to_package_judge": round(float(np.nanmax(np.abs(
                judges[arm].logit(cm) - load_judge().logit(cm)))), 6),
            "noise_rows": int(len(rows.yn)), "noise_weight": w,
            "noise_share": round(float(w * len(rows.yn) / (w * len(rows.yn) + len(rows.ym))),
                                 3),
            "mined_auc": jk._auc(z[rows.ym == 1], z[rows.ym == 0]),
            "draws": {d: v["0.5"] for d, v in
                      jk.draws(z, rows.ym, rows.mined, prior, args.draws).items()}}
        if args.heldout:  # fitted without any row whose Chinese is in the held-out set
            report[arm]["heldout_noise"] = cf.given_figures(
                rows.everything(MINED_FEATURES, w, leave_out=hns.src), hcols, hns)
        if args.noisy:
            report[arm]["transfer_noisy"] = cf.given_figures(judges[arm], tcols, tns)
        print(arm, json.dumps(report[arm]), flush=True)

    report.update(dc.shipped_on_sets(judges, args.bucc, args.density))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
