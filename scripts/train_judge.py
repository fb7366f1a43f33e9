#!/usr/bin/env python3
"""Train the shipped judge (:mod:`triemine.judging`) for dilution, on the training split only.

Seeded and in two steps that resume (``--work``):

1. ``mine``: a diluted mining set built from ``devsets/zh-en/train`` and
   :func:`triemine.evaluation.splits.training_english` only (never the transfer set, the BUCC
   sample or :func:`~triemine.evaluation.splits.reserved_english`): ``--present`` training
   sources whose English is among the targets, ``--absent`` whose English is not, against that
   English, ``--comparable`` de-en news English lines (other translations of some of the same
   WMT stories) and the English of ``--others`` further training pairs; mined by the default
   job's candidates (configuration ``combined``: the USE encoder's kNN, the exact scores, with
   the coverage ``judge`` computes);
2. ``noise``: the synthetic noise kinds of given pairs made from ``--noise`` training pairs
   (:func:`score_noise`), scored by ``trie-mine-score``'s path;
3. ``fit``: each candidate labelled (positive when its English is its source's reference
   English, :func:`label_of`, near-duplicates included), the judge's text features added
   (:func:`triemine.judging.features.text_features`), the judge fitted and written (``--out``,
   default the shipped file): ``--kind blend`` (the default, the shipped kind) the mean of the
   two below, ``--kind trees`` a gradient-boosted forest
   (:func:`triemine.judging.train.fit_trees`: scikit-learn's
   ``HistGradientBoostingClassifier``, seeded, exported as flat arrays), ``--kind logistic``
   the logistic regression (:meth:`triemine.judging.model.Judge.fit`).

::

    python scripts/train_judge.py --work /tmp/judge            # both steps
    python scripts/train_judge.py --work /tmp/judge --step fit --out /tmp/judge/judge.json
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triemine.io import DEVSET_ZH_EN, shared_path  # noqa: E402
from triemine.judging.train import KINDS, SHIPPED_KIND  # noqa: E402

SEED = 58  # the draw of the training set (the forest's own seed is triemine.judging.train's)


def _lines(path) -> list:
    return Path(path).read_text(encoding="utf-8").splitlines()


def _norm(text: str) -> str:
    """A text reduced for near-duplicate matching: lower case, letters and digits only."""
    return re.sub(r"[\W_]+", "", text.lower())


def build_set(work: Path, present: int, absent: int, comparable: int, others: int,
              seed: int = SEED) -> dict:
    """Write ``work/train.{zh,en}`` (BUCC layout, ``id<TAB>text``) and ``work/refs.json``
    (``{zh id: reference English}`` of every source); returns the set's description."""
    from triemine.evaluation.splits import training_english

    zh, en = _lines(shared_path(*DEVSET_ZH_EN, "train.zh")), _lines(
        shared_path(*DEVSET_ZH_EN, "train.en"))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(zh))
    pres, absn = order[:present], order[present:present + absent]
    oth = order[present + absent:present + absent + others]
    src_idx = np.concatenate([pres, absn])
    pool = [t for _, t in training_english()]
    comp = [pool[i] for i in np.sort(rng.choice(len(pool), size=comparable, replace=False))]
    absent_norm = {_norm(en[i]) for i in absn.tolist()}
    targets, seen = [], set()
    for t in [en[i] for i in pres.tolist()] + [en[i] for i in oth.tolist()] + comp:
        t = t.strip()
        if t and t not in seen and _norm(t) not in absent_norm:  # absent stays absent
            seen.add(t)
            targets.append(t)
    targets = [targets[i] for i in rng.permutation(len(targets))]
    work.mkdir(parents=True, exist_ok=True)
    refs = {}
    with open(work / "train.zh", "w", encoding="utf-8") as f:
        for k, i in enumerate(src_idx.tolist()):
            f.write(f"zh-{k:06d}\t{zh[i].strip()}\n")
            refs[f"zh-{k:06d}"] = en[i].strip()
    with open(work / "train.en", "w", encoding="utf-8") as f:
        for k, t in enumerate(targets):
            f.write(f"en-{k:06d}\t{t}\n")
    (work / "refs.json").write_text(json.dumps(refs, ensure_ascii=False), encoding="utf-8")
    return {"sources": len(src_idx), "present": present, "absent": absent,
            "targets": len(targets), "comparable": comparable, "others": others, "seed": seed}


def label_of(src_ids, tgt_texts, refs: dict) -> np.ndarray:
    """1 where a candidate's English is its source's reference (equal after :func:`_norm`: a
    near-duplicate counts positive), else 0."""
    return np.array([int(_norm(t) == _norm(refs[s])) for s, t in zip(src_ids, tgt_texts)],
                    dtype=np.int64)


def mine_set(work: Path, model_arg) -> Path:
    """Mine ``work/train.zh`` against ``work/train.en`` with the default job's candidates
    (configuration ``combined`` with the exact pass's coverage on, as ``judge`` runs it;
    every candidate kept in ``work/mined.tsv``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import benchlib

    from triemine.mining.options import MineOptions
    from triemine.mining.run import mine_pipeline

    model = benchlib.shared_model(model_arg, "train_judge")
    out = work / "mined.tsv"
    mine_pipeline(model, work / "train.zh", work / "train.en", out,
                  MineOptions.of("combined", coverage=True), resume=True, progress=True)
    return out


def score_noise(work: Path, model_arg, n: int, seed: int) -> Path:
    """The synthetic noise kinds of given pairs (:func:`triemine.cleaning.noise.noisy_set`,
    built from ``n`` training pairs as ``scripts/fit_calibration.py pairs`` builds them)
    scored by ``trie-mine-score``'s path with the ``combined`` configuration (every feature,
    no judge); ``work/noise.tsv`` and ``work/noise.labels.npy``."""
    from scripts.fit_calibration import _model, training_noisy_set
    from triemine.cleaning import score

    ns = training_noisy_set(n, seed)
    score(list(zip(ns.src, ns.tgt)), model=model_arg or _model(), output=work / "noise.tsv",
          config="combined", progress=True, resume=True)
    np.save(work / "noise.labels.npy", np.asarray(ns.label, dtype=np.int64))
    return work / "noise.tsv"


def scored_columns(tsv: Path):
    """``(columns, src, tgt, scored)`` of a TSV of scored given pairs (``trie-mine-score``'s
    columns; one row a pair, in order): every numeric column (NaN where empty), the texts, and
    whether each row's ``status`` is ``scored``."""
    import csv

    with open(tsv, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    text = ("line", "id", "src", "tgt", "status")
    cols = {c: np.array([float(r[c] or "nan") for r in rows]) for c in rows[0] if c not in text}
    return (cols, [r["src"] for r in rows], [r["tgt"] for r in rows],
            np.array([r["status"] == "scored" for r in rows]))


def _noise_rows(work: Path):
    """``(columns, labels)`` of the scored noisy pairs (those scored), or None without them."""
    path = work / "noise.tsv"
    if not path.is_file():
        return None
    cols, _src, _tgt, ok = scored_columns(path)
    y = np.load(work / "noise.labels.npy")
    return {c: v[ok] for c, v in cols.items()}, y[ok]


def fit_set(work: Path, out: Path, c: float, kind: str = SHIPPED_KIND) -> dict:
    """Label ``work/mined.tsv``, add the scored noisy pairs when ``work`` has them, fit the
    judge of ``kind`` (:func:`triemine.judging.train.fit`; ``logistic``: L2 strength
    ``1 / c``) on both and write it to ``out``."""
    from triemine.io import read_mined
    mined = read_mined(work / "mined.tsv")
    refs = json.loads((work / "refs.json").read_text(encoding="utf-8"))
    y = label_of(mined.src_ids, mined.tgt, refs)
    desc = json.loads((work / "set.json").read_text(encoding="utf-8"))
    where = (f"{len(y)} candidates ({int(y.sum())} positive) of the default job on "
             f"{desc['sources']} devsets/zh-en/train sources ({desc['present']} with their "
             f"English present) against {desc['targets']} English lines (training_english() "
             f"and other training pairs' English), seed {desc['seed']}; "
             "scripts/train_judge.py")
    from triemine.judging.features import MINED_FEATURES
    from triemine.judging.train import fit, mined_columns

    cols = mined_columns(mined)
    noise = _noise_rows(work)
    if noise is not None:
        ncols, ny = noise
        cols = {f: np.concatenate([cols[f], ncols[f]]) for f in MINED_FEATURES}
        y = np.concatenate([y, ny])
        where += (f"; and {len(ny)} given pairs ({int(ny.sum())} clean) of the noise kinds of "
                  "triemine.cleaning.noise made from devsets/zh-en/train as "
                  "scripts/fit_calibration.py pairs builds them")
    judge = fit(cols, y, MINED_FEATURES, kind, where, c)
    judge.save(out)
    return {"candidates": len(y), "positives": int(y.sum()), "out": str(out), "kind": kind,
            "bytes": out.stat().st_size,
            "fingerprint": judge.fingerprint(), "train_prior": judge.train_prior}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--step", choices=("all", "mine", "noise", "fit"), default="all")
    ap.add_argument("--noise", type=int, default=400, help="clean pairs of the noisy set")
    ap.add_argument("--noise-seed", type=int, default=49)
    ap.add_argument("--present", type=int, default=3000)
    ap.add_argument("--absent", type=int, default=12000)
    ap.add_argument("--comparable", type=int, default=15000)
    ap.add_argument("--others", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--kind", choices=KINDS, default=SHIPPED_KIND)
    ap.add_argument("--c", type=float, default=1.0, help="inverse L2 strength (logistic)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.step in ("all", "mine"):
        if not (args.work / "set.json").is_file():
            desc = build_set(args.work, args.present, args.absent, args.comparable, args.others,
                             args.seed)
            (args.work / "set.json").write_text(json.dumps(desc), encoding="utf-8")
        mine_set(args.work, args.model)
    res = {"mine_s": round(time.perf_counter() - t0, 1)}
    if args.step in ("all", "noise"):
        score_noise(args.work, args.model, args.noise, args.noise_seed)
    if args.step in ("all", "fit"):
        from triemine.judging.model import SHIPPED

        res.update(fit_set(args.work, args.out or SHIPPED, args.c, args.kind))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
