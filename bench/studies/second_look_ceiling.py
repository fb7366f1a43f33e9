"""Issue 59: how far the second look's F1 gain can go, and whether a cheap signal picks the sources
worth translating.

Reads a finished ``judge+look`` job (``bench/bucc_bench.py --configs judge+look --work W``: the
TSV and its ``.work`` folder) on the transfer set:

* the pairs only the second look proposed (origin ``mt_knn`` alone), how many are gold, how
  many the judge keeps (one-to-one over every candidate, ``prob >= 0.5``) and how many of the
  kept are wrong;
* the cosine between the model's translation of the source and the target (the look's own
  search score), and a logistic regression of (judge log-odds, that cosine) fitted on those
  pairs' gold itself (optimistic: a ceiling): gold and wrong pairs at each rank;
* the ranks, among the unpaired sources, of the sources whose gold pair the look found, by their
  best encoder cosine to any target (lowest first): if they gathered at one end, translating
  only that end would be a cheaper look.

Needs no model; the last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from triemine.filtering.rules import one_to_one
from triemine.io import read_mined

LOOK_ONLY = 8  # origin of a pair only the second look proposed (generator mt_knn)


def _texts(path: Path) -> list:
    return [line.rstrip("\n").split("\t", 1)[1] for line in open(path, encoding="utf-8")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tsv", type=Path, required=True, help="judge+look's TSV of the transfer set")
    ap.add_argument("--gold", required=True)
    ap.add_argument("--zh", required=True)
    ap.add_argument("--en", required=True)
    args = ap.parse_args()
    work = Path(str(args.tsv) + ".work")
    mined = read_mined(args.tsv)
    gold = {tuple(line.split()) for line in open(args.gold, encoding="utf-8")}
    src, tgt = np.asarray(mined.src_ids), np.asarray(mined.tgt_ids)
    origin, prob = mined.col("origin").astype(int), mined.col("prob")
    is_gold = np.array([(s, t) in gold for s, t in zip(src, tgt)])
    kept = one_to_one(src, tgt, prob, True)
    kept = kept[prob[kept] >= 0.5]
    look_kept = kept[origin[kept] == LOOK_ONLY]

    hyp_emb = np.load(work / "look" / "emb.use.hyps.npy")
    tgt_emb = np.load(work / "emb.use.tgt.npy")
    src_emb = np.load(work / "emb.use.src.npy")
    look_src = [t for t in _texts(work / "look" / "mt_knn.sources")]
    hyp_of = {}
    for i, text in enumerate(look_src):
        hyp_of.setdefault(text, i)
    en_row = {line.split("\t", 1)[0]: i for i, line in enumerate(open(args.en, encoding="utf-8"))}
    rows = np.flatnonzero(origin == LOOK_ONLY)
    y = is_gold[rows]
    cos = np.array([float(hyp_emb[hyp_of[mined.src[i].replace("\t", " ")]]
                          @ tgt_emb[en_row[tgt[i]]]) for i in rows])
    p = np.clip(prob[rows], 1e-6, 1 - 1e-6)
    x = np.stack([np.log(p / (1 - p)), cos], axis=1)
    from sklearn.linear_model import LogisticRegression

    order = np.argsort(-LogisticRegression(C=10.0).fit(x, y).decision_function(x))
    ranked = [{"rank": k + 1, "gold": int(np.cumsum(y[order])[k]),
               "wrong": int(np.cumsum(~y[order])[k])} for k in range(min(30, len(order)))]

    zh_row = {}
    for i, line in enumerate(open(args.zh, encoding="utf-8")):
        zh_row.setdefault(line.rstrip("\n").split("\t", 1)[1].replace("\t", " "), i)
    unpaired = np.array([zh_row[t] for t in look_src])
    best_cos = (src_emb[unpaired] @ tgt_emb.T).max(axis=1)
    rank_of = {int(unpaired[j]): r for r, j in enumerate(np.argsort(best_cos))}
    found = sorted(rank_of[zh_row[mined.src[i].replace("\t", " ")]] for i in rows[y])
    report = {"look_only_pairs": len(rows), "look_only_gold": int(y.sum()),
              "judge_kept_look_only": len(look_kept),
              "judge_kept_look_only_gold": int(is_gold[look_kept].sum()),
              "gold_by_translation_cosine": {str(q): int((cos[y] >= q).sum())
                                             for q in (0.7, 0.8, 0.85, 0.9)},
              "wrong_by_translation_cosine": {str(q): int((cos[~y] >= q).sum())
                                              for q in (0.7, 0.8, 0.85, 0.9)},
              "ceiling_ranking": ranked, "unpaired_sources": len(unpaired),
              "found_gold_source_ranks_by_best_cosine": found}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
