#!/usr/bin/env python3
"""Issue 58: a posterior from the run's own density of scores (local false discovery rate),
against today's prior shift.

Today's ``prob`` shifts the judge's posterior to the share of translations the run's EM
estimates, which assumes the run's negatives score as the training split's do.  The local
false discovery rate (Efron 2001) needs no such assumption about the negatives: with ``f_pos``
the density of the positives' log-odds (the training split's), ``f_run`` that of every
candidate of the run and ``pi`` the share of translations, P(translation | z) = ``pi f_pos(z) /
f_run(z)``, clipped to [0, 1] and made non-decreasing in ``z``.  Densities are Gaussian kernel
estimates (``--bandwidth`` in log-odds); ``pi`` is EM's share (``lfdr_em``) or the share of
the run's candidates above the positives' median over the positives' (``lfdr_tail``).
Selection as the job's: one-to-one by the log-odds, kept at posterior >= 0.5.

Measured on the training build (``--work``, ``scripts/train_judge.py``'s folder): out-of-fold
log-odds (5 folds by source, :mod:`crossfit`), the density draws of ``judge_kinds_study``; then,
the judge fitted on every training row and ``f_pos`` from its log-odds of the training
positives, on ``--bucc`` / ``--density`` TSVs (transfer figures, never used to choose).  Needs
no model; the last line is one JSON object.

    python bench/studies/local_fdr_study.py --work TRAIN_WORK \\
        --bucc sample=SAMPLE.tsv:SAMPLE.gold --density DENSITY_WORK/judge
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

def kde(sample: np.ndarray, h: float):
    """The Gaussian kernel density of ``sample`` with bandwidth ``h``, as a function."""
    s = np.sort(np.asarray(sample, dtype=np.float64))

    def f(x):
        x = np.asarray(x, dtype=np.float64)[:, None]
        out = np.zeros(len(x))
        for i in range(0, len(s), 4000):
            out += np.exp(-0.5 * ((x - s[None, i:i + 4000]) / h) ** 2).sum(1)
        return out / (len(s) * h * np.sqrt(2 * np.pi))
    return f


def lfdr_posterior(z_pos: np.ndarray, train_prior: float, h: float, share: str):
    """``z -> posterior`` of the module docstring for one run's log-odds ``z``."""
    from triemine.judging.prior import estimate_prior

    f_pos, hi = kde(z_pos, h), float(np.median(z_pos))
    tail = float((z_pos > hi).mean())

    def post(z):
        fin = np.isfinite(z)
        zf = np.where(fin, z, z[fin].min() - 5.0)
        pi = estimate_prior(zf, train_prior) if share == "em" else \
            min(1.0, float((zf > hi).mean()) / tail)
        grid = np.linspace(zf.min() - 1.0, zf.max() + 1.0, 400)
        r = np.clip(pi * f_pos(grid) / np.maximum(kde(zf, h)(grid), 1e-300), 0.0, 1.0)
        return np.interp(zf, grid, np.maximum.accumulate(r))
    return post


def posteriors(z_pos, train_prior: float, h: float) -> dict:
    from triemine.judging.prior import estimate_prior, shift_logit, sigmoid

    return {"shift": lambda z: sigmoid(shift_logit(z, train_prior,
                                                   estimate_prior(z, train_prior))),
            "lfdr_em": lfdr_posterior(z_pos, train_prior, h, "em"),
            "lfdr_tail": lfdr_posterior(z_pos, train_prior, h, "tail")}


def training_draws(rows, z, posts: dict, n_draws: int) -> dict:
    """Mean P / R / F1 of each posterior at each density of ``judge_kinds_study``'s
    ``DENSITIES`` (its ``density_draws``)."""
    import judge_kinds_study as jk

    from triemine.filtering.rules import one_to_one

    mined, y = rows.mined, rows.ym
    src, tgt = np.array(mined.src_ids), np.array(mined.tgt_ids)
    out = {}
    for dens in jk.DENSITIES:
        acc = {k: [] for k in posts}
        for _, r, gold in jk.density_draws(mined, n_draws, (dens,)):
            sel = one_to_one(src[r], tgt[r], z[r], True)
            for name, post in posts.items():
                kept = sel[post(z[r])[sel] >= 0.5]
                acc[name].append(jk._prf(float(y[r][kept].sum()), len(kept), gold))
        out[f"{dens:.0%}"] = {k: [round(float(v), 4) for v in np.mean(a, 0)]
                              for k, a in acc.items()}
        print(f"{dens:.0%}", json.dumps(out[f"{dens:.0%}"]), flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="the training build's folder")
    ap.add_argument("--bandwidth", type=float, default=0.5)
    ap.add_argument("--draws", type=int, default=30)
    ap.add_argument("--seed", type=int, default=58)
    ap.add_argument("--bucc", action="append", default=[], help="NAME=TSV:GOLD")
    ap.add_argument("--density", type=Path, help="density_bench's judge folder")
    args = ap.parse_args()

    import crossfit as cf
    import decoy_calibration as dc

    from triemine.filtering.rules import one_to_one
    from triemine.io import read_mined
    from triemine.judging.features import MINED_FEATURES
    from triemine.judging.train import mined_columns

    rows = cf.read_rows(args.work)
    z, prior = cf.crossfit(rows, cf.source_folds(rows.mined, args.seed), MINED_FEATURES)
    report = {"bandwidth": args.bandwidth, "draws": training_draws(
        rows, z, posteriors(z[rows.ym == 1], prior, args.bandwidth), args.draws)}
    judge = rows.everything(MINED_FEATURES)
    posts = posteriors(judge.logit(rows.cm)[rows.ym == 1], judge.train_prior, args.bandwidth)

    def judged(path: Path, count):
        m = read_mined(path)
        zz = judge.logit(mined_columns(m))
        sel = one_to_one(m.src_ids, m.tgt_ids, zz, True)
        return {name: count(m, sel[post(zz)[sel] >= 0.5]) for name, post in posts.items()}
    report.update(dc.each_set(args.bucc, args.density, judged, pairs=True))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
