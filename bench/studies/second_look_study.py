"""Issue 59, step 1: which second generator finds the gold pairs the encoder's kNN misses.

For the sources a configuration leaves without a kept pair (its one-to-one selection and cut,
read from a mined TSV), each generator proposes targets over the whole target corpus; printed
per generator: gold pairs newly proposed (not among the TSV's candidates) and wall seconds.

    (a) trie: the trie-constrained search (pre-expansion, beam ``--beam``) over the target trie
    (b) mt_use: the model's translation embedded by the encoder, English-to-English top-k cosine
    (c) mt_tfidf: the same translation against the targets by TF-IDF (``translation_space``)

(b) and (c) share one translation pass (counted once, in ``translate_s``).  The last line is one
JSON object.  ``--limit N``: the first N unpaired sources only (a slice, to extrapolate).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from triemine.decoding.driver import mine_to_tsv
from triemine.decoding.model_spec import inline_model_pool
from triemine.decoding.settings import SearchSettings
from triemine.decoding.trie_cache import get_trie
from triemine.distributed.local import InlinePool
from triemine.embedding.embed_shards import embed_corpora
from triemine.filtering.rules import one_to_one
from triemine.io import open_corpus, read_mined
from triemine.mining.candidates import translation_space
from triemine.mining.stages import cache_dir
from triemine.mining.translate_shards import cached_translations
from triemine.models.model_dir import load_model_dir


def _gold(path):
    with open(path, encoding="utf-8") as f:
        return {tuple(line.split()[:2]) for line in f if line.strip()}


def _topk(q: np.ndarray, d: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the ``k`` largest dot products of each query (dense or sparse rows)."""
    sims = q @ d.T
    sims = sims.toarray() if hasattr(sims, "toarray") else np.asarray(sims)
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tsv", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--gold", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rank", default="combined")
    ap.add_argument("--cut", type=float, default=5.4016585)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--translate-beam", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma list of trie,mt")
    ap.add_argument("--work", default=None)
    ap.add_argument("--min-cos", type=float, default=None)
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    mined = read_mined(args.tsv)
    vals = mined.col(args.rank)
    kept = one_to_one(mined.src_ids, mined.tgt_ids, vals, True)
    kept = kept[vals[kept] >= args.cut]
    kept_src = {mined.src_ids[i] for i in kept}
    proposed = set(zip(mined.src_ids, mined.tgt_ids))
    gold = _gold(args.gold)
    src, tgt = open_corpus(args.source), open_corpus(args.target)
    unpaired = [i for i, s in enumerate(src.ids) if s not in kept_src]
    if args.limit:
        unpaired = unpaired[:args.limit]
    missed = {(s, t) for s, t in gold if (s, t) not in proposed}
    u_ids = {src.ids[i] for i in unpaired}
    reachable = {p for p in missed if p[0] in u_ids}
    out = {"tsv": args.tsv, "sources": len(src), "kept": len(kept), "unpaired": len(unpaired),
           "gold": len(gold), "gold_not_proposed": len(missed),
           "missed_in_unpaired": len(reachable),
           "candidate_recall": round(1 - len(missed) / len(gold), 4)}
    work = Path(args.work or tempfile.mkdtemp(prefix="second_look."))
    work.mkdir(parents=True, exist_ok=True)
    sub = work / "unpaired.src"
    with open(sub, "w", encoding="utf-8") as f:
        f.writelines(f"{src.ids[i]}\t{src.texts[i]}\n" for i in unpaired)
    model = load_model_dir(args.model)

    def gained(pairs):
        return sorted(p for p in pairs if p in reachable)

    if "mt" not in skip:
        t0 = time.perf_counter()
        hyps, _ = cached_translations(model, sub, cache_dir("translations"),
                                      inline_model_pool(model, "cpu"), beam=args.translate_beam)
        out["translate_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        space = translation_space(hyps, tgt.texts, k=4)
        idx = _topk(space.src_vecs, space.tgt_vecs, args.k)
        out["mt_tfidf_s"] = round(time.perf_counter() - t0, 1)
        g = gained({(src.ids[unpaired[r]], tgt.ids[j]) for r, row in enumerate(idx)
                    for j in row})
        out["mt_tfidf_gained"], out["mt_tfidf_pairs"] = len(g), len(idx) * args.k
        hyp_file = work / "hyps.en"
        with open(hyp_file, "w", encoding="utf-8") as f:
            f.writelines(f"h{i}\t{h}\n" for i, h in enumerate(hyps))
        t0 = time.perf_counter()
        (he,) = embed_corpora("use", [(hyp_file, len(hyps), work / "emb.hyp.npy")],
                              InlinePool())
        out["mt_use_embed_hyps_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        (te,) = embed_corpora("use", [(args.target, len(tgt), work / "emb.tgt.npy")],
                              InlinePool())
        out["embed_targets_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        idx = _topk(np.asarray(he), np.asarray(te), args.k)
        out["mt_use_knn_s"] = round(time.perf_counter() - t0, 1)
        g2 = gained({(src.ids[unpaired[r]], tgt.ids[j]) for r, row in enumerate(idx)
                     for j in row})
        out["mt_use_gained"] = len(g2)
        out["mt_union_gained"] = len(set(g) | set(g2))
        cos = np.take_along_axis(np.asarray(he) @ np.asarray(te).T, idx, axis=1)
        ok = {(src.ids[unpaired[r]], tgt.ids[j]): float(c) for r, row in enumerate(idx)
              for j, c in zip(row, cos[r])}
        out["mt_use_gained_cos"] = sorted(round(ok[p], 3) for p in g2)
        if args.min_cos is not None:
            out["mt_use_pairs_over_cut"] = sum(c >= args.min_cos for c in ok.values())
            out["mt_use_gained_over_cut"] = sum(ok[p] >= args.min_cos for p in g2)
    if "trie" not in skip:
        t0 = time.perf_counter()
        trie = get_trie(model, args.target)
        out["trie_build_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        tsv = work / "trie.tsv"
        mine_to_tsv(model, sub, args.target, tsv, search=SearchSettings(beam=args.beam),
                    trie=trie)
        out["trie_s"] = round(time.perf_counter() - t0, 1)
        rows = read_mined(str(tsv)) if os.path.getsize(tsv) else None
        pairs = set(zip(rows.src_ids, rows.tgt_ids)) if rows is not None else set()
        g3 = gained(pairs)
        out["trie_gained"], out["trie_pairs"] = len(g3), len(pairs)
        if "mt" not in skip:
            out["all_union_gained"] = len(set(g) | set(g2) | set(g3))
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
