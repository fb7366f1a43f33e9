#!/usr/bin/env python3
"""Fit a configuration's calibrated probability (``prob``) and write it into its record.

Two uses (:mod:`triemine.calibration`), each a Platt curve of the ``combined`` score:

* ``pairs`` (``trie-mine-score``): a noisy set built from ``devsets/zh-en/train`` only
  (:func:`triemine.cleaning.noise.noisy_set`: ``--n`` clean pairs drawn with ``--seed``, each
  target's next sentence in the training file as its same-document neighbour, German from
  ``parallel/de-en/train.de``, as many noisy pairs of each kind as clean ones), scored by
  :func:`triemine.cleaning.score`; never the transfer set::

      python scripts/fit_calibration.py pairs --n 500 --work /tmp/cal

* ``mined`` (the mining job's candidates): a mining TSV of the BUCC sample (every candidate,
  ``combined`` column) and its gold, a candidate a positive when its id pair is gold::

      python scripts/fit_calibration.py mined WORK/sample.dedup.tsv \\
          --gold ../shared/data/bucc2018/zh-en/zh-en.sample.gold

``--write`` puts the curve into ``triemine/configs/<config>.json`` under ``calibration``;
without it the curve and its fit statistics are only printed (one JSON object).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triemine.calibration import Calibration, ece  # noqa: E402
from triemine.configurations import RECORDS  # noqa: E402
from triemine.paths import shared_path  # noqa: E402

TRAIN = ("data", "devsets", "zh-en")
GERMAN = ("data", "parallel", "de-en", "train.de")


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
    comb = res.columns["combined"]
    where = (f"{args.n} clean pairs of devsets/zh-en/train (seed {args.seed}) and as many of each "
             "noise kind (misaligned, partial, neighbour, copy, other_lang, number) made from "
             "them and parallel/de-en/train.de; scripts/fit_calibration.py pairs")
    return comb, ns.label, where


def fit_mined(args) -> tuple:
    from triemine.evaluation.bucc import read_gold
    from triemine.tsv import read_mined

    mined = read_mined(args.tsv)
    gold = set(read_gold(args.gold))
    label = np.array([(s, t) in gold for s, t in zip(mined.src_ids, mined.tgt_ids)], dtype=int)
    where = (f"{len(label)} candidates of {Path(args.tsv).name} (the default job on the BUCC "
             f"zh-en sample) labelled by {Path(args.gold).name}; scripts/fit_calibration.py mined")
    return mined.col("combined"), label, where


def _model():
    from triemine.paths import cache_root

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
    m = sub.add_parser("mined")
    m.add_argument("tsv")
    m.add_argument("--gold", required=True)
    for q in (p, m):
        q.add_argument("--config", default="combined")
        q.add_argument("--write", action="store_true")
    args = ap.parse_args()
    score, label, where = (fit_pairs if args.use == "pairs" else fit_mined)(args)
    cal = Calibration.fit(score, label, where)
    out = {"use": args.use, "calibration": cal.as_dict(), "n": int(np.isfinite(score).sum()),
           "positives": int(label.sum()), "ece_on_fit_set": ece(cal(score), label)}
    if args.write:
        path = RECORDS / f"{args.config}.json"
        rec = json.loads(path.read_text(encoding="utf-8"))
        rec.setdefault("calibration", {})[args.use] = cal.as_dict()
        path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        out["written"] = str(path)
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
