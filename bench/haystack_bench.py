#!/usr/bin/env python3
"""Haystack benchmark: the BUCC sample's sources against its English and up to a million others.

The BUCC 2018 zh-en sample's Chinese sentences are mined with the default configuration against
its 13,589 English sentences plus distractors, ``--targets N`` English sentences in all
(default 1,000,000): first the real English of the shared corpora (the parallel zh-en and de-en
training text, the devsets' training text and transfer set, ids ``en-9...``), then synthetic
ones (seeded joins of the first half of one real sentence and the second half of another, as
``speed_bench --curve`` builds them).  Scored against the sample's gold (restricted to the mined
sources) with the sample's shipped threshold unchanged (``f1_transfer``) and tuned on that gold
(``f1_tuned``, optimistic).

Two runs of ``trie-mine`` (each with its own empty cache, one thread per process): one process,
then ``--workers 2``; per sharded stage (``stage_s``: embed, knn, scoring, priors; ``finish``,
the driver's last stage, is timed but not sharded) the ratio of the two is
``stage_speedup_2_workers`` and the TSVs must be the same bytes (``identical_to_single_process``).
``knn_recall_vs_exact``: recall@4 of the job's neighbour lists against a brute-force numpy search
for 256 sources.  ``peak_rss_mb``: the largest resident size of any process of the runs.

``--quick``: :data:`QUICK_SOURCES` (12 gold-bearing sources and 12 others) against
:data:`QUICK_TARGETS` targets (3,000: their gold targets and the first other English of the
sample; ``--targets N`` below 13,589 slices the sample's English the same way), both runs and the
evaluation, under a minute on two idle cores (the record holds its ``wall_s``).  Last line: one
JSON object.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import benchlib
from benchlib import machine, shared_model_dir

import numpy as np

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.io.paths import BUCC_ZH_EN, DEVSET_ZH_EN, PARALLEL_DE_EN, PARALLEL_ZH_EN, shared_path

STAGES = ("embed", "knn", "scoring", "priors", "trie")
QUICK_SOURCES = (12, 12)  # --quick: gold-bearing sources, others
QUICK_TARGETS = 3_000     # --quick: targets in all (the sources' gold targets among them)
REAL_ENGLISH = [(PARALLEL_ZH_EN, "train.en"), (PARALLEL_DE_EN, "train.en"),
                (DEVSET_ZH_EN, "train.en"), (DEVSET_ZH_EN, "zh-en.dev.en")]


def _lines(path: Path):
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.split("\t", 1)[1] if "\t" in line and line.startswith("en-") else line
        if text.strip():
            yield text.strip()


def build_set(work: Path, n_targets: int, n_gold: int, n_other: int, seed: int = 13) -> Path:
    """The haystack in BUCC layout in ``work``; returns its gold file."""
    sample = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    gold = sorted(sample.gold)
    with_pair = {s for s, _ in gold}
    ids = [i for i in sample.src.ids if i in with_pair][:n_gold] if n_gold else \
        [i for i in sample.src.ids if i in with_pair]
    others = [i for i in sample.src.ids if i not in with_pair]
    ids += others[:n_other] if n_other else others
    keep = set(ids)
    zh = [(i, t) for i, t in zip(sample.src.ids, sample.src.texts) if i in keep]
    targets = list(zip(sample.tgt.ids, sample.tgt.texts))
    if n_targets < len(targets):  # a slice: the kept sources' gold targets, then the first others
        wanted = {t for s, t in gold if s in keep}
        targets = [p for p in targets if p[0] in wanted] + \
            [p for p in targets if p[0] not in wanted][:max(0, n_targets - len(wanted))]
    extra = max(0, n_targets - len(targets))
    seen = set(sample.tgt.texts)
    real = []
    for where, name in REAL_ENGLISH if extra else ():
        for t in _lines(shared_path(*where, name)):
            if t not in seen:
                seen.add(t)
                real.append(t)
    rng = random.Random(seed)
    distract = real[:extra]
    while len(distract) < extra:  # synthetic: the first half of one, the second of another
        a, b = rng.choice(real).split(), rng.choice(real).split()
        text = " ".join(a[:max(1, len(a) // 2)] + b[len(b) // 2:])
        if text not in seen:
            seen.add(text)
            distract.append(text)
    targets += [(f"en-9{k:08d}", t) for k, t in enumerate(distract)]
    rng.shuffle(targets)
    base = work / "zh-en.haystack"
    Path(f"{base}.zh").write_text("".join(f"{i}\t{t}\n" for i, t in zh), encoding="utf-8")
    Path(f"{base}.en").write_text("".join(f"{i}\t{t}\n" for i, t in targets), encoding="utf-8")
    Path(f"{base}.gold").write_text("".join(f"{s}\t{t}\n" for s, t in gold if s in keep),
                                    encoding="utf-8")
    return Path(f"{base}.gold")


def mine(model: Path, gold: Path, out: Path, workers: int, extra=()) -> dict:
    """One ``trie-mine`` run with its own empty cache (the model is linked in), with the flags
    ``extra`` (``--device``, ``--precision``); its summary.  Where no ``trie-mine`` script sits
    beside this Python (a machine where the package is not installed, only on the path), its
    entry point is run by this Python."""
    cache = out.parent / f"cache.{out.stem}"
    (cache / "models").mkdir(parents=True, exist_ok=True)
    link = cache / "models" / model.name
    if not link.exists():
        link.symlink_to(model.resolve())
    env = dict(os.environ, TRIEMINE_CACHE=str(cache), OMP_NUM_THREADS="1")
    base = str(gold)[: -len(".gold")]
    script = Path(sys.executable).parent / "trie-mine"
    prog = [str(script)] if script.is_file() else [
        sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
        "sys.exit(mine_main(sys.argv[1:]))"]
    cmd = prog + ["--model", str(link), "--source", f"{base}.zh", "--target", f"{base}.en",
                  "-o", str(out), "-q", *extra]
    if workers:
        cmd += ["--workers", str(workers)]
    with benchlib.timer() as t:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = t.s
    if proc.returncode:
        sys.exit(f"haystack_bench: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    summary = next(json.loads(line) for line in reversed(proc.stderr.splitlines())
                   if line.startswith("{") and '"stage_s"' in line)
    # the largest resident size of any child so far (this run's, as the runs go one by one)
    rss = benchlib.peak_rss_mb()["children"]
    return dict(summary, wall_s=round(wall, 1), peak_rss_mb=rss)


def evaluate(tsv: Path, gold: Path) -> dict:
    from triemine.evaluation.pipeline import Direction, evaluate as run_eval
    from triemine.filtering.selection import shipped_default
    from triemine.io.tsv import read_mined

    b, rows = read_bucc(gold), read_mined(tsv)
    shipped = shipped_default("combined")
    fixed = run_eval([Direction(rows)], b, "combined", "combined", rule="one-to-one",
                     thresholds=shipped.thresholds, thresholds_source="fixed:shipped")
    tuned = run_eval([Direction(rows)], b, "combined", "combined", rule="one-to-one")
    return {"f1_transfer": fixed.strict.f1, "f1_tuned": tuned.strict.f1,
            "transfer": fixed.strict.as_dict(), "tuned": tuned.strict.as_dict()}


def knn_recall(work_tsv: Path, k: int = 4, n: int = 256, seed: int = 0) -> float:
    """Recall@k of the job's forward neighbour lists against a brute-force search."""
    from triemine.embedding.knn_shards import knn_sharded
    from triemine.distributed.local import InlinePool

    work = Path(str(work_tsv) + ".work")
    src, tgt = work / "emb.use.src.npy", work / "emb.use.tgt.npy"
    _, idx = knn_sharded(src, tgt, k, work, InlinePool(), name="knn.use.fwd")  # reused shards
    x, y = np.load(src, mmap_mode="r"), np.load(tgt, mmap_mode="r")
    rows = np.random.default_rng(seed).choice(len(x), min(n, len(x)), replace=False)
    hits = 0
    for r in rows.tolist():
        sims = np.asarray(y) @ np.asarray(x[r])
        exact = np.argpartition(-sims, k - 1)[:k]
        hits += len(set(exact.tolist()) & set(idx[r].tolist()))
    return round(hits / (k * len(rows)), 4)


def ivf_check(work_tsv: Path, k: int = 4, nprobe: Optional[int] = None) -> dict:
    """The approximate index on this run's embeddings: an IVF index over the targets built and
    searched for every source as ``--knn-index ivf`` would (in this process), its recall@k
    against the job's exact forward lists, and the seconds of each step."""
    from triemine.embedding.knn_shards import ivf_index, ivf_nprobe, knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.ivf import n_lists

    work = Path(str(work_tsv) + ".work")
    src, tgt = work / "emb.use.src.npy", work / "emb.use.tgt.npy"
    check = work / "ivf-check"
    nprobe = nprobe or ivf_nprobe(int(np.load(tgt, mmap_mode="r").shape[0]))
    with benchlib.timer() as build:
        ivf_index(tgt, check, InlinePool(), name="fwd")
    with benchlib.timer() as search:
        _, idx = knn_sharded(src, tgt, k, check, InlinePool(), name="fwd", index="ivf",
                             nprobe=nprobe)
    with benchlib.timer() as reuse:
        _, exact = knn_sharded(src, tgt, k, work, InlinePool(), name="knn.use.fwd", index="exact")
    build_s, search_s, reuse_s = build.s, search.s, reuse.s
    hits = sum(len(set(a) & set(b)) for a, b in zip(idx.tolist(), exact.tolist()))
    return {"database": int(np.load(tgt, mmap_mode="r").shape[0]), "queries": len(idx),
            "nlist": n_lists(int(np.load(tgt, mmap_mode="r").shape[0])),
            "nprobe": nprobe, f"recall_at_{k}": round(hits / max(1, exact.size), 4),
            "build_s": round(build_s, 1), "search_s": round(search_s, 1),
            "exact_lists_read_s": round(reuse_s, 1), "threads": 1}


def hnsw_check(work_tsv: Path, k: int = 4, ef_search: Optional[int] = None,
               graph_rows: Optional[int] = None, workers: int = 2) -> dict:
    """The graph index on this run's embeddings: HNSW graphs over the targets built and walked
    for every source as ``--knn-index hnsw --workers N`` would, their recall@k against the job's
    exact forward lists, wall seconds of each step and the workers' CPU seconds (from the
    manifests)."""
    from triemine.distributed import make_pool
    from triemine.embedding.knn_shards import knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding import hnsw

    work = Path(str(work_tsv) + ".work")
    src, tgt = work / "emb.use.src.npy", work / "emb.use.tgt.npy"
    check = work / "hnsw-check"
    n_d = int(np.load(tgt, mmap_mode="r").shape[0])
    planned_rows, planned_ef = hnsw.graph_plan(n_d)
    graph_rows, ef_search = graph_rows or planned_rows, ef_search or planned_ef
    with benchlib.timer() as t, (make_pool(workers) if workers > 1 else InlinePool()) as pool:
        _, idx = knn_sharded(src, tgt, k, check, pool, name="fwd", index="hnsw",
                             graph_rows=graph_rows, ef_search=ef_search)
    wall = t.s
    _, exact = knn_sharded(src, tgt, k, work, InlinePool(), name="knn.use.fwd", index="exact")
    hits = sum(len(set(a) & set(b)) for a, b in zip(idx.tolist(), exact.tolist()))

    def cpu(part: str) -> float:
        done = json.loads((check / part / "manifest.json").read_text(encoding="utf-8"))["done"]
        return round(sum(e.get("cpu_s", 0.0) for e in done.values()), 1)
    return {"database": n_d, "queries": len(idx), "graphs": -(-n_d // graph_rows),
            "graph_rows": graph_rows, "M": hnsw.M, "ef_construction": hnsw.EF_CONSTRUCTION,
            "ef_search": ef_search, f"recall_at_{k}": round(hits / max(1, exact.size), 4),
            "wall_s": round(wall, 1), "build_cpu_s": cpu("fwd.hnsw"),
            "search_cpu_s": cpu("fwd.shards"), "workers": workers, "threads_per_process": 1}


def stage_speedups(work_tsv: Path, model_dir: Path, shards: int = 4,
                   stages: Optional[list] = None) -> dict:
    """Each sharded stage of the full mode at its full shard size, in this process and on 2
    worker processes (one pool held across the stages, as the job holds it): ``shards`` shards
    of each (embedding: 8,192 target lines each; kNN: the sources against 131,072-row cells of
    the million targets' embeddings; exact scores and priors: chunks of 2,000 of the run's
    candidates and candidate targets; the trie search, which the default job does not run but
    ``--config paper`` and the ``trie`` generator do: the first 256 sources a shard against the
    trie of the million targets, beam 5, built before the clock starts, as are the targets' token
    lengths, cached since 2026-11-25 and computed at a job's start), the seconds of each
    and whether the bytes agree.  The pool is started (workers spawned, modules imported) before
    the clock starts (``start_s_1``, ``start_s_2``: a job pays it once, not per stage; until
    2026-11-25 10:30 it counted in the embedding), and its workers load the MT model, the
    corpora and the trie then, as this process did (until 17:30 the scoring stage's clock had
    the workers' model load).  ``stages``: only these (default all)."""
    from triemine.io.corpus import open_corpus
    from triemine.decoding.driver import mine_to_tsv
    from triemine.models.model_dir import load_model_dir
    from triemine.decoding.runner import long_targets
    from triemine.decoding.settings import SearchSettings
    from triemine.decoding.trie_cache import get_trie
    from triemine.distributed import make_pool
    from triemine.decoding.model_spec import model_spec
    from triemine.decoding.shards import TrieShardTask
    from triemine.distributed.local import InlinePool
    from triemine.embedding.embed_shards import EMBED_SHARD_LINES, EmbedShardTask, embed_sharded
    from triemine.embedding.knn_shards import KNN_SHARD_ROWS, knn_sharded
    from triemine.mining.score_shards import forced_scores_sharded
    from triemine.embedding import ENCODERS
    from triemine.io.tsv import read_mined

    work = Path(str(work_tsv) + ".work")
    base = work_tsv.parent / "zh-en.haystack"
    src_path, tgt_path = Path(f"{base}.zh"), Path(f"{base}.en")
    rows = read_mined(work_tsv)
    src_ids = [ln.split("\t", 1)[0] for ln in src_path.read_text(encoding="utf-8").splitlines()]
    tgt_ids = {}
    with open(tgt_path, encoding="utf-8") as f:
        for i, ln in enumerate(f):
            tgt_ids[ln.split("\t", 1)[0]] = i
    s_of = {x: i for i, x in enumerate(src_ids)}
    n = 2000 * shards
    s_idx = np.array([s_of[x] for x in rows.src_ids[:n]], dtype=np.int64)
    t_idx = np.array([tgt_ids[x] for x in rows.tgt_ids[:n]], dtype=np.int64)
    priors_t = np.unique(np.array([tgt_ids[x] for x in rows.tgt_ids], dtype=np.int64))[:n]
    # the kNN: the sources against the first `shards` cells of the targets
    db = work / "speedups.db.npy"
    if not db.is_file():
        np.save(db, np.load(work / "emb.use.tgt.npy", mmap_mode="r")[:KNN_SHARD_ROWS * shards])
    model = load_model_dir(model_dir)
    trie_src = work / "speedups.trie.zh"  # 256 sources a shard: the default shard size
    trie_src.write_text("".join(ln + "\n" for ln in src_path.read_text(
        encoding="utf-8").splitlines()[:256 * shards]), encoding="utf-8")
    trie = get_trie(model, tgt_path)  # the million targets' trie, built once and cached
    # and their token lengths (the overlong-line rule), which a job computes at its start
    long_targets(model, open_corpus(tgt_path).texts)
    search = SearchSettings(mode="pre", beam=5, shard_sources=256)

    def trie_search(tsv: Path, pool) -> np.ndarray:  # the TSV's bytes, to compare
        mine_to_tsv(model, trie_src, tgt_path, tsv, trie=trie, search=search, pool=pool)
        return np.frombuffer(tsv.read_bytes(), dtype=np.uint8)
    out: dict = {"seconds_1": {}, "seconds_2": {}, "identical": {}}
    results = {}
    for label, pool in (("1", InlinePool()), ("2", make_pool(2))):
        d = work / f"speedups.{label}"
        d.mkdir(exist_ok=True)
        steps = {
            "embed": lambda: embed_sharded("use", tgt_path, EMBED_SHARD_LINES * shards,
                                           d / "emb.npy", pool, resume=False),
            "knn": lambda: knn_sharded(work / "emb.use.src.npy", db, 4, d, pool, name="knn",
                                       resume=False, index="exact"),
            "scoring": lambda: forced_scores_sharded(model, s_idx, t_idx, src_path, tgt_path, d,
                                                     pool, name="scores", chunk=2000,
                                                     resume=False)[:2],
            "priors": lambda: forced_scores_sharded(model, np.full(len(priors_t), -1), priors_t,
                                                    src_path, tgt_path, d, pool, name="priors",
                                                    chunk=2000, resume=False)[:2],
            "trie": lambda: trie_search(d / "trie.tsv", None if label == "1" else pool)}
        steps = {st: fn for st, fn in steps.items() if stages is None or st in stages}
        with pool:  # the workers spawned and their modules imported before the clock (a job
            # pays it once; USE reads its weights at its first sentences, in the embedding)
            with benchlib.timer() as t:
                pool.warm(EmbedShardTask(0, "use", os.path.abspath(tgt_path), 0, 0,
                                         ENCODERS["use"].__module__))
                # and the MT model, the corpora and the trie, which this process loaded before
                # the clock too (a job loads them once)
                pool.warm(TrieShardTask(0, model_spec(model), os.path.abspath(trie_src),
                                        os.path.abspath(tgt_path), 0, 0,
                                        ((os.path.abspath(trie.path), 0),), search))
            out[f"start_s_{label}"] = round(t.s, 1)
            for stage, fn in steps.items():
                with benchlib.timer() as t:
                    res = fn()
                out[f"seconds_{label}"][stage] = round(t.s, 1)
                res = res if isinstance(res, tuple) else (res,)
                results[(label, stage)] = b"".join(np.ascontiguousarray(r).tobytes() for r in res)
    for stage in out["seconds_1"]:
        out["identical"][stage] = results[("1", stage)] == results[("2", stage)]
    out["stage_speedup_2_workers"] = {st: round(out["seconds_1"][st] / out["seconds_2"][st], 3)
                                      for st in out["seconds_1"]}
    out.update(shards_per_stage=shards, threads_per_process=1)
    return out


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="24 sources, 3,000 targets", model=True)
    ap.add_argument("--targets", type=int, default=None, help="targets in all (1,000,000)")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--ivf-from", default=None, metavar="TSV",
                    help="only the IVF check on an earlier run's output (its .work directory)")
    ap.add_argument("--nprobe", type=int, default=None, help="IVF lists probed (the job's)")
    ap.add_argument("--hnsw-from", default=None, metavar="TSV",
                    help="only the HNSW check on an earlier run's output (2 workers)")
    ap.add_argument("--ef-search", type=int, default=None, help="HNSW efSearch (the job's)")
    ap.add_argument("--graph-rows", type=int, default=None, help="HNSW rows a graph (the job's)")
    ap.add_argument("--stage-speedups", default=None, metavar="TSV",
                    help="only each stage at full shard size, one process against 2 workers, on "
                         "an earlier full-mode run's output (4 shards a stage)")
    ap.add_argument("--runs", default="single,workers2",
                    help="which runs: single (one process), workers2 (--workers 2) or both; a run "
                         "not asked for whose TSV and summary an earlier invocation left in --work "
                         "is compared with (listed in runs_from_an_earlier_invocation); with one "
                         "run the speed-ups and the identity check are not measured")
    ap.add_argument("--stages", default=None, help="with --stage-speedups: only these stages "
                    "(comma-separated: embed, knn, scoring, priors, trie; default all)")
    ap.add_argument("--device", default="cpu", help="the job's --device (default cpu)")
    ap.add_argument("--precision", default="fp32", help="the job's --precision (default fp32)")
    ap.add_argument("--workers", type=int, default=2,
                    help="worker processes of the second run (named workers2; default 2)")
    ap.add_argument("--skip-index-checks", action="store_true",
                    help="no IVF / HNSW checks after the runs (a timed device run)")
    args = ap.parse_args(argv)
    run = benchlib.start("haystack_bench", args)
    stages = [st.strip() for st in args.stages.split(",") if st.strip()] if args.stages else None
    if stages and not args.stage_speedups:
        ap.error("--stages goes with --stage-speedups")
    if stages and set(stages) - set(STAGES):
        ap.error(f"--stages: choose from {', '.join(STAGES)}")
    if args.stage_speedups:
        res = stage_speedups(Path(args.stage_speedups), shared_model_dir(args.model,
                                                                        "haystack_bench"),
                             stages=stages)
        return run.finish({"bench": "haystack_bench", "mode": "stage speed-ups at full shard size",
                           "machine": machine(), "date": time.strftime("%Y-%m-%d"), **res})
    if args.hnsw_from:
        res = hnsw_check(Path(args.hnsw_from), ef_search=args.ef_search,
                         graph_rows=args.graph_rows)
        return run.finish({"bench": "haystack_bench", "machine": machine(),
                           "date": time.strftime("%Y-%m-%d"), "hnsw": res})
    if args.ivf_from:
        return run.finish({"bench": "haystack_bench", "ivf": ivf_check(Path(args.ivf_from),
                                                                        nprobe=args.nprobe)})
    model = shared_model_dir(args.model, "haystack_bench")
    n_targets = args.targets or (QUICK_TARGETS if args.quick else 1_000_000)
    work = benchlib.work_dir(args.work, "haystack_bench.")
    with benchlib.timer() as t:
        gold = build_set(work, n_targets, *(QUICK_SOURCES if args.quick else (0, 0)))
    build_s = t.s
    wanted = [r for r in args.runs.split(",") if r]
    if not wanted or set(wanted) - {"single", "workers2"}:
        ap.error(f"--runs: single, workers2 or both, not {args.runs!r}")
    runs, reused = {}, []
    job_flags = ["--device", args.device, "--precision", args.precision]
    for name, workers in (("single", 0), ("workers2", args.workers)):
        saved = work / f"{name}.summary.json"
        if name in wanted:
            runs[name] = mine(model, gold, work / f"{name}.tsv", workers, job_flags)
            saved.write_text(json.dumps(runs[name]), encoding="utf-8")
        elif saved.is_file() and (work / f"{name}.tsv").is_file():  # an earlier invocation's
            runs[name] = json.loads(saved.read_text(encoding="utf-8"))
            reused.append(name)
    first = next(iter(runs))
    one = runs[first]
    both = len(runs) == 2
    not_measured = "not measured (--runs " + args.runs + ")"
    if both:
        single, two = runs["single"], runs["workers2"]
        same = (work / "single.tsv").read_bytes() == (work / "workers2.tsv").read_bytes()
        speedup = {st: round(single["stage_s"][st] / two["stage_s"][st], 3)
                   for st in single["stage_s"] if st in STAGES and two["stage_s"].get(st)}
    result = {"bench": "haystack_bench", "quick": bool(args.quick), "machine": machine(),
              "threads_per_process": 1, "date": time.strftime("%Y-%m-%d"), "runs": list(runs),
              "device": args.device, "precision": args.precision,
              "workers_of_workers2": args.workers,
              "runs_from_an_earlier_invocation": reused,
              "sources": one["sources"], "targets": one["targets"],
              **evaluate(work / f"{first}.tsv", gold),
              "wall_s": runs["single"]["wall_s"] if "single" in runs else not_measured,
              "wall_s_2_workers": runs["workers2"]["wall_s"] if "workers2" in runs
              else not_measured,
              "stage_s": runs["single"]["stage_s"] if "single" in runs else not_measured,
              "stage_s_2_workers": runs["workers2"]["stage_s"] if "workers2" in runs
              else not_measured,
              "stage_speedup_2_workers": dict(speedup, trie="not run (the default job has no "
                                              "trie stage; bench/scale_bench.py measures it)")
              if both else not_measured,
              "peak_rss_mb": max(r.get("peak_rss_mb", 0) for r in runs.values()),
              "candidates": one["candidates"], "scored_pairs": one["candidates"],
              "knn_recall_vs_exact": knn_recall(work / f"{first}.tsv"),
              "ivf": "not run (--skip-index-checks)" if args.skip_index_checks else
              ivf_check(work / f"{first}.tsv", nprobe=args.nprobe),
              "hnsw": "not run in --quick" if args.quick else
              "not run (--skip-index-checks)" if args.skip_index_checks else
              hnsw_check(work / f"{first}.tsv", ef_search=args.ef_search,
                         graph_rows=args.graph_rows),
              "identical_to_single_process": same if both else not_measured,
              "build_set_s": round(build_s, 1)}
    return run.finish(result)


if __name__ == "__main__":
    sys.exit(main())
