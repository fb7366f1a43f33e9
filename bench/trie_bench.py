"""Benchmark of the compact trie vs a GENRE-style nested dict trie and marisa-trie.

Corpora:
* ``bucc-en``: English side of the shared BUCC 2018 zh-en sample, segmented with a sentencepiece
  model (``--spm``; default: an 8k unigram model trained on the shared zh-en parallel English
  side, cached under ``triemine.io.paths.cache_root()``), ids offset by 4 like a fairseq dictionary
  built from the model (EOS = 2).
* ``zipf``: synthetic sequences, token ids drawn from a Zipf(1.1) law over a 32k vocabulary,
  lengths log-normal around 27 tokens (clipped to 1..250), plus EOS. ``--quick``: 100k sequences,
  full mode: 1M.

Per corpus: nodes, bytes per node (node arrays keys + first_child only, and all arrays),
build seconds (token arrays → trie), load seconds with and without the CRC check, ns per lookup
of ``step_many`` (half hits, half random tokens, at nodes on real prefixes) in batches of 1024
and of 65536; the same lookups on a nested-dict trie (``dict_step_ns``; its memory by
tracemalloc, on at most ``--dict-max`` sequences since it needs ~100x more memory), and
marisa-trie's serialised size (``BinaryTrie`` over uint16 big-endian keys) per compact-trie node.

The last line printed is one JSON object (the first corpus's numbers at top level plus a
``corpora`` list with all of them).
"""
from __future__ import annotations

import gc
import os
import sys
import tempfile
import time

import benchlib  # noqa: E402  (bench/ is on sys.path when run as a script)
from benchlib import machine  # noqa: E402
import tracemalloc

import numpy as np

from triemine.io.paths import BUCC_ZH_EN, PARALLEL_ZH_EN, cache_root, shared_path
from triemine.trie import Trie

EOS = 2


def default_spm() -> str:
    import sentencepiece as spm
    path = cache_root() / "bench" / "en-unigram8k.model"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        src = shared_path(*PARALLEL_ZH_EN, "train.en")
        with benchlib.timer() as t:
            spm.SentencePieceTrainer.Train(input=str(src), model_prefix=str(path.with_suffix("")),
                                           vocab_size=8000, model_type="unigram", bos_id=-1,
                                           eos_id=-1, unk_id=0, num_threads=1, minloglevel=2)
        print(f"[bench] trained {path} in {t.s:.1f}s", file=sys.stderr)
    return str(path)


def bucc_sequences(spm_path: str):
    import sentencepiece as spm
    from triemine.io.corpus import read_corpus
    corpus = read_corpus(shared_path(*BUCC_ZH_EN, "zh-en.sample.en"))
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    idx = corpus.non_empty
    with benchlib.timer() as t:
        enc = sp.Encode([corpus.texts[i] for i in idx], out_type=int, num_threads=1)
    seg_s = t.s
    lens = np.array([len(e) + 1 for e in enc], dtype=np.int64)
    flat = np.concatenate([np.append(np.asarray(e, dtype=np.int64) + 4, EOS) for e in enc])
    return flat, lens, np.asarray(idx, dtype=np.int64), {"segment_s": round(seg_s, 3),
                                                        "spm": spm_path}


def zipf_sequences(n: int, seed: int = 0, vocab: int = 32000):
    rng = np.random.default_rng(seed)
    lens = np.clip(np.round(rng.lognormal(np.log(25), 0.55, size=n)), 1, 250).astype(np.int64)
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = ranks ** -1.1
    p /= p.sum()
    toks = rng.choice(vocab, size=int(lens.sum()), p=p) + 4  # 0..3 are fairseq specials
    lens = lens + 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = np.empty(int(offsets[-1]), dtype=np.int64)
    body = np.ones(flat.size, dtype=bool)
    body[offsets[1:] - 1] = False
    flat[body] = toks
    flat[~body] = EOS
    return flat, lens, np.arange(n, dtype=np.int64), {"vocab": vocab, "zipf_s": 1.1}


def queries(trie: Trie, flat, offsets, n_q: int, rng):
    """(node, token) pairs at nodes on real prefixes: half the true next token, half random."""
    n = offsets.size - 1
    seq = rng.integers(0, n, size=n_q)
    lens = offsets[seq + 1] - offsets[seq]
    pos = (rng.random(n_q) * lens).astype(np.int64)  # 0 .. len-1
    nodes = np.zeros(n_q, dtype=np.int64)
    for d in range(int(pos.max()) + 1):  # walk the prefixes, vectorised over queries
        act = pos > d
        nodes[act] = trie.step_many(nodes[act], flat[offsets[seq[act]] + d])
    toks = flat[offsets[seq] + pos]
    rand = rng.random(n_q) < 0.5
    toks[rand] = rng.integers(4, 32004, size=int(rand.sum()))
    return nodes, toks, seq, pos


def time_step(trie: Trie, nodes, toks, batch: int, min_s: float = 0.3) -> float:
    chunks = [(nodes[i:i + batch], toks[i:i + batch]) for i in range(0, nodes.size, batch)]
    best = float("inf")
    done, t_all = 0, time.perf_counter()
    while done < 3 or time.perf_counter() - t_all < min_s:
        t = time.perf_counter()
        for a, b in chunks:
            trie.step_many(a, b)
        best = min(best, time.perf_counter() - t)
        done += 1
    return best / nodes.size * 1e9


def dict_trie(flat, offsets, limit: int):
    """GENRE-style nested dicts; memory measured with tracemalloc."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    root: dict = {}
    seqs = [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(min(limit, offsets.size - 1))]
    n_nodes = 1
    for s in seqs:
        node = root
        for t in s:
            nxt = node.get(t)
            if nxt is None:
                nxt = node[t] = {}
                n_nodes += 1
            node = nxt
    del seqs
    gc.collect()
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return root, n_nodes, mem


def dict_step_ns(root, flat, offsets, seq, pos, toks, limit: int) -> float:
    keep = seq < limit
    seq, pos, toks = seq[keep], pos[keep], toks[keep]
    nodes = []
    for s, p in zip(seq.tolist(), pos.tolist()):
        node = root
        for t in flat[offsets[s]:offsets[s] + p].tolist():
            node = node[t]
        nodes.append(node)
    tl = toks.tolist()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        [n.get(k) for n, k in zip(nodes, tl)]
        best = min(best, time.perf_counter() - t)
    return best / max(1, len(tl)) * 1e9


def marisa_bytes(flat, offsets) -> int:
    import marisa_trie

    keys = [
        flat[offsets[i] : offsets[i + 1]].astype(">u2").tobytes() for i in range(offsets.size - 1)
    ]
    return len(marisa_trie.BinaryTrie(keys).tobytes())


def run_corpus(name, flat, lens, line_ids, extra, args):
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    gc.collect()
    with benchlib.timer() as t:
        trie = Trie.from_arrays(flat, offsets, line_ids, eos=EOS)
    build_s = t.s
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.trie")
        trie.save(path)
        file_bytes = os.path.getsize(path)
        with benchlib.timer() as t:
            loaded = Trie.load(path, verify=True)
        load_verify_s = t.s
        del loaded
        with benchlib.timer() as t:
            loaded = Trie.load(path, verify=False)
        load_s = t.s
        del loaded
    rng = np.random.default_rng(1)
    nodes, toks, seq, pos = queries(trie, flat, offsets, args.queries, rng)
    step_ns = time_step(trie, nodes, toks, 1024)
    step_ns_large = time_step(trie, nodes, toks, 65536)
    dict_limit = min(args.dict_max, lens.size)
    root, dict_nodes, dict_mem = dict_trie(flat, offsets, dict_limit)
    d_ns = dict_step_ns(root, flat, offsets, seq, pos, toks, dict_limit)
    del root
    gc.collect()
    m_bytes = marisa_bytes(flat, offsets)
    bpn = trie.node_nbytes / trie.n_nodes
    dict_bpn = dict_mem / dict_nodes
    res = {
        "corpus": name, "sequences": int(lens.size), "tokens": int(flat.size),
        "nodes": int(trie.n_nodes), "terminals": int(trie.n_terminals), "depth": trie.depth,
        "bytes_per_node": round(bpn, 3),
        "total_bytes_per_node": round(trie.nbytes / trie.n_nodes, 3),
        "file_bytes": file_bytes, "build_s": round(build_s, 3),
        "load_verify_s": round(load_verify_s, 4), "load_s": round(load_s, 4),
        "step_ns": round(step_ns, 1), "step_ns_batch65536": round(step_ns_large, 1),
        "queries": int(nodes.size),
           "query_hit_rate": round(float(np.mean(trie.step_many(nodes, toks) >= 0)), 3),
        "dict_sequences": int(dict_limit), "dict_nodes": int(dict_nodes),
        "dict_bytes_per_node": round(dict_bpn, 1), "dict_step_ns": round(d_ns, 1),
        "dict_over_compact": round(dict_bpn / bpn, 1),
        "marisa_bytes": m_bytes, "marisa_bytes_per_node": round(m_bytes / trie.n_nodes, 3),
    }
    res.update(extra)
    print(f"[bench] {name}: " + ", ".join(f"{k}={v}" for k, v in res.items() if k != "corpus"),
          file=sys.stderr)
    return res


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="100k synthetic sequences (< 1 minute)")
    ap.add_argument("--spm", help="sentencepiece model for the BUCC English side")
    ap.add_argument("--synthetic", type=int,
                    help="synthetic sequences (default 100k quick, 1M full)")
    ap.add_argument("--dict-max", type=int, help="sequences in the dict trie (memory bound; "
                    "default 20k quick, 200k full)")
    ap.add_argument("--queries", type=int, default=131072)
    args = ap.parse_args(argv)
    run = benchlib.start("trie_bench", args)
    n_syn = args.synthetic or (100_000 if args.quick else 1_000_000)
    if args.dict_max is None:
        args.dict_max = 20_000 if args.quick else 200_000
    results = [run_corpus("bucc-en", *bucc_sequences(args.spm or default_spm()), args),
               run_corpus(f"zipf-{n_syn}", *zipf_sequences(n_syn), args)]
    out = dict(results[0])
    out.update({
        "mode": "quick" if args.quick else "full", "corpora": results,
        "machine": machine(), "threads": 1, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "wall_s": round(run.elapsed(), 1),
    })
    return run.finish(out)


if __name__ == "__main__":
    sys.exit(main())
