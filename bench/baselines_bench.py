#!/usr/bin/env python3
"""Parallel-mining baselines on BUCC zh-en: every system as a miner, same evaluation as trie-mine.

Systems (``triemine.baselines``, docs/baselines.md): ``birnn`` (Grégoire & Langlais 2017),
``ae_mlp`` (Kim et al. 2019), ``dual_enc`` (Guo et al. 2018), ``opus_enc`` (the OPUS-MT encoder,
ratio margin, no training).  The trained ones are loaded from ``<cache>/baselines`` or trained
there first (from ``devsets/zh-en/train`` only).

For each system, with strict P/R/F1 of ``triemine.evaluation.pipeline`` (rule one-to-one, rank
and filter by the system's score):

* ``sample_tuned``: the whole BUCC zh-en sample, threshold tuned on its gold (optimistic);
* ``sample_heldout``: 2-fold held-out on the sample;
* ``transfer``: the sample's threshold applied to the transfer set (``devsets/zh-en``, never tuned on);
* ``transfer_tuned``: tuned on the transfer set's own gold (reference only);
* ``precision``: p@1/3/10 of the transfer set's gold zh sources against all its en sentences;
* ``seconds``: wall time of mining the sample (encoding both sides, kNN, head) with the threads
  given; ``train_seconds``: the training run's wall time (from the cached model's record).

``--quick`` (< 1 min): tiny models trained afresh in seconds on 3,000 training pairs, slices of
both sets (30 gold + 30 other sources, their gold targets and 600 other targets).
Last line of stdout: one JSON object.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

from benchlib import bucc_sets, machine, shared_model_dir  # noqa: E402

import numpy as np  # noqa: E402

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.evaluation.pipeline import Direction, evaluate  # noqa: E402

SYSTEMS = ("birnn", "ae_mlp", "dual_enc", "opus_enc")
F1_KEYS = {"birnn": "f1_birnn", "ae_mlp": "f1_autoencoder_mlp", "dual_enc": "f1_dual_encoder",
           "opus_enc": "f1_encoder_margin"}


class MemoEncoder:
    """A baseline whose ``encode`` remembers its last results per (side, texts): the transfer
    set's targets serve both mining and precision@k."""

    def __init__(self, baseline):
        self.inner, self.memo = baseline, {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, side):
        texts = list(texts)
        key = (side, hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest())
        if key not in self.memo:
            self.memo[key] = self.inner.encode(texts, side)
        return self.memo[key]


def evaluate_system(score: str, rows: dict, golds: dict) -> dict:
    """Sample-tuned, 2-fold held-out, transfer (sample threshold) and transfer-tuned P/R/F1."""
    sb, tb = read_bucc(golds["sample"]), read_bucc(golds["transfer"])
    kw = dict(filt=score, rank_by=score, rule="one-to-one")
    tuned = evaluate([Direction(rows["sample"])], sb, folds=2, **kw)
    th = {"zh-en": next(iter(tuned.thresholds.values()))}
    transfer = evaluate([Direction(rows["transfer"])], tb, thresholds=th,
                        thresholds_source=f"fixed:tuned-on:{Path(golds['sample']).name}", **kw)
    transfer_tuned = evaluate([Direction(rows["transfer"])], tb, **kw)
    for line in (tuned.signature("strict"), tuned.signature("heldout-strict", tuned.heldout_strict),
                 transfer.signature("strict")):
        print(line, flush=True)
    return {"threshold": th["zh-en"], "rule": "one-to-one", "filter": score,
            "candidates_sample": tuned.candidates,
            "sample_tuned": tuned.strict.as_dict(), "sample_heldout": tuned.heldout_strict.as_dict(),
            "transfer": transfer.strict.as_dict(), "transfer_tuned": transfer_tuned.strict.as_dict()}


def load_system(name: str, model_dir: Path, quick: bool, work: Path, retrain: bool, state: dict):
    """The baseline (trained first when needed); ``state`` keeps the shared resources."""
    from triemine.baselines import load_or_train
    from triemine.baselines.base import Resources
    from triemine.baselines.opus_encoder import OpusEncoder

    if name == "opus_enc":
        if "model" not in state:
            from triemine.decoding.model_dir import load_model_dir
            state["model"] = load_model_dir(model_dir)
        return OpusEncoder(state["model"])
    if "resources" not in state:
        state["resources"] = Resources.from_model_dir(model_dir)
    return load_or_train(name, model_dir, state["resources"], tiny=quick, retrain=retrain or quick,
                         cache=work if quick else None)


def run_system(name: str, model_dir: Path, golds: dict, args, work: Path, state: dict) -> dict:
    from triemine.baselines.mine import mine_bucc, retrieval_precision

    t0 = time.perf_counter()
    baseline = MemoEncoder(load_system(name, model_dir, args.quick, work, args.retrain, state))
    load_s = time.perf_counter() - t0
    rows, secs = {}, {}
    for key, gold in golds.items():
        t0 = time.perf_counter()
        rows[key] = mine_bucc(baseline, read_bucc(gold))
        secs[key] = time.perf_counter() - t0
    res = evaluate_system(baseline.score, rows, golds)
    tb = read_bucc(golds["transfer"])
    src_index, tgt_index = tb.src.index(), tb.tgt.index()
    gold = sorted(tb.gold, key=lambda p: src_index[p[0]])
    t0 = time.perf_counter()
    res["precision"] = retrieval_precision(baseline, [tb.src.text_of(s) for s, _ in gold], tb.tgt.texts,
                                           np.array([tgt_index[t] for _, t in gold]))
    res["seconds_precision"] = round(time.perf_counter() - t0, 1)
    stats = baseline.stats
    res.update({"score": baseline.score, "seconds_sample": round(secs["sample"], 1),
                "seconds_transfer": round(secs["transfer"], 1), "seconds_load": round(load_s, 1),
                "train_seconds": stats.get("seconds", 0.0),
                "training": {k: v for k, v in stats.items() if k != "seconds"}})
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny models, small slices (< 1 min)")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"subset of {','.join(SYSTEMS)}")
    ap.add_argument("--model", default=None, help="model dir (default <cache>/models/opus-mt-zh-en)")
    ap.add_argument("--retrain", action="store_true", help="train again even when cached")
    ap.add_argument("--work", default=None, help="folder for slices (and quick models)")
    args = ap.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        ap.error(f"unknown system(s) {', '.join(bad)}")
    model_dir = shared_model_dir(args.model, "baselines_bench")
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="baselines-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    golds = bucc_sets(work, args.quick)
    t_all = time.perf_counter()
    report = {"bench": "baselines_bench", "quick": bool(args.quick), "machine": machine(),
              "threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "sets": {k: str(v) for k, v in golds.items()}, "systems": {}}
    state: dict = {}
    for name in systems:
        print(f"== {name}", file=sys.stderr, flush=True)
        res = run_system(name, model_dir, golds, args, work, state)
        report["systems"][name] = res
        print(json.dumps({name: res}), file=sys.stderr, flush=True)
    s = report["systems"]
    for name, key in F1_KEYS.items():
        report[key] = s[name]["sample_tuned"]["F1"] if name in s else None
        report[f"{key}_heldout"] = s[name]["sample_heldout"]["F1"] if name in s else None
        report[f"{key}_transfer"] = s[name]["transfer"]["F1"] if name in s else None
    report["p_at_1"] = {n: r["precision"]["p@1"] for n, r in s.items()}
    report["seconds"] = {n: r["seconds_sample"] for n, r in s.items()}
    report["train_seconds"] = {n: r["train_seconds"] for n, r in s.items()}
    report["wall_seconds"] = round(time.perf_counter() - t_all, 1)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
