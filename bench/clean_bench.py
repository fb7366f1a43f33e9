#!/usr/bin/env python3
"""Cleaning benchmark: trie-mine-score on noisy bitext, and the default job on unrelated corpora.

Three parts (``--parts``; the first two by default):

* ``noisy``: the transfer set's 1,000 gold pairs (``devsets/zh-en/zh-en.dev``) as positives, mixed
  with as many noisy pairs of each kind of :func:`triemine.cleaning.noise.noisy_set` made from
  them (misaligned, partial = the English cut to its first half, same-document neighbour = the
  English line after the gold one in ``parallel/zh-en/train.en``, copy, German from
  ``parallel/de-en/train.de``, a changed number), scored by :func:`triemine.cleaning.score` with
  ``--config`` (default the package's, ``judge``; ``combined``: its ``pairs`` calibration; each
  fitted on ``devsets/zh-en/train`` only: this set is held out), the record naming it. Per noise
  kind and overall: ROC AUC of ``prob`` (trie-mine-score's judge), ``combined``, USE cosine, USE
  margin (within the set), ``ce_word`` alone and Bicleaner classic (the project's trained model,
  when ``<cache>/bicleaner`` has it); precision and recall at trie-mine-score's shipped cut
  (``prob >= 0.5``) and at the mining job's (``combined >= 5.4017``); how many of each noise kind
  each keeps; the expected calibration error of ``prob``; pairs/s of trie-mine-score (embedding,
  exact scores and priors, wall clock, ``OMP_NUM_THREADS`` threads; ``exact_pairs_per_s``: its
  scored pairs over the exact scores' and priors' seconds, the mining job's rate below) and of
  Bicleaner (``-p`` = the same thread count) on the same pairs.  Without ``--quick``,
  ``speed.wait_probe``: the exact stage on the first ``SPEED_PROBE`` pairs timed in one run with
  OpenMP threads that spin while they wait (libgomp's default, a subprocess) and that sleep
  (trie-mine's default since triemine/__init__.py sets ``OMP_WAIT_POLICY``), whether the two
  scores TSVs are byte-identical, and the mining job's exact stage (scores without coverage, then
  the targets' priors) on the same pairs.
* ``unrelated``: the default mining job (:func:`triemine.api.run`) on corpora with nothing to
  find: the first ``--sources`` Chinese sentences of the BUCC sample that have no gold pair
  against ``--targets`` English lines of ``parallel/de-en/train.en`` (drawn with a seed).  How
  many pairs it keeps at the shipped threshold and at ``prob >= 0.5`` (the ``mined``
  calibration), every kept pair shown; ``exact_pairs_per_s``: its candidates over its
  ``scoring`` and ``priors`` seconds.  With ``--work``, a rerun resumes the job's stages
  (``resumed``: its ``wall_s`` is then not the job's).
* ``mined`` (only when named): the ``mined`` calibration (a Platt curve of ``combined`` fitted
  on the BUCC sample's candidates) on the default job's TSVs of ``make demo`` (``--mined-sample``,
  ``--mined-transfer``): its expected calibration error over every candidate (a positive when
  its id pair is gold) and BUCC F1 (one-to-one) at ``prob >= 0.5``, at the shipped threshold
  and at the threshold tuned on the same gold (optimistic).  The sample is the calibration's
  own fitting set; the transfer set is held out.  Needs no model.

``--quick`` (< 1 min after the model loads): 30 positives and 30 of each kind; 150 sources
against 1,000 lines.  Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import benchlib  # noqa: E402  (this checkout first on sys.path)
import triemine  # noqa: E402,F401  before torch: it sets the OpenMP wait policy
from benchlib import machine, shared_model  # noqa: E402
from triemine.config.configurations import DEFAULT  # noqa: E402

import numpy as np  # noqa: E402

PARTS = ("noisy", "unrelated", "mined")
METHODS = ("prob", "combined", "use_cos", "use_margin", "ce_word", "bicleaner")
SEED = 49
MINING_CUT = 5.4016585  # the combined configuration's shipped mining threshold
SPEED_PROBE = 300  # pairs of the wait-policy probe (speed.wait_probe)


def _lines(*parts):
    from triemine.io.paths import shared_path

    return shared_path(*parts).read_text(encoding="utf-8").splitlines()


def transfer_noisy_set(n: int, seed: int = SEED):
    """The transfer set's first ``n`` gold pairs (gold file order) and their noise (module
    docstring)."""
    from triemine.cleaning.noise import noisy_set
    from triemine.evaluation.bucc import read_bucc
    from triemine.io.paths import shared_path

    b = read_bucc(shared_path("data", "devsets", "zh-en", "zh-en.dev.gold"))
    zh, en = dict(zip(b.src.ids, b.src.texts)), dict(zip(b.tgt.ids, b.tgt.texts))
    src = [zh[s] for s, _ in b.gold[:n]]
    tgt = [en[t] for _, t in b.gold[:n]]
    par = _lines("data", "parallel", "zh-en", "train.en")
    at = {t: i for i, t in enumerate(par)}
    following = [par[at[t] + 1] if t in at and at[t] + 1 < len(par) else None for t in tgt]
    german = _lines("data", "parallel", "de-en", "train.de")
    return noisy_set(src, tgt, german, following=following, seed=seed)


def _auc(pos, neg):
    from sklearn.metrics import roc_auc_score

    if not len(pos) or not len(neg):
        return None
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    return round(float(roc_auc_score(y, np.r_[pos, neg])), 4)


def reachable(score, label, p_goal: float = 0.97, r_goal: float = 0.95) -> dict:
    """What any cut of ``score`` (higher = more parallel; NaN = rejected) can reach on ``label``:
    the best precision at recall >= ``r_goal``, the best recall at precision >= ``p_goal``, and
    whether one cut reaches both (the goals at the shipped cut are bounded by this)."""
    s = np.where(np.isfinite(score), score, -np.inf)
    order = np.argsort(-s, kind="stable")
    tp = np.cumsum(label[order] == 1)
    p, r = tp / np.arange(1, len(order) + 1), tp / max(1, int((label == 1).sum()))
    at_r, at_p = p[r >= r_goal], r[p >= p_goal]
    return {f"best_P_at_R>={r_goal}": round(float(at_r.max()), 4) if at_r.size else None,
            f"best_R_at_P>={p_goal}": round(float(at_p.max()), 4) if at_p.size else None,
            "one_cut_reaches_both": bool(((p >= p_goal) & (r >= r_goal)).any())}


def _pr(kept, label) -> dict:
    tp = int((kept & (label == 1)).sum())
    p = tp / max(1, int(kept.sum()))
    r = tp / max(1, int((label == 1).sum()))
    return {"kept": int(kept.sum()), "P": round(p, 4), "R": round(r, 4),
            "F1": round(2 * p * r / (p + r), 4) if p + r else 0.0}


def noisy_part(model, args, work: Path, threads: int) -> dict:
    from triemine.judging.calibration import ece, reliability
    from triemine.cleaning import score
    from triemine.errors import TrieMineError
    from triemine.filtering.bicleaner import score_bicleaner

    ns = transfer_noisy_set(30 if args.quick else args.positives)
    kinds = np.array(ns.kind)
    label = ns.label
    out = work / "noisy.tsv"
    shutil.rmtree(str(out) + ".work", ignore_errors=True)  # timed from scratch
    t0 = time.perf_counter()
    res = score(list(zip(ns.src, ns.tgt)), model=model, output=out, progress=False,
                config=args.config)
    wall = time.perf_counter() - t0
    cols = {m: res.columns[m] for m in METHODS[:-1]}
    cols["ce_word"] = -cols["ce_word"]  # higher = more parallel
    exact_s = res.summary["stage_s"]["exact"]
    speed = {"pairs": len(ns), "distinct": res.summary["distinct"], "wall_s": round(wall, 1),
             "pairs_per_s": round(res.summary["distinct"] / wall, 2),
             "exact_pairs_per_s": round(res.summary["scored"] / exact_s, 2),
             "stage_s": res.summary["stage_s"], "threads": threads}
    try:
        t0 = time.perf_counter()
        cols["bicleaner"] = score_bicleaner(ns.src, ns.tgt, processes=threads, progress=False)
        bwall = time.perf_counter() - t0
        speed["bicleaner_pairs_per_s"] = round(len(ns) / bwall, 2)
        speed["ratio_to_bicleaner"] = round(
            speed["pairs_per_s"] / speed["bicleaner_pairs_per_s"], 2
        )
    except TrieMineError as exc:
        speed["bicleaner"] = f"not measured: {exc}"
    if not args.quick:
        speed["wait_probe"] = wait_probe(model, args, ns, work, threads)
    auc = {}
    for m, v in cols.items():
        fin = np.isfinite(v)  # a pair not scored is rejected: below every score
        v = np.where(fin, v, (v[fin].min() - 1.0) if fin.any() else 0.0)
        pos = v[kinds == "clean"]
        auc[m] = {"all": _auc(pos, v[kinds != "clean"])}
        for k in dict.fromkeys(ns.kind[len(pos):]):
            auc[m][k] = _auc(pos, v[kinds == k])
    comb, prob = res.columns["combined"], res.columns["prob"]
    with np.errstate(invalid="ignore"):  # trie-mine-score's cut (prob >= 0.5), the mining cut
        cuts = {"shipped (prob>=0.5)": res.kept, "combined>=5.4017": comb >= MINING_CUT}
    at_cut = {}
    for name, kept in cuts.items():
        at_cut[name] = _pr(kept, label)
        at_cut[name]["noise_kept"] = {k: int(kept[kinds == k].sum())
                                      for k in dict.fromkeys(ns.kind) if k != "clean"}
    finite = np.isfinite(prob)
    return {"pairs": {k: int((kinds == k).sum()) for k in dict.fromkeys(ns.kind)},
            "auc": auc, "cut": res.summary["cut"], "at_cut": at_cut,
            "any_cut_of_prob": reachable(prob, label),
            "ece": round(ece(prob[finite], label[finite]), 4),
            "reliability": reliability(prob[finite], label[finite]),
            "not_scored": res.summary["not_scored"], "speed": speed}


def _probe_pairs(n: int, positives: int):
    ns = transfer_noisy_set(positives)
    return list(zip(ns.src, ns.tgt))[:n]


def spin_probe_main(args) -> int:
    """The subprocess of :func:`wait_probe`: ``args.spin_probe`` pairs scored into
    ``<work>/probe.spin.tsv``; prints the exact stage's seconds as JSON."""
    import json

    from triemine.cleaning import score

    model = shared_model(args.model, "clean_bench")
    out = Path(args.work) / "probe.spin.tsv"
    shutil.rmtree(str(out) + ".work", ignore_errors=True)
    res = score(_probe_pairs(args.spin_probe, args.positives), model=model, output=out)
    print(json.dumps({"exact_s": res.summary["stage_s"]["exact"],
                      "wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                      "gomp_spincount": os.environ.get("GOMP_SPINCOUNT")}))
    return 0


def wait_probe(model, args, ns, work: Path, threads: int) -> dict:
    """The exact stage on the first :data:`SPEED_PROBE` pairs: OpenMP threads spinning
    (libgomp's default spin count, ``GOMP_SPINCOUNT=300000`` and no ``OMP_WAIT_POLICY``, in a
    subprocess) against sleeping (this process), the two TSVs compared byte for byte, and the
    mining job's exact stage (:func:`triemine.mining.score_shards.forced_scores_sharded` without
    coverage, then the priors) on the same pairs, in this process."""
    import hashlib
    import json
    import subprocess

    from triemine.cleaning import score
    from triemine.cleaning.job import _distinct
    from triemine.decoding.model_spec import inline_model_pool
    from triemine.mining.score_shards import forced_scores_sharded

    n = min(SPEED_PROBE, len(ns))
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["GOMP_SPINCOUNT"] = "300000"  # libgomp's spin count when no wait policy is set
    cmd = [sys.executable, str(Path(__file__).resolve()), "--spin-probe", str(n), "--work",
           str(work), "--positives", str(args.positives)] + \
        (["--model", args.model] if args.model else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"clean_bench: the spin probe failed:\n{done.stderr[-2000:]}")
    spin = json.loads(done.stdout.strip().splitlines()[-1])
    pairs = _probe_pairs(n, args.positives)
    out = work / "probe.sleep.tsv"
    shutil.rmtree(str(out) + ".work", ignore_errors=True)
    res = score(pairs, model=model, output=out)
    sleep_s = res.summary["stage_s"]["exact"]
    files = Path(str(out) + ".work")
    srcs, s_idx = _distinct([s for s, _ in pairs])
    tgts, t_idx = _distinct([t for _, t in pairs])
    mwork = work / "probe.mining"
    shutil.rmtree(mwork, ignore_errors=True)
    mwork.mkdir()
    pool = inline_model_pool(model)
    t0 = time.perf_counter()
    forced_scores_sharded(model, s_idx, t_idx, files / "src.txt", files / "tgt.txt", mwork, pool)
    u = np.unique(t_idx)
    forced_scores_sharded(model, np.full(len(u), -1, dtype=np.int64), u, files / "src.txt",
                          files / "tgt.txt", mwork, pool, name="priors")
    mining_s = time.perf_counter() - t0

    def digest(p):
        return hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return {"pairs": n, "threads": threads,
            "spinning": {"exact_s": spin["exact_s"],
                         "exact_pairs_per_s": round(n / spin["exact_s"], 2),
                         "env": "GOMP_SPINCOUNT=300000, no OMP_WAIT_POLICY"},
            "sleeping": {"exact_s": sleep_s, "exact_pairs_per_s": round(n / sleep_s, 2),
                         "env": f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"},
            "speedup": round(spin["exact_s"] / sleep_s, 2),
            "tsv_identical": digest(work / "probe.spin.tsv") == digest(out),
            "mining_path": {"exact_s": round(mining_s, 3),
                            "exact_pairs_per_s": round(n / mining_s, 2)},
            "ratio_to_mining_path": round(mining_s / sleep_s, 2)}


def unrelated_part(model, args, work: Path) -> dict:
    from triemine.evaluation.splits import clean_bench_draw
    from triemine.judging.shipped import shipped_calibration

    n_src, n_tgt = (150, 1000) if args.quick else (args.sources, args.targets)
    src = benchlib.bucc_unpaired_sources()[:n_src]
    sp, tp = work / "unrelated.zh", work / "unrelated.en"
    benchlib.write_corpus(sp, src)
    benchlib.write_corpus(tp, benchlib.de_en_rows(clean_bench_draw(n_tgt).tolist()))
    result, wall, resumed = benchlib.mine_corpora(model, args.config, sp, tp,
                                                  work / "unrelated.tsv")
    m = result.kept_rows()
    try:
        cal = True if "prob" in m.numeric else shipped_calibration(args.config, "mined")
        prob = m.col("prob") if cal is True else cal(m.col("combined"))
    except Exception as exc:  # noqa: BLE001  (no mined calibration shipped: said in the record)
        cal, prob = None, np.full(len(m), np.nan)
        print(f"clean_bench: no mined calibration: {exc}", file=sys.stderr)
    pairs = [{"src_id": m.src_ids[i], "tgt_id": m.tgt_ids[i], "src": m.src[i], "tgt": m.tgt[i],
              "combined": round(float(m.col("combined")[i]), 4),
              "prob": None if np.isnan(prob[i]) else round(float(prob[i]), 4)}
             for i in range(len(m))]
    kept_p = int(np.sum(prob >= 0.5)) if cal is not None else None
    st = result.summary.get("stage_s") or {}
    exact_s = st.get("scoring", 0.0) + st.get("priors", 0.0)
    return {"sources": len(src), "targets": n_tgt, "candidates": result.summary["candidates"],
            "stage_s": st, "exact_pairs_per_s": round(result.summary["candidates"] / exact_s, 2)
            if exact_s and not resumed else None,
            "kept_shipped": len(m), "kept_share": round(len(m) / len(src), 5),
            "kept_prob_0_5": kept_p, "selection": result.selection.text(),
            "wall_s": round(wall, 1), "resumed": resumed, "kept_pairs": pairs}


def mined_part(args) -> dict:
    from triemine.judging.calibration import ece, reliability
    from triemine.judging.shipped import shipped_calibration
    from triemine.evaluation.bucc import read_gold
    from triemine.evaluation.pipeline import evaluate, evaluate_files

    cal = shipped_calibration("combined", "mined")
    golds = benchlib.bucc_sets(None, False)
    tsvs = {"sample": args.mined_sample, "transfer": args.mined_transfer}
    out = {"calibration": cal.as_dict()}
    for name, tsv in tsvs.items():
        if not Path(tsv).is_file():
            raise SystemExit(f"clean_bench: {tsv}: no mining TSV (run make demo, or give "
                             f"--mined-{name})")
        tuned, dirs, bucc = evaluate_files([tsv], str(golds[name]))
        m = dirs[0].mined
        gold = set(read_gold(golds[name]))
        label = np.array([(a, b) in gold for a, b in zip(m.src_ids, m.tgt_ids)], dtype=int)
        prob = cal(m.col("combined"))
        fin = np.isfinite(prob)

        def at(value, source):
            th = {d: {c: value for c in t} for d, t in tuned.thresholds.items()}
            return evaluate(dirs, bucc, tuned.filter, tuned.rank_by, th, source,
                            rule=tuned.rule).strict.as_dict()
        out[name] = {"candidates": len(m), "positives": int(label.sum()),
                     "ece": round(ece(prob[fin], label[fin]), 4),
                     "reliability": reliability(prob[fin], label[fin]),
                     "f1_tuned_same_gold": tuned.strict.as_dict(),
                     "f1_shipped": at(MINING_CUT, "shipped"),
                     "f1_prob_0_5": at(cal.threshold(0.5), "prob>=0.5"),
                     "prob_0_5_threshold": round(cal.threshold(0.5), 4)}
        out[name]["f1_gap_prob_0_5_vs_tuned"] = round(
            out[name]["f1_tuned_same_gold"]["F1"] - out[name]["f1_prob_0_5"]["F1"], 4)
    return out


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="small slices (< 1 min after the model loads)",
                         model=True)
    ap.add_argument("--work", default=None, help="keep the inputs and outputs in this folder")
    ap.add_argument("--parts", default="noisy,unrelated", help=f"subset of {','.join(PARTS)} "
                    "(mined: only when named; it reads make demo's TSVs)")
    ap.add_argument("--positives", type=int, default=1000, help="noisy: gold pairs used (and "
                    "as many noisy pairs of each kind)")
    ap.add_argument("--sources", type=int, default=3000, help="unrelated: Chinese sources")
    ap.add_argument("--targets", type=int, default=14000, help="unrelated: English lines")
    ap.add_argument("--mined-sample", default=None, help="mined: the default job's TSV of the "
                    "BUCC sample (default <cache>/demo/sample.tsv)")
    ap.add_argument("--mined-transfer", default=None, help="mined: the default job's TSV of "
                    "the transfer set (default <cache>/demo/transfer.tsv)")
    ap.add_argument("--config", default=DEFAULT, help="noisy, unrelated: the configuration "
                    "scored and mined (default %(default)s, the package's)")
    ap.add_argument("--spin-probe", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.spin_probe:
        return spin_probe_main(args)
    parts = ap.names(args.parts, PARTS, "part")
    from triemine.io.paths import cache_root

    args.mined_sample = args.mined_sample or str(cache_root() / "demo" / "sample.tsv")
    args.mined_transfer = args.mined_transfer or str(cache_root() / "demo" / "transfer.tsv")
    run = benchlib.start("clean_bench", args)
    model = shared_model(args.model, "clean_bench") if set(parts) - {"mined"} else None
    import torch

    work = benchlib.work_dir(args.work, "clean-bench-")
    threads = torch.get_num_threads()
    report = {"bench": "clean_bench", "quick": bool(args.quick), "machine": machine(),
              "threads": threads, "load_at_start": list(os.getloadavg()),
              "date": time.strftime("%Y-%m-%d"), "config": args.config,
              "cpu_flags": benchlib.cpu_flags()}
    if "noisy" in parts:
        report["noisy"] = noisy_part(model, args, work, threads)
    if "unrelated" in parts:
        report["unrelated"] = unrelated_part(model, args, work)
    if "mined" in parts:
        report["mined"] = mined_part(args)
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
