#!/usr/bin/env python3
"""Which cut of the judge's prob on the training split's density draws (issue 69, item 4).

    python scripts/cut_study.py --work DIR   # DIR: scripts/train_judge.py --step mine's folder

Reads the training build that scripts/train_judge.py mines (``--work``: mined.tsv of the
default job, refs.json, set.json), cross-fits the shipped judge's kind over 5 folds of sources
(each fold's logits from a judge fitted on the other folds' mined rows; no noise rows), then
redraws the candidates at source densities (whole sources dropped with their candidates; the
targets stay), and for each draw: EM share, prob shifted to it, one-to-one by prob, and each cut
rule's P / R / F1 (recall over the draw's sources whose English is present).  Rules: fixed
prob p; the expected-F1 cut (keep the top k of the selected pairs by prob maximising
2 sum_k prob / (k + sum of each source's best prob)); and the expected-F1 cut floored at p.
Last line: one JSON object.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--in-sample", action="store_true", help="the shipped judge's own logits")
    a = ap.parse_args()
    from scripts.train_judge import label_of
    from triemine.io import read_mined, Mined
    from triemine.judging.features import MINED_FEATURES
    from triemine.judging.model import load_judge
    from triemine.judging.prior import estimate_prior, shift_logit, sigmoid
    from triemine.judging.quality import best_per_source
    from triemine.judging.train import fit, mined_columns
    from triemine.filtering.registry import apply_rule

    mined = read_mined(a.work / "mined.tsv")
    refs = json.loads((a.work / "refs.json").read_text(encoding="utf-8"))
    desc = json.loads((a.work / "set.json").read_text(encoding="utf-8"))
    y = label_of(mined.src_ids, mined.tgt, refs)
    cols = mined_columns(mined)
    shipped = load_judge()
    src = np.array(mined.src_ids, dtype=object)
    present = {f"zh-{k:06d}" for k in range(desc["present"])}
    all_src = [f"zh-{k:06d}" for k in range(desc["sources"])]
    if a.in_sample:
        z, prior0 = shipped.logit(cols), shipped.train_prior
        how = "in-sample: the shipped judge (fitted on these rows and noise rows)"
    else:
        rng = np.random.default_rng(7)
        fold_of = {s: int(f) for s, f in zip(all_src, rng.integers(0, 5, len(all_src)))}
        fold = np.array([fold_of[s] for s in mined.src_ids])
        z = np.full(len(y), np.nan)
        priors = []
        for f in range(5):
            tr = fold != f
            j = fit({k: v[tr] for k, v in cols.items()}, y[tr], MINED_FEATURES, shipped.kind)
            z[~tr] = j.logit({k: v[~tr] for k, v in cols.items()})
            priors.append(j.train_prior)
            print(f"fold {f}: {int(tr.sum())} rows, prior {j.train_prior:.4f}", flush=True)
        prior0 = float(np.mean(priors))
        how = "5-fold cross-fitted by source, the shipped kind, mined rows only"
    absent_src = [s for s in all_src if s not in present]
    present_src = [s for s in all_src if s in present]
    rules = {f"p>={p:g}": ("fixed", p) for p in (0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8)}
    rules.update({"eF1": ("ef1", 0.0)})
    rules.update({f"eF1|p>={p:g}": ("ef1", p) for p in (0.3, 0.4, 0.5)})
    rules.update({f"eF1|p>={p:g}|<=0.5": ("ef1cap", p) for p in (0.2, 0.3, 0.4)})
    out = {"how": how, "rows": len(y), "positives": int(y.sum()), "densities": {}}
    for d in (0.5, 0.2, 0.1, 0.03, 0.01):
        res = {r: [] for r in rules}
        for seed in range(a.seeds if d != 0.2 else 1):
            rng = np.random.default_rng(1000 + seed)
            if d >= 0.2:
                n_p = len(present_src)
                n_a = int(round(n_p * (1 - d) / d))
            else:
                n_a = len(absent_src)
                n_p = int(round(n_a * d / (1 - d)))
            keep_src = set(rng.choice(present_src, n_p, replace=False)) | \
                set(rng.choice(absent_src, n_a, replace=False))
            rows = np.flatnonzero(np.isin(src, list(keep_src)))
            zz = z[rows]
            share = estimate_prior(zz, prior0)
            p = sigmoid(shift_logit(zz, prior0, share))
            m = Mined.from_columns([mined.src_ids[i] for i in rows],
                                   [mined.tgt_ids[i] for i in rows], [""] * len(rows),
                                   [""] * len(rows), {"prob": np.nan_to_num(p, nan=0.0)})
            sel = apply_rule(m, "one-to-one", "prob")
            ps = np.nan_to_num(p[sel], nan=0.0)
            ys = y[rows][sel]
            order = np.argsort(-ps, kind="stable")
            ps, ys = ps[order], ys[order]
            findable = best_per_source(m.src_ids, np.nan_to_num(p, nan=0.0)).sum()
            k = np.arange(1, len(ps) + 1)
            ef1 = 2 * np.cumsum(ps) / (k + findable)
            kbest = int(np.argmax(ef1)) + 1 if len(ps) else 0
            cut_ef1 = ps[kbest - 1] if kbest else 1.0
            for r, (kind, q) in rules.items():
                cut = q if kind == "fixed" else max(cut_ef1, q) if kind == "ef1" else \
                    min(max(cut_ef1, q), 0.5)
                kept = ps >= cut
                tp = int(ys[kept].sum())
                P = tp / max(1, int(kept.sum()))
                R = tp / n_p
                F = 2 * P * R / (P + R) if P + R else 0.0
                res[r].append((P, R, F, cut, share))
        out["densities"][str(d)] = {r: [round(float(x), 4) for x in np.mean(v, axis=0)]
                                    for r, v in res.items()}
        print(f"density {d}:", flush=True)
        for r, v in out["densities"][str(d)].items():
            print(f"  {r:16s} P {v[0]:.3f} R {v[1]:.3f} F1 {v[2]:.3f} cut {v[3]:.3f} "
                  f"share {v[4]:.4f}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
