#!/usr/bin/env python3
"""Issue 58: does the judge gain from more of the training split?

Reads a training build of ``scripts/train_judge.py`` (``--work``; built larger than the shipped
one, e.g. ``--present 3000 --absent 12000 --others 3000``) and compares, by 5-fold
cross-fitting with the folds drawn by source (every candidate of a source in one fold; the
noise pairs by row, seeded), two arms of the shipped kind (``blend``) on the same held-out
rows:

* ``all``: fitted on every training row of the other folds;
* ``part``: fitted on the mined candidates of a seeded ``--share`` of the other folds' sources
  (present and absent sources alike) and as large a share of their noise rows: the size of a
  smaller build.

For each arm: the mined candidates' ROC AUC, the noise kinds' AUC (clean pairs against each
kind) and the density draws of ``judge_kinds_study`` (P / R / F1 at ``prob >= 0.5`` after the
EM shift, at 27 / 10 / 3 / 1 %).  With ``--bucc``/``--density`` (as ``token_study``), each arm
fitted on all of its rows is also counted on the ``judge`` job's TSVs (transfer figures).
Last line: one JSON object.

    python bench/studies/train_size_study.py --work /tmp/big --share 0.4 \\
        --bucc sample=TSV:GOLD --density DENSITY_WORK/judge
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


def _arms(mined, is_mined: np.ndarray, share: float, seed: int):
    """``(fold, part)``: each row's fold (by source for mined rows) and whether the ``part`` arm
    may train on it (a mined row: its source among the kept ``share``; a noise row: drawn with
    probability ``share``)."""
    rng = np.random.default_rng(seed)
    n = len(is_mined)
    src = np.array(mined.src_ids)
    uniq, inv = np.unique(src, return_inverse=True)
    fold = rng.integers(0, 5, n)
    fold[np.flatnonzero(is_mined)] = rng.integers(0, 5, len(uniq))[inv]
    part = rng.random(n) < share
    part[np.flatnonzero(is_mined)] = (rng.random(len(uniq)) < share)[inv]
    return fold, part


def main() -> int:
    import decoy_calibration as dc
    import judge_kinds_study as jk

    from triemine.judging.train import fit

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--share", type=float, default=0.4)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seed", type=int, default=58)
    ap.add_argument("--bucc", action="append", default=[], help="NAME=TSV:GOLD")
    ap.add_argument("--density", type=Path)
    args = ap.parse_args()

    cols, y, is_mined, kind, mined = jk.training_rows(args.work)
    fold, part = _arms(mined, is_mined, args.share, args.seed)
    report, judges = {"rows": int(len(y)), "positives": int(y.sum()),
                      "part_mined_rows": int((part & is_mined).sum())}, {}
    for arm, allowed in (("all", np.ones(len(y), bool)), ("part", part)):
        z, priors = np.zeros(len(y)), []
        for f in range(5):
            tr = (fold != f) & allowed
            z[fold == f] = fit({c: v[tr] for c, v in cols.items()}, y[tr]).logit(
                {c: v[fold == f] for c, v in cols.items()})
            priors.append(float(y[tr].mean()))
        zm, ym = z[is_mined], y[is_mined]
        clean = z[kind == "clean"]
        report[arm] = {
            "mined_auc": jk._auc(zm[ym == 1], zm[ym == 0]),
            "noise_auc": {n: jk._auc(clean, z[kind == n]) for n in ("partial", "number",
                                                                     "neighbour")},
            "draws": {d: v["0.5"] for d, v in
                      jk.draws(zm, ym, mined, float(np.mean(priors)), args.draws).items()}}
        print(arm, json.dumps(report[arm]), flush=True)
        judges[arm] = fit({c: v[allowed] for c, v in cols.items()}, y[allowed])

    report.update(dc.shipped_on_sets(judges, args.bucc, args.density))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
