"""Prior-corrected trie search: does ranking by log P(y|x) - lambda * log P(y|empty) find the
pairs that the plain search loses?

Pre-expansion at beam 5 over the gold sources of the BUCC zh-en sample against the trie of its
whole English side, with the trie's node priors (:mod:`triemine.scoring.prior`, computed once
and cached beside the trie) and ``prior_weight`` lambda in ``--weights`` (0 is the plain search).
For each lambda: ``recall_top1`` (the gold target is the source's best match: the recall ceiling
of best-per-source selection), ``recall_any`` (among all of its matches) and seconds per source.
``--quick``: 20 gold sources against a trie of their gold targets and the first 600 English
lines (node priors of that small trie only).  The last line printed is one JSON object.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import benchlib
from benchlib import machine, shared_model_dir


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="20 gold sources against 600 targets", model=True)
    ap.add_argument("--shared", default=os.environ.get("TRIEMINE_SHARED", "../shared"))
    ap.add_argument("--weights", default="0,0.5,1", help="prior weights lambda (0,0.5,1)")
    ap.add_argument("--beam", type=int, default=5)
    args = ap.parse_args(argv)
    run = benchlib.start("prior_bench", args)

    import torch

    from triemine.models.model_dir import load_model_dir
    from triemine.decoding.runner import mine_batches
    from triemine.decoding.settings import SearchSettings
    from triemine.decoding.trie_cache import get_trie
    from triemine.evaluation.bucc import read_bucc
    from triemine.scoring.prior import compute_node_priors, get_node_priors

    weights = [float(w) for w in args.weights.split(",")]
    model = load_model_dir(shared_model_dir(args.model, "prior_bench"))
    b = read_bucc(Path(args.shared) / "data/bucc2018/zh-en/zh-en.sample.gold")
    src_line = {i: n for n, i in enumerate(b.src.ids)}
    tgt_line = {i: n for n, i in enumerate(b.tgt.ids)}
    gold = [(src_line[s], tgt_line[t]) for s, t in b.gold]
    if args.quick:
        gold = gold[:20]
    with benchlib.timer() as t:
        if args.quick:
            keep = sorted(set(range(600)) | {t for _, t in gold})
            tmp = tempfile.TemporaryDirectory()
            path = Path(tmp.name) / "targets.en"
            path.write_text("".join(f"{b.tgt.ids[i]}\t{b.tgt.texts[i]}\n" for i in keep),
                            encoding="utf-8")
            trie = get_trie(model, path, cache_dir=Path(tmp.name))
            line_of = {n: keep[n] for n in range(len(keep))}  # trie line -> sample line
            node_prior = compute_node_priors(model, trie)
        else:
            trie = get_trie(model, Path(b.tgt.path))
            line_of = None
            node_prior = get_node_priors(model, trie, progress=True)
    prior_s = t.s
    print(f"node priors of {int(trie.n_nodes)} nodes: {prior_s:.1f} s", flush=True)

    sources = [b.src.texts[s] for s, _ in gold]
    rows = []
    for w in weights:
        top = anym = 0
        results = []
        search = SearchSettings(mode="pre", beam=args.beam, batch_size=16, prior_weight=w)
        with benchlib.timer() as t:
            for _, _, res in mine_batches(model, sources, trie, search,
                                          node_prior=node_prior if w else None):
                results.extend(res)
        secs = t.s
        for (_, t), ms in zip(gold, results):
            lines = [[line_of[x] if line_of else x for x in m.tgt_line_ids] for m in ms]
            top += bool(lines) and t in lines[0]
            anym += any(t in ls for ls in lines)
        row = {"prior_weight": w, "recall_top1": round(top / len(gold), 4),
               "recall_any": round(anym / len(gold), 4),
               "seconds_per_source": round(secs / len(gold), 3)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    best = max(rows, key=lambda r: r["recall_top1"])
    return run.finish({"bench": "prior", "quick": args.quick, "machine": machine(),
                      "threads": torch.get_num_threads(), "date": time.strftime("%Y-%m-%d"),
                      "beam": args.beam, "gold_sources": len(gold), "trie_nodes": int(trie.n_nodes),
                      "node_prior_seconds": round(prior_s, 1), "results": rows,
                      "best_prior_weight": best["prior_weight"],
                      "recall_top1_plain": rows[0]["recall_top1"] if weights[0] == 0 else None,
                      "recall_top1_best": best["recall_top1"]})


if __name__ == "__main__":
    sys.exit(main())
