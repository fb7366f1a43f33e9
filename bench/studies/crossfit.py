"""What the judge studies of issue 58 share: a training build's rows with their texts,
cross-fitting by source, and a judge's figures on a scored set of given noisy pairs (a TSV
``scripts/train_judge.py``'s ``scored_columns`` reads).

A training build is the folder ``scripts/train_judge.py`` writes (``mined.tsv``,
``refs.json``, ``set.json``, ``noise.tsv`` and ``noise.labels.npy``).  Cross-fitting draws each
mined source's fold (seeded; every candidate of a source in one fold) and fits on the other
folds' mined rows plus the noise rows whose Chinese is no held-out source's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

FOLDS = 5


@dataclass
class Rows:
    """A training build's rows: ``mined`` (its :class:`triemine.io.tsv.Mined`), the mined
    rows' columns ``cm`` and labels ``ym``; the scored noise rows' columns ``cn``, labels
    ``yn`` and texts ``nsrc`` / ``ntgt`` (object arrays)."""
    mined: object
    cm: dict
    ym: np.ndarray
    cn: dict
    yn: np.ndarray
    nsrc: np.ndarray
    ntgt: np.ndarray

    def fit(self, mask_m, mask_n, features: Sequence[str], weight: float = 1.0):
        """The shipped kind of judge fitted on the mined rows of ``mask_m`` and the noise rows
        of ``mask_n``, each noise row weighing ``weight``."""
        from triemine.judging.train import fit

        cols = {f: np.r_[self.cm[f][mask_m], self.cn[f][mask_n]] for f in features}
        y = np.r_[self.ym[mask_m], self.yn[mask_n]]
        w = np.r_[np.ones(int(np.sum(mask_m))), np.full(int(np.sum(mask_n)), weight)]
        return fit(cols, y, features, sample_weight=None if weight == 1 else w)

    def everything(self, features: Sequence[str], weight: float = 1.0, leave_out=()):
        """The judge of :meth:`fit` on every row but those whose Chinese is in ``leave_out``."""
        out = set(leave_out)
        return self.fit(np.array([s not in out for s in self.mined.src], dtype=bool),
                        np.array([s not in out for s in self.nsrc], dtype=bool),
                        features, weight)


def read_rows(work: Path, noise: Optional[Path] = None) -> Rows:
    """The rows of the build in ``work``, its noise rows read from ``noise`` (another build's
    folder holding only the noise kinds) when given."""
    import train_judge as tj

    from triemine.io import read_mined
    from triemine.judging.train import mined_columns

    mined = read_mined(work / "mined.tsv")
    ym = tj.label_of(mined.src_ids, mined.tgt,
                     json.loads((work / "refs.json").read_text(encoding="utf-8")))
    nwork = noise or work
    cn, src, tgt, ok = tj.scored_columns(nwork / "noise.tsv")
    yn = np.load(nwork / "noise.labels.npy")[ok]
    return Rows(mined, mined_columns(mined), ym, {c: v[ok] for c, v in cn.items()}, yn,
                np.array(src, dtype=object)[ok], np.array(tgt, dtype=object)[ok])


def source_folds(mined, seed: int) -> np.ndarray:
    """Each mined row's fold in ``range(FOLDS)``, drawn per source with ``seed``."""
    uniq, inv = np.unique(np.array(mined.src_ids), return_inverse=True)
    return np.random.default_rng(seed).integers(0, FOLDS, len(uniq))[inv]


def crossfit(rows: Rows, fold: np.ndarray, features: Sequence[str], weight: float = 1.0):
    """``(z, prior)``: the mined rows' out-of-fold log-odds, and the mean training share of
    the fold judges (module docstring)."""
    z, priors = np.zeros(len(rows.ym)), []
    src = np.asarray(rows.mined.src, dtype=object)
    for f in range(FOLDS):
        held = set(src[fold == f].tolist())
        judge = rows.fit(fold != f, np.array([s not in held for s in rows.nsrc], dtype=bool),
                         features, weight)
        z[fold == f] = judge.logit({c: v[fold == f] for c, v in rows.cm.items()})
        priors.append(judge.train_prior)
    return z, float(np.mean(priors))


def given_figures(judge, columns: dict, ns) -> dict:
    """``judge``'s figures on the noisy set ``ns`` (its kinds and labels) whose pairs'
    ``columns`` are given in order: ROC AUC of the clean pairs against all noise and against
    the partial, number and neighbour kinds (a pair not scored below every score), P / R / F1
    at ``prob >= 0.5`` with the share estimated as ``trie-mine-score`` does, and the expected
    calibration error."""
    import judge_kinds_study as jk

    from triemine.scoring.calibration import ece

    kinds, label = np.array(ns.kind), np.asarray(ns.label)
    z = judge.logit(columns)
    if len(z) != len(kinds):
        raise SystemExit(f"{len(z)} scored rows for a noisy set of {len(kinds)}")
    prob = judge.prob(z, "estimate")
    fin = np.isfinite(z)
    zf = np.where(fin, z, z[fin].min() - 1.0)
    clean = zf[kinds == "clean"]
    kept = fin & (prob >= 0.5)
    p, r, f1 = jk._prf(int((kept & (label == 1)).sum()), int(kept.sum()), int(label.sum()))
    return {"auc": {"all": jk._auc(clean, zf[kinds != "clean"]),
                    **{k: jk._auc(clean, zf[kinds == k]) for k in ("partial", "number",
                                                                  "neighbour")}},
            "P": round(p, 4), "R": round(r, 4), "F1": round(f1, 4),
            "ece": round(ece(prob[fin], label[fin]), 4)}
