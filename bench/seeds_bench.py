#!/usr/bin/env python3
"""The seed systems in their own papers' protocols, on held-out zh-en pairs, beside the papers.

Test pairs: the transfer set's 1,000 gold pairs (``devsets/zh-en/zh-en.dev.gold``; evaluation
only, never training). Non-translations: its English sentences that are no gold target (the
de-en corpus's English side). Training: ``devsets/zh-en/train`` only (18,247 pairs, 500 held
out for the training records), learning curves at ``--sizes`` pairs (a seeded, nested choice).

* **Grégoire & Langlais (2017), Table 1 / Figures 2-5** (``gl``): every test source against
  every test target (10^6 pairs), a ``ratio`` share of the targets replaced by non-translations
  (noise ratios 0-90 %); P/R/F1 at the threshold with the best F1
  (:func:`triemine.baselines.protocols.cartesian_f1`). Rows: the Siamese BiRNN (``birnn``,
  P(parallel)) against the paper's weak baseline, a feature-based logistic regression
  (:mod:`triemine.baselines.features`), trained on the same pairs and random negatives.
* **Kim et al. (2019), Tables 1 and 3** (``kim``): alignment recovery, each test sentence's
  best-scored partner among the 1,000 of the other side, both ways, error rate in percent.
  Rows: cosine of the autoencoded bilingual embeddings (``ae_mlp``'s space), its MLP similarity,
  Levenshtein distance of the raw strings.
* **Guo et al. (2018), Tables 2-3** (``guo``): P@1/3/10 of each test source's translation among
  a pool of targets (the 1,000 test targets; all 14,000 English sentences of the transfer set).
  Rows: the dual encoder after stage 2 with in-batch random negatives only (``M=0``) and with M
  = 5, 10, 20 hard negatives a source, all continued from one stage-1 model for the same budget.

References in every table: multilingual USE (ratio margin, k = 4; cosine too in Kim's), and
trie-mine's default job (``combined`` configuration: USE kNN candidates, exact forced-decoding
scores of those candidates, the combined score; pairs it never proposed score ``-inf``), which is
Kim et al.'s "NMT posteriors" row made affordable: it scores about 2 candidates a source and 1 a
target exactly instead of all 10^6 pairs. It is mined once, 1,000 test sources against all 14,000
English sentences of the transfer set, and every table takes its rows and columns from that run
(so its candidates were drawn from a larger pool than each table's: conservative).

Budgets are updates, not seconds (the machine is shared, so seconds buy different numbers of
updates from run to run): ``--steps`` gives each system's updates at the full size (``birnn``,
``ae_mlp``, ``dual_enc`` stage 1, ``stage2`` for each M of the ablation, so every M gets the same
number of updates); a smaller size gets ``steps * size / full``, at least a quarter of ``steps``
(``--curve-steps scaled``), or the full size's own (``--curve-steps same``: only the data varies
along the curve).
``--budget B`` caps each training run's wall time (a safety net). Every training record holds
its loss curve (the mean loss of each tenth of its steps) and its updates a second, so whether
the loss had stopped falling is read from the record. One thread.

``--systems birnn,ae_mlp,...`` (a partial run): only those systems (``birnn`` brings
``features``), trained once on all the training pairs, no references; recorded under
``partial.<system>`` with each one's protocol rows, loss curve and claims -- one long run a
system finds the budget at which its loss stops falling (``--steps`` large, ``--budget`` the cap).

``--quick`` (< 1 min): 60 test pairs, pools of 360, training sizes 500 and 1,500 with the tiny
settings and a 2 s cap a run. ``--work DIR`` keeps the trie-mine run and the USE vectors (default
``<cache>/seeds_bench``; reused when the inputs are the same, with their first run's seconds).
Last line of stdout: one JSON object.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import benchlib  # noqa: E402
from benchlib import shared_model_dir  # noqa: E402

import numpy as np  # noqa: E402

from triemine.baselines import protocols as P  # noqa: E402
from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.io.paths import DEVSET_ZH_EN, cache_root, shared_path  # noqa: E402

NOISE = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
MS = (0, 5, 10, 20)
CURVE_M = 5  # the dual encoder's M along the learning curve

# the papers' own numbers (their data, languages and scale; context for ours)
PAPER = {
    "gl": {"source": "Grégoire & Langlais 2017, Table 1 (Europarl en-fr, 500k training pairs)",
           "birnn": {"0.0": 75.7, "0.9": 66.7}, "features": {"0.0": 66.1, "0.9": 47.1}},
    "kim": {"source": "Kim et al. 2019, Tables 1/3 (newstest2018 de-en, error %)",
            "ae_cos": 4.3, "ae_mlp": 89.9, "levenshtein": 37.4, "nmt_posteriors": 1.7,
            "nmt_posteriors_time": "about 12 hours for 3,000 sentences"},
    "guo": {"source": "Guo et al. 2018, Tables 2-3 (UN corpus en-fr, pools of millions)",
            "hard_P@1": 48.9, "hard_minus_random_P@1": 8.0,
            "claim_m": "more hard negatives (M = 5, 10, 20) do not always help"},
}


def pct(d: dict) -> dict:
    """P/R/F1 of :func:`~triemine.baselines.protocols.cartesian_f1` in percent."""
    return {"P": round(100 * d["P"], 1), "R": round(100 * d["R"], 1), "F1": round(100 * d["F1"], 1),
            "threshold": round(d["threshold"], 4), "gold": d["gold"]}


def digest(texts) -> str:
    return hashlib.sha1("\n".join(texts).encode("utf-8")).hexdigest()[:16]


# -- the test data ------------------------------------------------------------------------------

def test_data(quick: bool, seed: int) -> dict:
    """Test sources/targets (gold pairs in zh id order), non-translations for the noise, the pool
    (every English sentence of the transfer set, the test targets first)."""
    b = read_bucc(shared_path(*DEVSET_ZH_EN, "zh-en.dev.gold"))
    si, ti = b.src.index(), b.tgt.index()
    gold = sorted(b.gold, key=lambda p: si[p[0]])
    if quick:
        gold = gold[:60]
    src = [b.src.texts[si[s]] for s, _ in gold]
    tgt = [b.tgt.texts[ti[t]] for _, t in gold]
    taken = {ti[t] for _, t in b.gold}
    others = [b.tgt.texts[j] for j in range(len(b.tgt.texts)) if j not in taken]
    rng = np.random.default_rng(seed)
    others = [others[j] for j in rng.permutation(len(others))]
    if quick:
        others = others[:300]
    n_noise = int(round(max(NOISE) * len(src)))
    return {"src": src, "tgt": tgt, "noise": others[:n_noise], "pool": tgt + others,
            "describe": {"test_pairs": len(src), "noise_targets": n_noise,
                         "pool": len(tgt) + len(others), "set": str(b.src.path)}}


def training_data(quick: bool, seed: int):
    """The training pairs (``devsets/zh-en/train``, 500 held out; 1,500 + 100 in quick mode) and
    a seeded order of them for the nested learning-curve subsets."""
    from triemine.baselines.text import training_pairs

    data = training_pairs(heldout=100, limit=1600, mono=1000) if quick else training_pairs()
    return data, np.random.default_rng(seed).permutation(len(data.src))


def subset(data, order, n):
    from triemine.baselines.text import TrainingPairs

    idx = np.sort(order[:n])
    return TrainingPairs([data.src[i] for i in idx], [data.tgt[i] for i in idx], data.held_src,
                         data.held_tgt, data.mono_tgt)


# -- references: USE and trie-mine's default job -----------------------------------------------

def use_vectors(texts, work: Path, what: str) -> np.ndarray:
    from triemine.embedding import get_encoder

    path = work / f"use-{what}-{digest(texts)}.npy"
    if path.is_file():
        return np.load(path)
    vecs = get_encoder("use").encode(texts)
    work.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def default_job(td: dict, model_dir: Path, work: Path) -> dict:
    """trie-mine's default job (``combined``), test sources against the whole pool: its
    candidates' ``combined`` and ``score`` (log P(y|x)) as ``(n, N)`` matrices (``-inf``
    elsewhere), and its wall time (of the first run on these inputs)."""
    import triemine
    from triemine.io.tsv import read_mined

    key = digest(td["src"] + ["\0"] + td["pool"])
    out = work / f"default-{key}.tsv"
    info = work / f"default-{key}.json"
    work.mkdir(parents=True, exist_ok=True)
    if not (out.is_file() and info.is_file()):
        src_f, tgt_f = work / f"default-{key}.zh", work / f"default-{key}.en"
        src_f.write_text("".join(f"s{i}\t{t}\n" for i, t in enumerate(td["src"])), encoding="utf-8")
        tgt_f.write_text(
            "".join(f"t{j}\t{t}\n" for j, t in enumerate(td["pool"])), encoding="utf-8"
        )
        t0 = time.perf_counter()
        res = triemine.mine(str(src_f), str(tgt_f), model=str(model_dir), output=str(out))
        secs = time.perf_counter() - t0
        info.write_text(json.dumps({"seconds": round(secs, 1), "candidates": len(res.candidates),
                                    "summary_keys": sorted(res.summary)}), encoding="utf-8")
    meta = json.loads(info.read_text(encoding="utf-8"))
    rows = read_mined(out)
    s = np.array([int(x[1:]) for x in rows.src_ids])
    t = np.array([int(x[1:]) for x in rows.tgt_ids])
    mats = {}
    for col in ("combined", "score"):
        m = np.full((len(td["src"]), len(td["pool"])), -np.inf)
        m[s, t] = rows.col(col)
        mats[col] = m
    return {"matrices": mats, "seconds": meta["seconds"], "candidates": meta["candidates"],
            "per_source": round(meta["candidates"] / len(td["src"]), 2)}


# -- the three protocols on matrices over the test set ------------------------------------------

def noise_columns(n: int, seed: int):
    """``{ratio: (columns into [tgt | noise], gold)}`` for every noise ratio."""
    return {r: P.noisy_columns(n, int(round(max(NOISE) * n)), r, seed) for r in NOISE}


def gl_rows(mat: np.ndarray, cols: dict) -> dict:
    """Cartesian F1 at every noise ratio of a ``(n, n + noise)`` matrix."""
    return {f"{r:.1f}": pct(P.cartesian_f1(mat[:, c], g)) for r, (c, g) in cols.items()}


def pool_columns(td: dict) -> dict:
    """Guo's pools as column sets of the pool matrix: the test targets, and every sentence."""
    n = len(td["tgt"])
    return {str(n): np.arange(n), str(len(td["pool"])): np.arange(len(td["pool"]))}


def guo_rows(mat: np.ndarray, pools: dict) -> dict:
    n = mat.shape[0]
    return {k: P.precision_at(mat[:, c], np.arange(n)) for k, c in pools.items()}


def concat_targets(td):
    return td["tgt"] + td["noise"]


# -- the systems ---------------------------------------------------------------------------------

STEPS = "birnn=600,ae_mlp=150,dual_enc=450,stage2=40"
QUICK_STEPS = "birnn=200,ae_mlp=60,dual_enc=200,stage2=60"


def parse_steps(text: str, default: str = STEPS) -> dict:
    """``"birnn=600,ae_mlp=150"`` -> ``{name: updates}`` for every system, an entry ``text``
    lacks taken from ``default``; raises ValueError on a malformed entry."""
    out = {}
    for part in [x for x in (default + "," + text).split(",") if x]:
        name, _, n = part.partition("=")
        if name not in ("birnn", "ae_mlp", "dual_enc", "stage2") or not n.isdigit() or int(n) < 1:
            raise ValueError(f"bad --steps entry {part!r}")
        out[name] = int(n)
    return out


def steps_for(steps: int, n: int, full: int) -> int:
    """Updates at ``n`` training pairs: proportional to the size, at least a quarter of the
    full's."""
    return max(int(round(steps * n / full)), int(round(steps / 4)), 1)


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, round(time.perf_counter() - t0, 1)


def run_birnn(resources, data, td, cols, budget, steps, quick):
    from triemine.baselines.systems import train

    model, secs = timed(train, "birnn", resources, data, tiny=quick, max_seconds=budget,
                        max_steps=steps, epochs=1000)
    vecs = (model.encode(td["src"], "src"), model.encode(concat_targets(td), "tgt"))
    mat, eval_s = timed(P.score_matrix, model, None, None, "head", vectors=vecs)
    cos = P.score_matrix(model, None, None, "cos", vectors=vecs)
    return {"train_seconds": secs, "eval_seconds": eval_s, "training": model.stats,
            "gl": gl_rows(mat, cols), "gl_cosine_first_stage": gl_rows(cos, cols)}


def run_features(resources, data, td, cols):
    from triemine.baselines.features import FeatureBaseline

    model, secs = timed(FeatureBaseline.train, resources.tokenizer, data)
    mat, eval_s = timed(model.matrix, td["src"], concat_targets(td))
    return {"train_seconds": secs, "eval_seconds": eval_s, "training": model.describe(),
            "gl": gl_rows(mat, cols)}


def run_ae(resources, data, td, budget, steps, quick, head=True):
    """``head``: also Kim et al.'s MLP row (its 10^6-pair scoring is the slow part)."""
    from triemine.baselines.systems import train

    model, secs = timed(train, "ae_mlp", resources, data, tiny=quick, max_seconds=budget,
                        max_steps=steps, epochs=1000)
    vecs = (model.encode(td["src"], "src"), model.encode(td["tgt"], "tgt"))
    cos = P.score_matrix(model, None, None, "cos", vectors=vecs)
    kim = {"ae_cos": P.recovery_error(cos), "ae_margin": P.recovery_error(P.ratio_margin(cos))}
    eval_s = 0.0
    if head:
        mlp, eval_s = timed(P.score_matrix, model, None, None, "head", vectors=vecs)
        kim["ae_mlp"] = P.recovery_error(mlp)
    return {"train_seconds": secs, "eval_seconds": eval_s, "training": model.stats, "kim": kim}


def run_dual(resources, data, td, pools, budget, steps, steps2, quick, ms):
    from triemine.baselines.dual_encoder import DualEncoder
    from triemine.baselines.systems import TINY

    settings = dict(TINY["dual_enc"] if quick else {}, max_seconds=budget, max_steps=steps,
                    epochs=1000, hard_negatives=CURVE_M)
    stage1, s1 = timed(DualEncoder.train_stage1, resources, data, **settings)
    variants, s2 = timed(stage1.negatives_ablation, data, ms, max_steps=steps2)
    out = {"stage1_seconds": s1, "stage2_seconds": s2, "variants": {}}
    for name, model in [("stage1", stage1)] + [(f"M={m}", v) for m, v in variants.items()]:
        vecs = (model.encode(td["src"], "src"), model.encode(td["pool"], "tgt"))
        cos = P.score_matrix(model, None, None, "cos", vectors=vecs)
        out["variants"][name] = {"guo": guo_rows(cos, pools),
                                 "training": {k: v for k, v in model.stats.items()
                                              if k in ("stage1", "stage2")}}
    return out


# -- tables --------------------------------------------------------------------------------------

def print_tables(res: dict) -> None:
    say = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    full = res["sizes"][-1]
    gl = res["gl"]
    say(f"\nGrégoire & Langlais: F1 (%) at the best threshold, {res['data']['test_pairs']}^2 pairs,"
        f" by noise ratio; paper: {PAPER['gl']['source']}")
    say("system".ljust(28) + "".join(f"{r:>7}" for r in gl["birnn"]))
    for name, rows in gl.items():
        say(name.ljust(28) + "".join(f"{v['F1']:7.1f}" for v in rows.values()))
    for name in ("birnn", "features"):
        say(f"paper {name}".ljust(28) + "".join(
            f"{PAPER['gl'][name].get(r, float('nan')):7.1f}" for r in gl["birnn"]))
    say(f"\nKim et al.: alignment recovery error (%), both ways; paper: {PAPER['kim']['source']}")
    for name, v in res["kim"].items():
        say(f"{name.ljust(28)}{v['src_to_tgt']:7.2f}{v['tgt_to_src']:7.2f}{v['both']:7.2f}  "
            f"paper {PAPER['kim'].get(name.replace('default_job_score', 'nmt_posteriors'), '–')}")
    say(f"\nGuo et al.: P@1/3/10 (%); paper: {PAPER['guo']['source']}")
    for name, pools in res["guo"].items():
        say(
            name.ljust(28)
            + "  ".join(
                f"N={k}: " + "/".join(f"{v[f'P@{n}']:.1f}" for n in (1, 3, 10))
                for k, v in pools.items()
            )
        )
    say(
        "\nloss curves at the full size (mean loss of each tenth of the updates; fall over the "
        "last fifth):"
    )
    for name, v in res["convergence"][str(full)].items():
        say(
            f"{name.ljust(20)} {v['steps']:5d} upd {v['steps_per_s']:5.2f}/s  "
            + " ".join(f"{x:.3f}" for x in v["loss_curve"])
            + f"  fell {v['tail_drop_pct']}% in the last fifth"
        )
    say(f"\nlearning curves (train pairs {res['sizes']}), full size {full}:")
    for name, curve in res["curves"].items():
        say(name.ljust(36) + " ".join(f"{v:7.2f}" for v in curve))


def main() -> int:
    ap = benchlib.parser(__doc__,
                         quick="60 test pairs, tiny models on 500/1,500 pairs, 2 s budgets")
    ap.add_argument("--steps", default="",
                    help=f"updates of each system at the full size, e.g. birnn=5000 (the others: "
                    f"{STEPS}; --quick: {QUICK_STEPS})")
    ap.add_argument("--budget", type=float, default=1800.0,
                    help="wall-time cap of each training run, seconds (default 1800)")
    ap.add_argument("--sizes", default="2000,5000,10000,all",
                    help="learning-curve training sizes, comma-separated ('all': every pair)")
    ap.add_argument("--curve-steps", choices=("scaled", "same"), default="scaled",
                    help="updates at a smaller size: scaled by size (at least a quarter of "
                    "--steps; default) or the same as at the full size")
    ap.add_argument("--model",
                    help="the imported OPUS-MT model (default <cache>/models/opus-mt-zh-en)")
    ap.add_argument("--work", help="where the default job's run and USE vectors are kept")
    ap.add_argument("--no-default-job", action="store_true",
                    help="skip trie-mine's default job (the tables lose that row)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--systems", help="a partial run: only these of " + ",".join(SYSTEM_NAMES)
                    + " (comma-separated), at the full size only, without the references; "
                    "recorded under 'partial' (see partial_run)")
    args = ap.parse_args()
    if args.budget <= 0:
        ap.error("--budget must be positive")
    try:
        steps = parse_steps(args.steps, QUICK_STEPS if args.quick else STEPS)
        systems = parse_systems(args.systems)
    except ValueError as exc:
        ap.error(str(exc))
    run = benchlib.start("seeds_bench", args)
    import torch

    from triemine.baselines.base import Resources

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))
    model_dir = shared_model_dir(args.model, "seeds_bench")
    work = Path(args.work) if args.work else cache_root() / "seeds_bench"
    quick = args.quick
    budget = 2.0 if quick else args.budget
    td = test_data(quick, args.seed)
    data, order = training_data(quick, args.seed)
    full = len(data.src)
    sizes = [500, full] if quick else sorted({full if s == "all" else min(int(s), full)
                                               for s in args.sizes.split(",")})
    resources = Resources.from_model_dir(model_dir)
    cols = noise_columns(len(td["src"]), args.seed)
    pools = pool_columns(td)
    if systems:
        return run.finish(partial_run(systems, resources, data, td, cols, pools, budget, steps,
                                      quick, torch.get_num_threads()))
    res = {"data": dict(td["describe"], train_pairs=full, heldout_pairs=len(data.held_src),
                        mono_en=len(data.mono_tgt),
                        mono_en_in_pool=len(set(data.mono_tgt) & set(td["pool"]))),
           "sizes": sizes, "budget_cap_s": budget, "steps_full": steps,
           "curve_steps": args.curve_steps,
           "threads": torch.get_num_threads(),
           "paper": PAPER, "gl": {}, "kim": {}, "guo": {}, "curves": {}, "seconds": {}}

    # references
    n = len(td["src"])
    with benchlib.timer() as t:
        u_src = use_vectors(td["src"], work, "src")
        u_pool = use_vectors(td["pool"], work, "pool")
        u_noise = use_vectors(td["noise"], work, "noise")
    res["seconds"]["use_encode"] = round(t.s, 1)
    use_gl = P.ratio_margin(P.cosine_matrix(u_src, np.concatenate([u_pool[:n], u_noise]), False))
    res["gl"]["use_margin"] = gl_rows(use_gl, cols)
    use_cos = P.cosine_matrix(u_src, u_pool[:n], False)
    res["kim"]["use_cos"] = P.recovery_error(use_cos)
    res["kim"]["use_margin"] = P.recovery_error(P.ratio_margin(use_cos))
    pool_cos = P.cosine_matrix(u_src, u_pool, False)
    res["guo"]["use_cos"] = guo_rows(pool_cos, pools)
    res["guo"]["use_margin"] = guo_rows(P.ratio_margin(pool_cos), pools)
    with benchlib.timer() as t:
        lev = P.levenshtein_matrix(td["src"], td["tgt"])
    res["kim"]["levenshtein"] = P.recovery_error(lev)
    res["seconds"]["levenshtein"] = round(t.s, 1)
    if not args.no_default_job:
        job = default_job(td, model_dir, work)
        pool_of = {t: j for j, t in enumerate(td["pool"])}
        noise_idx = np.array([pool_of[t] for t in td["noise"]], dtype=np.int64)
        gl_cols = np.concatenate([np.arange(n), noise_idx])
        for col, label in (("combined", "default_job"), ("score", "default_job_score")):
            m = job["matrices"][col]
            res["gl"][label] = gl_rows(m[:, gl_cols], cols)
            res["kim"][label] = P.recovery_error(m[:, :n])
            res["guo"][label] = guo_rows(m, pools)
        res["default_job"] = {k: v for k, v in job.items() if k != "matrices"}
        res["seconds"]["default_job"] = job["seconds"]

    # the trained systems, size by size
    per_size = {}
    for size in sizes:
        d = subset(data, order, size)
        st = dict(steps) if args.curve_steps == "same" else {
            k: steps_for(v, size, full) for k, v in steps.items()}
        print(f"seeds_bench: {size} training pairs, updates {st}", file=sys.stderr, flush=True)
        r = {"steps": st}
        r["features"] = run_features(resources, d, td, cols)
        r["birnn"] = run_birnn(resources, d, td, cols, budget, st["birnn"], quick)
        r["ae_mlp"] = run_ae(resources, d, td, budget, st["ae_mlp"], quick, head=size == full)
        r["dual_enc"] = run_dual(resources, d, td, pools, budget, st["dual_enc"], st["stage2"],
                                 quick, MS if size == full else (0, CURVE_M))
        per_size[str(size)] = r
    res["per_size"] = per_size
    top = per_size[str(full)]
    res["gl"]["birnn"] = top["birnn"]["gl"]
    res["gl"]["birnn_cosine_first_stage"] = top["birnn"]["gl_cosine_first_stage"]
    res["gl"]["features"] = top["features"]["gl"]
    res["kim"].update(top["ae_mlp"]["kim"])
    for name, v in top["dual_enc"]["variants"].items():
        res["guo"][f"dual_enc_{name}"] = v["guo"]
    big = str(len(td["pool"]))
    curves = {
        "gl_F1@0 birnn": [per_size[str(s)]["birnn"]["gl"]["0.0"]["F1"] for s in sizes],
        "gl_F1@0.9 birnn": [per_size[str(s)]["birnn"]["gl"]["0.9"]["F1"] for s in sizes],
        "gl_F1@0 features": [per_size[str(s)]["features"]["gl"]["0.0"]["F1"] for s in sizes],
        "gl_F1@0.9 features": [per_size[str(s)]["features"]["gl"]["0.9"]["F1"] for s in sizes],
        "kim_err ae_cos": [per_size[str(s)]["ae_mlp"]["kim"]["ae_cos"]["both"] for s in sizes],
        f"guo_P@1(N={big}) dual_enc M=0": [
            per_size[str(s)]["dual_enc"]["variants"]["M=0"]["guo"][big]["P@1"] for s in sizes
        ],
        f"guo_P@1(N={big}) dual_enc M={CURVE_M}": [
            per_size[str(s)]["dual_enc"]["variants"][f"M={CURVE_M}"]["guo"][big]["P@1"]
            for s in sizes
        ],
    }
    res["curves"] = curves
    res["convergence"] = convergence(per_size)
    res["claims"] = claims(res)
    print_tables(res)
    return run.finish(res)


FLAT_PCT = 2.0  # a loss that fell less than this (%) over the last fifth of training has stopped


def tail_drop(curve):
    """Percent by which the loss fell over the last fifth of training (the mean of the last two
    tenths of the loss curve against the two before); None for fewer than 4 points."""
    if len(curve) < 4:
        return None
    before, last = np.mean(curve[-4:-2]), np.mean(curve[-2:])
    return round(100 * float(before - last) / max(abs(float(before)), 1e-9), 1)


def convergence(per_size: dict) -> dict:
    """Each training run's updates, updates a second, loss curve and :func:`tail_drop`, by size."""
    out = {}
    for size, r in per_size.items():
        runs = {"birnn": r["birnn"]["training"], "ae_mlp": r["ae_mlp"]["training"]}
        for name, v in r["dual_enc"]["variants"].items():
            runs[f"dual_enc {name}"] = v["training"].get("stage2", v["training"].get("stage1"))
        out[size] = {name: run_info(t) for name, t in runs.items()}
    return out


def run_info(training: dict) -> dict:
    """A training record's updates, epochs, updates a second, loss curve and :func:`tail_drop`."""
    t = training
    return {"steps": t["steps"], "epochs": t["epochs"], "steps_per_s": t["steps_per_s"],
            "seconds": t.get("autoencoder_seconds", t.get("seconds")),
            "loss_curve": t["loss_curve"], "tail_drop_pct": tail_drop(t["loss_curve"])}


def claims(res: dict) -> dict:
    """Each paper's claim, measured here: ``{claim: {"holds": bool, "measured": ...}}``."""
    gl, kim, guo = res["gl"], res["kim"], res["guo"]
    drop_b = round(gl["birnn"]["0.0"]["F1"] - gl["birnn"]["0.9"]["F1"], 1)
    drop_f = round(gl["features"]["0.0"]["F1"] - gl["features"]["0.9"]["F1"], 1)
    out = {
        "gl_birnn_beats_features_at_every_noise_ratio": beats_claim(gl["birnn"], gl["features"]),
        "gl_birnn_degrades_slower_than_features": {
            "holds": drop_b < drop_f, "birnn_drop_0_to_90": drop_b,
                                                   "features_drop_0_to_90": drop_f},
        "kim_cosine_far_better_than_levenshtein": cosine_claim(kim["ae_cos"], kim["levenshtein"]),
        "kim_mlp_worse_than_cosine_at_recovery": {
            "holds": kim["ae_mlp"]["both"] > kim["ae_cos"]["both"],
            "ae_mlp": kim["ae_mlp"]["both"], "ae_cos": kim["ae_cos"]["both"]},
    }
    if "default_job" in kim:
        best_other = min(v["both"] for k, v in kim.items() if not k.startswith("default_job"))
        out["kim_nmt_posteriors_best"] = {
            "holds": kim["default_job"]["both"] < best_other,
            "default_job": kim["default_job"]["both"], "best_other": best_other,
            "default_job_seconds": res["default_job"]["seconds"]}
    out.update(guo_claims(guo))
    for name, curve in res["curves"].items():
        better = (lambda a, b: b < a) if name.startswith("kim_err") else (lambda a, b: b > a)
        out[f"curve_rises {name}"] = {"holds": better(curve[0], curve[-1]), "curve": curve}
    full = str(res["sizes"][-1])
    for name, v in res["convergence"][full].items():
        out[f"loss_stopped_falling {name}"] = {
            **flat_claim(v), "steps": v["steps"], "steps_per_s": v["steps_per_s"],
            "loss_curve": v["loss_curve"]}
    return out


def beats_claim(birnn: dict, features: dict) -> dict:
    """Grégoire & Langlais's claim on G&L rows by noise ratio: the BiRNN's F1 above the
    features' at every ratio."""
    margins = {r: round(birnn[r]["F1"] - features[r]["F1"], 1) for r in birnn}
    return {"holds": all(v > 0 for v in margins.values()), "birnn_minus_features_F1": margins}


def cosine_claim(ae_cos: dict, levenshtein: dict) -> dict:
    """Kim et al.'s claim: the autoencoder's cosine errs at most half as often as Levenshtein."""
    return {"holds": ae_cos["both"] < 0.5 * levenshtein["both"], "ae_cos": ae_cos["both"],
            "levenshtein": levenshtein["both"]}


def flat_claim(info: dict) -> dict:
    """Whether a training run's loss had stopped falling (:func:`run_info`, :data:`FLAT_PCT`)."""
    return {"holds": info["tail_drop_pct"] is not None and info["tail_drop_pct"] < FLAT_PCT,
            "fell_in_last_fifth_pct": info["tail_drop_pct"]}


def guo_claims(guo: dict) -> dict:
    """Guo et al.'s two claims from P@k rows ``{"dual_enc_M=<m>": {pool: {"P@k": ..}}}`` (the
    largest pool for the P@1 figures)."""
    ms = [m for m in MS if f"dual_enc_M={m}" in guo]
    hard = [m for m in ms if m]
    pools = list(guo["dual_enc_M=0"])
    big = max(pools, key=int)
    out = {"guo_hard_beats_random_at_every_k": {
        "holds": all(guo[f"dual_enc_M={m}"][k][f"P@{n}"] > guo["dual_enc_M=0"][k][f"P@{n}"]
                     for m in hard for k in pools for n in (1, 3, 10)),
        "P@1_pool": {f"M={m}": guo[f"dual_enc_M={m}"][big]["P@1"] for m in ms}}}
    if len(hard) > 1:
        p1 = [guo[f"dual_enc_M={m}"][big]["P@1"] for m in hard]
        out["guo_more_negatives_not_always_better"] = {
            "holds": any(b <= a for a, b in zip(p1, p1[1:])), "P@1_by_M": dict(zip(hard, p1))}
    return out


SYSTEM_NAMES = ("features", "birnn", "ae_mlp", "dual_enc")


def parse_systems(text):
    """``--systems`` as a list in :data:`SYSTEM_NAMES` order (``birnn`` brings ``features``, its
    paper's baseline); None without it; raises ValueError on an unknown name."""
    if not text:
        return None
    names = {x.strip() for x in text.split(",") if x.strip()}
    bad = names - set(SYSTEM_NAMES)
    if bad or not names:
        raise ValueError(f"--systems: unknown {', '.join(sorted(bad)) or 'empty list'} "
                         f"(choose from {', '.join(SYSTEM_NAMES)})")
    if "birnn" in names:
        names.add("features")
    return [n for n in SYSTEM_NAMES if n in names]


def partial_run(systems, resources, data, td, cols, pools, budget, steps, quick, threads) -> dict:
    """Only ``systems``, trained on all the training pairs: ``{"partial": {system: its protocol
    rows, training record, ``convergence`` (:func:`run_info`) and ``claims``}, ...}`` -- the
    budget at which each loss stops falling, read from one long run a system."""
    out = {}
    if "features" in systems:
        out["features"] = run_features(resources, data, td, cols)
    if "birnn" in systems:
        r = run_birnn(resources, data, td, cols, budget, steps["birnn"], quick)
        r["convergence"] = run_info(r["training"])
        r["claims"] = {"gl_birnn_beats_features_at_every_noise_ratio": beats_claim(
            r["gl"], out["features"]["gl"]), "loss_stopped_falling": flat_claim(r["convergence"])}
        out["birnn"] = r
    if "ae_mlp" in systems:
        r = run_ae(resources, data, td, budget, steps["ae_mlp"], quick)
        lev = P.recovery_error(P.levenshtein_matrix(td["src"], td["tgt"]))
        r["kim"]["levenshtein"] = lev
        r["convergence"] = run_info(r["training"])
        r["claims"] = {"kim_cosine_far_better_than_levenshtein": cosine_claim(r["kim"]["ae_cos"],
                                                                              lev),
                       "loss_stopped_falling": flat_claim(r["convergence"])}
        out["ae_mlp"] = r
    if "dual_enc" in systems:
        r = run_dual(resources, data, td, pools, budget, steps["dual_enc"],
                     steps["stage2"], quick, MS)
        r["convergence"] = {name: run_info(v["training"].get("stage2", v["training"].get("stage1")))
                            for name, v in r["variants"].items()}
        r["claims"] = guo_claims({f"dual_enc_{name}": v["guo"]
                                  for name, v in r["variants"].items()})
        out["dual_enc"] = r
    for name, r in out.items():
        if "convergence" in r:
            print(f"{name}: {json.dumps(r['convergence'])}", file=sys.stderr, flush=True)
        for claim, v in r.get("claims", {}).items():
            print(f"{name}: {claim}: {json.dumps(v)}", file=sys.stderr, flush=True)
    return {"partial": out, "systems": systems, "steps_full": {k: v for k, v in steps.items()},
            "budget_cap_s": budget, "threads": threads,
            "data": dict(td["describe"], train_pairs=len(data.src))}


if __name__ == "__main__":
    sys.exit(main())
