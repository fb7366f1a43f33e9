#!/usr/bin/env python3
"""Fit a configuration's calibrated probability (``prob``) and write it into its judge or record.

Two uses (:mod:`triemine.judging.calibration`):

* ``pairs`` (``trie-mine-score``): a logistic regression on the pairs' features
  (``--features``, standardised; its score is the column ``judge``), fitted on a noisy set
  built from ``devsets/zh-en/train`` only
  (:func:`triemine.cleaning.noise.noisy_set`: ``--n`` clean pairs drawn with ``--seed``, each
  target's next sentence in the training file as its same-document neighbour, German from
  ``parallel/de-en/train.de``, as many noisy pairs of each kind as clean ones), scored by
  :func:`triemine.cleaning.score`; never the transfer set::

      python scripts/fit_calibration.py pairs --n 500 --work /tmp/cal

* ``mined`` (the mining job's candidates): a Platt curve of ``combined`` on a mining TSV of the BUCC
sample (every candidate,
  ``combined`` column) and its gold, a candidate a positive when its id pair is gold::

      python scripts/fit_calibration.py mined WORK/sample.dedup.tsv \\
          --gold ../shared/data/bucc2018/zh-en/zh-en.sample.gold

``--write`` puts a ``mined`` curve into the configuration's ``zsum`` judge file (its ``curve``)
and a ``pairs`` regression and curve into its given-pairs judge file (``pairs_judge``:
``combination`` and ``curve``), and the new fingerprint into
``triemine/config/records/<config>.json``;
without it the curve and its fit statistics are only printed (one JSON object).
"""
from __future__ import annotations

import argparse
from dataclasses import asdict
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triemine.judging.calibration import Calibration, ece  # noqa: E402
from triemine.config.configurations import RECORDS  # noqa: E402
from triemine.io.paths import shared_path  # noqa: E402
from triemine.judging.shipped import judge_file  # noqa: E402
from triemine.judging.zsum import ZSum  # noqa: E402

TRAIN = ("data", "devsets", "zh-en")
GERMAN = ("data", "parallel", "de-en", "train.de")
JUDGE_FEATURES = ("use_margin", "use_cos", "ce_token", "ce_word", "pmi", "prior", "numerals",
                  "len_ratio", "uncovered", "number_match")


def _lines(path) -> list:
    return Path(path).read_text(encoding="utf-8").splitlines()


def training_noisy_set(n: int, seed: int):
    """The noisy set of ``n`` clean training pairs (module docstring)."""
    from triemine.cleaning.noise import noisy_set

    zh, en = _lines(shared_path(*TRAIN, "train.zh")), _lines(shared_path(*TRAIN, "train.en"))
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(zh) - 1, size=n, replace=False)).tolist()
    german = _lines(shared_path(*GERMAN))
    return noisy_set([zh[i] for i in pick], [en[i] for i in pick], german,
                     following=[en[i + 1] for i in pick], seed=seed)


def fit_pairs(args) -> tuple:
    from triemine.cleaning import score

    ns = training_noisy_set(args.n, args.seed)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    res = score(list(zip(ns.src, ns.tgt)), model=args.model or _model(), output=work / "cal.tsv",
                config=args.config, calibration={"a": 1.0, "b": 0.0}, threshold=0.0,
                progress=True, resume=True, workers=args.workers)
    where = (f"{args.n} clean pairs of devsets/zh-en/train (seed {args.seed}) and as many of each "
             "noise kind (misaligned, partial, neighbour, copy, other_lang, number) made from "
             "them and parallel/de-en/train.de; scripts/fit_calibration.py pairs")
    return res.columns, ns.label, where


def fit_judge(columns, label, where: str, features, c: float = 1.0):
    """``(judge, calibration)``: a logistic regression (L2, ``C = c``) of ``label`` on the
    standardised ``features`` of the scored pairs (rows with a non-finite feature left out), as
    a :class:`Combination` named ``judge`` and the curve ``prob = sigmoid(judge + intercept)``."""
    from sklearn.linear_model import LogisticRegression

    from triemine.judging.combination import Combination

    X = np.stack([np.asarray(columns[f], dtype=np.float64) for f in features], axis=1)
    keep = np.isfinite(X).all(axis=1)
    X, y = X[keep], np.asarray(label)[keep]
    mean, std = X.mean(axis=0), X.std(axis=0)
    std[std == 0] = 1.0
    lr = LogisticRegression(C=c, max_iter=5000).fit((X - mean) / std, y)
    judge = Combination("judge", list(features), [float(w) for w in lr.coef_[0]],
                        [float(m) for m in mean], [float(s) for s in std],
                        f"logistic regression (C={c:g}) on {where}")
    cal = Calibration(1.0, float(lr.intercept_[0]), "judge", where,
                      asdict(judge))
    return judge, cal


def fit_mined(args) -> tuple:
    from triemine.evaluation.bucc import read_gold
    from triemine.io.tsv import read_mined

    mined = read_mined(args.tsv)
    gold = set(read_gold(args.gold))
    label = np.array([(s, t) in gold for s, t in zip(mined.src_ids, mined.tgt_ids)], dtype=int)
    where = (f"{len(label)} candidates of {Path(args.tsv).name} (the default job on the BUCC "
             f"zh-en sample) labelled by {Path(args.gold).name}; scripts/fit_calibration.py mined")
    return mined.col("combined"), label, where


def _model():
    from triemine.io.paths import cache_root

    return cache_root() / "models" / "opus-mt-zh-en"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="use", required=True)
    p = sub.add_parser("pairs")
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--seed", type=int, default=49)
    p.add_argument("--work", required=True)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--model")
    p.add_argument("--features", default=",".join(JUDGE_FEATURES),
                   help="the features the regression reads")
    m = sub.add_parser("mined")
    m.add_argument("tsv")
    m.add_argument("--gold", required=True)
    for q in (p, m):
        q.add_argument("--config", default="combined")
        q.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.use == "pairs":
        columns, label, where = fit_pairs(args)
        judge, cal = fit_judge(columns, label, where, args.features.split(","))
        score = judge(columns)
    else:
        score, label, where = fit_mined(args)
        cal = Calibration.fit(score, label, where)
    out = {"use": args.use, "calibration": cal.as_dict(), "n": int(np.isfinite(score).sum()),
           "positives": int(label.sum()), "ece_on_fit_set": ece(cal(score), label)}
    if args.write:
        path = RECORDS / f"{args.config}.json"
        rec = json.loads(path.read_text(encoding="utf-8"))
        key = "judge" if args.use == "mined" else "pairs_judge"
        jpath = judge_file(args.config, args.use)   # the configuration's zsum judge file
        data = json.loads(Path(jpath).read_text(encoding="utf-8"))
        data["curve"] = {"a": cal.a, "b": cal.b, "fitted_on": cal.fitted_on}
        if args.use == "pairs":
            data["combination"] = asdict(judge)
        Path(jpath).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                               encoding="utf-8")
        rec[key]["fingerprint"] = ZSum.load(jpath).fingerprint()
        out["written_judge"] = jpath
        path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        out["written"] = str(path)
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
