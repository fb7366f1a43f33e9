#!/usr/bin/env python3
"""Issue 58: does the model's own translation of the source tell a same-story paraphrase
from a translation?

The judge reads how probable the candidate is under the model (forced decoding); a candidate
that swaps one word (鉛筆 -> "pen", 學校 -> "class") or drops a clause can still be probable
enough.  Here the candidate is compared with the model's free translation of its source
(CTranslate2 beam 4, as the job's translation retrieval): chrF (sacrebleu, the candidate as
hypothesis, the translation as reference; character 6-grams, recall weighted twice) and
the same with the roles swapped.

Step ``translate`` translates every distinct Chinese text of the training build (``--work``:
its candidates and noise rows), of ``--heldout`` (a noise scoring no arm trains on), of the
noisy transfer set (``--noisy``) and of the given TSVs into the JSON cache ``--cache``
(``{text: translation}``, written after every batch; a rerun translates what is missing).
Step ``eval`` compares judges of the shipped kind on the judge's features and on them plus
``mt_chrf`` (and ``mt_chrf_rev``), as ``noise_share_study`` compares its arms: the density
draws of the training build's mined candidates by 5-fold cross-fitting by source; the given
pairs of ``--heldout``; fitted on every row, the noisy transfer set and the ``--bucc`` /
``--density`` TSVs (transfer figures).  Step ``best`` stores the score of each text's best
translation instead (``--cache``: ``{text: CTranslate2's length-normalised
log-probability}``, beam 4; ``--part i/K`` takes the texts whose hash falls in part ``i`` of
``K``, for one process each); step ``forced`` the same from the exact pass's own fp32 model, the
cached translation (``--translations``) teacher-forced, its log-probability per token, EOS
included; and ``eval --best FILE...``
adds the arms ``mt_lp`` (that score: how sure the model is of any translation of the source)
and ``mt_gap`` (it plus the candidate's per-token log-probability ``-ce_token``: how far the
candidate falls short of the model's own best).  Step ``probe`` reads the pairs the shipped judge
keeps at ``prob >= 0.2`` on the density bench's comparable mixes (``--density``, counted as the
bench counts them) and gives the ROC AUC of gold against wrong pairs of the judge's ``prob``,
of ``mt_chrf`` / ``mt_chrf_rev`` and of Bicleaner's score (``make bicleaner``): can a second
opinion tell the judge's hard errors from its hard gold?  Last line: one JSON object.

    python bench/studies/mt_overlap_study.py translate --cache MT.json --work /tmp/big \\
        --heldout /tmp/h50 --noisy CLEAN_WORK/noisy.tsv TSV...
    python bench/studies/mt_overlap_study.py eval --cache MT.json --work /tmp/big \\
        --heldout /tmp/h50 --noisy CLEAN_WORK/noisy.tsv --bucc sample=TSV:GOLD \\
        --density DENSITY_WORK/judge
    python bench/studies/mt_overlap_study.py probe --cache MT.json --density DENSITY_WORK/judge
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "studies"),
                str(ROOT / "scripts")]

ARMS = {"shipped": (), "mt_chrf": ("mt_chrf",), "mt_chrf both": ("mt_chrf", "mt_chrf_rev")}
BEST_ARMS = {"mt_lp": ("mt_lp",), "mt_gap": ("mt_lp", "mt_gap")}


def _load(cache: Path) -> dict:
    return json.loads(cache.read_text(encoding="utf-8")) if cache.is_file() else {}


def _texts(args) -> set:
    """Every distinct Chinese text the step reads (module docstring)."""
    import crossfit as cf
    import train_judge as tj

    from triemine.io import read_mined

    texts = set()
    if args.work:
        rows = cf.read_rows(args.work)
        texts |= set(rows.mined.src) | set(rows.nsrc.tolist())
    for scored in (args.heldout and args.heldout / "noise.tsv", args.noisy):
        if scored:
            texts |= set(tj.scored_columns(scored)[1])
    for tsv in args.tsv:
        texts |= set(read_mined(tsv).src)
    return texts


def _batches(args, texts: set, run) -> int:
    """``run`` over the texts of ``texts`` the cache lacks, 256 at a time, the cache written
    after each batch."""
    done = _load(args.cache)
    todo = sorted(t for t in texts if t not in done)
    print(f"{len(texts)} texts, {len(todo)} to do", flush=True)
    for start in range(0, len(todo), 256):
        batch = todo[start:start + 256]
        done.update(zip(batch, run(batch)))
        tmp = args.cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(done, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, args.cache)
        print(f"{start + len(batch)} / {len(todo)}", flush=True)
    print(json.dumps({"texts": len(texts), "done": len(todo)}))
    return 0


def translate(args) -> int:
    import benchlib

    from triemine.mining.translate import make_translator

    tr = make_translator(benchlib.shared_model(None, "mt_overlap_study"), beam=4)
    return _batches(args, _texts(args), lambda b: [t.replace("\n", " ") for t in tr(b)])


def _part_texts(args) -> set:
    """The non-blank texts of :func:`_texts` whose hash falls in part ``i`` of ``K``
    (``--part i/K``)."""
    import hashlib

    i, k = map(int, args.part.split("/"))
    return {t for t in _texts(args) if t.strip()
            and int(hashlib.sha1(t.encode()).hexdigest()[:8], 16) % k == i}


def best(args) -> int:
    import benchlib
    import ctranslate2

    from triemine.mining.translate import ct2_origin

    model = benchlib.shared_model(None, "mt_overlap_study")
    tr = ctranslate2.Translator(str(ct2_origin(model)), device="cpu", compute_type="int8",
                                intra_threads=int(os.environ.get("OMP_NUM_THREADS") or 1))
    texts = _part_texts(args)

    def run(batch):
        res = tr.translate_batch([model.source_spm.encode(t, out_type=str) for t in batch],
                                 beam_size=4, max_batch_size=32, return_scores=True)
        return [float(r.scores[0]) for r in res]
    return _batches(args, texts, run)


def forced(args) -> int:
    """Step ``forced``: the exact pass's own score of each text's cached translation
    (``--translations``, step ``translate``'s cache): its total fp32 log-probability by teacher
    forcing over its tokens, EOS included, divided by their number, into ``--cache`` in step
    ``best``'s form (its ``--part``, its texts)."""
    import benchlib
    import torch

    from triemine.scoring.forced import ForcedScorer

    torch.set_num_threads(1)
    model = benchlib.shared_model(None, "mt_overlap_study")
    scorer, mt = ForcedScorer(model), _load(args.translations)
    texts = {t for t in _part_texts(args) if mt.get(t, "").strip()}

    def run(batch):
        tgt = [model.encode_target(mt[t]) for t in batch]
        idx = np.arange(len(batch))
        total = scorer.score_pairs([model.encode_source(t) for t in batch], tgt, idx, idx)
        return [float(v) / len(y) for v, y in zip(total, tgt)]
    return _batches(args, texts, run)


def mt_columns(src, tgt, mt: dict) -> dict:
    """``mt_chrf`` (chrF of each target against its source's translation, in [0, 1]) and
    ``mt_chrf_rev`` (the translation against the target); a ``KeyError`` for a source the
    cache lacks."""
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    fwd = [chrf.sentence_score(t, [mt[s]]).score / 100 for s, t in zip(src, tgt)]
    rev = [chrf.sentence_score(mt[s], [t]).score / 100 for s, t in zip(src, tgt)]
    return {"mt_chrf": np.array(fwd), "mt_chrf_rev": np.array(rev)}


def evaluate(args) -> int:
    import crossfit as cf
    import train_judge as tj
    import decoy_calibration as dc
    import judge_kinds_study as jk

    from triemine.judging.features import MINED_FEATURES
    from triemine.judging.train import mined_columns

    mt = _load(args.cache)
    lp = {}
    for path in args.best:
        lp.update(_load(path))
    arms = {**ARMS, **(BEST_ARMS if lp else {})}

    def extra(src, tgt, cols):
        out = mt_columns(src, tgt, mt)
        if lp:
            out["mt_lp"] = np.array([lp[s] for s in src])
            out["mt_gap"] = out["mt_lp"] + cols["ce_token"]
        return out
    rows = cf.read_rows(args.work)
    rows.cm.update(extra(rows.mined.src, rows.mined.tgt, rows.cm))
    rows.cn.update(extra(rows.nsrc, rows.ntgt, rows.cn))
    fold = cf.source_folds(rows.mined, args.seed)
    given = {}
    if args.heldout:
        from fit_calibration import training_noisy_set

        cols, src, tgt, _ = tj.scored_columns(args.heldout / "noise.tsv")
        hns = training_noisy_set(args.heldout_pairs, args.heldout_seed)
        given["heldout_noise"] = (hns, {**cols, **extra(src, tgt, cols)}, True)
    if args.noisy:
        import clean_bench as cb

        cols, src, tgt, _ = tj.scored_columns(args.noisy)
        given["transfer_noisy"] = (cb.transfer_noisy_set(1000), {**cols, **extra(
            src, tgt, cols)}, False)
    report = {"mined_rows": len(rows.ym), "mined_positives": int(rows.ym.sum())}
    judges = {}
    for arm, added in arms.items():
        feats = tuple(MINED_FEATURES) + added
        z, prior = cf.crossfit(rows, fold, feats)
        judges[arm] = rows.everything(feats)
        report[arm] = {"mined_auc": jk._auc(z[rows.ym == 1], z[rows.ym == 0]),
                       "draws": {d: v["0.5"] for d, v in
                                 jk.draws(z, rows.ym, rows.mined, prior, args.draws).items()}}
        for name, (ns, cols, held_out) in given.items():
            judge = rows.everything(feats, leave_out=ns.src) if held_out else judges[arm]
            report[arm][name] = cf.given_figures(judge, cols, ns)
        print(arm, json.dumps(report[arm]), flush=True)

    def columns(m):
        cols = mined_columns(m)
        return {**cols, **extra(m.src, m.tgt, cols)}

    report.update(dc.shipped_on_sets(judges, args.bucc, args.density, columns))
    print(json.dumps(report))
    return 0


def probe(args) -> int:
    import decoy_calibration as dc
    import density_bench as db
    import judge_kinds_study as jk

    from triemine.filtering.bicleaner import score_bicleaner
    from triemine.filtering.rules import one_to_one
    from triemine.io import read_mined
    from triemine.judging.model import load_judge
    from triemine.judging.train import mined_columns

    class Args:
        quick, unrelated_sources = False, 2700
    mt, judge, readings = _load(args.cache), load_judge(), db.load_readings()
    src, tgt, label, prob = [], [], [], []
    for _kind, mix in db.mixes(("comparable",), Args):
        m = read_mined(args.density / mix.name / "mined.tsv")
        p = dc.probs(judge, judge.logit(mined_columns(m)))
        sel = one_to_one(m.src_ids, m.tgt_ids, p, True)
        rows = sel[p[sel] >= 0.2]
        kinds = db.classify(mix, [m.src_ids[i] for i in rows], [m.tgt_ids[i] for i in rows],
                            [m.tgt[i] for i in rows], readings)
        for i, k in zip(rows, kinds):
            if k in ("gold", "wrong"):
                src.append(m.src[i]), tgt.append(m.tgt[i]), label.append(k == "gold")
                prob.append(p[i])
    label = np.array(label)
    scores = {"judge_prob": np.array(prob), **mt_columns(src, tgt, mt),
              "bicleaner": score_bicleaner(src, tgt, progress=False)}
    report = {"gold": int(label.sum()), "wrong": int((~label).sum()),
              "auc": {k: jk._auc(v[label], v[~label]) for k, v in scores.items()}}
    print(json.dumps(report))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    for name in ("translate", "best", "forced", "eval", "probe"):
        p = sub.add_parser(name)
        p.add_argument("--cache", type=Path, required=True)
        p.add_argument("--work", type=Path, required=name == "eval")
        if name == "probe":
            p.add_argument("--density", type=Path, required=True)
            continue
        p.add_argument("--heldout", type=Path)
        p.add_argument("--heldout-seed", type=int, default=50)
        p.add_argument("--heldout-pairs", type=int, default=400)
        p.add_argument("--noisy", type=Path)
        if name in ("translate", "best", "forced"):
            p.add_argument("tsv", nargs="*", type=Path)
            if name != "translate":
                p.add_argument("--part", default="0/1")
            if name == "forced":
                p.add_argument("--translations", type=Path, required=True,
                               help="step translate's cache")
        else:
            p.add_argument("--draws", type=int, default=100)
            p.add_argument("--seed", type=int, default=58)
            p.add_argument("--bucc", action="append", default=[], help="NAME=TSV:GOLD")
            p.add_argument("--density", type=Path)
            p.add_argument("--best", type=Path, nargs="*", default=[],
                           help="caches of step best (the mt_lp / mt_gap arms)")
    args = ap.parse_args()
    return {"translate": translate, "best": best, "forced": forced, "eval": evaluate,
            "probe": probe}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
