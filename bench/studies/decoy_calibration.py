"""Issue 58: a calibration fitted on the run's own negatives, against today's prior shift.

A candidate the one-to-one pass (:func:`triemine.filtering.rules.one_to_one` by the judge's
log-odds) does not keep is a negative of
the run (a decoy).  A balanced logistic regression of the log-odds separating the training
split's decoys (out-of-fold log-odds, 5 folds by source, the shipped judge's kind and features)
from the run's estimates ``log f_train(z) / f_run(z)``, which is added to the log-odds before
the EM share estimate and the prior shift.  Each mining TSV of the ``judge`` configuration given
is counted at ``prob >= 0.5`` after the one-to-one pass, today's way and with the correction:
BUCC-style TSVs against a gold file, density-bench mixes with the bench's own counting (its
readings included).  Needs no model; the last line is one JSON object.

    python bench/studies/decoy_calibration.py --train-work TRAIN_WORK \
        --bucc sample=SAMPLE.tsv:SAMPLE.gold --bucc transfer=DEV.tsv:DEV.gold \
        --density DENSITY_WORK/judge

``TRAIN_WORK``: ``scripts/train_judge.py``'s work folder (``mined.tsv``, ``refs.json``,
``noise.tsv``); ``DENSITY_WORK/judge``: ``bench/density_bench.py --work``'s folder of the
``judge`` configuration (``<mix>/mined.tsv``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "scripts")]

from triemine.filtering.rules import one_to_one  # noqa: E402
from triemine.io import read_mined  # noqa: E402
from triemine.judging.features import MINED_FEATURES  # noqa: E402
from triemine.judging.model import load_judge  # noqa: E402
from triemine.judging.prior import estimate_prior, shift_logit, sigmoid  # noqa: E402
from triemine.judging.train import fit, mined_columns  # noqa: E402

FOLDS, SEED = 5, 0


def decoys(mined, z) -> np.ndarray:
    """The log-odds of the candidates the one-to-one pass leaves out."""
    out = np.ones(len(z), dtype=bool)
    out[one_to_one(mined.src_ids, mined.tgt_ids, z, True)] = False
    return z[out & np.isfinite(z)]


def training_decoys(work: Path) -> np.ndarray:
    """Out-of-fold log-odds of the training split's decoys (folds by source; the noisy pairs in
    every fold's training rows)."""
    from train_judge import _noise_rows, label_of

    mined = read_mined(work / "mined.tsv")
    y = label_of(mined.src_ids, mined.tgt, json.loads((work / "refs.json").read_text()))
    cols = mined_columns(mined)
    ncols, ny = _noise_rows(work)
    srcs = np.asarray(mined.src_ids)
    uniq = np.unique(srcs)
    fold_of = dict(zip(uniq, np.random.default_rng(SEED).integers(0, FOLDS, len(uniq))))
    fold = np.array([fold_of[s] for s in srcs])
    z = np.full(len(y), np.nan)
    for k in range(FOLDS):
        tr = fold != k
        judge = fit({n: np.concatenate([cols[n][tr], ncols[n]]) for n in MINED_FEATURES},
                    np.concatenate([y[tr], ny]), MINED_FEATURES)
        z[~tr] = judge.logit({n: cols[n][~tr] for n in MINED_FEATURES})
    return decoys(mined, z)


def log_ratio(ref: np.ndarray, run: np.ndarray):
    """``z -> log f_ref(z) / f_run(z)`` by a balanced logistic regression on ``z``."""
    from sklearn.linear_model import LogisticRegression

    x = np.concatenate([ref, run])[:, None]
    lab = np.r_[np.ones(len(ref)), np.zeros(len(run))]
    w = np.r_[np.full(len(ref), 1 / len(ref)), np.full(len(run), 1 / len(run))] * len(x)
    lr = LogisticRegression().fit(x, lab, sample_weight=w)
    return lambda z: lr.decision_function(np.asarray(z)[:, None])


def probs(judge, z, correction=None) -> np.ndarray:
    zc = z if correction is None else z + correction(z)
    return sigmoid(shift_logit(zc, judge.train_prior, estimate_prior(zc, judge.train_prior)))


def run_one(judge, path: Path, ref_decoys, count) -> dict:
    mined = read_mined(path)
    z = judge.logit(mined_columns(mined))
    rows = one_to_one(mined.src_ids, mined.tgt_ids, z, True)
    corr = log_ratio(ref_decoys, decoys(mined, z))
    out = {"candidates": len(z), "correction_at": {
        str(t): round(float(corr(np.array([float(t)]))[0]), 3) for t in (-4, 0, 2, 4)}}
    for name, p in (("today", probs(judge, z)), ("decoys", probs(judge, z, corr))):
        out[name] = count(mined, rows[p[rows] >= 0.5])
    return out


def shipped_counts(judges: dict, mined, columns, count) -> dict:
    """``{name: count(mined, kept)}`` for each judge of ``judges``: its ``prob`` on ``columns``
    (the EM share, :func:`probs`), one-to-one by it, kept at ``prob >= 0.5`` as the job keeps."""
    res = {}
    for name, judge in judges.items():
        p = probs(judge, judge.logit(columns))
        sel = one_to_one(mined.src_ids, mined.tgt_ids, p, True)
        res[name] = count(mined, sel[p[sel] >= 0.5])
    return res


def shipped_on_sets(judges: dict, bucc, density, columns=mined_columns) -> dict:
    """``{set: {name: counts}}``: :func:`shipped_counts` of ``judges`` on each set of
    :func:`each_set` (``bucc``, ``density``, the unrelated pairs too), the judges reading
    ``columns(mined)`` of each TSV (default: its judge columns)."""
    def judged(path: Path, count):
        m = read_mined(path)
        return shipped_counts(judges, m, columns(m), count)
    return dict(each_set(bucc, density, judged, pairs=True))


def bucc_count(gold_path: str):
    gold = {tuple(line.split()) for line in open(gold_path, encoding="utf-8")}

    def count(mined, rows):
        pred = {(mined.src_ids[i], mined.tgt_ids[i]) for i in rows}
        c = len(pred & gold)
        p, r = (c / len(pred) if pred else 1.0), c / len(gold)
        return {"P": round(p, 4), "R": round(r, 4),
                "F1": round(2 * p * r / (p + r), 4) if p + r else 0.0}
    return count


def mix_count(mix, readings):
    import density_bench as db

    def count(mined, rows):
        src = [mined.src_ids[i] for i in rows]
        labels = db.classify(mix, src, [mined.tgt_ids[i] for i in rows],
                             [mined.tgt[i] for i in rows], readings)
        c = db.count(mix, src, labels, [(mined.src[i], mined.tgt[i]) in readings for i in rows])
        return {k: c[k] for k in ("P", "R", "F1", "wrong", "read", "unread",
                                  "wrong_diluting_pct")}
    return count


def each_set(bucc, density, run, pairs: bool = False):
    """``(name, run(tsv, count))`` for each ``NAME=TSV:GOLD`` of ``bucc`` (counted against its
    gold) and each mix of the density bench's ``judge`` folder ``density`` that has a TSV
    (counted as the bench counts, its readings included; with ``pairs`` also its two unrelated
    pairs), printed as they come."""
    sets = []
    for spec in bucc:
        name, rest = spec.split("=", 1)
        tsv, gold = rest.rsplit(":", 1)
        sets.append((name, Path(tsv), bucc_count(gold)))
    if density:
        import density_bench as db

        class Args:
            quick, unrelated_sources = False, 2700
        readings = db.load_readings()
        mixes = [m for _kind, m in db.mixes(("comparable", "unrelated"), Args)]
        for mix in mixes + (db.pair_mixes(False) if pairs else []):
            path = density / mix.name / "mined.tsv"
            if path.is_file():
                sets.append((mix.name, path, mix_count(mix, readings)))
    for name, path, count in sets:
        out = run(path, count)
        print(name, json.dumps(out), flush=True)
        yield name, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train-work", type=Path, required=True)
    ap.add_argument("--bucc", action="append", default=[], help="NAME=TSV:GOLD")
    ap.add_argument("--density", type=Path, help="density_bench's judge folder")
    args = ap.parse_args()
    judge = load_judge()
    ref = training_decoys(args.train_work)
    report = {"training_decoys": len(ref), "sets": dict(each_set(
        args.bucc, args.density, lambda path, count: run_one(judge, path, ref, count)))}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
