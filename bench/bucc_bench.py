#!/usr/bin/env python3
"""BUCC zh-en mining benchmark: every configuration, tuned on the sample, transferred to unseen
data.

For each configuration, one run mines the BUCC 2018 zh-en **sample** and the zh-en **transfer set**
(``shared/data/devsets/zh-en``, BUCC layout, never tuned on) and prints, with the same evaluation
code as ``trie-mine-eval`` (strict P/R/F1):

* ``sample_tuned``: thresholds tuned on the sample's gold (optimistic, LASER style);
* ``sample_heldout``: 2-fold held-out on the sample (tuned on one half of the zh sentences,
  applied to the other, pooled); where a combination's weight was chosen on the sample (its
  ``choices``), each fold chooses it again on its training half (``evaluate_choosing``), so the
  choice never sees the half it is scored on;
* ``transfer``: the sample's thresholds applied unchanged to the transfer set;
* ``transfer_tuned``: tuned on the transfer set's own gold (optimistic; for reference only);
* ``seconds_per_source``: wall time of mining the sample divided by its sources (set-up such as
  the trie's node priors included; model loading excluded), with the threads it ran on.

Configurations (``--configs``):

* ``combined``: MT model + embedding candidates — multilingual USE ratio-margin neighbours, every
  pair scored exactly by the MT model, ``combined`` = fixed z-sum of features, one-to-one;
* ``mt-only``: no embedding model anywhere — the MT model's own translations matched by TF-IDF,
  every pair scored exactly, fixed combination, one-to-one;
* ``paper``: the paper's configuration — trie-constrained pre-expansion, beam 5, one target per
  source by ``ce_word``, CE threshold;
* ``use_margin``: USE v3 + LASER's ratio margin (k=4), fwd and bwd best, one-to-one;
* ``translate_chrf``: OPUS-MT translation (greedy, shared with ``mt-only``), the 4 best TF-IDF
  neighbours re-ranked by chrF, one-to-one;
* ``combined+look``, ``judge+look`` (``-look``; only when named): the configuration with its
  second look (:mod:`triemine.mining.second_look`) added (taken out), whatever its record
  lists.

Each mining configuration's record also holds ``candidate_recall`` (the gold pairs among the
candidates, per generator by the ``origin`` bits and in union, on both sets), ``stage_s`` (the
job's wall seconds per stage), and with the second look its counts and ``kept_by_generator``.

``--work DIR`` keeps the mined TSVs (and each job's ``.work`` stages) and resumes them, so a
rerun only evaluates; ``seconds_*`` then measure the resumed run, not the mining, and the
configuration's ``resumed`` is true.  A TSV that
other code or settings began (its resume key refuses it) is mined again from the start.

``--quick`` (< 1 min on an idle 2-core box after set-up): 16 gold + 16 other sources of each set
against their gold targets and 300 other target lines. Last line: one JSON object.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import benchlib  # noqa: E402
from benchlib import bucc_sets, machine, shared_model  # noqa: E402

import numpy as np  # noqa: E402

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.evaluation.pipeline import Direction, evaluate, evaluate_combination  # noqa: E402
from triemine.io.paths import cache_root  # noqa: E402
from triemine.io.tsv import Mined, read_mined  # noqa: E402

from triemine.config.configurations import NAMES, PAPER, configuration  # noqa: E402
from triemine.filtering.selection import SELECTION  # noqa: E402
from triemine.judging.shipped import configuration_cut  # noqa: E402
from triemine.mining.options import MineOptions  # noqa: E402

MINING = tuple(n for n in NAMES if n != PAPER)  # the mining job's configurations
# a mining configuration with the second look added (+look) or taken out (-look), whatever its
# record lists (triemine.mining.second_look)
LOOKS = tuple(f"{n}{s}" for n in ("combined", "judge") for s in ("+look", "-look"))
CONFIGS = MINING + (PAPER, "use_margin", "translate_chrf")  # the default list
# how each configuration's TSV is evaluated: (rule, rank_by, filter); the mining job's own
# configurations are selected as triemine.filtering.selection.SELECTION says
EVAL = dict(SELECTION, use_margin=("one-to-one", "use_margin", "use_margin"),
            translate_chrf=("one-to-one", "chrf", "chrf"))


def base_of(name: str) -> str:
    """The configuration a ``+look``/``-look`` variant is of (else ``name``)."""
    return name[:-5] if name in LOOKS else name


def run_config(name: str, model, gold: Path, work: Path) -> tuple:
    """Mine one set with configuration ``name``; returns (Mined rows, seconds, resumed, the
    job's summary or None), where ``resumed`` says that ``work`` already held this set's TSV or
    job stages (the seconds then measure a resumed run, not the mining)."""
    b = read_bucc(gold)
    src, tgt = Path(b.src.path), Path(b.tgt.path)
    out = work / f"{name}.{gold.stem}.tsv"
    resumed = out.exists() or Path(f"{out}.work").exists()
    summary = {}
    with benchlib.timer() as t:
        rows = _mine(name, model, b, src, tgt, out, work, summary)
    return rows, t.s, resumed, summary or None


def _mine(name, model, b, src, tgt, out, work, summary) -> Mined:
    if name == "paper":
        from triemine.decoding import SearchSettings, mine_to_tsv
        _resumed(lambda resume: mine_to_tsv(model, src, tgt, out, progress=True,
                                            search=SearchSettings(mode="pre", beam=5),
                                            resume=resume and out.exists()), out)
    elif base_of(name) in MINING:
        from triemine.mining.run import mine_pipeline
        from triemine.mining.second_look import second_look

        base = base_of(name)
        opts = MineOptions.of(base, second_look={"+look": True, "-look": False}.get(
            name[len(base):]))
        look = opts.look.second_look and "second_look" in configuration(base).stages
        summary.update(_resumed(lambda resume: mine_pipeline(
            model, src, tgt, out, opts, resume=resume, progress=True,
            after=second_look if look else None), out))
    elif name == "use_margin":
        return baseline_use(b, work)
    elif name == "translate_chrf":
        return baseline_chrf(b, model, work)
    return read_mined(out)


def _resumed(run, out: Path):
    """``run(resume=True)``: a TSV in ``--work`` goes on from where it stopped; one that other
    code or settings began (its key refuses it) is mined again from the start, with a note."""
    from triemine.errors import InputError

    try:
        return run(True)
    except InputError as exc:
        if "cannot resume" not in str(exc):
            raise
        print(f"bucc_bench: {out}: {exc}; mining it again from the start", file=sys.stderr)
        return run(False)


def _rows(b, s, t, numeric):
    return Mined.from_columns([b.src.ids[i] for i in s], [b.tgt.ids[i] for i in t],
                              [b.src.texts[i] for i in s], [b.tgt.texts[i] for i in t], numeric,
                              meta={"model": "opus-mt-zh-en", "mode": "baseline",
                                    "source": b.src.path, "target": b.tgt.path})


def baseline_use(b, work: Path) -> Mined:
    """USE v3 + ratio margin (k=4): each source's best target and each target's best source."""
    from triemine.embedding import get_encoder
    from triemine.mining.candidates import embedding_space

    enc = get_encoder("use")
    space = embedding_space(enc.encode(b.src.texts), enc.encode(b.tgt.texts), "use", 4)
    c = space.candidates(1, 1)
    return _rows(b, c.src, c.tgt, {"use_margin": c.columns["use_margin"]})


def baseline_chrf(b, model, work: Path) -> Mined:
    """Translate with the MT model, take each source's 4 nearest targets by TF-IDF of the
    translation, score them by chrF (sacrebleu) against the translation."""
    from sacrebleu.metrics import CHRF

    from triemine.decoding.model_spec import inline_model_pool
    from triemine.mining.translate_shards import cached_translations
    from triemine.mining.candidates import translation_space

    # the same (greedy) translations as the mt-only configuration, cached once for both
    hyps, _ = cached_translations(model, b.src.path, cache_root() / "translations",
                                  inline_model_pool(model),
                                  beam=MineOptions.of("mt-only").retrieval.translate_beam,
                                  progress=True)
    if len(hyps) != len(b.src.texts):
        raise RuntimeError(f"{b.src.path}: {len(hyps)} translations for {len(b.src.texts)} lines")
    space = translation_space(hyps, b.tgt.texts, 4)
    c = space.candidates(4, 0)
    chrf = CHRF()
    score = np.array([chrf.sentence_score(hyps[s], [b.tgt.texts[t]]).score
                      for s, t in zip(c.src.tolist(), c.tgt.tolist())])
    return _rows(b, c.src, c.tgt, {"chrf": score})


def candidate_recall(rows: Mined, gold: Path) -> dict:
    """The share of ``gold``'s pairs among the candidates ``rows``, by the generator that
    proposed them (the ``origin`` bits; a pair may count for several) and in union."""
    from triemine.mining.generators import REGISTRY

    pairs = read_bucc(gold).gold
    at = {p: i for i, p in enumerate(zip(rows.src_ids, rows.tgt_ids))}
    hit = np.array([at.get(p, -1) for p in pairs])
    out = {"union": round(float((hit >= 0).mean()), 4)}
    if "origin" in rows.columns:
        origin = rows.col("origin").astype(np.int64)
        for name, g in REGISTRY.items():
            found = (hit >= 0) & ((origin[np.maximum(hit, 0)] & g.bit) > 0)
            if found.any():
                out[name] = round(float(found.mean()), 4)
    return out


def evaluate_config(name, sample_rows, transfer_rows, sample_gold, transfer_gold) -> dict:
    name = base_of(name)
    rule, rank, filt = EVAL[name]
    sb, tb = read_bucc(sample_gold), read_bucc(transfer_gold)
    extra = {}
    # tuned scores and the threshold: the rows as mined (the shipped combination)
    tuned, figures = benchlib.tuned_and_transferred(
        {"sample": sample_rows, "transfer": transfer_rows},
        {"sample": sample_gold, "transfer": transfer_gold}, filt, rank, rule)
    if "combination" in sample_rows.meta and name in MINING:
        # held-out: the combination's chosen weight chosen again inside each training fold
        from triemine.judging.combination import Combination

        chosen = evaluate_combination(sample_rows, Combination(**sample_rows.meta["combination"]),
                                      sb, folds=2, rule=rule)
        if chosen.strict.f1 > tuned.strict.f1:
            print(f"WARNING: {name}: the sample now chooses {chosen.chosen} (tuned F1 "
                  f"{chosen.strict.f1:.4f} > {tuned.strict.f1:.4f} shipped): refit the combination "
                  "(scripts/fit_combination.py)", file=sys.stderr, flush=True)
        tuned.heldout_strict = chosen.heldout_strict
        figures["sample_heldout"] = chosen.heldout_strict.as_dict()
        extra = {"chosen": chosen.chosen, "fold_chosen": chosen.fold_chosen}
    shipped = configuration_cut(name).thresholds if name in MINING else None
    if shipped:  # the judge's own cut, tuned on no gold for judge (prob >= 0.5)
        for key, rows, gold in (("sample_shipped", sample_rows, sb),
                                ("transfer_shipped", transfer_rows, tb)):
            extra[key] = evaluate([Direction(rows)], gold, filt, rank,
                                  thresholds=shipped, rule=rule,
                                  thresholds_source=f"shipped:{name}").strict.as_dict()
    extra["candidate_recall"] = {key: candidate_recall(rows, gold) for key, rows, gold in (
        ("sample", sample_rows, sample_gold), ("transfer", transfer_rows, transfer_gold))}
    print(tuned.signature("heldout-strict", tuned.heldout_strict), flush=True)
    return {**figures, **extra}


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="small slices of both sets (< 1 min)", model=True)
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help=f"subset of {','.join(CONFIGS + LOOKS)}")
    ap.add_argument("--work", default=None, help="keep (and resume) the mined TSVs in this folder")
    args = ap.parse_args(argv)
    configs = ap.names(args.configs, CONFIGS + LOOKS, "configuration")
    run = benchlib.start("bucc_bench", args)
    model = shared_model(args.model, "bucc_bench")
    work = benchlib.work_dir(args.work, "bucc-bench-")
    golds = bucc_sets(work, args.quick)
    report = {"bench": "bucc_bench", "quick": bool(args.quick), "machine": machine(),
              "threads": benchlib.threads()["torch"], "date": time.strftime("%Y-%m-%d"),
              "sets": {k: str(v) for k, v in golds.items()}, "configs": {}}
    for name in configs:
        rows, secs, resumed, summaries = {}, {}, {}, {}
        for key, gold in golds.items():
            print(f"== {name} on {key}", file=sys.stderr, flush=True)
            rows[key], secs[key], resumed[key], summaries[key] = run_config(name, model, gold,
                                                                           work)
        res = evaluate_config(name, rows["sample"], rows["transfer"], golds["sample"],
                              golds["transfer"])
        n_src = len(read_bucc(golds["sample"]).src.ids)
        res["seconds_sample"] = round(secs["sample"], 1)
        res["seconds_transfer"] = round(secs["transfer"], 1)
        res["seconds_per_source"] = round(secs["sample"] / n_src, 4)
        res["resumed"] = any(resumed.values())
        if base_of(name) in MINING:  # the arithmetic its exact stage ran (--precision auto)
            res["precision"] = MineOptions.of(base_of(name)).precision
        for field in ("stage_s", "second_look", "kept_by_generator"):
            got = {k: v[field] for k, v in summaries.items() if v and field in v}
            if got:
                res[field] = got
        report["configs"][name] = res
        print(json.dumps({name: res}), file=sys.stderr, flush=True)
    c = report["configs"]
    f = lambda n, k: c[n][k]["F1"] if n in c else None  # noqa: E731
    report.update({
        "f1_heldout": f("combined", "sample_heldout"), "f1_transfer": f("combined", "transfer"),
        "f1_mt_only_heldout": f("mt-only", "sample_heldout"),
        "f1_mt_only_transfer": f("mt-only", "transfer"),
        "f1_paper_heldout": f("paper", "sample_heldout"),
                   "f1_paper_transfer": f("paper", "transfer"),
        "f1_use_margin": f("use_margin", "sample_tuned"),
        "f1_use_margin_transfer": f("use_margin", "transfer"),
        "f1_translate_chrf": f("translate_chrf", "sample_tuned"),
        "f1_translate_chrf_transfer": f("translate_chrf", "transfer"),
        "seconds_per_source": c["combined"]["seconds_per_source"] if "combined" in c else None,
    })
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
