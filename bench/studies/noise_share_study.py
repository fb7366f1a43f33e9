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
import csv
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "studies"),
                str(ROOT / "scripts")]


def noise_rows(work: Path):
    """``(columns, labels, sources)`` of the scored noise rows of ``work``."""
    import train_judge as tj

    cols, y = tj._noise_rows(work)
    with open(work / "noise.tsv", encoding="utf-8", newline="") as f:
        src = [r["src"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
               if r["status"] == "scored"]
    return cols, y, np.array(src, dtype=object)


def given_figures(judge, tsv: Path, ns) -> dict:
    """The given-pairs figures of ``judge`` on the noisy set ``ns`` scored into ``tsv`` (one
    row a pair, in order)."""
    import judge_kinds_study as jk

    from triemine.judging.features import MINED_FEATURES
    from triemine.scoring.calibration import ece

    kinds, label = np.array(ns.kind), np.asarray(ns.label)
    with open(tsv, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if len(rows) != len(kinds):
        raise SystemExit(f"{tsv}: {len(rows)} rows, its noisy set has {len(kinds)}")
    z = judge.logit({c: np.array([float(r[c] or "nan") for r in rows]) for c in MINED_FEATURES})
    prob = judge.prob(z, "estimate")
    fin = np.isfinite(z)
    zf = np.where(fin, z, z[fin].min() - 1.0)
    clean = zf[kinds == "clean"]
    kept = fin & (prob >= 0.5)
    p, r, f1 = jk._prf(int((kept & (label == 1)).sum()), int(kept.sum()), int(label.sum()))
    return {"auc": {"all": jk._auc(clean, zf[kinds != "clean"]),
                    **{k: jk._auc(clean, zf[kinds == k]) for k in ("partial", "number",
                                                                  "neighbour")}},
            "P": round(p, 4), "R": round(r, 4), "F1": round(f1, 4),
            "ece": round(ece(prob[fin], label[fin]), 4)}


def main() -> int:
    import decoy_calibration as dc
    import judge_kinds_study as jk
    import train_judge as tj

    from triemine.io import read_mined
    from triemine.judging.features import MINED_FEATURES
    from triemine.judging.model import load_judge
    from triemine.judging.train import fit, mined_columns

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

    mined = read_mined(args.work / "mined.tsv")
    ym = tj.label_of(mined.src_ids, mined.tgt,
                     json.loads((args.work / "refs.json").read_text(encoding="utf-8")))
    cm = mined_columns(mined)
    srcs = np.array(mined.src_ids)
    uniq, inv = np.unique(srcs, return_inverse=True)
    fold = np.random.default_rng(args.seed).integers(0, 5, len(uniq))[inv]
    base = noise_rows(args.work)
    if args.heldout:
        from fit_calibration import training_noisy_set

        hns = training_noisy_set(args.heldout_pairs, args.heldout_seed)
        hsrc = set(hns.src)
    if args.noisy:
        import clean_bench as cb

        tns = cb.transfer_noisy_set(1000)
    arms = {"shipped": (base, 1.0)}
    arms.update({f"weight {w:g}": (base, w) for w in args.weights})
    if args.more:
        arms["more"] = (noise_rows(args.more), 1.0)
    report, judges = {"mined_rows": len(ym), "mined_positives": int(ym.sum())}, {}
    for arm, ((nc, ny, nsrc), w) in arms.items():
        def rows(mask_m, mask_n):
            cols = {f: np.r_[cm[f][mask_m], nc[f][mask_n]] for f in MINED_FEATURES}
            wts = np.r_[np.ones(int(mask_m.sum())), np.full(int(mask_n.sum()), w)]
            return cols, np.r_[ym[mask_m], ny[mask_n]], wts
        z, priors = np.zeros(len(ym)), []
        for f in range(5):
            held = set(np.asarray(mined.src)[fold == f].tolist())
            cols, y, wts = rows(fold != f, np.array([s not in held for s in nsrc]))
            judge = fit(cols, y, sample_weight=None if w == 1 else wts)
            z[fold == f] = judge.logit({c: v[fold == f] for c, v in cm.items()})
            priors.append(judge.train_prior)
        cols, y, wts = rows(np.ones(len(ym), bool), np.ones(len(ny), bool))
        judges[arm] = fit(cols, y, sample_weight=None if w == 1 else wts)
        report[arm] = {
            "max_logit_gap_to_package_judge": round(float(np.nanmax(np.abs(
                judges[arm].logit(cm) - load_judge().logit(cm)))), 6),
            "noise_rows": int(len(ny)), "noise_weight": w,
            "noise_share": round(float(w * len(ny) / (w * len(ny) + len(ym))), 3),
            "mined_auc": jk._auc(z[ym == 1], z[ym == 0]),
            "draws": {d: v["0.5"] for d, v in
                      jk.draws(z, ym, mined, float(np.mean(priors)), args.draws).items()}}
        if args.heldout:  # fitted without any row whose Chinese is in the held-out set
            cols, y, wts = rows(np.array([s not in hsrc for s in mined.src]),
                                np.array([s not in hsrc for s in nsrc]))
            report[arm]["heldout_noise"] = given_figures(
                fit(cols, y, sample_weight=None if w == 1 else wts), args.heldout / "noise.tsv",
                hns)
        if args.noisy:
            report[arm]["transfer_noisy"] = given_figures(judges[arm], args.noisy, tns)
        print(arm, json.dumps(report[arm]), flush=True)

    def judged(path: Path, count):
        m = read_mined(path)
        return dc.shipped_counts(judges, m, mined_columns(m), count)

    report.update(dc.each_set(args.bucc, args.density, judged, pairs=True))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
