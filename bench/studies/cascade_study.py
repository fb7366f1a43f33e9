#!/usr/bin/env python3
"""How well can a cheap pass predict which candidates the exact MT scores would keep? (issue 22)

For each set (a BUCC-layout gold file), the default job's candidates (multilingual USE, ratio
margin, as ``trie-mine`` makes them) get, by one teacher-forced pass each, the log-probability of
every target token given the source and given the empty source (the prior).  From these per-token
arrays (kept in ``--work`` as ``<set>.npz``, so a rerun only analyses) the script measures, for
the shipped ``combined`` combination and a floor ``threshold - below``, with the numerals weight
at any of the combination's choices (what a held-out evaluation may re-choose):

* ``prefix``: the decoder run on the first k target tokens (with and without the source), the
  per-token rates extrapolated to the whole target and put through the combination.  ``margin``
  is the largest shortfall (exact minus estimate) of a pair whose exact score reaches the floor
  on the fitting sets; ``survivors`` the share of candidates whose estimate reaches
  ``floor - factor * margin`` (what would still be scored exactly); ``recall`` the share of the
  floor-reaching pairs kept; ``tokens`` the share of the exact pass's target tokens the cheap
  pass decodes.
* ``abort``: the exact bound ``log P(y|x) <= log P(y_1..k|x)`` (every later token has
  log-probability <= 0), checked after each stage of k tokens with the exact prior: decoded
  tokens relative to one full pass (the stages recompute their prefix), and survivors.

``--train-slice``: also a set cut from ``devsets/zh-en/train`` (the first 2,000 zh lines; English:
the translations of the first 500 and 3,500 lines from elsewhere, shuffled): pairs the project
may learn from, never the transfer set's.  The transfer set is only ever evaluated.

Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.mining.combine import shipped  # noqa: E402
from triemine.io.paths import BUCC_ZH_EN, DEVSET_ZH_EN, cache_root, shared_path  # noqa: E402

THRESHOLD = 5.4016585  # the shipped combined threshold (triemine/config/records/combined.json)


def train_slice(work: Path) -> Path:
    """The training-split set in BUCC layout (module docstring); returns its gold file."""
    d = work / "train"
    d.mkdir(parents=True, exist_ok=True)
    zh = shared_path(*DEVSET_ZH_EN, "train.zh").read_text(encoding="utf-8").split("\n")
    en = shared_path(*DEVSET_ZH_EN, "train.en").read_text(encoding="utf-8").split("\n")
    ens = [(f"en-{i:09d}", en[i]) for i in list(range(500)) + list(range(10000, 13500))]
    random.Random(7).shuffle(ens)
    (d / "zh-en.train.zh").write_text("".join(f"zh-{i:09d}\t{zh[i]}\n" for i in range(2000)
                                              if zh[i].strip()), encoding="utf-8")
    (d / "zh-en.train.en").write_text("".join(f"{a}\t{b}\n" for a, b in ens if b.strip()),
                                      encoding="utf-8")
    (d / "zh-en.train.gold").write_text("".join(f"zh-{i:09d}\ten-{i:09d}\n" for i in range(500)
                                                if zh[i].strip() and en[i].strip()),
                                        encoding="utf-8")
    return d / "zh-en.train.gold"


def probe(model, gold: Path, out: Path) -> dict:
    """Candidates of the default job and their per-token log-probabilities (``out``, .npz)."""
    from triemine.mining.features import numeral_agreement
    from triemine.mining.generators import REGISTRY, Job
    from triemine.mining.options import MineOptions
    from triemine.scoring.forced import ForcedScorer

    b = read_bucc(gold)
    work = out.with_suffix(".work")
    work.mkdir(parents=True, exist_ok=True)
    job = Job(model, b.src, b.tgt, b.src.path, b.tgt.path, MineOptions.of("combined"), work,
              progress=True)
    cands, _ = REGISTRY["knn"].run(job)
    usrc, si = np.unique(cands.src, return_inverse=True)
    utgt, ti = np.unique(cands.tgt, return_inverse=True)
    srcs = [model.encode_source(b.src.texts[i]) for i in usrc.tolist()]
    tgts = [model.encode_target(b.tgt.texts[i]) for i in utgt.tolist()]
    scorer = ForcedScorer(model)
    t0 = time.perf_counter()
    _, cond = scorer.score_pairs(srcs, tgts, si, ti, progress=True, per_token=True)
    t_pairs = time.perf_counter() - t0
    _, prior = scorer.prior(tgts, progress=True, per_token=True)
    t_prior = time.perf_counter() - t0 - t_pairs
    gold_pairs = set(b.gold)
    np.savez(out, margin=cands.col("use_margin"), ti=ti,
             numerals=np.array([numeral_agreement(b.src.texts[s], b.tgt.texts[t])
                                for s, t in zip(cands.src.tolist(), cands.tgt.tolist())]),
             gold=np.array([(b.src.ids[s], b.tgt.ids[t]) in gold_pairs
                            for s, t in zip(cands.src.tolist(), cands.tgt.tolist())]),
             cond=np.concatenate(cond), cond_off=np.cumsum([0] + [len(x) for x in cond]),
             prior=np.concatenate(prior), prior_off=np.cumsum([0] + [len(x) for x in prior]))
    return {"candidates": len(cands), "sources": len(usrc), "targets": len(utgt),
            "seconds_pairs": round(t_pairs, 1), "seconds_priors": round(t_prior, 1)}


class Probe:
    """One set's arrays, and sums of its per-token log-probabilities over prefixes."""

    def __init__(self, path: Path):
        z = np.load(path)
        self.margin, self.numerals, self.ti = z["margin"], z["numerals"], z["ti"]
        self.cond, self.cond_off = z["cond"], z["cond_off"]
        self.prior, self.prior_off = z["prior"], z["prior_off"]
        self.n = np.diff(self.cond_off).astype(np.float64)
        self.pn = np.diff(self.prior_off).astype(np.float64)

    def sums(self, k=None):
        """``(sum log P(y_1..k|x), sum log P(y_1..k|empty), tokens)`` per candidate."""
        def part(vals, off, lens):
            if k is None:
                return np.add.reduceat(vals, off[:-1]), lens
            d = np.minimum(lens, k)
            c = np.concatenate([[0.0], np.cumsum(vals)])
            return c[off[:-1] + d.astype(np.int64)] - c[off[:-1]], d
        s, d = part(self.cond, self.cond_off, self.n)
        p, pd = part(self.prior, self.prior_off, self.pn)
        return s, p[self.ti], d, pd

    def combined(self, comb, s, p, d):
        """The combination's score, the largest over its weight choices."""
        cols = {"use_margin": self.margin, "ce_token": -s / d, "pmi": (s - p) / d,
                "numerals": self.numerals}
        return np.max([c(cols) for c in comb.variants().values()], axis=0)


def study(probes: dict, fit: list, ks: list, below: float, factors: list) -> dict:
    comb = shipped("combined")
    floor = THRESHOLD - below
    exact = {}
    for name, pr in probes.items():
        s, p, _, _ = pr.sums()
        exact[name] = pr.combined(comb, s, p, pr.n)
    out = {"floor": floor, "passing": {n: int((e >= floor).sum()) for n, e in exact.items()},
           "candidates": {n: len(e) for n, e in exact.items()}, "prefix": {}, "abort": {}}
    for k in ks:
        est, tok = {}, {}
        for name, pr in probes.items():
            s, p, d, pd = pr.sums(k)
            est[name] = pr.combined(comb, s * pr.n / d, p * pr.n / d, pr.n)
            tok[name] = float((d.sum() + pd.sum()) / (pr.n.sum() + pr.pn.sum()))
        margin = max(float((exact[n] - est[n])[exact[n] >= floor].max()) for n in fit)
        row = {"margin": round(margin, 3)}
        for name in probes:
            pos = exact[name] >= floor
            row[name] = {"tokens": round(tok[name], 3),
                         "own_margin": round(float((exact[name] - est[name])[pos].max()), 3)}
            for f in factors:
                keep = est[name] >= floor - f * margin
                row[name][f"x{f:g}"] = {"survivors": round(float(keep.mean()), 3),
                                        "recall": round(float(keep[pos].mean()), 4)}
        out["prefix"][k] = row
        print(f"prefix k={k}: {json.dumps(row)}", file=sys.stderr, flush=True)
    for stages in ([4, 8, 16], [6, 12]):
        row = {}
        for name, pr in probes.items():
            alive, cost = np.ones(len(pr.n), dtype=bool), 0.0
            for k in stages + [None]:
                s, p, d, _ = pr.sums(k)
                cost += d[alive].sum()
                # exact bound: the tokens after the prefix add log-probabilities <= 0
                alive &= pr.combined(comb, s, pr.sums()[1], pr.n) >= floor
            row[name] = {"tokens": round(float(cost / pr.n.sum()), 3),
                         "survivors": round(float(alive.mean()), 3)}
        out["abort"]["-".join(map(str, stages))] = row
        print(f"abort {stages}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=str(cache_root() / "cascade-study"))
    ap.add_argument("--model", default=str(cache_root() / "models" / "opus-mt-zh-en"))
    ap.add_argument("--train-slice", action="store_true", help="also the training-split set")
    ap.add_argument("--k", default="4,6,8,12,16", help="prefix lengths")
    ap.add_argument("--below", type=float, default=0.5, help="floor = threshold - below")
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sets = {"sample": shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"),
            "transfer": shared_path(*DEVSET_ZH_EN, "zh-en.dev.gold")}
    if args.train_slice:
        sets = {"train": train_slice(work), **sets}
    timings, model = {}, None
    for name, gold in sets.items():
        path = work / f"{name}.npz"
        if not path.is_file():
            if model is None:
                import torch

                from triemine.models.model_dir import load_model_dir
                torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
                model = load_model_dir(args.model)
            timings[name] = probe(model, gold, path)
    probes = {name: Probe(work / f"{name}.npz") for name in sets}
    fit = [n for n in probes if n != "transfer"]  # never fitted on the transfer set
    res = study(probes, fit, [int(k) for k in args.k.split(",")], args.below, [1.0, 1.5])
    print(json.dumps({"study": "cascade", "fit_on": fit, "timings": timings, **res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
