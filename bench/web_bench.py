#!/usr/bin/env python3
"""Web-like benchmark: the default mining job on a BUCC target side made to look like web crawl.

The BUCC zh-en sample's sources are mined against its English side made web-like
(:func:`web_side`, seeded): each line 1-3 times (a third of the extra copies with doubled or
trailing spaces, which the deduplication rule folds), then lines in other languages (German
from ``parallel/de-en/train.de``, Chinese from ``parallel/zh-en/train.zh``) to make 20 % of the
file and boilerplate (``Home``, ``Login``, ``Accept cookies``, ...) and markup-laden copies of
English lines to make 10 %, shuffled, numbered ``web-0000001``... and gzipped.

Runs, each the default job (``triemine.api.run`` with ``MineOptions.of("combined")``, the
shipped combination and threshold), on the gzipped file as it is (the job reads it through its
decompressed cache):

* ``clean``: the sample as it is (the default job: deduplicated, as every run but ``web``);
* ``web``: the web-like side with ``dedup=False``: every line mined;
* ``web_dedup``: the web-like side, the default job (each distinct text once);
* ``web_prepare``: the web-like side after ``trie-mine-prepare`` (:func:`triemine.prepare.prepare`,
  ``lang="en"``, boilerplate lines occurring more than :data:`BOILERPLATE_MAX` times dropped;
  its ``report`` kept), then the default job.

For each: ``candidates`` (the job's summary; the default job scores every candidate exactly, so
``exact_scored`` is the same number), ``priors`` (distinct target lines among the candidates:
the lines whose prior the job computes), ``stage_s`` (the summary's seconds per stage),
``wall_s``, and P/R/F1 of the shipped selection counting a pair right when its target is any
line whose normalised text (:func:`triemine.mining.dedup.normalise`) is the gold target's.
``ratios``: ``web_dedup`` and ``web_prepare`` over ``clean`` (the issue's goal: exact-scored
pairs and wall time within 1.2x, F1 >= 0.985).

Each run uses a fresh ``$TRIEMINE_CACHE`` under the work folder (the model is read from its
own folder), so no run reuses another's (or an earlier bench's) target priors.

``--quick`` (< 1 min on an idle 2-core box after set-up): 16 gold + 16 other sources against
their gold targets and 300 other English lines, made web-like.  Last line: one JSON object.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import benchlib  # noqa: E402
from benchlib import machine, shared_model  # noqa: E402

import numpy as np  # noqa: E402

SEED = 40
OTHER_SHARE, BOILER_SHARE = 0.2, 0.1
BOILERPLATE = ("Home", "Login", "Log in", "Sign up", "Accept cookies",
               "This site uses cookies. Accept cookies", "Privacy Policy", "Terms of Use",
               "Contact us", "About us", "Skip to main content", "Read more »", "Next »",
               "« Previous", "Share on Facebook", "Tweet", "© 2018 All rights reserved.",
               "Page 1 of 12", "Search", "Subscribe to our newsletter", "Menu", "Back to top")
MARKUP = ("<p>{}</p>", "<div class=\"post-body\">{}</div>", "{} | Home | Contact",
          "<a href=\"/news/2018/05/article.html\">{}</a>", "&nbsp;{}&nbsp;Read more »",
          "<li><span>{}</span></li>")
RUNS = ("clean", "web", "web_dedup", "web_prepare")
BOILERPLATE_MAX = 5  # a real line occurs at most 3 times in the web-like side
OTHER_LANGS = (("de", ("parallel", "de-en", "train.de")), ("zh", ("parallel", "zh-en", "train.zh")))


def web_side(ids, texts, seed: int = SEED):
    """``(lines, counts)``: the web-like ``id<TAB>text`` lines made from the corpus ``ids``/
    ``texts`` (module docstring) and how many lines of each kind it holds."""
    from triemine.io.corpus import sentences
    from triemine.io.paths import shared_path

    rng = np.random.default_rng(seed)
    en = [t for t in texts if t]
    copies = rng.integers(1, 4, size=len(en))
    lines = []
    for t, k in zip(en, copies.tolist()):
        lines.append(t)
        for _ in range(k - 1):
            v = rng.integers(0, 3)  # a third of the extra copies differ in spacing only
            lines.append(t if v else (t.replace(" ", "  ", 1) + " "))
    n_en = len(lines)
    total = int(round(n_en / (1 - OTHER_SHARE - BOILER_SHARE)))
    n_other, n_boiler = int(round(OTHER_SHARE * total)), int(round(BOILER_SHARE * total))
    other = []
    for j, (_lang, where) in enumerate(OTHER_LANGS):
        pool = sentences(shared_path("data", *where))
        want = n_other // len(OTHER_LANGS) + (j < n_other % len(OTHER_LANGS))
        other += [pool[i] for i in rng.choice(len(pool), size=min(want, len(pool)),
                                              replace=False).tolist()]
    boiler = [BOILERPLATE[i] for i in rng.integers(0, len(BOILERPLATE), n_boiler // 2).tolist()]
    boiler += [MARKUP[int(rng.integers(0, len(MARKUP)))].format(en[int(i)])
               for i in rng.integers(0, len(en), n_boiler - len(boiler)).tolist()]
    allx = lines + other + boiler
    order = rng.permutation(len(allx))
    out = [f"web-{k:07d}\t{allx[i]}" for k, i in enumerate(order.tolist(), 1)]
    return out, {"lines": len(out), "english": n_en, "english_distinct": len(en),
                 "other_language": len(other), "boilerplate_and_markup": len(boiler)}


def write_gz(lines, path: Path) -> Path:
    """``lines`` gzipped (mtime 0: the same bytes every time), atomically."""
    from triemine.io.outfile import atomic_write

    atomic_write(path, gzip.compress("".join(x + "\n" for x in lines).encode("utf-8"), mtime=0),
                 "web-like corpus")
    return path


def copies_of(tgt_path):
    """``{normalised text: set of ids}`` of a target corpus."""
    from triemine.io.corpus import read_corpus
    from triemine.mining.dedup import normalise

    c = read_corpus(tgt_path)
    groups: dict = {}
    for i, t in zip(c.ids, c.texts):
        if t:
            groups.setdefault(normalise(t), set()).add(i)
    return groups


def score_any_copy(mined, kept, gold, gold_texts, groups) -> dict:
    """P/R/F1 of the ``kept`` rows of ``mined``: a row is right when its source has a gold
    pair and its target id is one of the lines whose normalised text is the gold target's."""
    from triemine.mining.dedup import normalise

    ok = {s: groups.get(normalise(gold_texts[t]), set()) for s, t in gold}
    right = [i for i in kept.tolist() if mined.tgt_ids[i] in ok.get(mined.src_ids[i], ())]
    found = len({mined.src_ids[i] for i in right})
    p = len(right) / len(kept) if len(kept) else 0.0
    r = found / len(gold) if gold else 0.0
    return {"kept": int(len(kept)), "right": len(right), "P": round(p, 4), "R": round(r, 4),
            "F1": round(2 * p * r / (p + r), 4) if p + r else 0.0}


def run_one(name, job, src, tgt, work: Path, dedup: bool, gold, gold_texts) -> dict:
    """One run of the job ``job(src, tgt, out, dedup) -> summary``, measured and scored."""
    from triemine.filtering.selection import choose
    from triemine.io.tsv import read_mined

    out = work / f"{name}.tsv"
    cache = work / f"cache.{name}"
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["TRIEMINE_CACHE"] = str(cache)  # no priors from an earlier run
    print(f"== {name}", file=sys.stderr, flush=True)
    with benchlib.timer() as t:
        summary = job(str(src), str(tgt), str(out), dedup)
    m = read_mined(out)
    kept = choose(m).keep(m)
    res = {"wall_s": round(t.s, 1), "candidates": summary["candidates"],
           "exact_scored": summary["candidates"], "priors": len(set(m.tgt_ids)),
           "sources": summary["sources"], "targets": summary["targets"],
           "stage_s": {k: round(v, 1) for k, v in summary.get("stage_s", {}).items()},
           **score_any_copy(m, kept, gold, gold_texts, copies_of(tgt))}
    if dedup:
        res["dedup"] = summary["dedup"]
    print(json.dumps({name: res}), file=sys.stderr, flush=True)
    return res


def prepared(web: Path, work: Path) -> tuple:
    """``(the prepared side, its report)``: :func:`triemine.prepare.prepare` of ``web`` for
    English with the boilerplate filter, timed."""
    from triemine.prepare import prepare

    out = work / "web.prep.en.gz"
    with benchlib.timer() as t:
        rep = prepare(web, out, "en", boilerplate=BOILERPLATE_MAX)
    return out, {"wall_s": round(t.s, 1), "summary": rep["summary"],
                 "dropped": {k: v.get("dropped") if isinstance(v, dict) else v
                             for k, v in rep.get("filters", {}).items()}}


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="a slice of the sample (< 1 min)", model=True)
    ap.add_argument("--work", default=None, help="keep the corpora and mined TSVs in this folder")
    ap.add_argument("--seed", type=int, default=SEED, help="the web-like side's seed")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"subset of {','.join(RUNS)}")
    args = ap.parse_args(argv)
    runs = ap.names(args.runs, RUNS, "run")
    run = benchlib.start("web_bench", args)
    model = shared_model(args.model, "web_bench")
    import torch
    from triemine.api import MineOptions, run as run_job
    from triemine.evaluation.bucc import read_bucc

    def job(s, t, o, dedup):
        return run_job(MineOptions.of("combined", dedup=dedup), model, s, t, o).summary
    work = benchlib.work_dir(args.work, "web-bench-")
    b = read_bucc(benchlib.bucc_sets(work, args.quick, ("sample",))["sample"])
    src, clean = Path(b.src.path), Path(b.tgt.path)
    lines, counts = web_side(b.tgt.ids, b.tgt.texts, args.seed)
    web = write_gz(lines, work / "web.en.gz")
    gold_texts = dict(zip(b.tgt.ids, b.tgt.texts))
    report = {"bench": "web_bench", "quick": bool(args.quick), "machine": machine(),
              "threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d"),
              "seed": args.seed, "web_side": counts,
              "sources": len(b.src.ids), "gold": len(b.gold), "runs": {}}
    for name in runs:
        tgt = {"clean": clean, "web": web, "web_dedup": web}.get(name)
        if name == "web_prepare":
            tgt, report["prepare"] = prepared(web, work)
        report["runs"][name] = run_one(name, job, src, tgt, work, name != "web", b.gold,
                                       gold_texts)
        if name == "web_prepare":
            report["runs"][name]["wall_s"] += report["prepare"]["wall_s"]
    r = report["runs"]
    report["ratios"] = {
        name: {"exact_scored": round(r[name]["exact_scored"] / r["clean"]["exact_scored"], 3),
               "wall_s": round(r[name]["wall_s"] / r["clean"]["wall_s"], 3),
               "priors": round(r[name]["priors"] / r["clean"]["priors"], 3)}
        for name in ("web_dedup", "web_prepare") if "clean" in r and name in r}
    for name in r:
        report[f"f1_{name}"] = r[name]["F1"]
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
