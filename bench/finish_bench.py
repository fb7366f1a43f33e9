#!/usr/bin/env python3
"""The mining job's last stage at growing candidate counts: its peak memory should not grow.

The last stage (:mod:`triemine.mining.finish`: derived features, the shipped ``combined``
score, the TSV) is run on N synthetic scored candidates between the BUCC zh-en sample's 8,624
Chinese and 13,589 English sentences (seeded random pairs sorted by source, with plausible
``use_cos``, ``use_margin``, ``score``, ``n_tokens`` and ``prior`` columns), each run in a fresh
process that reads the scored columns from disk, as a job (or a resumed job) does:

* ``blocks``: the job's path, ``finish_tsv`` a block of 65,536 candidates at a time;
* ``whole``: the same rules over the whole set at once, as the job ran until 2026-11-25
  (every column, the derived ones and ``combined`` in memory, then the TSV in blocks).

Per N and path: wall seconds, candidates per second and the process's peak RSS above what it
held before the stage (``VmHWM`` minus the resident size after the imports and the corpora's
indexes), in bytes per candidate; the two TSVs must be the same bytes.  One thread.
``--quick``: 100,000 and 400,000 candidates (under a minute); the full mode 1,000,000 and
4,000,000.  Last line: one JSON object.

``--generation N[,N...]``: the driver's side of every stage of the default job after the kNN
(:func:`generation_child`: the margin candidates, the union, the exact scores' merge, the
priors, the TSV) on synthetic inputs of N sources and N targets, each stage's peak memory:
the resident size above what the process held before it (``VmHWM`` started over; it counts
the pages of the memory-mapped lists, embeddings and corpora the stage reads, which the kernel
may drop) and the peak of the Python and numpy allocations (``tracemalloc``; not for the TSV,
whose Python objects it would slow twofold): what should not grow with the candidates
(docs/scale.md).  ``--no-tsv``: every stage but the TSV (its ten minutes a 10^7 candidates;
``--sizes`` measures it on its own).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import benchlib  # noqa: E402
from benchlib import machine, proc_status_kb as _status_kb, reset_peak_rss as _reset_peak  # noqa: E402

import numpy as np  # noqa: E402

from triemine.io.paths import BUCC_ZH_EN, shared_path  # noqa: E402


def make_scored(work: Path, n: int, n_src: int, n_tgt: int, seed: int = 7) -> None:
    """``n`` synthetic scored candidates saved as a job's scored stage in ``work``."""
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.finish import save_scored

    rng = np.random.default_rng(seed)
    src = np.sort(rng.integers(0, n_src, n))
    tgt = rng.integers(0, n_tgt, n)
    ntok = rng.integers(5, 60, n).astype(np.float64)
    score = -ntok * rng.uniform(0.3, 3.0, n)
    cols = {"use_cos": rng.uniform(0.2, 0.9, n), "use_margin": rng.uniform(0.9, 1.3, n),
            "score": score, "n_tokens": ntok, "prior": score * rng.uniform(1.2, 2.5, n)}
    save_scored(work, CandidateSet(src, tgt, np.full(n, 2, dtype=np.uint8), cols))


def finish_child(work: Path, out: Path, path: str) -> dict:
    """In this (fresh) process: the last stage of ``work``'s scored candidates by ``path``."""
    from triemine.io.corpus import open_corpus
    from triemine.judging.shipped import shipped
    from triemine.mining.features import derived
    from triemine.mining.finish import finish_tsv, load_scored
    from triemine.io.tsv import column_order, write_row_blocks

    base = shared_path(*BUCC_ZH_EN)
    src, tgt = open_corpus(base / "zh-en.sample.zh"), open_corpus(base / "zh-en.sample.en")
    comb = shipped("combined")
    scored = load_scored(work)
    before = _status_kb("VmRSS")
    with benchlib.timer() as clock:
        if path == "blocks":
            finish_tsv(out, scored, src, tgt, comb, meta={})
        else:  # the whole set at once, as the job did before the last stage went block by block
            cands = scored.block(0, len(scored))
            cands = derived(cands, tgt.texts, src.texts)
            cands = cands.with_columns(combined=comb(cands.columns))
            columns = column_order(c for c in list(cands.columns) + ["origin"]
                                   if c not in ("n_tokens", "n_tokens_rev"))
            block = 65536

            def blocks():
                for a in range(0, len(cands), block):
                    s, t = cands.src[a:a + block].tolist(), cands.tgt[a:a + block].tolist()
                    yield dict({c: v[a:a + block] for c, v in cands.columns.items()},
                               origin=cands.origin[a:a + block].astype(np.float64),
                               src_id=[src.ids[i] for i in s], tgt_id=[tgt.ids[i] for i in t],
                               src=[src.texts[i] for i in s], tgt=[tgt.texts[i] for i in t])
            write_row_blocks(out, columns, blocks())
    wall = clock.s
    peak = _status_kb("VmHWM")
    return {"wall_s": round(wall, 2), "rss_before_mb": round(before / 1024, 1),
            "peak_rss_mb": round(peak / 1024, 1),
            "peak_above_before_mb": round((peak - before) / 1024, 1)}


class _Lines:
    """``n`` synthetic corpus lines, built when read (no list of them in memory)."""

    def __init__(self, n: int, tag: str):
        self.n, self.tag = n, tag

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return f"{self.tag} {i} words of a line"

    def __iter__(self):
        return (self[i] for i in range(self.n))


def generation_child(work: Path, n: int, tsv: bool = True) -> dict:
    """In this (fresh) process: the driver's side of every stage of the default job on
    synthetic inputs of ``n`` sources and ``n`` targets, each stage's peak RSS above what the
    process held before it (``VmHWM`` started over at each stage), per candidate, and its
    peak of Python and numpy allocations (``tracemalloc``).

    * ``generate``: the margin candidates (2 a source, 1 a target, no margin cut) from
      memory-mapped neighbour lists (k = 4; 8-dimensional embeddings, so the rows' reads are
      small), written to the generator's store a range of sources at a time;
    * ``unite``: the union, the overlong-line filter, every pair's features, the job's store;
    * ``scores``: the scoring shards planned, their tasks made from the memory-mapped pairs
      as they are submitted, their files recorded in the manifest and merged into the store:
      the job's code, with a pool whose workers return synthetic scores (the forced decoding
      is the workers' work, not the driver's);
    * ``priors``: the targets of the candidates, the priors table (its values synthetic, as
      above) and the ``prior`` column;
    * ``finish``: the TSV from the store (derived features, ``combined``), the texts read from
      synthetic corpus files of ``n`` lines a side."""
    import collections
    import importlib
    import types

    from triemine.io.corpus import open_corpus
    from triemine.mining import run
    from triemine.mining.candidates import embedding_space
    from triemine.judging.shipped import shipped
    from triemine.mining.finish import finish_tsv
    from triemine.mining.generators import Job
    from triemine.mining.stages import stage, stage_dir
    from triemine.mining.options import MineOptions
    from triemine.io.outfile import npy_bytes

    importlib.import_module("triemine.scoring.forced")  # torch, before the clock (as in the
    # job, whose model is loaded at its start)

    rng = np.random.default_rng(11)
    k, dim = 4, 8
    files = {}
    for side, other in (("fwd", n), ("bwd", n)):
        idx = np.lib.format.open_memmap(work / f"{side}.idx.npy", "w+", np.int64, (n, k))
        sim = np.lib.format.open_memmap(work / f"{side}.sim.npy", "w+", np.float32, (n, k))
        for a in range(0, n, 1 << 20):
            b = min(a + (1 << 20), n)
            idx[a:b] = rng.integers(0, other, (b - a, k))
            sim[a:b] = -np.sort(-rng.uniform(0.3, 0.9, (b - a, k)).astype(np.float32), axis=1)
        idx.flush(), sim.flush()
        del idx, sim
        files[side] = (np.load(work / f"{side}.idx.npy", mmap_mode="r"),
                       np.load(work / f"{side}.sim.npy", mmap_mode="r"))
    for side in ("src", "tgt"):
        vecs = np.lib.format.open_memmap(work / f"{side}.emb.npy", "w+", np.float32, (n, dim))
        for a in range(0, n, 1 << 20):
            b = min(a + (1 << 20), n)
            v = rng.standard_normal((b - a, dim)).astype(np.float32)
            vecs[a:b] = v / np.linalg.norm(v, axis=1, keepdims=True)
        vecs.flush()
        del vecs
        with open(work / f"{side}.txt", "w", encoding="utf-8") as f:
            lines = _Lines(n, side)
            for a in range(0, n, 1 << 16):
                f.write("".join(lines[i] + "\n" for i in range(a, min(a + (1 << 16), n))))
    src, tgt = open_corpus(work / "src.txt"), open_corpus(work / "tgt.txt")
    xs = np.load(work / "src.emb.npy", mmap_mode="r")
    ys = np.load(work / "tgt.emb.npy", mmap_mode="r")

    class SyntheticPool:  # the workers, their forced decoding replaced by synthetic scores
        max_attempts = 1

        def __init__(self):
            self.queue = collections.deque()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def attempts_used(self, _error):
            return 1

        def submit(self, pid, task):
            self.queue.append((pid, task))

        def next_result(self):
            pid, task = self.queue.popleft()
            t = np.asarray(task.tgt, dtype=np.float64)
            return pid, True, (npy_bytes(np.stack([-(t % 97 + 1.0), t % 40 + 5.0])),
                               {"pairs": len(t)})
    model = types.SimpleNamespace(path=str(work), weights_digest="synthetic")
    opts = MineOptions.of("combined")  # computes the targets' priors
    job = Job(model, src, tgt, str(work / "src.txt"), str(work / "tgt.txt"), opts, work,
              pool=SyntheticPool())
    stages, out = {}, {}

    def measured(name, compute, traced=True):
        import tracemalloc

        _reset_peak()
        before = _status_kb("VmRSS")
        if traced:
            tracemalloc.start()
        try:
            with benchlib.timer() as t:
                out[name] = compute()
        finally:
            wall = t.elapsed()
            heap = tracemalloc.get_traced_memory()[1] if traced else None
            tracemalloc.stop()
        peak = _status_kb("VmHWM")
        stages[name] = {"wall_s": round(wall, 2), "rss_before_mb": round(before / 1024, 1),
                        "peak_rss_mb": round(peak / 1024, 1),
                        "peak_above_before_mb": round((peak - before) / 1024, 1),
                        "heap_peak_mb": round(heap / 2 ** 20, 1) if traced else None}
    spaces = []

    def generate():  # as the knn generator: the space (its means mapped in work), its blocks
        spaces.append(embedding_space(xs, ys, "use", k, origin=2, work=work, neighbours=(
            files["fwd"][0], files["fwd"][1], files["bwd"][0], files["bwd"][1])))
        return stage(work, "knn", lambda: spaces[0].candidate_blocks(
            2, 1, None, spill=work / "knn.spill"), columns=spaces[0].columns)
    measured("generate", generate)
    skip = np.zeros(n, dtype=bool)
    measured("unite", lambda: run.unite(stage_dir(work, "candidates"), [out["generate"]],
                                        spaces, skip, skip))
    measured("scores", lambda: run._scores(job, out["unite"], model))
    measured("priors", lambda: run._priors(job, out["scores"]))
    if tsv:
        measured("finish", lambda: finish_tsv(work / "out.tsv", out["priors"], src, tgt,
                                              shipped("combined"), meta={}),
                 traced=False)  # a Python object a cell: tracemalloc would double its time
    n_cands = len(out["priors"])
    for st in stages.values():
        st["bytes_per_candidate"] = round(st["peak_above_before_mb"] * 2 ** 20 / n_cands, 1)
    return {"sources": n, "candidates": n_cands, "stages": stages,
            "peak_rss_mb": max(st["peak_rss_mb"] for st in stages.values()),
            "wall_s": round(sum(st["wall_s"] for st in stages.values()), 2)}


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="100,000 and 400,000 candidates")
    ap.add_argument("--sizes", default=None, help="comma-separated candidate counts")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--generation", default=None, metavar="N,N",
                    help="instead: the driver's candidate stage on synthetic neighbour lists of "
                         "N sources and N targets, for each N (peak RSS per candidate)")
    ap.add_argument("--no-tsv", action="store_true",
                    help="with --generation: every stage but the TSV")
    ap.add_argument("--child", nargs=3, metavar=("WORK", "OUT", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--generation-child", nargs=2, metavar=("WORK", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.generation_child:
        print(json.dumps(generation_child(Path(args.generation_child[0]),
                                          int(args.generation_child[1]), not args.no_tsv)))
        return 0
    if args.child:
        print(json.dumps(finish_child(Path(args.child[0]), Path(args.child[1]), args.child[2])))
        return 0
    run = benchlib.start("finish_bench", args)
    work = benchlib.work_dir(args.work, "finish_bench.")
    if args.generation:
        runs = []
        for n in (int(x) for x in args.generation.split(",")):
            d = work / f"gen{n}"
            d.mkdir(parents=True, exist_ok=True)
            res = subprocess.run([sys.executable, __file__, "--generation-child", str(d), str(n)]
                                 + ["--no-tsv"] * args.no_tsv,
                                 capture_output=True, text=True, check=False,
                                 env=dict(os.environ, TRIEMINE_CACHE=str(d / "cache")))
            if res.returncode:
                sys.stderr.write(res.stderr)
                raise SystemExit(f"finish_bench: the generation run of {n} sources failed")
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(json.dumps(runs[-1]), flush=True)
            shutil.rmtree(d)
        return run.finish({"bench": "finish_bench", "mode": "generation", "machine": machine(),
                           "threads": 1, "date": time.strftime("%Y-%m-%d"), "runs": runs})
    from triemine.io.corpus import open_corpus

    base = shared_path(*BUCC_ZH_EN)
    n_src = len(open_corpus(base / "zh-en.sample.zh"))
    n_tgt = len(open_corpus(base / "zh-en.sample.en"))
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else \
        ([100_000, 400_000] if args.quick else [1_000_000, 4_000_000])
    runs = []
    for n in sizes:
        d = work / f"n{n}"
        make_scored(d, n, n_src, n_tgt)
        row = {"candidates": n}
        for path in ("blocks", "whole"):
            out = d / f"{path}.tsv"
            res = subprocess.run([sys.executable, __file__, "--child", str(d), str(out), path],
                                 capture_output=True, text=True, check=False)
            if res.returncode:
                sys.stderr.write(res.stderr)
                raise SystemExit(f"finish_bench: the {path} run of {n} candidates failed")
            got = json.loads(res.stdout.strip().splitlines()[-1])
            got["candidates_per_s"] = round(n / got["wall_s"], 1)
            got["bytes_per_candidate"] = round(got["peak_above_before_mb"] * 2 ** 20 / n, 1)
            row[path] = got
        row["identical"] = (d / "blocks.tsv").read_bytes() == (d / "whole.tsv").read_bytes()
        row["tsv_mb"] = round((d / "blocks.tsv").stat().st_size / 2 ** 20, 1)
        for p in d.glob("*.tsv"):
            p.unlink()
        runs.append(row)
        print(json.dumps(row), flush=True)
    first, last = runs[0], runs[-1]
    growth = {p: round(last[p]["peak_above_before_mb"] - first[p]["peak_above_before_mb"], 1)
              for p in ("blocks", "whole")}
    return run.finish({"bench": "finish_bench", "quick": bool(args.quick), "machine": machine(),
                      "threads": 1, "date": time.strftime("%Y-%m-%d"), "runs": runs,
                      "peak_growth_mb": growth,
                      "peak_growth_per_added_candidate_bytes": {
                          p: round(g * 2 ** 20 / (last["candidates"] - first["candidates"]), 1)
                          for p, g in growth.items()} if len(runs) > 1 else None,
                      "identical": all(r["identical"] for r in runs)})


if __name__ == "__main__":
    sys.exit(main())
