#!/usr/bin/env python3
"""Render the benchmarks' records (``bench/results/*.jsonl``) as ``docs/results.md`` and as the
README's one results table.

``docs/results.md``: one section a benchmark, headed ``## <script stem>`` (``results.md#bucc_bench``
links it), holding the table of its latest full-mode record and of its latest ``--quick`` record,
each followed by the command, machine, threads, date and commit (``dirty`` when the tree was)
that produced it. Records are appended by ``bench/benchlib.py`` (``--record``); the latest is
the last line of a file.

The README's table sits between ``<!-- results:begin -->`` and ``<!-- results:end -->``: one row
a ``bench/bucc_bench.py`` configuration that has a full-mode record (the latest record holding
it), with the sample's F1 tuned and 2-fold held-out, the transfer set's F1 at the sample's
threshold, precision / recall on ``bench/density_bench.py``'s comparable 1 % mix (the latest full
record of that configuration, :func:`density_cell`), the arithmetic of its exact stage (the
record's ``precision``; fp32 for records before ``--precision auto``), the wall time of mining
the sample and the threads; the setup (CPU with its bf16 matrix units where the record names
its flags, cores, GPUs, Python and torch) is said once above it. No path, load figure, date
or commit goes into the README (``scripts/check_layout.py`` checks). A configuration whose
stages ``--work`` resumed shows no wall time, unless an earlier full record mined it from
scratch.

Usage::

    python scripts/results_table.py            # print docs/results.md
    python scripts/results_table.py --write    # write docs/results.md and README.md's block
    python scripts/results_table.py --check    # exit 1 with a diff when either is stale

``--results DIR``, ``--docs PATH`` and ``--readme PATH`` point elsewhere (tests). Exit status:
0 done / up to date, 1 stale or README.md without the markers, 2 a record that cannot be read
(file and line named).
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from triemine.config.configurations import NAMES  # noqa: E402
from triemine.io.outfile import atomic_write  # noqa: E402
from triemine.judging.shipped import configuration_cut  # noqa: E402

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
# bucc_bench's configurations in the README's order, with the names the README gives them
CONFIG_LABELS = {"judge": "judge (default: learned judge, prob >= 0.5)",
                 "combined": "combined (fixed combined score)",
                 "mt-only": "mt-only (no embedding model)",
                 "paper": "paper (Chen et al. 2020)",
                 "use_margin": "use_margin (USE + LASER margin)",
                 "translate_chrf": "translate_chrf (OPUS-MT + chrF)"}
# keys every record carries: said under the table, not in it
META_KEYS = {"bench", "quick", "machine", "threads", "date", "mode"}
MAX_DEPTH = 3


class RecordError(Exception):
    """A record that cannot be read: the file, the line and the problem."""


def load_records(results: Path) -> Dict[str, List[dict]]:
    """``{bench: [record, ...]}`` in file order, from every ``<bench>.jsonl`` in ``results``."""
    out: Dict[str, List[dict]] = {}
    for path in sorted(results.glob("*.jsonl")):
        recs = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(f"{path}:{n}: not JSON ({exc.msg})") from None
            missing = [k for k in ("bench", "commit", "date", "machine", "threads", "quick",
                                   "results") if not isinstance(rec, dict) or k not in rec]
            if missing:
                raise RecordError(f"{path}:{n}: a record without {', '.join(missing)}")
            recs.append(rec)
        if recs:
            out[path.stem] = recs
    return out


def latest(recs: List[dict], quick: bool) -> Optional[dict]:
    found = [r for r in recs if bool(r["quick"]) == quick]
    return found[-1] if found else None


# --- cells -----------------------------------------------------------------------------------

def cell(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.0f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(cell(x) for x in v) if all(not isinstance(x, (dict, list)) for x in v) \
            else json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return json.dumps(v, ensure_ascii=False)
    return str(v).replace("|", "\\|").replace("\n", " ")


def duration(s) -> str:
    if not isinstance(s, (int, float)):
        return "–"
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    return f"{m} min {sec:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def table(header: List[str], rows: List[List[str]]) -> List[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


# --- the generic table: every scalar of the results, lists of rows as their own table ---------

def flatten(d: dict, prefix: str = "", depth: int = 1):
    """``(key, value)`` of every leaf of ``d`` (dotted keys, at most ``MAX_DEPTH`` deep), and
    ``(key, rows)`` of every list of dicts apart."""
    leaves, lists = [], []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v and depth < MAX_DEPTH:
            sub_leaves, sub_lists = flatten(v, key + ".", depth + 1)
            leaves += sub_leaves
            lists += sub_lists
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lists.append((key, v))
        else:
            leaves.append((key, v))
    return leaves, lists


def generic_tables(results: dict) -> List[str]:
    leaves, lists = flatten({k: v for k, v in results.items() if k not in META_KEYS})
    leaves.sort(key=lambda kv: kv[0].count("."))  # the top-level summary first, in its order
    out = table(["result", "value"], [[f"`{k}`", cell(v)] for k, v in leaves])
    for key, rows in lists:
        cols: List[str] = []
        for r in rows:
            cols += [c for c in r if c not in cols and not isinstance(r[c], (dict, list))]
        out += ["", f"`{key}`:", ""]
        out += table([f"`{c}`" for c in cols], [[cell(r.get(c)) for c in cols] for r in rows])
    return out


# --- bucc_bench: one row a configuration -----------------------------------------------------

def f1(res: dict, key: str) -> str:
    v = (res.get(key) or {}).get("F1")
    return f"{v:.4f}" if isinstance(v, (int, float)) else "–"


def ordered_configs(names) -> List[str]:
    return [c for c in CONFIG_LABELS if c in names] + \
        sorted(c for c in names if c not in CONFIG_LABELS)


def recall(res: dict) -> str:
    """The candidate recall (gold pairs among the candidates, all generators) of both sets."""
    r = res.get("candidate_recall") or {}
    if not r:
        return "–"
    return " / ".join(cell((r.get(k) or {}).get("union")) for k in ("sample", "transfer"))


def bucc_tables(results: dict) -> List[str]:
    configs = results.get("configs") or {}
    rows = []
    for name in ordered_configs(configs):
        r = configs[name]
        rows.append([name, f1(r, "sample_tuned"), f1(r, "sample_heldout"), f1(r, "transfer"),
                     f1(r, "transfer_tuned"), f1(r, "sample_shipped"), f1(r, "transfer_shipped"),
                     recall(r), duration(r.get("seconds_sample")),
                     duration(r.get("seconds_transfer")), cell(r.get("seconds_per_source")),
                     cell(r.get("resumed"))])
    return table(["configuration", "sample F1 tuned", "sample F1 held-out", "transfer F1",
                  "transfer F1 tuned", "sample F1 shipped cut", "transfer F1 shipped cut",
                  "candidate recall sample / transfer", "sample wall", "transfer wall",
                  "s / source", "resumed"],
                 rows)


# --- seeds_bench: the seed papers' tables beside the papers' numbers ---------------------------

def _num(v, fmt: str = ".1f") -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else "–"


def seeds_tables(results: dict) -> List[str]:
    if "partial" in results:
        return seeds_partial_tables(results)
    paper = results.get("paper") or {}
    out: List[str] = []
    gl = results.get("gl") or {}
    if gl:
        ratios = list(next(iter(gl.values())))
        out += [f"Grégoire & Langlais: F1 (%) at the best threshold over every test pair (tuned "
                f"on the same gold, the paper's protocol: optimistic), by "
                f"noise ratio (paper: {(paper.get('gl') or {}).get('source', '–')})", ""]
        rows = [[f"`{name}`"] + [_num((r.get(k) or {}).get("F1")) for k in ratios]
                for name, r in gl.items()]
        for name in ("birnn", "features"):
            nums = (paper.get("gl") or {}).get(name) or {}
            rows.append([f"paper: {name}"] + [_num(nums.get(k)) for k in ratios])
        out += table(["system"] + [f"{float(k):.0%}" for k in ratios], rows) + [""]
    kim = results.get("kim") or {}
    if kim:
        pk = paper.get("kim") or {}
        out += [f"Kim et al.: alignment recovery error (%) (paper: {pk.get('source', '–')})", ""]
        alias = {"default_job": "nmt_posteriors"}
        out += table(["system", "zh→en", "en→zh", "both", "paper"],
                     [[f"`{n}`", _num(v.get("src_to_tgt"), ".2f"), _num(v.get("tgt_to_src"), ".2f"),
                       _num(v.get("both"), ".2f"), _num(pk.get(alias.get(n, n)))]
                      for n, v in kim.items()]) + [""]
    guo = results.get("guo") or {}
    if guo:
        pools = list(next(iter(guo.values())))
        out += [f"Guo et al.: P@1 / P@3 / P@10 (%) against pools of N targets (paper: "
                f"{(paper.get('guo') or {}).get('source', '–')})", ""]
        out += table(["system"] + [f"N = {k}" for k in pools],
                     [[f"`{n}`"] + [" / ".join(_num((v.get(k) or {}).get(f"P@{i}"))
                                               for i in (1, 3, 10))
                                    for k in pools] for n, v in guo.items()]) + [""]
    curves = results.get("curves") or {}
    if curves:
        sizes = results.get("sizes") or []
        out += ["Learning curves (training pairs):", ""]
        out += table(["measure"] + [str(s) for s in sizes],
                     [[f"`{n}`"] + [_num(x) for x in c] for n, c in curves.items()]) + [""]
    claims = results.get("claims") or {}
    if claims:
        out += ["Claims:", ""]
        out += table(["claim", "holds here", "measured"],
                     [[f"`{n}`", cell(c.get("holds")),
                       cell({k: v for k, v in c.items() if k != "holds"})]
                      for n, c in claims.items()]) + [""]
    job = results.get("default_job") or {}
    out += table(["result", "value"],
                 [["training updates a system at the full size",
                   ", ".join(f"{k} {v}" for k, v in (results.get("steps_full") or {}).items())
                   or "–"],
                  ["updates at a smaller size", {"same": "the full size's",
                                                 "scaled": "scaled by size (at least a quarter)"}
                   .get(results.get("curve_steps", "scaled"), "–")],
                  ["wall-time cap a training run", duration(results.get("budget_cap_s"))],
                  ["threads", cell(results.get("threads"))],
                  ["default job: wall time (1,000 sources × the pool)",
                   duration(job.get("seconds"))],
                  ["default job: candidates a source", cell(job.get("per_source"))],
                  ["data", cell(results.get("data"))]])
    return out


def seeds_partial_tables(results: dict) -> List[str]:
    """A ``--systems`` run of seeds_bench: each system's protocol rows, loss curve and claims."""
    part = results["partial"]
    out = [
        f"Long run of {', '.join(f'`{n}`' for n in part)} alone, on all "
        f"{cell((results.get('data') or {}).get('train_pairs'))} training pairs (updates asked: "
        + ", ".join(f"{k} {v}" for k, v in (results.get("steps_full") or {}).items()
                    if k in part or (k == "stage2" and "dual_enc" in part))
        + f"; wall-time cap a run {duration(results.get('budget_cap_s'))}; threads "
        f"{cell(results.get('threads'))}):",
        "",
    ]
    gl = {n: part[n]["gl"] for n in ("birnn", "features") if "gl" in part.get(n, {})}
    if "birnn" in part:
        gl["birnn_cosine_first_stage"] = part["birnn"]["gl_cosine_first_stage"]
    if gl:
        ratios = list(next(iter(gl.values())))
        out += table(
            ["G&L F1 (%), threshold tuned on the same gold"] + [f"{float(k):.0%}" for k in ratios],
            [[f"`{n}`"] + [_num(r[k]["F1"]) for k in ratios] for n, r in gl.items()],
        ) + [""]
    if "ae_mlp" in part:
        out += table(["Kim et al. recovery error (%)", "zh→en", "en→zh", "both"],
                     [[f"`{n}`", _num(v["src_to_tgt"], ".2f"), _num(v["tgt_to_src"], ".2f"),
                       _num(v["both"], ".2f")] for n, v in part["ae_mlp"]["kim"].items()]) + [""]
    variants = (part.get("dual_enc") or {}).get("variants") or {}
    if variants:
        pools = list(next(iter(variants.values()))["guo"])
        out += table(["Guo et al. P@1 / P@3 / P@10 (%)"] + [f"N = {k}" for k in pools],
                     [[f"`dual_enc {n}`"] + [" / ".join(_num(v["guo"][k].get(f"P@{i}"))
                                                      for i in (1, 3, 10)) for k in pools]
                      for n, v in variants.items()]) + [""]
        stop = ((variants.get("stage1") or {}).get("training") or {}).get("stage1", {})
        if "early_stop" in stop:
            es = stop["early_stop"]
            out += [f"Stage 1 stopped early: best held-out P@1 {_num(100 * es['best'])} % at "
                    f"update {es['best_step']} of {stop['steps']} (patience {es['patience']}); "
                    "held-out P@1 by update: "
                    + ", ".join(f"{st} {_num(100 * v)}" for st, v in es["checks"]), ""]
    runs = []
    for name, r in part.items():
        conv = r.get("convergence") or {}
        runs += [(name, conv)] if "steps" in conv else [(f"{name} {k}", v) for k, v in conv.items()]
    if runs:
        out += table(["training", "updates", "updates/s", "seconds", "loss by tenth of the run",
                      "fell in the last fifth (%)"],
                     [[f"`{n}`", cell(v["steps"]), cell(v["steps_per_s"]), cell(v.get("seconds")),
                       cell(v["loss_curve"]), cell(v["tail_drop_pct"])] for n, v in runs]) + [""]
    claims = [(f"{n}: {c}", v) for n, r in part.items() for c, v in (r.get("claims") or {}).items()]
    if claims:
        out += table(["claim", "holds here", "measured"],
                     [[f"`{n}`", cell(v.get("holds")),
                       cell({k: x for k, x in v.items() if k != "holds"})]
                      for n, v in claims])
    return out


# --- clean_bench: ROC AUC per noise kind and method, the cuts, the unrelated corpora's pairs ---

def clean_tables(results: dict) -> List[str]:
    out: List[str] = []
    noisy = results.get("noisy")
    if noisy:
        auc = noisy["auc"]
        methods = list(auc)
        kinds = list(dict.fromkeys(k for m in methods for k in auc[m]))
        out += ["ROC AUC, transfer set's gold pairs against each noise kind "
                f"({cell(noisy['pairs'])}):", ""]
        out += table(["noise kind"] + [f"`{m}`" for m in methods],
                     [[k] + [cell(auc[m].get(k)) for m in methods] for k in kinds])
        out += ["", f"At the cuts (shipped: `{noisy['cut']}`; ECE of `prob` {cell(noisy['ece'])}):",
                ""]
        cuts = noisy["at_cut"]
        noise = list(next(iter(cuts.values()))["noise_kept"])
        out += table(["cut", "kept", "P", "R", "F1"] + [f"{k} kept" for k in noise],
                     [[c, cell(v["kept"]), cell(v["P"]), cell(v["R"]), cell(v["F1"])]
                      + [cell(v["noise_kept"][k]) for k in noise] for c, v in cuts.items()])
        speed = {k: v for k, v in noisy["speed"].items() if k != "wait_probe"}
        out += ["", "Speed: " + ", ".join(f"`{k}` {cell(v)}" for k, v in speed.items())]
        wp = noisy["speed"].get("wait_probe")
        if wp:
            out += ["", f"Exact stage on the first {wp['pairs']} pairs, {wp['threads']} threads, "
                    f"in one run: {cell(wp['spinning']['exact_pairs_per_s'])} pairs/s with "
                    f"spinning OpenMP threads ({wp['spinning']['env']}), "
                    f"{cell(wp['sleeping']['exact_pairs_per_s'])} sleeping "
                    f"({wp['sleeping']['env']}; x{cell(wp['speedup'])}; scores TSVs "
                    f"byte-identical: {cell(wp['tsv_identical'])}); the mining job's exact stage "
                    f"on the same pairs {cell(wp['mining_path']['exact_pairs_per_s'])} pairs/s."]
    if results.get("mined"):
        out += ([""] if out else []) + mined_calibration_table(results["mined"])
    un = results.get("unrelated")
    if un:
        out += ["", f"Unrelated corpora ({un['sources']} Chinese sources without a gold pair "
                f"against {un['targets']} English lines of de-en): {un['kept_shipped']} pairs kept "
                f"at the shipped threshold ({cell(100 * un['kept_share'])} % of the sources), "
                f"{cell(un['kept_prob_0_5'])} at prob >= 0.5; {un['candidates']} candidates, "
                + ("a run resumed from an earlier one's stages (its wall time is not the job's)."
                   if un.get("resumed") else f"{duration(un['wall_s'])}."), ""]
        if un["kept_pairs"]:
            out += table(["source", "target", "combined", "prob"],
                         [[cell(p["src"]), cell(p["tgt"]), cell(p["combined"]), cell(p["prob"])]
                          for p in un["kept_pairs"]])
    return out


# --- density_bench: one row a mix, the margin cut, the wrong pairs, the unrelated pairs ------

def _count_rows(mixes: dict, key: str) -> List[List[str]]:
    rows = []
    for name, m in mixes.items():
        c = m.get(key)
        if c:
            rows.append([name, cell(m["sources"]), cell(m["gold"]), cell(m["density"]),
                         cell(c["kept"]), cell(c["P"]), cell(c.get("P_auto")), cell(c["R"]),
                         cell(c["F1"]), cell(c["P_strict"]), cell(c["wrong"]),
                         cell(c["wrong_near_ref"]), cell(c["accidental"]), cell(c.get("read")),
                         cell(c["wrong_per_10k_sources"]),
                         cell(c["wrong_diluting_pct"]),
                         "resumed" if m.get("resumed") else duration(m["wall_s"])])
    return rows


def _shown_pairs(pairs: List[dict]) -> List[str]:
    cols = ["kind", "src", "tgt", "reference", "ref_dice", "combined", "prob", "generators"]
    cols = [c for c in cols if any(p.get(c) is not None for p in pairs)]
    return table(cols, [[cell(p.get(c)) for c in cols] for p in pairs])


def _look_added(added: Optional[dict]) -> str:
    if not added:
        return ""
    return (f" The second look added {added['kept']} of the kept pairs ({added['wrong']} wrong, "
            f"{added['accidental']} accidental).")


def density_tables(results: dict) -> List[str]:
    look = " with the second look (`--second-look`)" if results.get("second_look") else ""
    out = [f"Configuration `{results.get('config')}`{look}; one-to-one at its shipped cut; "
           "P leaves accidental translations and those read as translations out (gold / "
           "(gold + wrong)), P auto counts the read ones wrong, P strict is BUCC's (gold / "
           "kept); `read`: pairs bench/density_readings.tsv marks as translations; `near ref`: "
           "wrong pairs whose English has trigram Dice >= "
           f"{cell((results.get('rules') or {}).get('same_story_dice'))} with the source's own "
           "English; `wrong dil. %`: wrong pairs among the diluting sources.", ""]
    head = ["mix", "sources", "gold", "density", "kept", "P", "P auto", "R", "F1", "P strict",
            "wrong", "near ref", "accidental", "read", "wrong / 10k sources", "wrong dil. %",
            "wall"]
    mixes = results.get("mixes") or {}
    shipped, at_half = _count_rows(mixes, "shipped"), _count_rows(mixes, "prob_0_5")
    if shipped:
        out += ["At the shipped cut:", ""] + table(head, shipped) + [""]
    if at_half == shipped and shipped:  # the shipped cut is prob >= 0.5 (a judge's)
        out += ["At prob >= 0.5: the same.", ""]
    elif at_half:
        out += ["At prob >= 0.5:", ""] + table(head, at_half) + [""]
    mg = results.get("margin")
    if mg:
        cuts = [f"{c:g}" for c in mg["cuts"]]
        out += ["A cut on `use_margin` before the exact stage: share of candidates spared / "
                "kept gold pairs lost (recall lost):", ""]
        out += table(["mix"] + [f"< {c}" for c in cuts],
                     [[name] + [f"{cell(t[c]['spared'])} / {cell(t[c]['kept_gold_lost'])} "
                                f"({cell(t[c]['recall_lost'])})" for c in cuts]
                      for name, t in mg["mixes"].items()]) + [""]
    for name, m in mixes.items():
        for key in ("shipped", "prob_0_5"):
            pairs = (m.get(key) or {}).get("pairs")
            if key == "prob_0_5" and pairs == (m.get("shipped") or {}).get("pairs"):
                continue  # the same cut
            if pairs:
                out += [f"`{name}`, {key}: every kept pair that is not gold:", ""]
                out += _shown_pairs(pairs) + [""]
    for name, p in (results.get("pairs") or {}).items():
        for key in ("shipped", "prob_0_5"):
            c = p.get(key)
            if not c or (key == "prob_0_5" and c == p.get("shipped")):
                continue
            out += [f"Unrelated pair `{name}` ({p['sources']} sources against {p['targets']} "
                    f"English lines, {key}): {c['kept']} kept, {c['wrong']} wrong "
                    f"({cell(c['wrong_pct_of_sources'])} % of the sources), {c['accidental']} "
                    f"accidental translations, {cell(c.get('read'))} read as translations; "
                    f"{p['candidates']} candidates, "
                    + ("resumed." if p.get("resumed") else f"{duration(p['wall_s'])}.")
                    + _look_added(c.get("look_added")), ""]
            if c["pairs"]:
                out += _shown_pairs(c["pairs"]) + [""]
    return out[:-1] if out and out[-1] == "" else out


# --- gpu_bench: a table per stage, one row a precision or a batch size -----------------------

def _precision_rows(st: dict) -> List[List[str]]:
    rows = []
    for p in ("fp32", "tf32", "bf16", "fp16"):
        v = st.get(p)
        if not isinstance(v, dict) or "best" not in v:
            continue
        best = v[v["best"]]
        diffs = [x.get("max_diff_vs_first_nats") for x in v.values()
                 if isinstance(x, dict) and x.get("max_diff_vs_first_nats") is not None]
        rows.append([p, f"`{v['best']}`", cell(v["best_per_s"]), cell(best["tflop_per_s"]),
                     cell(v.get("peak_tflop_per_s")), cell(v.get("share_of_peak")),
                     cell(st.get(f"speedup_{p}_vs_fp32", 1.0 if p == "fp32" else None)),
                     cell(max(diffs) if diffs and p != "fp32" else None)])
    return rows


def gpu_tables(results: dict) -> List[str]:
    out = [f"Device `{results.get('device')}` ({results.get('gpu', 'no GPU')}), torch "
           f"{results.get('torch')}; model weights: {results.get('weights')}.", ""]
    stages = results.get("stages") or {}
    for name in ("scores", "priors"):
        st = stages.get(name)
        if not st or "error" in st:
            continue
        out += [f"`{name}`: {cell(st.get('items'))} pairs, {cell(st.get('gflop_per_item'))} "
                "GFLOP each; the fastest batch shape of each arithmetic:", ""]
        out += table(["precision", "shape", "pairs/s", "TFLOP/s", "peak TFLOP/s",
                      "share of peak", "speed-up vs fp32", "max \\|Δ\\| vs fp32 (nats)"],
                     _precision_rows(st))
        cpu = st.get("cpu_one_thread") or {}
        out += ["", f"One CPU core: {cell(cpu.get('per_s'))} pairs/s (max \\|Δ\\| vs the "
                f"device's fp32 {cell(cpu.get('max_diff_vs_gpu_fp32_nats'))} nats); the device "
                f"in fp32 = {cell(st.get('cores_per_gpu_fp32'))} cores.", ""]
    tr = stages.get("trie")
    if tr and "error" not in tr:
        rows = [["fp32", k[len("batch_"):], cell(v["sent_per_s"]), "1", "–"]
                for k, v in tr.items() if k.startswith("batch_")]
        for p in ("bf16", "fp16"):
            for k, v in (tr.get(p) or {}).items():
                if k.startswith("batch_"):
                    rows.append([p, k[len("batch_"):], cell(v["sent_per_s"]),
                                 cell(tr[p].get("speedup_vs_fp32")),
                                 cell(v.get("rows_kept_from_fp32"))])
        cpu = tr.get("cpu_one_thread") or {}
        out += [f"`trie`: the paper's search (beam {tr.get('beam')}) of {tr.get('sources')} "
                f"sources against {tr.get('targets')} targets:", ""]
        out += table(["precision", "batch", "sources/s", "speed-up vs fp32",
                      "rows kept from fp32"], rows)
        out += ["", f"One CPU core: {cell(cpu.get('sent_per_s'))} sources/s, rows identical to "
                f"the device's: {cell(cpu.get('rows_identical_to_gpu'))}.", ""]
    kn = stages.get("knn")
    if kn and "error" not in kn:
        out += [f"`knn`: {cell(kn.get('queries'))} queries x {cell(kn.get('rows'))} rows x "
                f"{kn.get('dim')} dims, top {kn.get('k')}: fp32 {cell(kn['fp32']['s'])} s, "
                f"fp16 {cell((kn.get('fp16') or {}).get('s'))} s (top-1 as fp32's: "
                f"{cell((kn.get('fp16') or {}).get('top1_same_as_fp32'))}); the device in fp32 = "
                f"{cell(kn.get('cores_per_gpu_fp32'))} cores, in fp16 = "
                f"{cell(kn.get('cores_per_gpu_fp16'))}.", ""]
    rest = {k: v for k, v in stages.items() if k not in ("scores", "priors", "trie", "knn")}
    if rest:
        out += generic_tables({"stages": rest})
    return out


def mined_calibration_table(mined: dict) -> List[str]:
    """clean_bench's ``mined`` part: the mining calibration on the default job's candidates."""
    rows = []
    for name in ("sample", "transfer"):
        m = mined.get(name)
        if m:
            rows.append([name + (" (fitting set)" if name == "sample" else " (held out)"),
                         cell(m["candidates"]), cell(m["positives"]), cell(m["ece"]),
                         cell(m["f1_tuned_same_gold"]["F1"]), cell(m["f1_shipped"]["F1"]),
                         cell(m["f1_prob_0_5"]["F1"]), cell(m["f1_gap_prob_0_5_vs_tuned"])])
    return ["The `mined` calibration on the default job's candidates (a candidate positive when "
            "gold; F1 one-to-one):", ""] + table(
        ["set", "candidates", "gold among them", "ECE of `prob`", "F1 tuned (same gold)",
         "F1 shipped threshold", "F1 at prob >= 0.5", "gap to tuned"], rows)


RENDERERS = {"bucc_bench": bucc_tables, "seeds_bench": seeds_tables,
             "clean_bench": clean_tables, "gpu_bench": gpu_tables,
             "density_bench": density_tables}
# benchmarks whose runs may record some parts only: the latest record of each part is shown
# (a dotted path into the record's results)
PARTS = {"clean_bench": ("noisy", "unrelated", "mined"),
         "seeds_bench": ("paper", "partial.features", "partial.birnn", "partial.ae_mlp",
                         "partial.dual_enc"),
         "gpu_bench": ("stages.scores", "stages.priors", "stages.trie", "stages.knn",
                       "stages.profile")}


# benchmarks whose records each measure one of several things, named by keys of the results (a
# key absent or false in a record: the same thing): the latest record of each is shown
CPU_UNIT = "cpu_unit"  # a GROUP_BY key read from the record's machine (:func:`unit_of`)
GROUP_BY = {"density_bench": ("config", "second_look"),
            "precision_bench": ("mode", "precision", CPU_UNIT)}


def unit_of(machine) -> str:
    """The bf16 matrix units a record's ``machine`` lists (``amx_bf16 and avx512_bf16``, ``no
    bf16 matrix unit``), or ``""`` for a record without CPU flags."""
    flags = (machine.get("cpu_flags") if isinstance(machine, dict) else None) or {}
    units = [f for f in ("amx_bf16", "avx512_bf16") if flags.get(f)]
    return "" if not flags else (" and ".join(units) if units else "no bf16 matrix unit")


def group_of(rec: dict, keys) -> tuple:
    """What a record of a :data:`GROUP_BY` benchmark measures: its results' values of
    ``keys`` (:data:`CPU_UNIT`: its machine's :func:`unit_of`), a value absent or false read as
    ``None``."""
    return tuple((unit_of(rec.get("machine")) if k == CPU_UNIT else rec["results"].get(k))
                 or None for k in keys)


def without(results: dict, parts) -> dict:
    """A copy of ``results`` without the dotted paths ``parts`` (the others shared)."""
    out = dict(results)
    for part in parts:
        *head, last = part.split(".")
        node = out
        for key in head:
            if not isinstance(node.get(key), dict):
                break
            node[key] = dict(node[key])
            node = node[key]
        else:
            node.pop(last, None)
    return out


def has_part(results: dict, part: str) -> bool:
    """Whether the dotted path ``part`` names a key of ``results``."""
    node = results
    for key in part.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


# --- what is said under a table --------------------------------------------------------------

def commit_of(rec: dict) -> str:
    c = rec.get("commit")
    if not c:
        return "commit unknown (not a git checkout)"
    return f"commit `{c[:10]}`" + (" (dirty)" if rec.get("dirty") else "")


def machine_of(rec: dict) -> str:
    m = rec["machine"]
    if not isinstance(m, dict):
        return cell(m)
    gpus = ", ".join(m.get("gpus") or []) or "no GPU"
    load = m.get("loadavg_start")
    load = f"; load {load[0]:.1f} at start" if load else ""
    unit = f" ({unit_of(m)})" if unit_of(m) else ""
    return f"{m.get('cpu')}{unit}, {m.get('cores')} cores, {gpus}{load}"


def threads_of(rec: dict) -> str:
    t = rec["threads"]
    if not isinstance(t, dict):
        return cell(t)
    return f"OMP_NUM_THREADS={t.get('OMP_NUM_THREADS') or 'unset'}, torch {cell(t.get('torch'))}"


def provenance(rec: dict) -> List[str]:
    mem = rec.get("peak_rss_mb") or {}
    peak = max((v for k, v in mem.items() if isinstance(v, (int, float))), default=None)
    lines = [f"- command: `{' '.join(rec.get('command') or [])}`",
             f"- machine: {machine_of(rec)}",
             f"- threads: {threads_of(rec)}",
             f"- date: {str(rec['date'])[:10]}, {commit_of(rec)}"]
    if "wall_s" in rec:
        lines.append(f"- wall time {duration(rec['wall_s'])}"
                     + (f", peak memory {peak:.0f} MiB" if peak is not None else ""))
    return lines


def render_results(records: Dict[str, List[dict]]) -> str:
    out = ["# Benchmark results", "",
           "Generated by `scripts/results_table.py` from the records in `bench/results/` "
           "(`bench/<name>.py --record` appends one); do not edit by hand. Each benchmark: its "
           "latest full-mode record and its latest `--quick` record.", ""]
    out += [f"- [{b}](#{b})" for b in records] + [""]
    for bench, recs in records.items():
        out += [f"## {bench}", ""]
        for quick, title in ((False, "Full run"), (True, "Quick run (`--quick`)")):
            parts = PARTS.get(bench, (None,))  # a bench whose runs may record parts apart
            owner = {p: latest([x for x in recs if p is None or has_part(x["results"], p)],
                               quick) for p in parts}
            if bench in GROUP_BY:
                keys = GROUP_BY[bench]
                owner = {("group", v): latest(
                    [x for x in recs if group_of(x, keys) == v], quick)
                    for v in dict.fromkeys(group_of(x, keys) for x in recs)}
            shown = {id(r) for r in owner.values() if r}
            out += [f"### {title}", ""]
            if not shown:
                out += ["No record yet.", ""]
            for rec in [r for r in recs if id(r) in shown]:
                # a part a later record holds too is shown from that one only
                res = without(rec["results"], [p for p, r in owner.items()
                                               if isinstance(p, str) and r is not rec])
                out += RENDERERS.get(bench, generic_tables)(res) + [""]
                out += provenance(rec) + [""]
    return "\n".join(out).rstrip("\n") + "\n"


# --- the README's table ----------------------------------------------------------------------

def setup_of(rec: dict) -> str:
    """The setup a README row was measured on, with nothing that names one machine or one run
    (no paths, load figures, dates or commits: those stay in ``docs/results.md``)."""
    m = rec["machine"] if isinstance(rec.get("machine"), dict) else {}
    gpus = ", ".join(m.get("gpus") or []) or "no GPU"
    unit = f" ({unit_of(m)})" if unit_of(m) else ""
    return (f"{m.get('cpu', 'CPU unknown')}{unit}, {m.get('cores', '?')} cores, {gpus}; "
            f"Python {m.get('python', '?')}, torch {m.get('torch', '?')}")


DENSITY_MIX = "comparable_1pct"


def density_cell(records: Dict[str, List[dict]], name: str) -> str:
    """Precision / recall of bucc_bench configuration ``name`` (``judge``, ``combined+look``,
    ...) on density_bench's comparable 1 % mix at its shipped cut, from the latest full record
    of that configuration with the second look on or off as the name says; ``–`` when none."""
    config, look = name.split("+look")[0], name.endswith("+look")
    for rec in reversed(records.get("density_bench", [])):
        res = rec["results"]
        shipped = ((res.get("mixes") or {}).get(DENSITY_MIX) or {}).get("shipped") or {}
        if (not rec["quick"] and res.get("config") == config
                and bool(res.get("second_look")) == look and "P" in shipped):
            return f"{shipped['P']:.3f} / {shipped['R']:.3f}"
    return "–"


def cut_kind(name: str, res: dict) -> str:
    """``tuned`` when configuration ``name``'s shipped cut (``judge+look``: ``judge``'s) was
    tuned on the BUCC sample's gold (its record's thresholds say ``tuned-on:``), ``transfer``
    when it was chosen without it; a bench variant that is no configuration: ``transfer`` when
    its record has a shipped-cut figure of its own, else ``tuned`` (its threshold is the
    sample's best)."""
    base = name.split("+")[0]
    if base in NAMES:
        source = configuration_cut(base).source
        return "tuned" if source.startswith("tuned-on:") else "transfer"
    return "transfer" if "sample_shipped" in res else "tuned"


def render_readme_block(records: Dict[str, List[dict]]) -> str:
    """The README's table in CTranslate2's style: the setup said once above the table (or once
    per distinct setup, marked on its rows), threads per row; the commands, dates, commits and
    machine loads of the records stay in ``docs/results.md``."""
    full = [r for r in records.get("bucc_bench", []) if not r["quick"]]
    rows, setups = [], []
    found = set()
    for r in full:
        found |= set(r["results"].get("configs") or {})
    for name in ordered_configs(found):
        holding = [r for r in full if name in (r["results"].get("configs") or {})]
        rec = holding[-1]
        res = rec["results"]["configs"][name]
        mined = [r for r in holding if not r["results"]["configs"][name].get("resumed")]
        wall = duration(mined[-1]["results"]["configs"][name].get("seconds_sample")) if mined \
            else "– (resumed)"
        timed = mined[-1] if mined else rec
        for r in (rec, timed):
            if setup_of(r) not in setups:
                setups.append(setup_of(r))
        # at the shipped cut: a configuration without *_shipped keys ships the threshold tuned
        # on the whole sample, so its tuned sample F1 and its transfer F1 are those at its cut;
        # the sample's figure is marked tuned or transfer by where that cut came from
        rows.append([CONFIG_LABELS.get(name, name), f1(res, "sample_tuned"),
                     f1(res, "sample_heldout"),
                     f1(res, "sample_shipped" if "sample_shipped" in res else "sample_tuned")
                     + f" ({cut_kind(name, res)})",
                     f1(res, "transfer_shipped" if "transfer_shipped" in res else "transfer"),
                     density_cell(records, name), res.get("precision", "fp32"), wall,
                     cell((timed["threads"] or {}).get("torch")
                          if isinstance(timed["threads"], dict) else timed["threads"]),
                     setup_of(timed)])
    if not rows:
        return "No full-mode record of `bench/bucc_bench.py` yet.\n"
    marks = {s: "" if len(setups) == 1 else f" ({chr(ord('a') + i)})" for i, s in enumerate(setups)}
    out = [f"Setup{marks[s]}: {s}." for s in setups] + [""]
    out += table(["configuration", "BUCC sample F1 (tuned)", "sample F1 (2-fold held-out)",
                  "sample F1 (shipped cut)", "transfer set F1 (shipped cut)",
                  "P / R, 1 % density, comparable news", "arithmetic", "wall time, sample",
                  "threads"],
                 [r[:-2] + [r[-2] + marks[r[-1]]] for r in rows])
    out += ["", "From the full-mode records of `bench/bucc_bench.py` and, for the 1 % column, "
                "`bench/density_bench.py`; their commands, dates and commits: "
                "[docs/results.md](docs/results.md#bucc_bench)."]
    return "\n".join(out) + "\n"


def splice(readme: str, block: str) -> Optional[str]:
    """``readme`` with ``block`` between the markers; ``None`` when it lacks them."""
    if BEGIN not in readme or END not in readme or readme.index(BEGIN) > readme.index(END):
        return None
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}{END}{tail}"


def diff(path: Path, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"{path} (committed)", f"{path} (from the records)"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help="write docs/results.md and README.md's block")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 with a diff when either is stale")
    ap.add_argument("--results", default=str(REPO / "bench" / "results"), help="records folder")
    ap.add_argument("--docs", default=str(REPO / "docs" / "results.md"), help="the page to render")
    ap.add_argument("--readme", default=str(REPO / "README.md"), help="README holding the markers")
    args = ap.parse_args(argv)
    try:
        records = load_records(Path(args.results))
    except (RecordError, OSError, UnicodeDecodeError) as exc:
        print(f"results_table: {exc}", file=sys.stderr)
        return 2
    page = render_results(records)
    if not (args.write or args.check):
        sys.stdout.write(page)
        return 0
    docs, readme = Path(args.docs), Path(args.readme)
    old_readme = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    new_readme = splice(old_readme, render_readme_block(records))
    problems = []
    if new_readme is None:
        problems.append(f"{readme}: no {BEGIN} ... {END} markers for the results table")
    if args.write:
        atomic_write(docs, page.encode("utf-8"), "results page")
        if new_readme is not None and new_readme != old_readme:
            atomic_write(readme, new_readme.encode("utf-8"), "README")
    else:
        old_page = docs.read_text(encoding="utf-8") if docs.is_file() else ""
        if old_page != page:
            problems.append(f"{docs} is not what the records give "
                            "(scripts/results_table.py --write):\n" + diff(docs, old_page, page))
        if new_readme is not None and new_readme != old_readme:
            problems.append(f"{readme}'s results table is not what the records give "
                            "(scripts/results_table.py --write):\n"
                            + diff(readme, old_readme, new_readme))
    for p in problems:
        print(f"results_table: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
