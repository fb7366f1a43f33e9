"""Fidelity and speed of a cheaper arithmetic in exact (forced-decoding) scoring: the int8
output projection (``--precision int8-output``, the default) or the job's half precision
(``--precision bf16``: ``trie-mine --precision bf16``).

The default configuration spends nearly all of its time scoring candidate pairs and their
targets' priors by teacher forcing, and about 60% of that arithmetic is the output projection
(512 x 65,002 for OPUS-MT).  ``ForcedScorer(precision="int8-output")`` runs that one matrix as a
dynamically quantised int8 layer (per-row weight scales); this benchmark measures what it buys
and what it changes, in one run:

* speed: ``pairs_per_s_fp32`` / ``pairs_per_s_int8`` and ``speedup`` on the same pairs, wall and
  process CPU time (CPU time is the fairer ratio on a shared machine); per stage, the exact
  scores' ``scores_pairs_per_s_*`` and the priors' ``priors_targets_per_s_*`` (wall; ``_per_cpu_s``
  by CPU time) and ``{stage}_speedup_cpu``; the CPU's bf16-relevant flags (``cpu_flags``:
  amx_bf16, avx512_bf16, ...) beside ``machine`` and ``threads``;
* fidelity on the mined TSVs of the default configuration (``--sample``/``--transfer``, written
  by ``make demo`` or ``bench/bucc_bench.py``): every row's ``score`` and ``prior`` recomputed in
  int8 and compared with the fp32 values in the TSV (mean/max absolute difference per token), the
  share of sources whose best target (by the combined score) is unchanged
  (``best_target_agreement``), and BUCC F1 with both precisions: tuned and 2-fold held-out on the
  sample, and on the transfer set with the sample's threshold (``f1_*_fp32`` / ``f1_*_int8``).

With ``--precision bf16`` the record also has, per set, the largest and mean |delta log P(y|x)|
per pair (``{set}_score_abs_diff_max`` / ``_mean`` / ``_p95`` / ``_p99``, nats, the whole
sentence) and of the prior, per token of the target (``_per_token_mean`` / ``_max`` / ``_p99``:
a pair's |delta| over its tokens), and how many of the one-to-one selections with the shipped
threshold change (``{set}_selected_fp32`` pairs kept in fp32, ``{set}_selection_changed``
pairs kept by one arithmetic and not the other, ``{set}_selection_changed_share`` of the fp32
ones).  The candidates stay those of the fp32 run (the TSVs): the exact-scoring and prior
stages are re-run in the other arithmetic on them, the kNN is not (``candidates: fixed``).
``--rows N`` measures the first N rows of each TSV only (no F1, which needs every row).

``--jobs``: instead, the whole job of the package's default configuration (``trie-mine`` with
no flags) on the BUCC sample and the transfer set (``--quick``: 16 + 16 sources of each), once
with ``--precision fp32`` and once with ``auto`` (what this CPU resolves it to), each with a
cold cache of its own, one after the other in this run: ``{set}_{fp32|auto}_wall_s`` and its
stages' seconds (``_stage_s``), ``{set}_auto_over_fp32`` (wall), the pairs kept, how many of
them one arithmetic keeps and the other not (``{set}_kept_changed``, ``_share`` of fp32's) and
strict F1 at the shipped cut in each (``{set}_f1_{fp32|auto}``; the default's cut is tuned on
no gold of these sets: transfer figures).

``--scaling``: instead, ``trie-mine-score`` (the default configuration) on the transfer set's
first ``--scaling-pairs`` gold pairs (400; 40 with ``--quick``) in fp32 and in ``auto``, each at
1 thread, 2 threads (``OMP_NUM_THREADS``) and 2 worker processes of 1 thread (``--workers 2``):
the exact stage's pairs/s (``{arith}_{1t|2t|2w}_scores_pairs_per_s``, from the run's
``stage_s``), the whole run's (``_pairs_per_s``, model loads included) and each setting's
speed-up over 1 thread; ``cores`` says how many this machine has.

``--quick``: speed on 60 pairs and fidelity on the first 120 rows of the sample's TSV (or, where
``make demo`` has not run, on 30 gold and 30 wrong pairs of the sample, agreement by ``pmi``);
no F1.
The last line printed is one JSON object.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from benchlib import machine, shared_model_dir  # noqa: E402

from triemine.io.paths import cache_root  # noqa: E402


def rescore(model, mined, precision: str, progress: bool = True, cache=None, stages=None):
    """(score, prior, n_tokens, wall s, CPU s) of every row of ``mined`` under ``precision``.

    ``cache`` (a dict, :func:`load_cache`): values computed earlier in that arithmetic, keyed by
    ``(precision, source text, target text)`` and ``(precision, None, target text)`` for a
    prior; only the rows it lacks are computed (and added to it), and the seconds are theirs.
    ``stages`` (a dict): filled with each stage's ``(items, wall s, CPU s)``, ``"scores"`` (the
    exact stage, pairs) and ``"priors"`` (targets)."""
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.features import exact_scores, target_priors

    cache = {} if cache is None else cache
    pairs = list(zip(mined.src, mined.tgt))
    todo = sorted({p for p in pairs if (precision, *p) not in cache})
    tgts = sorted({t for _, t in pairs if (precision, None, t) not in cache})
    src_texts = sorted({s for s, _ in todo})
    tgt_texts = sorted({t for _, t in todo} | set(tgts))
    si = {t: i for i, t in enumerate(src_texts)}
    ti = {t: i for i, t in enumerate(tgt_texts)}
    src = np.array([si[s] for s, _ in todo], dtype=np.int64)
    tgt = np.array([ti[t] for _, t in todo], dtype=np.int64)
    n = len(todo)
    cands = CandidateSet(src, tgt, np.zeros(n, dtype=np.int64),
                         {"score": np.full(n, np.nan), "n_tokens": np.full(n, np.nan)})
    stages = {} if stages is None else stages
    with benchlib.timer() as t:
        with benchlib.timer() as ts:
            if n:
                scored = exact_scores(model, cands, src_texts, tgt_texts, progress=progress,
                                      precision=precision)
                for p, sc, nt in zip(todo, scored.col("score"), scored.col("n_tokens")):
                    cache[(precision, *p)] = (float(sc), float(nt))
        with benchlib.timer() as tp:
            if tgts:
                prior = target_priors(model, tgt_texts, np.array([ti[x] for x in tgts]),
                                      cache_dir=None, progress=progress, precision=precision)
                for x, pr in zip(tgts, prior):
                    cache[(precision, None, x)] = float(pr)
    stages.update(scores=(n, ts.s, ts.cpu), priors=(len(tgts), tp.s, tp.cpu))
    score = np.array([cache[(precision, *p)][0] for p in pairs])
    ntok = np.array([cache[(precision, *p)][1] for p in pairs])
    prior = np.array([cache[(precision, None, x)] for _, x in pairs])
    return score, prior, ntok, t.s, t.cpu


def load_cache(path) -> dict:
    """The values a ``--cache`` file holds (:func:`rescore`), ``{}`` when it does not exist."""
    import pickle

    if path is None or not Path(path).is_file():
        return {}
    with open(path, "rb") as f:
        return pickle.load(f)


def save_cache(cache: dict, path) -> None:
    import pickle

    if path is not None:
        tmp = Path(str(path) + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(cache, f)
        os.replace(tmp, path)


def with_scores(mined, score, prior, ntok):
    """``mined`` with score/prior replaced and every column derived from them recomputed."""
    from triemine.decoding.matches import word_count
    from triemine.judging.shipped import shipped

    nwords = np.array([word_count(t) for t in mined.tgt], dtype=np.float64)
    cols = {"score": score, "prior": prior, "ce_word": -score / (nwords + 1),
            "ce_token": -score / ntok, "pmi": (score - prior) / ntok}
    out = mined
    for k, v in cols.items():
        out = out.with_column(k, v)
    if "combined" not in mined.numeric:  # rows built by the quick mode: no combined score
        return out
    comb = shipped(mined.meta.get("pipeline", {}).get("combination", "combined"))
    return out.with_column("combined", comb({**out.numeric}))


def quick_rows(model, shared: Path, n: int = 60,
               gold: str = "data/bucc2018/zh-en/zh-en.sample.gold",
               cache=None):
    """Without a mined TSV: the first ``n / 2`` gold pairs of a BUCC set (default the sample)
    and as many wrong pairs (each gold source with the next one's target), with their fp32
    score and prior."""
    from triemine.evaluation.bucc import read_bucc
    from triemine.io.tsv import Mined

    b = read_bucc(shared / gold)
    si = {i: k for k, i in enumerate(b.src.ids)}
    ti = {i: k for k, i in enumerate(b.tgt.ids)}
    g = b.gold[: n // 2]
    pairs = [(si[s], ti[t]) for s, t in g] + [(si[g[k][0]], ti[g[(k + 1) % len(g)][1]])
                                             for k in range(len(g))]
    rows = Mined.from_columns([b.src.ids[s] for s, _ in pairs], [b.tgt.ids[t] for _, t in pairs],
                              [b.src.texts[s] for s, _ in pairs],
                              [b.tgt.texts[t] for _, t in pairs],
                              {"score": np.zeros(len(pairs))})
    score, prior, ntok, _, _ = rescore(model, rows, "fp32", progress=False, cache=cache)
    return with_scores(rows, score, prior, ntok)


def selection_changes(a, b) -> dict:
    """The one-to-one selections of ``a`` and ``b`` (rows of the same pairs) with the shipped
    threshold of the default configuration: pairs kept in ``a``, and pairs kept by one and not
    the other."""
    from triemine.filtering.selection import Selection, shipped_default

    saved = shipped_default("combined")
    sel = Selection(saved.rule, saved.rank_by, saved.filter,
                    dict(next(iter(saved.thresholds.values()))))
    kept = [{(m.src_ids[i], m.tgt_ids[i]) for i in sel.keep(m)} for m in (a, b)]
    return {"selected_fp32": len(kept[0]), "selection_changed": len(kept[0] ^ kept[1]),
            "selection_changed_share": round(len(kept[0] ^ kept[1]) / max(1, len(kept[0])), 5)}


def shipped_f1(mined, gold: Path) -> float:
    """Strict F1 of ``mined`` against ``gold`` with the default configuration's selection and
    its shipped threshold (what ``trie-mine-filter`` keeps by default)."""
    from triemine.evaluation.bucc import read_bucc
    from triemine.evaluation.pipeline import Direction, evaluate
    from triemine.filtering.selection import shipped_default

    saved = shipped_default("combined")
    th = {"zh-en": dict(next(iter(saved.thresholds.values())))}
    out = evaluate([Direction(mined)], read_bucc(gold), saved.filter, saved.rank_by,
                   thresholds=th, thresholds_source="shipped", rule=saved.rule)
    return out.strict.as_dict()["F1"]


def best_target_agreement(a, b) -> float:
    """Share of sources whose highest-``combined`` (else highest-``pmi``) target is the same in
    ``a`` and ``b``."""
    col = "combined" if "combined" in a.numeric else "pmi"
    best = {}
    for name, m in (("a", a), ("b", b)):
        c = m.col(col)
        for i in np.argsort(-c, kind="stable"):
            best.setdefault((name, m.src_ids[i]), m.tgt_ids[i])
    srcs = {s for (_, s) in best}
    return float(np.mean([best[("a", s)] == best[("b", s)] for s in srcs]))


def whole_jobs(model_dir: Path, quick: bool, work: Path) -> dict:
    """The ``--jobs`` record (module docstring): the default configuration's job on each set in
    fp32 and in ``auto``, each in a folder of ``work`` made anew for it (its TSV and its own
    empty ``TRIEMINE_CACHE``)."""
    import shutil

    from triemine.config.configurations import DEFAULT
    from triemine.evaluation.bucc import read_bucc
    from triemine.scoring.precision import AUTO, resolve_precision

    auto = resolve_precision(AUTO)
    res = {"mode": "jobs", "config": DEFAULT, "auto_is": auto,
           "cut": "the configuration's shipped cut (tuned on no gold of these sets: transfer)"}
    for name, gold in benchlib.bucc_sets(work, quick).items():
        b = read_bucc(gold)
        kept = {}
        for label, precision in (("fp32", "fp32"), ("auto", AUTO)):
            run_dir = work / f"{name}.{label}"  # the job's outputs and cache, made anew
            shutil.rmtree(run_dir, ignore_errors=True)
            run_dir.mkdir(parents=True)
            out = run_dir / "mined.tsv"
            with benchlib.env_var("TRIEMINE_CACHE", run_dir / "cache"):
                result, wall, _ = benchlib.mine_corpora(model_dir, DEFAULT, b.src.path,
                                                        b.tgt.path, out, precision=precision)
            rows = result.kept_rows()
            kept[label] = set(zip(rows.src_ids, rows.tgt_ids))
            correct = len(kept[label] & set(b.gold))
            res[f"{name}_{label}_wall_s"] = wall
            res[f"{name}_{label}_stage_s"] = result.summary.get("stage_s")
            res[f"{name}_{label}_kept"] = len(kept[label])
            res[f"{name}_f1_{label}"] = round(2 * correct / (len(kept[label]) + len(b.gold)), 4)
            print(f"{name} {label}: {wall} s, {len(kept[label])} kept, F1 "
                  f"{res[f'{name}_f1_{label}']}", flush=True)
        changed = len(kept["fp32"] ^ kept["auto"])
        res[f"{name}_auto_over_fp32"] = round(res[f"{name}_auto_wall_s"] /
                                              res[f"{name}_fp32_wall_s"], 3)
        res[f"{name}_kept_changed"] = changed
        res[f"{name}_kept_changed_share"] = round(changed / max(1, len(kept["fp32"])), 5)
    return res


def scaling(model_dir: Path, n: int, work: Path) -> dict:
    """The ``--scaling`` record (module docstring), each run a ``trie-mine-score`` process."""
    import json
    import subprocess

    from triemine.evaluation.bucc import read_bucc
    from triemine.io.paths import DEVSET_ZH_EN, shared_path
    from triemine.scoring.precision import AUTO, resolve_precision

    b = read_bucc(shared_path(*DEVSET_ZH_EN, "zh-en.dev.gold"))
    src, tgt = dict(zip(b.src.ids, b.src.texts)), dict(zip(b.tgt.ids, b.tgt.texts))
    pairs = benchlib.write_lines(work / "pairs.tsv", [f"{src[s]}\t{tgt[t]}"
                                                      for s, t in b.gold[:n]])
    res = {"mode": "scaling", "pairs": n, "cores": os.cpu_count(), "auto_is":
           resolve_precision(AUTO), "given": "the transfer set's first gold pairs"}
    exe = Path(sys.executable).with_name("trie-mine-score")
    for arith in ("fp32", "auto"):
        for label, threads, workers in (("1t", 1, 0), ("2t", 2, 0), ("2w", 1, 2)):
            out = work / f"{arith}.{label}.tsv"
            out.unlink(missing_ok=True)
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            t0 = time.perf_counter()
            proc = subprocess.run([str(exe), str(pairs), "--model", str(model_dir), "-o",
                                   str(out), "--precision", arith, "--workers", str(workers),
                                   "-q"], env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if proc.returncode:
                sys.exit(f"precision_bench: trie-mine-score failed: {proc.stderr[-2000:]}")
            stages = json.loads(proc.stderr.strip().splitlines()[-1])["stage_s"]
            key = f"{arith}_{label}"
            res[f"{key}_scores_pairs_per_s"] = round(n / stages["exact"], 2)
            res[f"{key}_pairs_per_s"] = round(n / wall, 2)
            print(f"{key}: {res[f'{key}_scores_pairs_per_s']} pairs/s in the exact stage",
                  flush=True)
        for label in ("2t", "2w"):
            res[f"{arith}_{label}_speedup"] = round(res[f"{arith}_{label}_scores_pairs_per_s"] /
                                                    res[f"{arith}_1t_scores_pairs_per_s"], 3)
    res["auto_over_fp32_1t"] = round(res["fp32_1t_scores_pairs_per_s"] /
                                     res["auto_1t_scores_pairs_per_s"], 3)
    return res


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="120 rows of the sample's TSV, 60 of them timed")
    ap.add_argument("--model", default=None,
                    help="model dir (default <cache>/models/opus-mt-zh-en)")
    ap.add_argument("--sample", default=str(cache_root() / "demo" / "sample.tsv"),
                    help="mining TSV of the default configuration on the BUCC sample")
    ap.add_argument("--transfer", default=str(cache_root() / "demo" / "transfer.tsv"),
                    help="the same on the transfer set ('none': the sample alone, the "
                         "transfer set recorded as not measured)")
    ap.add_argument("--shared", default=os.environ.get("TRIEMINE_SHARED", "../shared"))
    ap.add_argument("--precision", default="int8-output", choices=("int8-output", "bf16"),
                    help="the arithmetic compared with fp32 (default int8-output)")
    ap.add_argument("--rows", type=int, default=None,
                    help="only the first N rows of each TSV (a stated subset: no F1)")
    ap.add_argument("--transfer-pairs", type=int, default=0, metavar="N",
                    help="with --transfer none: |delta| on N/2 gold and N/2 wrong pairs of the "
                         "transfer set (no F1)")
    ap.add_argument("--cache", default=None, metavar="FILE",
                    help="scores and priors of the fidelity sets computed earlier in the compared "
                         "arithmetic (a pickle this option fills): only missing rows are computed")
    ap.add_argument("--speed-rows", type=int, default=None,
                    help="pairs timed in both arithmetics (default 60 with --quick, else 1000)")
    ap.add_argument("--jobs", action="store_true",
                    help="the default configuration's whole job, fp32 against auto, instead")
    ap.add_argument("--work", default=None, help="folder for --jobs (default: a temporary one)")
    ap.add_argument("--scaling", action="store_true",
                    help="trie-mine-score's exact stage at 1 and 2 threads and 2 workers instead")
    ap.add_argument("--scaling-pairs", type=int, default=None, metavar="N")
    args = ap.parse_args(argv)
    run = benchlib.start("precision_bench", args)
    if args.jobs or args.scaling:
        import torch

        res = {"bench": "precision", "quick": args.quick, "machine": machine(),
               "threads": torch.get_num_threads(), "cpu_flags": benchlib.cpu_flags(),
               "date": time.strftime("%Y-%m-%d")}
        model_dir = Path(shared_model_dir(args.model, "precision_bench")).resolve()
        work = benchlib.work_dir(args.work, "precision-jobs-")
        if args.scaling:
            return run.finish(dict(res, **scaling(
                model_dir, args.scaling_pairs or (40 if args.quick else 400), work)))
        return run.finish(dict(res, **whole_jobs(model_dir, args.quick, work)))

    import torch

    from triemine.models.model_dir import load_model_dir
    from triemine.io.tsv import read_mined

    no_transfer = args.transfer == "none"
    if not args.quick:
        for p in (args.sample,) + (() if no_transfer else (args.transfer,)):
            if not Path(p).is_file():
                sys.exit(f"precision_bench: {p} is missing; `make demo` (or bench/bucc_bench.py) "
                         f"writes it")
    model = load_model_dir(shared_model_dir(args.model, "precision_bench"))
    threads = torch.get_num_threads()
    if Path(args.sample).is_file():
        sample = read_mined(args.sample)
        if args.quick or args.rows:
            sample = sample.take(np.arange(min(args.rows or 120, len(sample))))
    else:  # --quick on a machine that has not run `make demo`
        sample = quick_rows(model, Path(args.shared))

    # speed: both precisions on the same pairs, one after the other in this process
    prec_b = args.precision
    lab = "int8" if prec_b == "int8-output" else prec_b  # the record's name of it
    speed_n = args.speed_rows or (60 if args.quick else 1000)
    speed_rows = sample.take(np.arange(min(speed_n, len(sample))))
    speed, stages = {}, {}
    for prec in ("fp32", prec_b):
        stages[prec] = {}
        s, p, nt, wall, cpu = rescore(model, speed_rows, prec, progress=False,
                                      stages=stages[prec])
        speed[prec] = (wall, cpu)
        print(f"{prec}: {len(speed_rows)} pairs + their priors in {wall:.1f} s wall, "
              f"{cpu:.1f} s CPU ({threads} threads)", flush=True)

    res = {"bench": "precision", "quick": args.quick, "machine": machine(), "threads": threads,
           "cpu_flags": benchlib.cpu_flags(),
           "date": time.strftime("%Y-%m-%d"), "speed_pairs": len(speed_rows),
           "pairs_per_s_fp32": round(len(speed_rows) / speed["fp32"][0], 2),
           f"pairs_per_s_{lab}": round(len(speed_rows) / speed[prec_b][0], 2),
           "speedup_wall": round(speed["fp32"][0] / speed[prec_b][0], 3),
           "speedup_cpu": round(speed["fp32"][1] / speed[prec_b][1], 3)}
    for stage, unit in (("scores", "pairs"), ("priors", "targets")):
        for prec, name in (("fp32", "fp32"), (prec_b, lab)):
            items, wall, cpu = stages[prec][stage]
            res[f"{stage}_{unit}_per_s_{name}"] = round(items / max(wall, 1e-9), 2)
            res[f"{stage}_{unit}_per_cpu_s_{name}"] = round(items / max(cpu, 1e-9), 2)
        res[f"{stage}_speedup_cpu"] = round(stages["fp32"][stage][2] /
                                            max(stages[prec_b][stage][2], 1e-9), 3)
    if lab != "int8":
        res.update(precision=lab, candidates="fixed: the fp32 run's (TSV rows); the exact "
                   "scores and priors re-run in " + lab)

    sets = {"sample": sample}
    if no_transfer:
        res["transfer"] = "not measured (--transfer none)"
        if args.transfer_pairs:
            sets["transfer_pairs"] = quick_rows(model, Path(args.shared), args.transfer_pairs,
                                                "data/devsets/zh-en/zh-en.dev.gold",
                                                cache=load_cache(args.cache))
            res["transfer"] = (f"the transfer set's first {args.transfer_pairs // 2} gold pairs "
                               "and as many wrong ones (transfer_pairs_*); no mined TSV, no F1")
    if not args.quick and not no_transfer:
        sets["transfer"] = read_mined(args.transfer)
        if args.rows:
            sets["transfer"] = sets["transfer"].take(np.arange(min(args.rows,
                                                                   len(sets["transfer"]))))
    other = {}
    cache = load_cache(args.cache)
    if args.cache:
        res["cache"] = (f"{len(cache)} values computed earlier (--cache): the seconds are "
                        "this run's computations only")
    for name, mined in sets.items():
        s, p, nt, wall, cpu = rescore(model, mined, prec_b, cache=cache)
        save_cache(cache, args.cache)
        ref_s, ref_p = mined.col("score"), mined.col("prior")
        res[f"{name}_rows"] = len(mined)
        res[f"{name}_score_abs_diff_per_token_mean"] = round(
            float(np.mean(np.abs(s - ref_s) / nt)), 5
        )
        res[f"{name}_score_abs_diff_per_token_max"] = round(
            float(np.max(np.abs(s - ref_s) / nt)), 5
        )
        for col, mine, ref in (("score", s, ref_s), ("prior", p, ref_p)):
            tok = np.abs(mine - ref) / nt  # a pair's |delta| a token of its target
            res[f"{name}_{col}_abs_diff_per_token_p99"] = round(float(np.quantile(tok, 0.99)), 5)
            if col == "prior":
                res[f"{name}_prior_abs_diff_per_token_mean"] = round(float(np.mean(tok)), 5)
                res[f"{name}_prior_abs_diff_per_token_max"] = round(float(np.max(tok)), 5)
        res[f"{name}_pmi_abs_diff_mean"] = round(
            float(np.mean(np.abs((s - p) - (ref_s - ref_p)) / nt)), 5)
        other[name] = with_scores(mined, s, p, nt)
        res[f"{name}_best_target_agreement"] = round(best_target_agreement(mined, other[name]), 4)
        res[f"{name}_{lab}_seconds"] = round(wall, 1)
        if lab != "int8":
            res[f"{name}_score_abs_diff_max"] = round(float(np.max(np.abs(s - ref_s))), 5)
            res[f"{name}_score_abs_diff_mean"] = round(float(np.mean(np.abs(s - ref_s))), 5)
            for col, d in (("score", np.abs(s - ref_s)), ("prior", np.abs(p - ref_p))):
                for q in (95, 99):
                    res[f"{name}_{col}_abs_diff_p{q}"] = round(float(np.quantile(d, q / 100)), 5)
            res[f"{name}_prior_abs_diff_max"] = round(float(np.max(np.abs(p - ref_p))), 5)
            res[f"{name}_prior_abs_diff_mean"] = round(float(np.mean(np.abs(p - ref_p))), 5)
            if "combined" in mined.numeric:
                res.update({f"{name}_{k}": v for k, v in
                            selection_changes(mined, other[name]).items()})
    res["best_target_agreement"] = res["sample_best_target_agreement"]

    if not args.quick and not args.rows:
        from bucc_bench import evaluate_config

        sg = Path(args.shared) / "data/bucc2018/zh-en/zh-en.sample.gold"
        tg = Path(args.shared) / "data/devsets/zh-en/zh-en.dev.gold"
        for prec, rows in (("fp32", sets), (lab, other)):
            # without a transfer set the sample stands in for it and its transfer F1 is dropped
            r = evaluate_config("combined", rows["sample"], rows.get("transfer", rows["sample"]),
                                sg, sg if no_transfer else tg)
            res[f"f1_tuned_{prec}"] = r["sample_tuned"]["F1"]
            res[f"f1_heldout_{prec}"] = r["sample_heldout"]["F1"]
            res[f"f1_sample_shipped_{prec}"] = shipped_f1(rows["sample"], sg)
            if not no_transfer:
                res[f"f1_transfer_{prec}"] = r["transfer"]["F1"]
                res[f"f1_transfer_shipped_{prec}"] = shipped_f1(rows["transfer"], tg)
        res["f1_heldout_change_points"] = round(100 * (res[f"f1_heldout_{lab}"] -
                                                       res["f1_heldout_fp32"]), 2)
    return run.finish(res)


if __name__ == "__main__":
    sys.exit(main())
