"""Mining speed against CTranslate2, and how the cost grows with the beam and the target corpus.

One run, same sources, same machine, same threads (``OMP_NUM_THREADS``, default 2):

* ``trie_mine_sent_per_s``: trie-mine pre-expansion (``mine_batches`` with its default batching:
  64 sources per batch at beam 5, length-sorted within blocks of 8 batches) over the first
  ``--sources`` BUCC zh sources (200; 24 with ``--quick``) against the trie of the whole English
  side of the sample;
* ``ct2_sent_per_s``: CTranslate2 int8 (the shared model as shipped) translating the same
  sources unconstrained at the same beam, ``max_batch_size`` 16, ``intra_threads`` = threads;
* ``ratio_vs_ct2`` = trie-mine / CTranslate2 (the goal of issue 11 is >= 1.0);
* ``best_target_agreement``: share of the sources whose best trie match is the same target
  with the approximate variant (``int8_output``: the decoder's output projection run as an int8
  matrix, :func:`triemine.scoring.forced._int8_projection`) as with the exact fp32 search; its
  speed is ``int8_sent_per_s``.  Full mode also times ``int8_top64``: the same int8 matrix, then
  the 64 largest logits of every row recomputed exactly in float32 (so the normaliser and the
  likely tokens are nearly exact): ``int8_top64_sent_per_s`` and ``int8_top64_agreement``.

Full mode also times the batching levers on the same sources (``batching``: batch 16 / 32 / 64,
in input order / sorted by source length, each with its best-target agreement with the default;
``batching_default_vs_b16_input_order``: the default against the batching before 2026-11-24).
``--curve`` adds the
cost curve: seconds per source at beams 5 / 20 / 90 against tries of 1k,
10k, 100k and 1M target sentences (the sample's English first, then the English sides of the
shared parallel corpora, then synthetic sentences that join the first half of one real sentence
to the second half of another, seeded), so the growth in N can be read off (the paper's claim:
O(B L) per source, not O(N)).  ``--quick`` (< 1 min on an idle machine): 24 sources at beam 5;
with ``--curve``, beam 5 against 1k and 10k targets.  The last line printed is one JSON object.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from benchlib import machine, shared_model_dir  # noqa: E402

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")


def mine_time(model, trie, sources, beam, batch_size=None, sort_window=None):
    """(seconds, best target line of every source or -1) of pre-expansion over ``sources``
    (default batching: ``mine_batches``'s)."""
    from triemine.decoding.runner import mine_batches
    from triemine.decoding.settings import SearchSettings

    search = SearchSettings(mode="pre", beam=beam, batch_size=batch_size)
    if sort_window:
        search = replace(search, sort_window=sort_window)
    best = []
    with benchlib.timer() as t:
        for _, _, results in mine_batches(model, sources, trie, search):
            best.extend(ms[0].tgt_line_ids[0] if ms else -1 for ms in results)
    return t.s, best


def int8_top_exact(decoder, top: int):
    """An output projection: int8 logits for the whole vocabulary, the ``top`` largest of each
    row recomputed exactly (float32) from the exact weights."""
    import torch

    from triemine.scoring.forced import _int8_projection

    class Int8TopExact(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = _int8_projection(decoder, "cpu")
            self.weight = decoder.output_projection.weight
            self.bias = decoder.output_projection.bias

        def forward(self, h):
            flat = h.reshape(-1, h.shape[-1])
            z = self.q(flat)
            idx = torch.topk(z, top, dim=1).indices
            exact = torch.einsum("rtd,rd->rt", self.weight[idx], flat)
            if self.bias is not None:
                exact = exact + self.bias[idx]
            return z.scatter_(1, idx, exact).view(*h.shape[:-1], -1)

    return Int8TopExact()


def ct2_time(model, sources, beam, threads):
    import ctranslate2

    from triemine.mining.translate import ct2_origin

    origin = ct2_origin(model)
    if origin is None:
        sys.exit("speed_bench: the model directory has no CTranslate2 origin to compare with")
    tr = ctranslate2.Translator(str(origin), device="cpu", compute_type="int8",
                                intra_threads=threads, inter_threads=1)
    toks = [model.source_spm.encode(s, out_type=str) for s in sources]
    tr.translate_batch(toks[:2], beam_size=beam)  # warm-up
    with benchlib.timer() as t:
        tr.translate_batch(toks, beam_size=beam, max_batch_size=16)
    return t.s


def target_pool(n, shared: Path, seed=1234):
    """``n`` English target sentences: the sample's, then real ones from the shared parallel
    corpora, then synthetic recombinations of real halves."""
    from triemine.io.corpus import read_corpus

    pool, seen = [], set()
    for p in (shared / "data/bucc2018/zh-en/zh-en.sample.en",
              shared / "data/parallel/de-en/train.en",
              shared / "data/parallel/zh-en/train.en"):
        for t in read_corpus(p).texts:
            if t.strip() and t not in seen:
                seen.add(t)
                pool.append(t)
            if len(pool) >= n:
                return pool
    rng = np.random.default_rng(seed)
    halves = [t.split() for t in pool]
    while len(pool) < n:
        a, b = rng.integers(len(halves), size=2)
        wa, wb = halves[a], halves[b]
        t = " ".join(wa[: max(1, len(wa) // 2)] + wb[len(wb) // 2:])
        if t not in seen:
            seen.add(t)
            pool.append(t)
    return pool


def build_trie(model, texts, work: Path):
    from triemine.trie.build import build_trie_from_corpus

    path = work / f"targets.{len(texts)}.txt"
    path.write_text("".join(t.replace("\n", " ") + "\n" for t in texts), encoding="utf-8")
    with benchlib.timer() as t:
        trie, _ = build_trie_from_corpus(path, model.target_spm, model.tgt_dict, format="plain")
    return trie, t.s


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="24 sources, the int8 projection only")
    ap.add_argument("--model", default=None,
                    help="model dir (default <cache>/models/opus-mt-zh-en)")
    ap.add_argument("--shared", default=os.environ.get("TRIEMINE_SHARED", "../shared"))
    ap.add_argument("--sources", type=int, default=200)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--curve", action="store_true", help="also the cost curve (beam x target size)")
    args = ap.parse_args(argv)
    run = benchlib.start("speed_bench", args)

    import torch

    from triemine.io.corpus import read_corpus
    from triemine.decoding.trie_cache import get_trie
    from triemine.models.model_dir import load_model_dir
    from triemine.scoring.forced import _int8_projection

    threads = torch.get_num_threads()
    shared = Path(args.shared)
    model = load_model_dir(shared_model_dir(args.model, "speed_bench"))
    src = read_corpus(shared / "data/bucc2018/zh-en/zh-en.sample.zh")
    n = 24 if args.quick else args.sources
    sources = [src.texts[i] for i in src.non_empty][:n]
    trie = get_trie(model, shared / "data/bucc2018/zh-en/zh-en.sample.en")

    res = {"bench": "speed", "quick": args.quick, "machine": machine(), "threads": threads,
           "date": time.strftime("%Y-%m-%d"), "beam": args.beam, "sources": n,
           "targets": int(trie.n_lines) if getattr(trie, "n_lines", None) else None,
           "load_average": os.getloadavg()[0]}
    secs, best = mine_time(model, trie, sources, args.beam)
    res["trie_mine_sent_per_s"] = round(n / secs, 3)
    print(f"trie-mine pre-expansion, beam {args.beam}: {n / secs:.2f} sent/s", flush=True)
    ct2 = ct2_time(model, sources, args.beam, threads)
    res["ct2_sent_per_s"] = round(n / ct2, 3)
    res["ratio_vs_ct2"] = round(ct2 / secs, 3)
    print(f"CTranslate2 int8, beam {args.beam}: {n / ct2:.2f} sent/s", flush=True)

    if not args.quick:  # batching levers, same sources (the default is timed above)
        res["batching"] = {}
        for name, bs, window in (("b16_input_order", 16, 1), ("b16_sorted", 16, 8),
                                 ("b32_input_order", 32, 1), ("b32_sorted", 32, 8),
                                 ("b64_input_order", 64, 1)):
            t, best_b = mine_time(model, trie, sources, args.beam, batch_size=bs,
                                  sort_window=window)
            res["batching"][name] = round(n / t, 3)
            res["batching"][name + "_agreement"] = round(
                float(np.mean(np.array(best) == np.array(best_b))), 4
            )
            print(f"batching {name}: {n / t:.2f} sent/s", flush=True)
        res["batching_default_vs_b16_input_order"] = round(res["trie_mine_sent_per_s"] /
                                                           res["batching"]["b16_input_order"], 3)

    dec = model.model.decoder
    exact_proj = dec.output_projection
    variants = [("int8", _int8_projection(dec, "cpu"))]
    if not args.quick:
        variants.append(("int8_top64", int8_top_exact(dec, 64)))
    for name, proj in variants:
        dec.output_projection = proj
        try:
            secs8, best8 = mine_time(model, trie, sources, args.beam)
        finally:
            dec.output_projection = exact_proj
        agree = round(float(np.mean(np.array(best) == np.array(best8))), 4)
        res[f"{name}_sent_per_s"] = round(n / secs8, 3)
        res[f"{name}_speedup"] = round(secs / secs8, 3)
        res[f"{name}_ratio_vs_ct2"] = round(ct2 / secs8, 3)
        res["best_target_agreement" if name == "int8" else f"{name}_agreement"] = agree
        print(f"{name} output projection: {n / secs8:.2f} sent/s, best target agreement "
              f"{agree:.3f}", flush=True)

    if args.curve:
        sizes = (1000, 10000) if args.quick else (1000, 10000, 100000, 1000000)
        beams = (5,) if args.quick else (5, 20, 90)
        per_beam = {5: 16, 20: 8, 90: 4} if not args.quick else {5: 8}
        curve = []
        with tempfile.TemporaryDirectory() as tmp:
            pool = target_pool(max(sizes), shared)
            for size in sizes:
                t, build_s = build_trie(model, pool[:size], Path(tmp))
                row = {"targets": size, "trie_nodes": int(t.n_nodes), "build_s": round(build_s, 1)}
                for b in beams:
                    s, _ = mine_time(model, t, sources[: per_beam[b]], b,
                                     batch_size=min(16, per_beam[b]))
                    row[f"s_per_source_beam{b}"] = round(s / per_beam[b], 3)
                print(json.dumps(row), flush=True)
                curve.append(row)
                del t
        res["curve"] = curve
        for b in beams:
            first, last = curve[0][f"s_per_source_beam{b}"], curve[-1][f"s_per_source_beam{b}"]
            res[f"growth_beam{b}_{sizes[0]}_to_{sizes[-1]}"] = round(last / first, 3)
    return run.finish(res)


if __name__ == "__main__":
    sys.exit(main())
