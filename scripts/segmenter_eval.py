#!/usr/bin/env python
"""Full numbers for the recovered target segmenter of the shared OPUS-MT zh-en model.

1. Recover ``target.spm`` (default estimation data, see triemine.models.segmenter) and a
   rank-prior-only variant; evaluate both and the longest-match baseline on the first 1000 BUCC zh
   sentences (greedy outputs of the CTranslate2 model).
2. Retrieval of known parallel pairs: for held-out ``parallel/zh-en`` pairs (lines not used for
   estimation) the true English target is segmented by every candidate segmenter; CTranslate2
   forced decoding scores each candidate segmentation given the Chinese source.  A trie built with
   a segmenter holds the target "reachably" when it contains the segmentation the model itself
   scores best (the path a constrained beam search follows); we also report the mean log-prob
   lost by the best path the trie does hold, and node counts of tries over the targets plus
   distractor lines for longest match, 1-best and n-best (k=2, 4).

Prints one JSON object as its last line.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--eval-sentences", type=int, default=1000)
    ap.add_argument("--pairs", type=int, default=300, help="held-out parallel pairs to retrieve")
    ap.add_argument("--distractors", type=int, default=2000, help="extra target lines in tries")
    ap.add_argument("--out", default=None, help="where to write target.spm (default: cache)")
    args = ap.parse_args(argv)

    import ctranslate2
    import sentencepiece as spm
    from tqdm import tqdm

    from triemine.models import segmenter as S
    from triemine.paths import OPUS_MT_ZH_EN_CT2, PARALLEL_ZH_EN, cache_root, shared_path
    from triemine.trie import Trie

    ct2 = shared_path(*OPUS_MT_ZH_EN_CT2)
    out = args.out or str(cache_root() / "segmenter" / "target.spm")
    t0 = time.time()
    S.recover_target_spm(ct2, out)
    recover_s = time.time() - t0
    prior = str(cache_root() / "segmenter" / "target-prior-only.spm")
    S.recover_target_spm(ct2, prior, estimation_sources=[], progress=False)
    evals = S.default_evaluation_sentences(args.eval_sentences)
    result = {"recover_seconds": round(recover_s, 1),
              "recovered": S.evaluate_segmenter(ct2, out, evals, nbest=4),
              "prior_only": S.evaluate_segmenter(ct2, prior, evals, nbest=4, progress=False)}

    # --- retrieval of known parallel pairs -----------------------------------------------------
    zh = shared_path(*PARALLEL_ZH_EN, "train.zh").read_text(encoding="utf-8").splitlines()
    en = shared_path(*PARALLEL_ZH_EN, "train.en").read_text(encoding="utf-8").splitlines()
    start = 20000  # estimation uses the first 1500 lines
    pairs = [(z.strip(), e.strip()) for z, e in zip(zh[start:], en[start:])
             if z.strip() and e.strip()][:args.pairs]
    distract = [e.strip() for e in en[15000:15000 + args.distractors] if e.strip()]
    sp = spm.SentencePieceProcessor(model_file=out)
    src_sp = spm.SentencePieceProcessor(model_file=str(S.find_source_spm(ct2)))
    vocab = S.read_target_vocabulary(ct2)
    vid = {p: i + 4 for i, p in enumerate(vocab)}  # any injective id map; 2 = EOS in the trie
    lm = S.LongestMatch(vocab)

    def ids(seg):
        return [vid.get(p, 3) for p in seg] + [2]

    def segs(name, text):
        if name == "longest_match":
            return [lm.encode(text)]
        k = {"1best": 1, "nbest2": 2, "nbest4": 4}[name]
        return S.nbest_segmentations(sp, text, k)

    names = ["longest_match", "1best", "nbest2", "nbest4"]
    translator = ctranslate2.Translator(str(ct2), device="cpu", compute_type="int8",
                                        intra_threads=1)
    reach = {n: 0 for n in names}
    loss = {n: [] for n in names}
    for z, e in tqdm(pairs, desc="forced decoding"):
        cands = {tuple(s) for n in names for s in segs(n, e)}
        cands = [list(c) for c in cands]
        src = src_sp.encode(z, out_type=str)
        res = translator.score_batch([src] * len(cands), cands, max_batch_size=16)
        score = {tuple(c): float(np.sum(r.log_probs)) for c, r in zip(cands, res)}
        best = max(score.values())
        for n in names:
            mine = [score[tuple(s)] for s in segs(n, e)]
            reach[n] += max(mine) >= best - 1e-6
            loss[n].append(best - max(mine))
    tries = {}
    lines = [e for _, e in pairs] + distract
    for n in names:
        seqs, lids = [], []
        for i, text in enumerate(lines):
            for s in segs(n, text):
                seqs.append(ids(s))
                lids.append(i)
        t = Trie.build(seqs, lids, eos=2)
        tries[n] = {"sequences": len(seqs), "nodes": int(t.n_nodes), "bytes": int(t.nbytes)}
    result["retrieval"] = {
        "pairs": len(pairs), "trie_lines": len(lines),
        "model_best_path_in_trie": {n: reach[n] / len(pairs) for n in names},
        "mean_logprob_lost": {n: float(np.mean(loss[n])) for n in names},
        "tries": tries,
    }
    result["machine"] = f"{platform.machine()} {os.cpu_count()}-core CPU, threads=1"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
