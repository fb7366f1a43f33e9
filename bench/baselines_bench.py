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
* ``transfer``: the sample's threshold applied to the transfer set (``devsets/zh-en``, never tuned
on);
* ``transfer_tuned``: tuned on the transfer set's own gold (reference only);
* ``precision``: p@1/3/10 of the transfer set's gold zh sources against all its en sentences;
* ``seconds``: wall time of mining the sample (encoding both sides, kNN, head) with the threads
  given; ``train_seconds``: the training run's wall time (from the cached model's record);
* ``sample_diagnostics``: why the sample is hard -- precision@1/3/10 of the sample's 257 gold
  sources against all its 13,589 English sentences, how many gold pairs the first stage proposes
  at all, and the score quantiles of gold and non-gold candidates.

**Filter table** (``filters``): trie-mine's candidates (``--candidates``, default the demo's
whole-sample TSV ``<cache>/demo/sample.tsv``: the ``combined`` configuration's 6,842 candidates,
with ``ce_word``) get each system's column from ``trie-mine-filter --classifier NAME``, then
``trie-mine-eval --rule one-to-one --folds 2`` scores the classifier alone (ranked by its score)
and its union with CE (``ce+<score>``, ranked by ``ce_word``), thresholds tuned on the sample's
gold and saved, then applied unchanged to ``--transfer-candidates`` (default
``<cache>/demo/transfer.tsv``) when it exists.  Reference rows: CE alone and the shipped
``combined`` score on the same candidates.  Keys ``f1_filter_<name>`` and
``f1_filter_<name>_union_ce`` (tuned; ``_heldout`` and ``_transfer`` variants too).

``--quick`` (< 1 min): tiny models trained afresh in seconds on 3,000 training pairs, slices of
both sets (16 gold + 16 other sources, their gold targets and 300 other targets); the filter
table uses the rows of the sample's candidates TSV that fall inside its slice (no transfer).
Last line of stdout: one JSON object.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import benchlib  # noqa: E402
from benchlib import bucc_sets, machine, shared_model_dir  # noqa: E402

import numpy as np  # noqa: E402

from triemine.evaluation.bucc import read_bucc  # noqa: E402

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
    """Sample-tuned, 2-fold held-out, transfer (sample threshold) and transfer-tuned P/R/F1
    (:func:`benchlib.tuned_and_transferred`) and the sample's candidates."""
    tuned, figures = benchlib.tuned_and_transferred(rows, golds, score, score)
    print(tuned.signature("heldout-strict", tuned.heldout_strict), flush=True)
    return dict(figures, candidates_sample=tuned.candidates)


def gold_precision(baseline, bucc) -> dict:
    """p@1/3/10 of ``bucc``'s gold sources against all its target sentences."""
    from triemine.baselines.knn import retrieval_precision

    src_index, tgt_index = bucc.src.index(), bucc.tgt.index()
    gold = sorted(bucc.gold, key=lambda p: src_index[p[0]])
    return retrieval_precision(baseline, [bucc.src.text_of(s) for s, _ in gold], bucc.tgt.texts,
                               np.array([tgt_index[t] for _, t in gold]))


def sample_diagnostics(baseline, bucc, rows) -> dict:
    """Why a system's F1 on the sample is what it is: retrieval of the gold sources, gold pairs
    among the first stage's candidates, and where gold and non-gold candidates score."""
    from triemine.evaluation.metrics import gold_mask

    score = rows.col(baseline.score)
    is_gold = gold_mask(rows.src_ids, rows.tgt_ids, set(bucc.gold))
    q = (0.5, 0.9, 0.99)
    out = {
        "precision": gold_precision(baseline, bucc),
        "candidates": len(rows),
        "gold_in_candidates": int(is_gold.sum()),
        "gold": len(bucc.gold),
        "nongold_quantiles": {str(k): round(float(np.quantile(score[~is_gold], k)), 4) for k in q}
        if (~is_gold).any()
        else {},
    }
    if is_gold.any():
        med = float(np.median(score[is_gold]))
        out["gold_median"] = round(med, 4)
        out["nongold_at_or_above_gold_median"] = int((score[~is_gold] >= med).sum())
    return out


def load_system(name: str, model_dir: Path, quick: bool, work: Path, retrain: bool, state: dict):
    """The baseline (trained first when needed); ``state`` keeps the shared resources."""
    from triemine.baselines.systems import load_or_train
    from triemine.baselines.base import Resources
    from triemine.baselines.opus_encoder import OpusEncoder

    if name == "opus_enc":
        if "model" not in state:
            from triemine.models.model_dir import load_model_dir
            state["model"] = load_model_dir(model_dir)
        return OpusEncoder(state["model"])
    if "resources" not in state:
        state["resources"] = Resources.from_model_dir(model_dir)
    return load_or_train(name, model_dir, state["resources"], tiny=quick, retrain=retrain or quick,
                         cache=work if quick else None)


def run_system(name: str, model_dir: Path, golds: dict, args, work: Path, state: dict) -> dict:
    from triemine.baselines.knn import mine_bucc

    with benchlib.timer() as t:
        baseline = MemoEncoder(load_system(name, model_dir, args.quick, work, args.retrain, state))
    load_s = t.s
    rows, secs = {}, {}
    for key, gold in golds.items():
        with benchlib.timer() as t:
            rows[key] = mine_bucc(baseline, read_bucc(gold))
        secs[key] = t.s
    res = evaluate_system(baseline.score, rows, golds)
    with benchlib.timer() as t:
        res["precision"] = gold_precision(baseline, read_bucc(golds["transfer"]))
    res["seconds_precision"] = round(t.s, 1)
    res["sample_diagnostics"] = sample_diagnostics(baseline,
                                                   read_bucc(golds["sample"]), rows["sample"])
    stats = baseline.stats
    res.update({"score": baseline.score, "seconds_sample": round(secs["sample"], 1),
                "seconds_transfer": round(secs["transfer"], 1), "seconds_load": round(load_s, 1),
                "train_seconds": stats.get("seconds", 0.0),
                "training": {k: v for k, v in stats.items() if k != "seconds"}})
    return res


# -- the filter table: trie-mine's candidates filtered by each classifier -----------------------

def quiet(fn, argv) -> None:
    """Run a CLI entry point (``trie-mine-filter``/``trie-mine-eval``, in process) with its stdout
    sent to stderr, as the bench's stdout ends with one JSON line; a failure stops the bench."""
    with contextlib.redirect_stdout(sys.stderr):
        rc = fn([str(a) for a in argv])
    if rc != 0:
        sys.exit(f"baselines_bench: {fn.__name__} {' '.join(map(str, argv))} failed (exit {rc})")


def candidates_in(tsv: Path, gold: Path, out: Path) -> Path:
    """The rows of mining TSV ``tsv`` whose source and target ids are in the BUCC set of ``gold``
    (quick mode: the candidates of the slices)."""
    from triemine.io.tsv import read_mined, write_mined

    bucc, mined = read_bucc(gold), read_mined(tsv)
    si, ti = bucc.src.index(), bucc.tgt.index()
    keep = [i for i, (s, t) in enumerate(zip(mined.src_ids, mined.tgt_ids)) if s in si and t in ti]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_mined(mined.take(np.array(keep, dtype=np.int64)), out)
    return out


def eval_row(tsv: Path, gold: Path, spec: str, rank_by: str, tag: str, work: Path,
             transfer=None) -> dict:
    """``trie-mine-eval --filter spec --rank-by rank_by --rule one-to-one --folds 2`` on the
    sample (thresholds tuned on its gold and saved), then, with ``transfer = (tsv, gold)``,
    ``trie-mine-eval --thresholds`` (the sample's, unchanged) on the transfer set."""
    from triemine.cli import eval_main

    js, th = work / f"{tag}.sample.json", work / f"{tag}.thresholds.json"
    quiet(eval_main, [tsv, "--gold", gold, "--filter", spec, "--rank-by", rank_by,
                      "--rule", "one-to-one", "--folds", "2", "--json", js,
                      "--save-thresholds", th])
    d = json.loads(js.read_text(encoding="utf-8"))
    row = {"filter": spec, "rank_by": rank_by, "rule": "one-to-one", "thresholds": d["thresholds"],
           "candidates": d["candidates"], "sample_tuned": d["strict"],
           "sample_heldout": d["heldout_strict"], "transfer": None}
    if transfer is not None:
        jt = work / f"{tag}.transfer.json"
        quiet(eval_main, [transfer[0], "--gold", transfer[1], "--thresholds", th, "--json", jt])
        row["transfer"] = json.loads(jt.read_text(encoding="utf-8"))["strict"]
    return row


def filter_table(systems, args, golds: dict, work: Path, model_dir: Path) -> dict:
    """Every system's column on trie-mine's candidates, as a filter alone and in union with CE
    (module docstring).  Returns ``{"candidates": {...}, "rows": {label: row}}``."""
    from triemine.baselines.systems import system_class
    from triemine.cli import filter_main
    from triemine.io.paths import cache_root

    demo = cache_root() / "demo"
    cands = {"sample": Path(args.candidates) if args.candidates else demo / "sample.tsv",
             "transfer": Path(args.transfer_candidates) if args.transfer_candidates
             else demo / "transfer.tsv"}
    if not cands["sample"].is_file():
        if args.candidates:
            sys.exit(f"baselines_bench: no candidates TSV at {cands['sample']}")
        print(f"filter table not run: no candidates TSV at {cands['sample']} (run `make demo` "
              "first, or give --candidates)", file=sys.stderr, flush=True)
        return {"not_run": f"no candidates TSV at {cands['sample']}"}
    if args.quick:  # under a minute: the sample's slice only
        cands.pop("transfer")
    elif not cands["transfer"].is_file():
        if args.transfer_candidates:
            sys.exit(f"baselines_bench: no candidates TSV at {cands['transfer']}")
        print(f"filter table: no transfer candidates at {cands['transfer']}; sample only",
              file=sys.stderr, flush=True)
        cands.pop("transfer")
    folder = work / "filters"
    folder.mkdir(parents=True, exist_ok=True)
    if args.quick:
        cands = {k: candidates_in(v, golds[k],
                                  folder / f"{k}.candidates.tsv") for k, v in cands.items()}
    info = {"candidates": {k: str(v) for k, v in cands.items()}, "rows": {}, "seconds_filter": {}}
    transfer = (cands["transfer"], golds["transfer"]) if "transfer" in cands else None
    rows = info["rows"]
    from triemine.io.tsv import read_mined
    have = read_mined(cands["sample"]).numeric
    info["candidates_rows"] = {k: len(read_mined(v)) for k, v in cands.items()}
    rows["ce"] = eval_row(cands["sample"], golds["sample"], "ce", "ce_word", "ce", folder, transfer)
    if "combined" in have:
        rows["combined"] = eval_row(cands["sample"], golds["sample"], "combined", "combined",
                                    "combined", folder, transfer)
    qcache = None
    if args.quick:  # the tiny models this run trained, where trie-mine-filter looks for them
        import shutil
        qcache = work / "qcache"
        (qcache / "baselines").mkdir(parents=True, exist_ok=True)
        for name in systems:
            if (work / f"{name}-tiny.pt").is_file():
                shutil.copyfile(work / f"{name}-tiny.pt", qcache / "baselines" / f"{name}.pt")
    for name in systems:
        score = system_class(name).score
        scored = {}
        with benchlib.timer() as t:
            with benchlib.env_var("TRIEMINE_CACHE", qcache):  # the models this run trained
                for key, tsv in cands.items():
                    scored[key] = folder / f"{key}.{name}.tsv"
                    quiet(filter_main,
                          [tsv, "--classifier", name, "--model", model_dir, "-o", scored[key]])
        info["seconds_filter"][name] = round(t.s, 1)
        t_scored = (scored["transfer"], golds["transfer"]) if "transfer" in scored else None
        rows[name] = eval_row(scored["sample"], golds["sample"], score, score,
                              name, folder, t_scored)
        rows[f"{name}+ce"] = eval_row(scored["sample"], golds["sample"], f"ce+{score}", "ce_word",
                                      f"{name}+ce", folder, t_scored)
        print(json.dumps({f"filter {name}": rows[name], f"filter {name}+ce": rows[f"{name}+ce"]}),
              file=sys.stderr, flush=True)
    return info


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="tiny models, small slices (< 1 min)", model=True)
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"subset of {','.join(SYSTEMS)}")
    ap.add_argument("--retrain", action="store_true", help="train again even when cached")
    ap.add_argument("--work", default=None, help="folder for slices (and quick models)")
    ap.add_argument("--parts", default="miners,filters",
                    help="what to run: miners (each system mining the sets), filters (the filter "
                         "table on trie-mine's candidates), or both (default)")
    ap.add_argument("--candidates", default=None, help="trie-mine's mining TSV of the whole sample "
                    "for the filter table (default <cache>/demo/sample.tsv)")
    ap.add_argument("--transfer-candidates", default=None, help="trie-mine's mining TSV of the "
                    "transfer set (default <cache>/demo/transfer.tsv; skipped when absent)")
    args = ap.parse_args(argv)
    run = benchlib.start("baselines_bench", args)
    systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad:
        ap.error(f"unknown system(s) {', '.join(bad)}")
    parts = {p for p in args.parts.split(",") if p}
    if not parts or parts - {"miners", "filters"}:
        ap.error("--parts: miners, filters or miners,filters")
    model_dir = shared_model_dir(args.model, "baselines_bench")
    import torch
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    work = benchlib.work_dir(args.work, "baselines-bench-")
    golds = bucc_sets(work, args.quick)
    t_all = run.elapsed()
    report = {"bench": "baselines_bench", "quick": bool(args.quick), "machine": machine(),
              "threads": torch.get_num_threads(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "sets": {k: str(v) for k, v in golds.items()}, "systems": {}}
    state: dict = {}
    if "miners" not in parts and args.quick:  # the filters need this run's tiny models
        for name in systems:
            load_system(name, model_dir, True, work, False, state)
    for name in (systems if "miners" in parts else ()):
        print(f"== {name}", file=sys.stderr, flush=True)
        res = run_system(name, model_dir, golds, args, work, state)
        report["systems"][name] = res
        print(json.dumps({name: res}), file=sys.stderr, flush=True)
    state.clear()  # the loaded OPUS-MT model: trie-mine-filter loads its own
    if "filters" in parts:
        print("== filter table", file=sys.stderr, flush=True)
        with benchlib.timer() as t:
            report["filters"] = filter_table(systems, args, golds, work, model_dir)
        report["filters"]["seconds"] = round(t.s, 1)
        rows = report["filters"].get("rows", {})
        for label, row in rows.items():
            key = f"f1_filter_{label.replace('+ce', '_union_ce')}"
            report[key] = row["sample_tuned"]["F1"]
            report[f"{key}_heldout"] = row["sample_heldout"]["F1"]
            report[f"{key}_transfer"] = row["transfer"]["F1"] if row["transfer"] else None
    s = report["systems"]
    for name, key in F1_KEYS.items():
        report[key] = s[name]["sample_tuned"]["F1"] if name in s else None
        report[f"{key}_heldout"] = s[name]["sample_heldout"]["F1"] if name in s else None
        report[f"{key}_transfer"] = s[name]["transfer"]["F1"] if name in s else None
    report["p_at_1"] = {n: r["precision"]["p@1"] for n, r in s.items()}
    report["p_at_1_sample"] = {n: r["sample_diagnostics"]["precision"]["p@1"] for n, r in s.items()}
    report["seconds"] = {n: r["seconds_sample"] for n, r in s.items()}
    report["train_seconds"] = {n: r["train_seconds"] for n, r in s.items()}
    report["wall_seconds"] = round(run.elapsed() - t_all, 1)
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
