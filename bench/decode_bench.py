"""Decoding speed: unconstrained vs trie-constrained (pre/post) vs fairseq's prefix-function search.

Same sources, batch size and beam for every method:

* ``unconstrained``: fairseq's stock ``SequenceGenerator`` + ``BeamSearch``;
* ``unconstrained_alg1``: our generator without a trie (Algorithm 1's shrinking beam);
* ``pre`` / ``post``: our generator with the trie (pre-/post-expansion);
* ``pre_stock``: our ``TrieConstrainedBeamSearch`` (pre) inside fairseq's stock generator;
* ``prefix_fn``: fairseq's ``PrefixConstrainedBeamSearch`` driven by a GENRE-style nested-dict
  trie through ``prefix_allowed_tokens_fn`` (stock generator).

``pre_selection_s`` is the part of ``pre_s`` spent in the trie-constrained candidate selection
(``sparse_topk``: trie lookup, gather, scatter, top-k); ``prefix_fn_over_pre_without_selection``
is the speed-up over ``prefix_fn`` that pre-expansion would have if that selection cost nothing.

``--quick`` (< 1 min): the tiny synthetic model (trained once, ~30 s, then cached), 64 sources, a
trie of 3000
synthetic targets, beam 20.  Full mode: ``--model DIR`` (default: the imported OPUS-MT zh-en in
the cache), BUCC sample sources/targets, beams 5, 20, 90.  Prints one JSON object as its last line
(seconds are wall-clock, best of ``--repeat`` runs, single thread).
"""
from __future__ import annotations

import os
import sys
import time

import benchlib  # noqa: E402  (bench/ is on sys.path when run as a script)
from benchlib import machine  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")


def nested_dict_trie(seqs):
    """GENRE-style trie: nested dicts keyed by token id."""
    root: dict = {}
    for s in seqs:
        node = root
        for t in s:
            node = node.setdefault(int(t), {})
    return root


def make_prefix_fn(root, eos):
    def allowed(batch_id, prefix):
        node = root
        for t in prefix.tolist()[1:]:  # skip the BOS (= EOS) fairseq puts first
            node = node.get(t)
            if node is None:
                return [eos]  # left the trie (only after a forced EOS): nothing sensible
        keys = list(node.keys())
        return keys if keys else [eos]
    return allowed


def batches_of(model, sources, batch_size):
    import torch
    from fairseq.data import data_utils

    toks = [model.encode_source(s) for s in sources]
    for i in range(0, len(toks), batch_size):
        b = toks[i:i + batch_size]
        yield {"net_input": {
            "src_tokens": data_utils.collate_tokens(b, model.src_dict.pad(), left_pad=True),
            "src_lengths": torch.tensor([len(t) for t in b])}}


class SelectionTimer:
    """Wraps a search's ``sparse_topk`` (the whole trie-constrained candidate selection: trie
    lookup, gather, scatter, top-k) and adds up the seconds spent in it."""

    def __init__(self, search):
        self.seconds = 0.0
        inner = search.sparse_topk

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
        search.sparse_topk = timed


def time_method(gen, model, sources, batch_size, repeat, timer=None):
    """Best wall time over ``repeat`` runs; with ``timer``, also its seconds in that run."""
    best, best_sel, n_out = float("inf"), 0.0, 0
    for _ in range(repeat):
        if timer is not None:
            timer.seconds = 0.0
        with benchlib.timer() as t:
            n_out = 0
            for sample in batches_of(model, sources, batch_size):
                out = gen.generate(model.models, sample)
                n_out += sum(len(h) for h in out)
        secs = t.s
        if secs < best:
            best, best_sel = secs, (timer.seconds if timer is not None else 0.0)
    return best, best_sel, n_out


def run_beam(model, trie, seqs, sources, beam, batch_size, repeat, skip_prefix=False):
    from fairseq.search import BeamSearch, PrefixConstrainedBeamSearch
    from fairseq.sequence_generator import SequenceGenerator

    from triemine.decoding.generator import TrieSequenceGenerator
    from triemine.decoding.search import TrieConstrainedBeamSearch

    d = model.tgt_dict
    depth = int(trie.depth)
    res = {"beam": beam}
    gens = {
        "unconstrained": SequenceGenerator(model.models, d, beam_size=beam, max_len_a=1.2,
                                           max_len_b=10, search_strategy=BeamSearch(d)),
        "unconstrained_alg1": TrieSequenceGenerator(model.models, d, None, beam_size=beam,
                                                    max_len_a=1.2, max_len_b=10),
        "pre": TrieSequenceGenerator(model.models, d, TrieConstrainedBeamSearch(d, trie, "pre"),
                                     beam_size=beam),
        "post": TrieSequenceGenerator(model.models, d, TrieConstrainedBeamSearch(d, trie, "post"),
                                      beam_size=beam),
        "pre_stock": SequenceGenerator(model.models, d, beam_size=beam, max_len_b=depth,
                                       search_strategy=TrieConstrainedBeamSearch(d, trie, "pre")),
    }
    if not skip_prefix:
        fn = make_prefix_fn(nested_dict_trie(seqs), d.eos())
        gens["prefix_fn"] = SequenceGenerator(
            model.models, d, beam_size=beam, max_len_b=depth,
            search_strategy=PrefixConstrainedBeamSearch(d, fn))
    timer = SelectionTimer(gens["pre"].search)
    for name, gen in gens.items():
        secs, sel, n_out = time_method(gen, model, sources, batch_size, repeat,
                                       timer if name == "pre" else None)
        res[f"{name}_s"] = round(secs, 3)
        if name == "pre":
            res["pre_selection_s"] = round(sel, 3)
        res[f"{name}_hyps"] = n_out
        print(f"beam {beam:3d} {name:20s} {secs:8.2f} s  ({n_out} hypotheses)", file=sys.stderr)
    res["pre_over_unconstrained"] = round(res["pre_s"] / res["unconstrained_s"], 3)
    res["pre_over_unconstrained_alg1"] = round(res["pre_s"] / res["unconstrained_alg1_s"], 3)
    if "prefix_fn_s" in res:
        res["prefix_fn_over_pre"] = round(res["prefix_fn_s"] / res["pre_s"], 3)
        # Ceiling for any trie implementation in this generator: pre-expansion with its whole
        # candidate selection made free (same steps, same model calls, same reordering).
        res["prefix_fn_over_pre_without_selection"] = round(
            res["prefix_fn_s"] / max(res["pre_s"] - res["pre_selection_s"], 1e-9), 3)
    return res


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="tiny model, beam 20, < 1 minute")
    ap.add_argument("--model", help="model directory (full mode)")
    ap.add_argument("--source", help="source corpus (full mode; default BUCC sample zh)")
    ap.add_argument("--target", help="target corpus (full mode; default BUCC sample en)")
    ap.add_argument("--n-sources", type=int, default=None, help="first N non-empty sources")
    ap.add_argument("--beams", default=None, help="comma-separated beams (full: 5,20,90)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=None, help="best of N runs (quick: 3, full: 1)")
    ap.add_argument("--no-prefix-fn", action="store_true", help="skip the slow GENRE baseline")
    args = ap.parse_args(argv)
    run = benchlib.start("decode_bench", args)
    if args.repeat is None:
        args.repeat = 3 if args.quick else 1

    import torch
    torch.set_num_threads(1)
    from triemine.models.model_dir import load_model_dir
    from triemine.trie import Trie

    info = {"bench": "decode_bench", "machine": machine(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "batch_size": args.batch_size}
    if args.quick:
        from benchlib import cached_tiny_model
        from triemine.testing.tiny_model import synthetic_pairs

        tiny, trained_s = cached_tiny_model()  # trained once, then reused
        if trained_s:
            info["tiny_model_trained_s"] = trained_s
        model = load_model_dir(tiny)
        pairs = synthetic_pairs(args.n_sources or 64, seed=1)
        targets = [t for _, t in pairs[: len(pairs) // 2]] + \
            [t for _, t in synthetic_pairs(3000, seed=2)]
        seqs = [model.encode_target(t).tolist() for t in targets]
        trie = Trie.build(seqs, eos=model.tgt_dict.eos())
        sources = [s for s, _ in pairs]
        beams = [int(b) for b in (args.beams or "20").split(",")]
        info.update(mode="quick", model="tiny synthetic (1+1 layers, d=64)")
    else:
        from triemine.io.corpus import read_corpus
        from triemine.decoding.trie_cache import get_trie
        from triemine.io.paths import BUCC_ZH_EN, cache_root, shared_path

        mdir = args.model or str(cache_root() / "models" / "opus-mt-zh-en")
        model = load_model_dir(mdir)
        src_path = args.source or shared_path(*BUCC_ZH_EN, "zh-en.sample.zh")
        tgt_path = args.target or shared_path(*BUCC_ZH_EN, "zh-en.sample.en")
        src = read_corpus(src_path)
        sources = [src.texts[i] for i in src.non_empty][: args.n_sources or 64]
        trie = get_trie(model, tgt_path)
        seqs = [list(k) for k, _ in trie]
        beams = [int(b) for b in (args.beams or "5,20,90").split(",")]
        info.update(mode="full", model=str(mdir), source=str(src_path), target=str(tgt_path))
    info.update(n_sources=len(sources), trie_sequences=len(trie), trie_nodes=int(trie.n_nodes),
                trie_depth=int(trie.depth))
    results = [run_beam(model, trie, seqs, sources, b, args.batch_size, args.repeat,
                        args.no_prefix_fn) for b in beams]
    out = dict(info)
    main_res = next((r for r in results if r["beam"] == 20), results[0])
    out.update(main_res)
    out["results"] = results
    return run.finish(out)


if __name__ == "__main__":
    sys.exit(main())
