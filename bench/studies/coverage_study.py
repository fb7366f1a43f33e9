"""Study: the share of source pieces the target leaves uncovered (cross-attention mass under
half a unit, :func:`triemine.scoring.forced.uncovered_share`) as a judge of given pairs, on
clean pairs of ``devsets/zh-en/train`` (a block in document order; training data, never the
transfer set) and noisy pairs made from them (:func:`triemine.cleaning.noise.noisy_set`): ROC AUC
of ``-uncovered`` per noise kind, its mean per kind, and the exact scores' CPU seconds with and
without the coverage (one thread).  Prints one JSON object.

    python bench/studies/coverage_study.py [N]     # N clean pairs (default 150)
"""
import json
import os
import sys
import time

import numpy as np
import torch

from triemine.cleaning.noise import noisy_set
from triemine.models.model_dir import load_model_dir
from triemine.io.paths import cache_root
from triemine.scoring.forced import ForcedScorer

KINDS = ("partial", "misaligned", "neighbour", "number")
START = 5000  # a block of the training split in document order


def _lines(*parts):
    path = os.path.join(os.environ.get("TRIEMINE_SHARED", "../shared"), "data", *parts)
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def auc(pos, neg) -> float:
    pos, neg = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def main() -> None:
    torch.set_num_threads(1)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    zh, en = _lines("devsets", "zh-en", "train.zh"), _lines("devsets", "zh-en", "train.en")
    de = _lines("parallel", "de-en", "train.de")[:2000]
    ns = noisy_set(zh[START:START + n], en[START:START + n], de, per_kind=n // 2, seed=7,
                   kinds=KINDS)
    model = load_model_dir(cache_root() / "models" / "opus-mt-zh-en")
    sc = ForcedScorer(model)
    src = [model.encode_source(x) for x in ns.src]
    tgt = [model.encode_target(x) for x in ns.tgt]
    idx = np.arange(len(src))
    t0 = time.process_time()
    plain = sc.score_pairs(src, tgt, idx, idx)
    t1 = time.process_time()
    totals, cov = sc.score_pairs(src, tgt, idx, idx, coverage=True)
    t2 = time.process_time()
    if not np.array_equal(plain, totals):
        raise SystemExit("coverage_study: the scores changed with coverage")
    kind = np.array(ns.kind)
    res = {"pairs": len(src), "cpu_s_plain": round(t1 - t0, 2),
           "cpu_s_coverage": round(t2 - t1, 2),
           "mean_uncovered_clean": round(float(cov[kind == "clean"].mean()), 4)}
    for k in KINDS:
        res[f"auc_{k}"] = round(auc(-cov[kind == "clean"], -cov[kind == k]), 4)
        res[f"mean_uncovered_{k}"] = round(float(cov[kind == k].mean()), 4)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
