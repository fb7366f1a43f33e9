"""The sharded exact scores of candidate pairs, and what the sharded jobs share.

The sharded trie search is :func:`triemine.decoding.driver.mine_to_tsv` given a pool.  Both plan
their shards on the single-process run's own boundaries (blocks of the search, chunks of
:func:`triemine.mining.features.exact_scores`), so the merged output is byte-identical to the
single-process one with the same settings and threads per process.
"""
from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import warnings
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from triemine.decoding.fingerprint import model_fingerprint
from triemine.distributed.shards import MANIFEST, Shard, ShardStore, execute, plan_shards
from triemine.distributed.worker import (EmbedShardTask, GraphShardTask, KnnShardTask, ModelSpec,
                                         ScoreShardTask)
from triemine.embedding.knn import KNN_INDEXES
from triemine.mining.features import exact_scores, score_chunk
from triemine.outfile import atomic_write, npy_bytes
from triemine.paths import content_sha256, remember_sha256

SHARDS_SUFFIX = ".shards"


def model_spec(model, device: str = "cpu") -> ModelSpec:
    spm = getattr(model, "target_spm_path", None)
    return ModelSpec(os.path.abspath(model.path), os.path.abspath(spm) if spm else None, device)


def progress_bar(total_n: int, initial: int, desc: str, unit: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total_n, initial=initial, desc=desc, unit=unit, disable=not enabled,
                dynamic_ncols=True)


def shard_stats(store: ShardStore, computed: Sequence[int]) -> dict:
    """Counts, and the CPU seconds each worker process spent on this run's shards."""
    cpu: dict = {}
    for i in computed:
        e = store.done[str(i)]
        cpu[str(e.get("pid"))] = round(cpu.get(str(e.get("pid")), 0.0) + e.get("cpu_s", 0.0), 3)
    return {"shards": len(store.shards), "shards_computed": len(computed),
            "shards_reused": len(store.reused), "shard_dir": str(store.dir),
            "worker_cpu_s": cpu}


def forced_scores_sharded(model, src_idx: np.ndarray, tgt_idx: np.ndarray, source_path,
                          target_path, work_dir: Path, pool, *, name: str = "scores",
                          reverse: bool = False,
                          progress: bool = False, desc: str = "exact scores", device: str = "cpu",
                          resume: bool = True, chunk: Optional[int] = None,
                          precision: str = "fp32",
                          stale: str = "refuse"):
    """:func:`triemine.mining.features.forced_scores` with the pairs cut into shards of whole
    chunks (``chunk`` pairs: the function's own chunking), so every pair gets the very bits the
    single-process run computes.  ``src_idx`` indexes the model's input lines (the target corpus
    with ``reverse``; ``-1`` the empty source).  Shards live in ``work_dir/<name>.shards/``.
    ``stale``: what a manifest of other pairs does (:class:`~triemine.distributed.shards.ShardStore`).
    Returns ``(score, n_tokens, shard statistics)``."""
    src_idx = np.asarray(src_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    n = len(src_idx)
    if not n:
        return np.zeros(0), np.zeros(0), {"shards": 0, "shards_computed": 0, "shards_reused": 0}
    chunk = chunk or score_chunk(n)
    shards = plan_shards(range(0, n, chunk), n, chunk)
    h = hashlib.sha256(src_idx.tobytes())
    h.update(tgt_idx.tobytes())
    key = {"model": model_fingerprint(model), "source": content_sha256(source_path),
           "target": content_sha256(target_path), "pairs": h.hexdigest(), "reverse": reverse,
           "chunk": chunk, "precision": precision}
    store = ShardStore(Path(work_dir) / f"{name}{SHARDS_SUFFIX}", key, shards,
                       resume=resume, ext="npy", unit="pairs", stale=stale)
    spec = model_spec(model, device)

    def make_task(s: Shard) -> ScoreShardTask:
        return ScoreShardTask(s.id, spec, os.path.abspath(source_path),
                              os.path.abspath(target_path),
                              tuple(src_idx[s.start:s.end].tolist()),
                              tuple(tgt_idx[s.start:s.end].tolist()), chunk=chunk,
                              reverse=reverse, precision=precision)
    reused = sum(len(store.by_id[i]) for i in store.reused)
    with progress_bar(n, reused, desc + " (shards)", "pair", progress) as bar:
        computed = execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
    arr = np.concatenate([np.load(io.BytesIO(store.read(s.id))) for s in store.shards], axis=1)
    return arr[0], arr[1], shard_stats(store, computed)


def exact_scores_sharded(model, cands, source_path, target_path, work_dir: Path, pool,
                         progress: bool = False, reverse: bool = False, device: str = "cpu",
                         resume: bool = True, chunk: Optional[int] = None,
                         precision: str = "fp32"):
    """:func:`triemine.mining.features.exact_scores` on a pool (:func:`forced_scores_sharded`),
    shards in ``work_dir/scores[_rev].shards/``.  Returns ``(candidates, shard statistics)``."""
    stats = {"shards": 0, "shards_computed": 0, "shards_reused": 0}

    def sharded(in_idx, out_idx, name, desc):
        score, ntok, st = forced_scores_sharded(
            model, in_idx, out_idx, source_path, target_path, work_dir, pool, name=name,
            reverse=reverse, progress=progress, device=device, resume=resume, chunk=chunk,
            precision=precision, desc=desc)
        stats.update(st)
        return score, ntok
    return exact_scores(model, cands, (), (), reverse=reverse, scores=sharded), stats


# lines per embedding shard: whole batches of the encoder (SentenceEncoder.encode's 256), so a
# shard's rows are the single call's bits
EMBED_SHARD_LINES = 256 * 32


def embed_sharded(encoder: str, corpus_path, n_lines: int, out_path: Path, pool, *,
                  progress: bool = False, resume: bool = True,
                  lines: int = EMBED_SHARD_LINES) -> np.ndarray:
    """The sentence embeddings of a corpus's ``n_lines`` lines, computed in shards of ``lines``
    lines on ``pool`` (an :class:`~triemine.distributed.local.InlinePool` runs them here) and
    merged into ``out_path`` (a float32 ``.npy``, written atomically once complete), returned
    memory-mapped.  Shards live in ``<out_path>.shards/``; a resumed run redoes only the
    unfinished ones, and a finished ``out_path`` is reused when its shard manifest says it
    belongs to this corpus and encoder.  Workers build the encoder by name, importing the
    package's module that registered it; an encoder registered outside ``triemine`` (a user's
    script or module, which a Ray actor on another node may not be able to import) runs here,
    in this process, on the same shards: the same bits either way."""
    from triemine.distributed.local import InlinePool
    from triemine.embedding import ENCODERS, get_encoder

    if lines % 256:
        raise ValueError("embedding shards must be whole batches of 256 lines")
    if encoder not in ENCODERS:
        get_encoder(encoder)  # the registry's own error, before any shard is planned
    key = {"encoder": encoder, "corpus": content_sha256(corpus_path), "lines": int(n_lines),
           "batch": 256}
    shards = plan_shards(range(0, n_lines, lines), n_lines, lines)
    store = ShardStore(Path(str(out_path) + SHARDS_SUFFIX), key, shards, resume=resume,
                       ext="npy", unit="lines")
    if Path(out_path).is_file() and not store.pending():
        try:  # a merged file that was truncated or replaced is merged again from the shards
            done = np.load(out_path, mmap_mode="r")
            if done.ndim == 2 and done.shape[0] == n_lines:
                return done
        except (OSError, ValueError):
            pass
    corpus = os.path.abspath(corpus_path)
    module = getattr(ENCODERS[encoder], "__module__", "") or ""
    if module.split(".")[0] != "triemine":
        pool = InlinePool()

    def make_task(s: Shard) -> EmbedShardTask:
        return EmbedShardTask(s.id, encoder, corpus, s.start, s.end, module)
    reused = sum(len(store.by_id[i]) for i in store.reused)
    with progress_bar(n_lines, reused, f"embed ({encoder}, shards)", "sent", progress) as bar:
        execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
    _merge_rows(store, n_lines, getattr(ENCODERS[encoder], "dim", 0), Path(out_path))
    return np.load(out_path, mmap_mode="r")


def _merge_rows(store: ShardStore, n_rows: int, dim: int, out_path: Path) -> None:
    """The shards' float32 rows, in order, as one ``.npy`` written atomically by plain writes (a
    full disk is an :class:`~triemine.errors.OutputError` naming the file, not the SIGBUS of a
    memory map that cannot get its page)."""
    parts = (np.ascontiguousarray(np.load(io.BytesIO(store.read(s.id))), dtype=np.float32)
             for s in store.shards)
    first = next(parts, np.zeros((0, dim), dtype=np.float32))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {
        "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
        "shape": (n_rows, first.shape[1] if first.ndim == 2 else dim)})
    digest = hashlib.sha256()

    def hashed(chunks):  # the kNN's keys name the file by content: hash it as it is written
        for chunk in chunks:
            digest.update(chunk)
            yield chunk
    atomic_write(out_path, hashed(itertools.chain([header.getvalue(), first.tobytes()],
                                                  (part.tobytes() for part in parts))),
                 "embeddings")
    remember_sha256(out_path, digest.hexdigest())


# rows per kNN shard, each way: a task is up to this many queries against up to this many
# database rows (one exact pass); corpora of this size or less are one shard, the very call the
# single process made before kNN was sharded
KNN_SHARD_ROWS = 131072
# the exact search up to this many query x database pairs (about 90 s a direction with two
# workers at the 9.4 x 10^7 pairs/s per process measured on 512-dim USE vectors, 2026-11-25);
# above, HNSW graphs (triemine.embedding.hnsw), when the database has at least INDEX_MIN_ROWS
# rows: on the haystack's million rows they found the exact top 4 with recall 0.995 where IVF
# reached 0.975, but their build and walk took 6x the exact search's CPU seconds there (8,624
# queries: too few to pay for a build; docs/scale.md)
KNN_EXACT_PAIRS = 2 ** 34
INDEX_MIN_ROWS = 65536
# lists probed per query; None: an eighth of the lists, at least 64 (ivf_nprobe).  Measured on
# the haystack (8,624 Chinese sources against 1,000,000 English targets, 4,000 lists,
# bench/haystack_bench.py --ivf-from): recall@4 against the exact search 0.856 probing 64
# lists, 0.949 probing 256, 0.975 probing 512; the gold target in the top 4 for 98.4 %, 99.2 %
# and 99.2 % of the gold sources (99.2 % exact).  Cross-lingual queries sit away from the
# English rows' centroids, so they need many probes.
IVF_NPROBE = None
IVF_PROBE_FRACTION = 8


def ivf_nprobe(n_database: int) -> int:
    """The default lists probed per query: an eighth of the index's lists, at least 64 (all of
    them in an index of 64 lists or fewer)."""
    from triemine.embedding.ivf import n_lists

    nlist = n_lists(n_database)
    return min(nlist, max(64, nlist // IVF_PROBE_FRACTION))


def knn_method(n_queries: int, n_database: int, index: str = "auto") -> str:
    """``exact``, ``ivf`` or ``hnsw`` for a search of ``n_queries`` against ``n_database``
    rows."""
    if index not in KNN_INDEXES:
        raise ValueError(f"kNN index must be one of {', '.join(KNN_INDEXES)}, not {index!r}")
    if index != "auto":
        return index
    big = n_queries * n_database > KNN_EXACT_PAIRS and n_database >= INDEX_MIN_ROWS
    return "hnsw" if big else "exact"


def knn_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                name: str, progress: bool = False, resume: bool = True,
                rows: int = KNN_SHARD_ROWS, index: str = "auto",
                nprobe: Optional[int] = IVF_NPROBE, graph_rows: Optional[int] = None,
                ef_search: Optional[int] = None):
    """``(sim, idx)``, each (n_queries, k'): the top-k inner products of every row of
    ``queries_path`` against ``database_path`` (``.npy`` files, memory-mapped), in shards on
    ``pool`` (an ``InlinePool``: in this process); shards live in ``work_dir/<name>.shards/``.

    ``exact`` (:func:`knn_method` chooses by size): a grid of shards (up to ``rows`` queries
    against up to ``rows`` database rows each) merged per query, the k best of its shards by
    similarity, ties to the lower row, as one exhaustive search ranks them.  ``ivf``: the
    database in an IVF index (``work_dir/<name>.ivf/``, built once: quantiser trained on a seeded
    sample, rows assigned to lists by an exact grid search against the centroids), searched in
    shards of ``rows`` queries probing ``nprobe`` lists each (None: :func:`ivf_nprobe`).
    ``hnsw``: HNSW graphs of ``graph_rows`` database rows each, built on the pool one thread a
    graph, walked by a grid of ``rows`` queries x one graph with ``ef_search`` candidates
    (None: :func:`triemine.embedding.hnsw.graph_plan`'s; :func:`_hnsw_sharded`).  Every way the
    plan depends on the data alone, so any number of workers gives the same bits."""
    n_q = np.load(queries_path, mmap_mode="r").shape[0]
    n_d = np.load(database_path, mmap_mode="r").shape[0]
    method = knn_method(n_q, n_d, index) if n_d else "exact"
    if method == "ivf":
        return _ivf_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                            progress=progress, resume=resume, rows=rows, nprobe=nprobe)
    if method == "hnsw":
        return _hnsw_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                             progress=progress, resume=resume, rows=rows, graph_rows=graph_rows,
                             ef_search=ef_search)
    return _grid_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                         progress=progress, resume=resume, rows=rows)


def _grid_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                  name: str, progress: bool, resume: bool, rows: int, stale: str = "refuse",
                  graphs: Optional[ShardStore] = None, ef_search: int = 0):
    """The search as a grid of cells, ``rows`` queries against a range of database rows each
    (``rows`` of them, or with ``graphs`` one graph's rows, walked through its graph), merged
    per query.  The cells of one graph are planned together, so a worker walking them keeps
    that graph loaded."""
    n_q = np.load(queries_path, mmap_mode="r").shape[0]
    n_d = np.load(database_path, mmap_mode="r").shape[0]
    kk = min(int(k), n_d)
    q_ranges = [(a, min(a + rows, n_q)) for a in range(0, n_q, rows)] or [(0, 0)]
    d_ranges = ([(a, min(a + rows, n_d)) for a in range(0, n_d, rows)] or [(0, 0)]
                if graphs is None else [(g.start, g.end) for g in graphs.shards])
    cell = ({(qi, di): qi * len(d_ranges) + di for qi in range(len(q_ranges))
             for di in range(len(d_ranges))} if graphs is None else
            {(qi, di): di * len(q_ranges) + qi for qi in range(len(q_ranges))
             for di in range(len(d_ranges))})
    grid = {c: (q_ranges[qi], d_ranges[di], di) for (qi, di), c in cell.items()}
    shards = [Shard(i, i, i + 1) for i in range(len(grid))]  # one grid cell each
    key = {"queries": content_sha256(queries_path), "database": content_sha256(database_path),
           "k": kk, "rows": rows}
    if graphs is not None:  # new graphs (a rebuilt shard) make the old cells stale
        key.update(graphs=graphs.key, graph_bytes=[e["bytes"] for e in graphs.entries()],
                   ef_search=int(ef_search))

    def make_task(s: Shard) -> KnnShardTask:
        q, d, di = grid[s.id]
        return KnnShardTask(s.id, os.path.abspath(queries_path), os.path.abspath(database_path),
                            q, d, kk, graph="" if graphs is None else
                            os.path.abspath(graphs.path(graphs.shards[di].id)),
                            ef_search=int(ef_search))
    store = ShardStore(Path(work_dir) / f"{name}{SHARDS_SUFFIX}", key, shards, resume=resume,
                       ext="npz", unit="cells", stale=stale)
    with progress_bar(len(shards), len(store.reused), f"kNN ({name}, shards)", "shard",
                      progress) as bar:
        execute(store, make_task, pool, lambda s, _info: bar.update(1))

    def merged(qi: int):
        parts = [np.load(io.BytesIO(store.read(cell[qi, di]))) for di in range(len(d_ranges))]
        sim = np.concatenate([p["sim"] for p in parts], axis=1)
        idx = np.concatenate([p["idx"] for p in parts], axis=1)
        if len(parts) > 1:  # by similarity, then the lower row
            order = np.lexsort((idx, -sim), axis=1)[:, :kk]
            sim, idx = np.take_along_axis(sim, order, axis=1), np.take_along_axis(idx, order, 1)
        return sim, idx
    return _merged_lists(store, Path(work_dir), name, n_q, kk,
                         (merged(qi) for qi in range(len(q_ranges))))


def _merged_lists(store: ShardStore, work_dir: Path, name: str, n_rows: int, k: int,
                  blocks) -> tuple:
    """``(sim, idx)`` of a search's ``n_rows`` queries, from ``blocks`` (each ``(sim, idx)`` of
    the next queries, merged from ``store``'s shards), written to ``work_dir/<name>.lists.<tag>.npy``
    as one ``.npy`` of records (k float32 similarities, k int64 rows: 12 k bytes a query) and
    returned memory-mapped, so the driver does not hold the lists of 10^8 sentences (4.8 GB a
    side at k = 4) in its memory.  ``tag`` digests the store's key and shard entries, so a
    resumed run whose shards are all reused reads the file it merged before (``blocks`` is not
    read) and any other run merges again."""
    if n_rows == 0 or k == 0:  # nothing to map
        return np.zeros((n_rows, k), dtype=np.float32), np.zeros((n_rows, k), dtype=np.int64)
    tag = hashlib.sha256(json.dumps({"key": store.key, "done": store.entries()},
                                    sort_keys=True).encode("utf-8")).hexdigest()[:16]
    path = work_dir / f"{name}.lists.{tag}.npy"
    dtype = np.dtype([("sim", "<f4", (k,)), ("idx", "<i8", (k,))])
    if path.is_file():
        try:
            lists = np.load(path, mmap_mode="r")
            if lists.shape == (n_rows,) and lists.dtype == dtype:
                return lists["sim"], lists["idx"]
        except (OSError, ValueError):
            pass
    for old in work_dir.glob(f"{name}.lists.*.npy"):  # an earlier run's
        old.unlink(missing_ok=True)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {
        "descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
        "shape": (n_rows,)})

    def records():
        yield header.getvalue()
        for sim, idx in blocks:
            rec = np.empty(len(sim), dtype=dtype)
            rec["sim"], rec["idx"] = sim, idx
            yield rec.tobytes()
    atomic_write(path, records(), "neighbour lists")
    lists = np.load(path, mmap_mode="r")
    if lists.shape != (n_rows,):
        raise RuntimeError(f"{path}: {lists.shape[0]} rows of neighbour lists, not {n_rows}")
    return lists["sim"], lists["idx"]


def ivf_index(database_path: Path, work_dir: Path, pool, *, name: str, progress: bool = False,
              resume: bool = True, rows: int = KNN_SHARD_ROWS, seed: int = 0) -> Path:
    """The IVF index file of ``database_path`` in ``work_dir/<name>.ivf/``: reused when whole
    and built for this database; otherwise (none, truncated, another database's: a warning names
    it) built again: centroids trained here, the rows' lists found on ``pool`` (an exact
    1-NN grid search against the centroids), the index written once, atomically."""
    import warnings

    from triemine.embedding import ivf

    db = np.load(database_path, mmap_mode="r")
    nlist = ivf.n_lists(len(db))
    directory = Path(work_dir) / f"{name}.ivf"
    key = {"database": content_sha256(database_path), "nlist": nlist, "seed": seed,
           "per_list": 64}
    try:
        return ivf.check_index(directory, key)
    except ivf.StaleIndex as exc:
        if (directory / ivf.INDEX).exists():
            warnings.warn(f"{exc}; building it again", stacklevel=2)
    directory.mkdir(parents=True, exist_ok=True)
    centroids = directory / "centroids.npy"
    atomic_write(centroids, npy_bytes(ivf.train_centroids(db, nlist, seed)), "kNN centroids")
    _, assign = _grid_sharded(database_path, centroids, 1, directory, pool, name="assign",
                               progress=progress, resume=resume, rows=rows, stale="restart")
    index = ivf.build_index(np.load(centroids), db, assign[:, 0])
    path = ivf.write_index(index, directory, key)
    del index
    return path


def _ivf_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                 name: str, progress: bool, resume: bool, rows: int, nprobe: Optional[int]):
    from triemine.embedding import ivf

    index_path = ivf_index(database_path, work_dir, pool, name=name, progress=progress,
                           resume=resume, rows=rows)
    meta = (index_path.parent / ivf.META).read_text(encoding="utf-8")
    n_q = np.load(queries_path, mmap_mode="r").shape[0]
    n_d = np.load(database_path, mmap_mode="r").shape[0]
    kk = min(int(k), n_d)
    nprobe = nprobe or ivf_nprobe(n_d)
    shards = plan_shards(range(0, n_q, rows), n_q, rows)
    key = {"queries": content_sha256(queries_path), "index": meta, "k": kk, "rows": rows,
           "nprobe": int(nprobe)}
    # a rebuilt index (named in a warning) makes the old search shards stale: start over
    store = ShardStore(Path(work_dir) / f"{name}{SHARDS_SUFFIX}", key, shards, resume=resume,
                       ext="npz", unit="queries", stale="restart")

    def make_task(s: Shard) -> KnnShardTask:
        return KnnShardTask(s.id, os.path.abspath(queries_path), os.path.abspath(database_path),
                            (s.start, s.end), (0, n_d), kk, index=os.path.abspath(index_path),
                            nprobe=int(nprobe))
    with progress_bar(n_q, sum(len(store.by_id[i]) for i in store.reused),
                      f"kNN ({name}, IVF shards)", "query", progress) as bar:
        execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))

    def parts():
        for s in store.shards:
            p = np.load(io.BytesIO(store.read(s.id)))
            yield p["sim"].astype(np.float32), p["idx"]
    return _merged_lists(store, Path(work_dir), name, n_q, kk, parts())


def _hnsw_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                  name: str, progress: bool, resume: bool, rows: int,
                  graph_rows: Optional[int] = None, ef_search: Optional[int] = None):
    """HNSW graphs of ``graph_rows`` database rows each (``work_dir/<name>.hnsw/``, built on
    ``pool``, one thread a graph: the same graph with any workers), then the grid search walking
    them (:mod:`triemine.embedding.hnsw`).  A graph file that is truncated or not the one the
    manifest names is built again."""
    import faiss

    from triemine.embedding import hnsw

    n_d = np.load(database_path, mmap_mode="r").shape[0]
    planned_rows, planned_ef = hnsw.graph_plan(n_d)
    graph_rows, ef_search = graph_rows or planned_rows, ef_search or planned_ef
    plan = [Shard(i, a, min(a + graph_rows, n_d)) for i, a in enumerate(range(0, n_d, graph_rows))]
    key = {"database": content_sha256(database_path), "m": hnsw.M,
           "ef_construction": hnsw.EF_CONSTRUCTION, "faiss": faiss.__version__}
    directory = Path(work_dir) / f"{name}.hnsw"
    try:  # graphs of another database (or built otherwise) are named, then built again
        old = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))["key"]["settings"]
    except (OSError, ValueError, KeyError, TypeError):
        old = None
    if resume and old is not None and old != json.loads(json.dumps(key)):
        warnings.warn(f"{directory / MANIFEST}: HNSW graphs built for another database or "
                      f"other settings ({old}; this job: {key}); building them again",
                      stacklevel=2)
    graphs = ShardStore(directory, key, plan, resume=resume, ext="faiss", unit="rows",
                        stale="restart")

    def make_task(s: Shard) -> GraphShardTask:
        return GraphShardTask(s.id, os.path.abspath(database_path), (s.start, s.end),
                              str(graphs.path(s.id).resolve()), hnsw.M, hnsw.EF_CONSTRUCTION)
    with progress_bar(n_d, sum(len(graphs.by_id[i]) for i in graphs.reused),
                      f"kNN ({name}, HNSW graphs)", "row", progress) as bar:
        execute(graphs, make_task, pool, lambda s, _info: bar.update(len(s)))
    return _grid_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                         progress=progress, resume=resume, rows=rows, stale="restart",
                         graphs=graphs, ef_search=ef_search)
