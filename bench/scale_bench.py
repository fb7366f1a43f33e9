"""Scale-out benchmark: one process against 2 worker processes (and 2 Ray actors), identical output.

    OMP_NUM_THREADS=1 .venv/bin/python bench/scale_bench.py --quick   # tiny model, < 1 min
    OMP_NUM_THREADS=1 .venv/bin/python bench/scale_bench.py           # shared OPUS-MT model

Full mode, on the BUCC zh-en sample with the imported OPUS-MT model (one thread per process):

* the trie search (``--config paper``, pre-expansion, beam 5) of the first ``--sources`` zh lines
  against the whole English sample's trie: one process, then 2 worker processes, then 2 Ray
  actors (local cluster); the workers are started and warmed (model loaded, trie mapped) before
  the timed run, and their start-up time is reported apart; every output is compared byte for
  byte with the one process's;
* exact scoring (forced decoding) of ``--pairs`` candidate pairs, one process against 2 workers;
* ``--target-shards`` K = 1, 2, 4 on the 257 gold sources (2 workers): time and recall of the
  gold target (top match and any match);
* the cost model's inputs: sources/s per core, scored pairs/s per core, trie bytes per target
  sentence (trie file size / target sentences).

The last line printed is one JSON object (``workers``, ``sources``, ``sent_per_s``,
``speedup_vs_1_worker``, ``identical_to_single_process``, ...).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import benchlib  # noqa: E402
from benchlib import cached_tiny_model, machine, shared_model_dir, write_lines  # noqa: E402


def _load() -> str:
    return "load average: " + ", ".join(map(str, benchlib.loadavg() or ["?"]))


def _timed_sharded(model, src, tgt, out, pool, warm_src, search):
    """``(seconds of the timed run, seconds to start and warm the pool, summary, stats)``."""
    from dataclasses import replace

    from triemine.decoding.driver import mine_to_tsv

    from triemine.distributed.stage import fixed_cost_per_shard

    with pool:
        with benchlib.timer() as warm:  # a shard per worker: every worker started and warmed
            mine_to_tsv(model, warm_src, tgt, str(out) + ".warm", pool=pool,
                        search=replace(search, shard_sources=1))
        with benchlib.timer() as t:
            summary = mine_to_tsv(model, src, tgt, out, pool=pool, search=search)
        fixed = fixed_cost_per_shard(pool, str(out) + ".echo.shards")
    stats = summary.shards
    stats["runner_fixed_cost_per_shard_ms"] = round(1000 * fixed, 2)
    # the workers are reaped now: the largest resident size of any of them
    stats["worker_max_rss_mb"] = benchlib.peak_rss_mb()["children"]
    return t.s, warm.s, summary, stats


def _cpu_view(stats: dict, cpu_single: float) -> dict:
    """What the run would give on idle cores, from CPU time (this box is shared, so wall-clock
    speed-ups depend on the other jobs): the workers' CPU seconds per process, the work added
    by sharding (their sum / the one process's CPU seconds) and the projected speed-up (the one
    process's CPU seconds / the busiest worker's)."""
    per = stats.get("worker_cpu_s", {})
    if not per:
        return {}
    return {"worker_cpu_s": per, "cpu_work_ratio": round(sum(per.values()) / cpu_single, 3),
            "projected_speedup_on_idle_cores": round(cpu_single / max(per.values()), 3)}


def trie_search(model, src, tgt, work: Path, n_sources: int, beam: int, shard: int,
                use_ray: bool) -> dict:
    from triemine.decoding.driver import mine_to_tsv
    from triemine.decoding.settings import SearchSettings
    from triemine.decoding.trie_cache import get_trie
    from triemine.distributed import make_pool

    trie = get_trie(model, tgt)
    lines = src.read_text(encoding="utf-8").splitlines()
    warm = write_lines(work / "warm.src", lines[:8])
    # two blocks (one batch each, the least a block holds), so two shards: a pool starts no more
    # workers than a stage has shards, and both must be warm before the timed run
    search = SearchSettings(mode="pre", beam=beam, batch_size=16, shard_sources=shard)
    warm_pool = write_lines(work / "warm_pool.src", lines[:2 * search.sources_per_batch])
    single = work / "single.tsv"
    mine_to_tsv(model, warm, tgt, work / "warm.tsv", trie=trie,
                search=search)  # first-call costs, as the workers'
    with benchlib.timer() as t:
        mine_to_tsv(model, src, tgt, single, trie=trie, search=search)
    t_single, c_single = t.s, t.cpu
    print(f"one process: {n_sources} sources in {t_single:.1f} s", file=sys.stderr, flush=True)
    res = {"sources": n_sources, "beam": beam, "shard_sources": shard,
           "single_process_s": round(t_single, 2), "single_process_cpu_s": round(c_single, 2),
           "sent_per_s_1_worker": round(n_sources / t_single, 3)}
    runs = [("workers", make_pool(2))]
    if use_ray:
        runs.append(("ray", make_pool(2, ray="local")))
    for name, pool in runs:
        out = work / f"{name}.tsv"
        secs, start, summary, stats = _timed_sharded(model, src, tgt, out, pool, warm_pool,
                                                     search)
        same = out.read_bytes() == single.read_bytes()
        print(f"{name} x2: {n_sources} sources in {secs:.1f} s (+{start:.1f} s start-up), "
              f"identical: {same}", file=sys.stderr, flush=True)
        res[name] = {"workers": 2, "seconds": round(secs, 2), "startup_s": round(start, 2),
                     "sent_per_s": round(n_sources / secs, 3),
                     "sent_per_s_with_startup": round(n_sources / (secs + start), 3),
                     "speedup_vs_1_worker": round(t_single / secs, 3),
                     "shards": stats["shards"], "identical_to_single_process": same,
                     "runner_fixed_cost_per_shard_ms": stats["runner_fixed_cost_per_shard_ms"],
                     "worker_max_rss_mb": stats["worker_max_rss_mb"] if name == "workers"
                     else "not measured (Ray workers are not children)",
                     **_cpu_view(stats, c_single)}
    res["trie_bytes_per_target_sentence"] = round(os.path.getsize(trie.path) / trie.n_lines, 1)
    res["trie_file_bytes"] = os.path.getsize(trie.path)
    res["trie_target_sentences"] = trie.n_lines
    return res


def scoring(model, src, tgt, work: Path, n_pairs: int, chunk: int) -> dict:
    """Exact scores of ``n_pairs`` pairs (the first gold-like pairs by line, then random ones)."""
    import numpy as np

    from triemine.io.corpus import read_corpus
    from triemine.distributed import make_pool
    from triemine.mining.score_shards import exact_scores_sharded
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.features import exact_scores

    s, t = read_corpus(src), read_corpus(tgt)
    rng = np.random.default_rng(0)
    ok_s = [i for i in range(len(s)) if s.texts[i].strip()]
    ok_t = [i for i in range(len(t)) if t.texts[i].strip()]
    pairs = np.unique(np.stack([rng.choice(ok_s, n_pairs), rng.choice(ok_t, n_pairs)], 1), axis=0)
    cands = CandidateSet(pairs[:, 0], pairs[:, 1], np.ones(len(pairs)))
    with benchlib.timer() as single:
        ref = exact_scores(model, cands, s.texts, t.texts, chunk=chunk)
    t_single, c_single = single.s, single.cpu
    pool = make_pool(2)
    with pool:
        with benchlib.timer() as warm:
            exact_scores_sharded(model, cands.take(np.arange(min(2 * chunk, len(cands)))), src,
                                 tgt, work / "warm", pool, chunk=chunk)
        with benchlib.timer() as timed:
            got, stats = exact_scores_sharded(model, cands, src, tgt, work / "scores", pool,
                                              chunk=chunk)
    start, secs = warm.s, timed.s
    same = got.col("score").tobytes() == ref.col("score").tobytes()
    print(f"exact scores: {len(cands)} pairs, one process {t_single:.1f} s, 2 workers {secs:.1f} s"
          f" (+{start:.1f} s start-up), identical: {same}", file=sys.stderr, flush=True)
    return {"pairs": len(cands), "chunk": chunk, "single_process_s": round(t_single, 2),
            "pairs_per_s_1_worker": round(len(cands) / t_single, 3),
            "workers": 2, "seconds": round(secs, 2), "startup_s": round(start, 2),
            "pairs_per_s": round(len(cands) / secs, 3),
            "speedup_vs_1_worker": round(t_single / secs, 3), "shards": stats["shards"],
            "identical_to_single_process": same, **_cpu_view(stats, c_single)}


def target_shards(model, gold_src, tgt, gold, work: Path, beam: int, ks) -> list:
    from triemine.decoding.driver import mine_to_tsv
    from triemine.decoding.settings import SearchSettings
    from triemine.distributed import make_pool
    from triemine.io.tsv import read_mined

    pairs = dict(line.split("\t")[:2] for line in gold.read_text(encoding="utf-8").split("\n")
                 if line.strip())
    pool = make_pool(2)
    out = []
    warm = write_lines(work / "warm.gold.zh", gold_src.read_text(encoding="utf-8").splitlines()[:4])
    with pool:  # workers started and the model loaded before the first timed run
        mine_to_tsv(model, warm, tgt, work / "warm.k.tsv", pool=pool,
                    search=SearchSettings(mode="pre", beam=beam))
        for k in ks:
            path = work / f"k{k}.tsv"
            with benchlib.timer() as t:
                summary = mine_to_tsv(model, gold_src, tgt, path, pool=pool, search=SearchSettings(
                    mode="pre", beam=beam, target_shards=k, shard_sources=32))
            secs = t.s
            m = read_mined(path)
            top, anym = {}, set()
            for s_id, t_id in zip(m.src_ids, m.tgt_ids):
                top.setdefault(s_id, t_id)  # rows are in rank order: the first is the best
                if pairs.get(s_id) == t_id:
                    anym.add(s_id)
            r_top = sum(top.get(s) == t for s, t in pairs.items()) / len(pairs)
            row = {"target_shards": k, "sources": summary.sources, "seconds": round(secs, 2),
                   "rows": summary.rows, "recall_top1": round(r_top, 4),
                   "recall_any_match": round(len(anym) / len(pairs), 4)}
            print(json.dumps(row), file=sys.stderr, flush=True)
            out.append(row)
    return out


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="tiny synthetic model, < 1 minute")
    ap.add_argument("--model", default=None, help="model directory (default: the imported OPUS-MT)")
    ap.add_argument("--sources", type=int, default=None,
                    help="sources of the timed trie search (quick 600, full 200)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=400, help="full: exact-scored pairs (400)")
    ap.add_argument("--target-shards", default="1,2,4", help="full: K values ('' to skip)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray actors")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    args = ap.parse_args(argv)
    run = benchlib.start("scale_bench", args)

    import torch

    from triemine.models.model_dir import load_model_dir
    from triemine.io.paths import BUCC_ZH_EN, shared_path

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    load_before = _load()
    work = benchlib.work_dir(args.work, "scale_bench.")
    use_ray = not args.no_ray and not args.quick
    if use_ray:
        try:
            import ray  # noqa: F401
        except ImportError:
            use_ray = False
            print("ray not installed: the Ray actors are not measured", file=sys.stderr)
    result = {"machine": machine(), "threads_per_process": int(os.environ["OMP_NUM_THREADS"]),
              "date": time.strftime("%Y-%m-%d"), "mode": "quick" if args.quick else "full"}
    if args.quick:
        from triemine.testing.tiny_model import synthetic_pairs

        model_dir, _ = cached_tiny_model()
        n = args.sources or 600
        pairs = synthetic_pairs(n, seed=3)
        src = write_lines(work / "src.txt", [s for s, _ in pairs])
        tgt = write_lines(work / "tgt.txt", [t for _, t in pairs[: n // 2]]
                     + [t for _, t in synthetic_pairs(1500, seed=4)])
        model = load_model_dir(model_dir)
        search = trie_search(model, src, tgt, work, n, args.beam, 64, use_ray)
        result.update(model="tiny synthetic (triemine.testing.tiny_model)",
                      ray="not run in --quick", scoring="not run in --quick",
                      target_shards="not run in --quick")
    else:
        model_dir = shared_model_dir(args.model, "scale_bench")
        n = args.sources or 200
        bucc = shared_path(*BUCC_ZH_EN)
        zh_lines = (bucc / "zh-en.sample.zh").read_text(encoding="utf-8").splitlines()
        src = write_lines(work / "slice.zh", zh_lines[:n])
        tgt = bucc / "zh-en.sample.en"
        model = load_model_dir(model_dir)
        search = trie_search(model, src, tgt, work, n, args.beam, 16, use_ray)
        result["model"] = Path(model_dir).name
        result["scoring"] = scoring(model, bucc / "zh-en.sample.zh", tgt, work, args.pairs, 100)
        ks = [int(k) for k in args.target_shards.split(",") if k.strip()]
        if ks:
            gold = bucc / "zh-en.sample.gold"
            ids = {line.split("\t")[0] for line in gold.read_text(encoding="utf-8").splitlines()
                   if line.strip()}
            gold_src = write_lines(work / "gold.zh",
                              [ln for ln in zh_lines if ln.split("\t", 1)[0] in ids])
            result["target_shards"] = target_shards(model, gold_src, tgt, gold, work,
                                                    args.beam, ks)
    w = search.pop("workers")
    result.update({"workers": 2, "sources": n, "sent_per_s": w["sent_per_s"],
                   "sent_per_s_1_worker": search["sent_per_s_1_worker"],
                   "speedup_vs_1_worker": w["speedup_vs_1_worker"],
                   "identical_to_single_process": w["identical_to_single_process"],
                   "workers_run": w, "trie_search": search})
    if "ray" in search:
        result["ray"] = search.pop("ray")
    result["cost_inputs"] = {
        "sources_per_s_per_core": search["sent_per_s_1_worker"],
        "pairs_per_s_per_core": (result["scoring"]["pairs_per_s_1_worker"]
                                 if isinstance(result.get("scoring"), dict) else None),
        "trie_bytes_per_target_sentence": search["trie_bytes_per_target_sentence"]}
    result["goal_speedup_1_7"] = w["speedup_vs_1_worker"] >= 1.7
    result["runner_fixed_cost_per_shard_ms"] = w["runner_fixed_cost_per_shard_ms"]
    result["goal_fixed_cost_50ms"] = w["runner_fixed_cost_per_shard_ms"] <= 50
    result["projected_speedup_on_idle_cores"] = w.get("projected_speedup_on_idle_cores")
    result["load_before"] = load_before
    result["load_after"] = _load()
    result["total_s"] = round(run.elapsed(), 1)
    return run.finish(result)


if __name__ == "__main__":
    sys.exit(main())
