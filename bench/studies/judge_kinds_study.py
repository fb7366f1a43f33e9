#!/usr/bin/env python3
"""Which kind of judge, and which cut, on the training split only (issue 58).

Reads the rows ``scripts/train_judge.py`` fits the shipped judge on (``--work``: its mined
training candidates and its scored noise kinds) and compares, by 5-fold cross-fitting (folds
seeded), the logistic regression, the boosted trees of ``train_judge.TREES``, a small MLP
(16 hidden units; scikit-learn) and the blend (the mean of the first two's log-odds):

* ``cv``: mined candidates' ROC AUC and P / R at ``prob >= 0.5``; the noise kinds' AUC of the
  clean pairs against each kind (partial, number, neighbour) and all;
* ``draws``: the mined candidates redrawn at a source density of 27 / 10 / 3 / 1 % (whole
  training sources dropped with or without their English; ``--draws`` seeded draws each),
  each draw's share estimated by EM, one-to-one by ``prob``, kept at ``prob >= 0.5`` and at
  the expected-F1 cut (:func:`expected_f1_cut`); mean P / R / F1, recall over the sources
  whose English is present;
* ``transfer`` (``--tsv NAME=TSV:GOLD``, e.g. the ``judge`` job's TSVs of the BUCC sample and
  the transfer set): each kind fitted on every training row, F1 at ``prob >= 0.5`` at the
  training share and at the EM share, and at the expected-F1 cut.

Conclusions: decisions, "A judge that is not linear", "A cut that maximises expected F1" and
"The judge that ships".  Last line: one JSON object.

::

    python bench/studies/judge_kinds_study.py --work /tmp/judge --tsv \\
        sample=judge.zh-en.sample.tsv:$SHARED/data/bucc2018/zh-en/zh-en.sample.gold
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import train_judge as tj  # noqa: E402

from triemine.filtering.rules import one_to_one  # noqa: E402
from triemine.judging.features import MINED_FEATURES  # noqa: E402
from triemine.judging.prior import estimate_prior, shift_logit, sigmoid  # noqa: E402
from triemine.judging.train import fit as fit_judge  # noqa: E402

KINDS = ("logistic", "trees", "mlp", "blend")
DENSITIES = (0.27, 0.10, 0.03, 0.01)


def expected_f1_cut(selected, every) -> float:
    """The ``prob`` cut that maximises expected F1: keeping the ``k`` most probable of the
    ``selected`` pairs' ``prob`` expects ``TP(k)`` = their sum true pairs out of ``sum(every)``
    translations, F1(k) = ``2 TP(k) / (k + sum(every))``; the k-th largest ``prob`` (1.0 when
    nothing is selected)."""
    q = np.sort(np.asarray(selected, dtype=np.float64))[::-1]
    if not len(q):
        return 1.0
    f1 = 2 * np.cumsum(q) / (np.arange(1, len(q) + 1) + float(np.sum(every)))
    return float(q[int(np.argmax(f1))])


def training_rows(work: Path):
    """``(columns, labels, is_mined, noise kind, mined)`` of the training rows."""
    from scripts.fit_calibration import training_noisy_set
    from triemine.io import read_mined
    from triemine.judging.train import mined_columns

    mined = read_mined(work / "mined.tsv")
    refs = json.loads((work / "refs.json").read_text(encoding="utf-8"))
    y1, c1 = tj.label_of(mined.src_ids, mined.tgt, refs), mined_columns(mined)
    c2, y2 = tj._noise_rows(work)
    ns = training_noisy_set(400, 49)   # as train_judge.score_noise built them
    rows = (work / "noise.tsv").read_text(encoding="utf-8").splitlines()[1:]
    head = (work / "noise.tsv").read_text(encoding="utf-8").split("\n", 1)[0].split("\t")
    ok = np.array([r.split("\t")[head.index("status")] == "scored" for r in rows])
    cols = {f: np.concatenate([c1[f], c2[f]]) for f in MINED_FEATURES}
    kind = np.r_[np.array(["mined"] * len(y1)), np.array(ns.kind)[ok]]
    return cols, np.r_[y1, y2], np.r_[np.ones(len(y1), bool), np.zeros(len(y2), bool)], kind, \
        mined


def fit(kind: str, cols, y):
    """A function from columns to log-odds: the judge of ``kind`` fitted on ``cols``, ``y``."""
    feats = list(MINED_FEATURES)
    if kind == "mlp":
        from sklearn.neural_network import MLPClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        x = np.stack([cols[f] for f in feats], 1)
        m = make_pipeline(StandardScaler(), MLPClassifier((16,), alpha=1e-3, max_iter=1000,
                                                          random_state=tj.SEED)).fit(x, y)

        def logit(c):
            p = m.predict_proba(np.stack([c[f] for f in feats], 1))[:, 1]
            p = np.clip(p, 1e-12, 1 - 1e-12)
            return np.log(p / (1 - p))
        return logit
    return fit_judge(cols, y, feats, kind=kind).logit


def _auc(pos, neg) -> float:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(np.r_[np.ones(len(pos)), np.zeros(len(neg))],
                                      np.r_[pos, neg])), 4)


def _prf(tp: float, kept: int, gold: int):
    p, r = tp / max(kept, 1), tp / max(gold, 1)
    return p, r, 2 * p * r / max(p + r, 1e-12)


def density_draws(mined, n_draws: int, densities=DENSITIES):
    """``(density, rows, gold)`` for each of ``n_draws`` seeded draws at each density of
    ``densities`` (module docstring): the indices of the mined rows whose source is drawn, and
    how many drawn sources have their English present."""
    num = np.array([int(s.split("-")[1]) for s in mined.src_ids])
    present = int(json.loads((Path(mined.path).parent / "set.json").read_text())["present"])
    pres, absn = np.arange(present), np.arange(present, int(num.max()) + 1)
    for dens in densities:
        for d in range(n_draws):
            rng = np.random.default_rng(1000 + d)
            if dens > len(pres) / (len(pres) + len(absn)):
                keep = np.r_[pres, rng.choice(absn, int(round(len(pres) * (1 - dens) / dens)),
                                              replace=False)]
            else:
                keep = np.r_[rng.choice(pres, int(round(len(absn) * dens / (1 - dens))),
                                        replace=False), absn]
            yield dens, np.flatnonzero(np.isin(num, keep)), int((keep < present).sum())


def draws(z, y, mined, prior: float, n_draws: int) -> dict:
    """Mean P / R / F1 at each density of :data:`DENSITIES` (module docstring)."""
    src, tgt = np.array(mined.src_ids), np.array(mined.tgt_ids)
    out = {}
    for dens in DENSITIES:
        acc = {"0.5": [], "expected_f1": []}
        for _, rows, gold in density_draws(mined, n_draws, (dens,)):
            p = sigmoid(shift_logit(z[rows], prior, estimate_prior(z[rows], prior)))
            sel = one_to_one(src[rows], tgt[rows], p, True)
            for name, cut in (("0.5", 0.5), ("expected_f1", expected_f1_cut(p[sel], p))):
                kept = sel[p[sel] >= cut]
                acc[name].append(_prf(float(y[rows][kept].sum()), len(kept), gold))
        out[f"{dens:.0%}"] = {k: [round(float(v), 4) for v in np.mean(a, 0)]
                              for k, a in acc.items()}
    return out


def transfer(logit, prior: float, tsv: str, gold_path: str) -> dict:
    """F1 (P / R) of one judge TSV against its gold (module docstring)."""
    from triemine.evaluation.bucc import read_gold
    from triemine.io import read_mined
    from triemine.judging.train import mined_columns

    m, gold = read_mined(tsv), set(read_gold(gold_path))
    z = logit(mined_columns(m))
    out = {}
    shifted = sigmoid(shift_logit(z, prior, estimate_prior(z, prior)))
    for name, p in (("train_share", sigmoid(z)), ("em_share", shifted)):
        sel = one_to_one(m.src_ids, m.tgt_ids, p, True)
        cuts = {"0.5": 0.5} if name == "train_share" else {
            "0.5": 0.5, "expected_f1": expected_f1_cut(p[sel], p)}
        for cut_name, cut in cuts.items():
            kept = {(m.src_ids[i], m.tgt_ids[i]) for i in sel[p[sel] >= cut]}
            out[f"{name}@{cut_name}"] = [round(v, 4) for v in _prf(
                len(kept & gold), len(kept), len(gold))]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, type=Path, help="train_judge.py's --work")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--tsv", action="append", default=[], help="NAME=TSV:GOLD")
    args = ap.parse_args()
    cols, y, is_mined, kind, mined = training_rows(args.work)
    prior = float(y.mean())
    fold = np.random.default_rng(0).integers(0, 5, len(y))
    res = {}
    for k in KINDS:
        z = np.zeros(len(y))
        for f in range(5):
            tr = fold != f
            z[~tr] = fit(k, {c: v[tr] for c, v in cols.items()}, y[tr])(
                {c: v[~tr] for c, v in cols.items()})
        ym, zm = y[is_mined], z[is_mined]
        clean = z[kind == "clean"]
        p, r, _ = _prf(float(((zm >= 0) & (ym == 1)).sum()), int((zm >= 0).sum()),
                       int(ym.sum()))
        row = {"mined_auc": _auc(zm[ym == 1], zm[ym == 0]), "mined_P_R": [round(p, 4),
                                                                         round(r, 4)],
               "noise_auc": {n: _auc(clean, z[kind == n]) for n in ("partial", "number",
                                                                    "neighbour")},
               "draws": draws(zm, ym, mined, prior, args.draws)}
        row["noise_auc"]["all"] = _auc(clean, z[(~is_mined) & (kind != "clean")])
        if args.tsv:
            logit = fit(k, cols, y)
            for spec in args.tsv:
                name, rest = spec.split("=", 1)
                row[name] = transfer(logit, prior, *rest.rsplit(":", 1))
        res[k] = row
        print(k, json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps({"study": "judge_kinds", "rows": len(y), "positives": int(y.sum()),
                      "kinds": res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
