"""The sharded kNN searches: exact grids of cells merged per query, an IVF index, HNSW graphs.

Every plan depends on the data alone (the queries, the database, ``rows``), never on the number
of workers, so any pool gives the same bits; cells and graphs (the tasks of
:mod:`triemine.embedding.knn_tasks`) go through the one shard mechanism of
:mod:`triemine.distributed.shards` (manifest, atomic files, resume).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from triemine.io import cached_npy, load_npy, npy_writer, write_npy
from triemine.distributed.shards import SHARDS_SUFFIX, Shard, ShardStore
from triemine.distributed.stage import (Stage, npy_payload, run_stage, run_stages,
                                        stage_key)
from triemine.embedding import hnsw, ivf
from triemine.embedding.knn import KNN_INDEXES
from triemine.embedding.knn_tasks import GraphShardTask, KnnShardTask


# rows per kNN shard, each way: a task is up to this many queries against up to this many
# database rows (one exact pass); corpora of this size or less are one shard, the very call the
# single process made before kNN was sharded
KNN_SHARD_ROWS = 131072
# the exact search up to this many query x database pairs; above, HNSW graphs
# (triemine.embedding.hnsw), when the database has at least INDEX_MIN_ROWS rows (see
# docs/decisions.md#knn-index-choice-auto)
KNN_EXACT_PAIRS = 2 ** 34
INDEX_MIN_ROWS = 65536
# lists probed per query; None: an eighth of the lists, at least 64 (ivf_nprobe).
# Cross-lingual queries sit away from the English rows' centroids, so they need many probes
# (see docs/decisions.md#ivf-recall).
IVF_NPROBE = None
IVF_PROBE_FRACTION = 8
# Off the CPU a cell is up to DEVICE_KNN_QUERY_ROWS queries against this many database rows, read
# from their mapped file a block at a time (triemine.embedding.knn.device_knn): a GPU's products
# are some 300 CPU cores' (see docs/decisions.md#device-knn), where the
# CPU's cells of 131,072 x 131,072 would be a second of arithmetic each and 6 MB of merged lists
# (3.7 TB of cell files a direction at 10^8 x 10^8)
DEVICE_KNN_DATABASE_ROWS = 1 << 23
# ... and up to this many queries (2 GB on the device at 512 dimensions): each query range reads
# the whole database once, 205 GB a range at 10^8 rows, so fewer ranges read less (96 of them a
# direction at 10^8, each cell about 5 minutes of products)
DEVICE_KNN_QUERY_ROWS = 1 << 20


def ivf_nprobe(n_database: int) -> int:
    """The default lists probed per query: an eighth of the index's lists, at least 64 (all of
    them in an index of 64 lists or fewer)."""
    nlist = ivf.n_lists(n_database)
    return min(nlist, max(64, nlist // IVF_PROBE_FRACTION))


def knn_method(n_queries: int, n_database: int, index: str = "auto", device: str = "cpu") -> str:
    """``exact``, ``ivf`` or ``hnsw`` for a search of ``n_queries`` against ``n_database``
    rows; ``auto`` on a ``device`` other than the CPU is the exact search at any size (see
    docs/decisions.md#device-knn)."""
    if index not in KNN_INDEXES:
        raise ValueError(f"kNN index must be one of {', '.join(KNN_INDEXES)}, not {index!r}")
    if index != "auto":
        return index
    if device != "cpu":
        return "exact"
    big = n_queries * n_database > KNN_EXACT_PAIRS and n_database >= INDEX_MIN_ROWS
    return "hnsw" if big else "exact"


def knn_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                name: str, progress: bool = False, resume: bool = True,
                rows: int = KNN_SHARD_ROWS, index: str = "auto",
                nprobe: Optional[int] = IVF_NPROBE, graph_rows: Optional[int] = None,
                ef_search: Optional[int] = None, device: str = "cpu"):
    """``(sim, idx)``, each (n_queries, k'): the top-k inner products of every row of
    ``queries_path`` against ``database_path`` (``.npy`` files, memory-mapped), in shards on
    ``pool`` (an ``InlinePool``: in this process); shards live in ``work_dir/<name>.shards/``.

    ``exact`` (:func:`knn_method` chooses by size): a grid of shards (up to ``rows`` queries
    against up to ``rows`` database rows each) merged per query, the k best of its shards by
    similarity, ties to the lower row (faiss lists exactly tied rows of one cell in its heap's
    order).  ``ivf``: the database in an IVF index (``work_dir/<name>.ivf/``, built once: quantiser
    trained on a seeded
    sample, rows assigned to lists by an exact grid search against the centroids), searched in
    shards of ``rows`` queries probing ``nprobe`` lists each (None: :func:`ivf_nprobe`).
    ``hnsw``: HNSW graphs of ``graph_rows`` database rows each, built on the pool one thread a
    graph, walked by a grid of ``rows`` queries x one graph with ``ef_search`` candidates
    (None: :func:`triemine.embedding.hnsw.graph_plan`'s; :func:`_hnsw_sharded`).  Every way the
    plan depends on the data alone, so any number of workers gives the same bits.  ``device``:
    where the exact cells run (off the CPU: cells of ``DEVICE_KNN_QUERY_ROWS`` x
    ``DEVICE_KNN_DATABASE_ROWS``); the indexes are faiss's on the CPU."""
    n_q = np.load(queries_path, mmap_mode="r").shape[0]
    n_d = np.load(database_path, mmap_mode="r").shape[0]
    method = knn_method(n_q, n_d, index, device) if n_d else "exact"
    if method == "ivf":
        return _ivf_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                            progress=progress, resume=resume, rows=rows, nprobe=nprobe)
    if method == "hnsw":
        return _hnsw_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                             progress=progress, resume=resume, rows=rows, graph_rows=graph_rows,
                             ef_search=ef_search)
    return _grid_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                         progress=progress, resume=resume, rows=rows, device=device)


def knn_searches(searches: Sequence[tuple], k: int, work_dir: Path, pool, *,
                 progress: bool = False, resume: bool = True, rows: int = KNN_SHARD_ROWS,
                 index: str = "auto", nprobe: Optional[int] = IVF_NPROBE,
                 graph_rows: Optional[int] = None,
                 ef_search: Optional[int] = None, device: str = "cpu") -> List[tuple]:
    """:func:`knn_sharded` of every ``(queries_path, database_path, name)`` of ``searches``
    (a job's two directions), ``(sim, idx)`` of each.  The exact ones' cells are queued on
    ``pool`` together (each direction of a small job is a single cell: one after the other,
    a worker idles through each); an index search (IVF, HNSW) runs on its own, after them.
    The same files and bits as one call each."""
    out: List[Optional[tuple]] = [None] * len(searches)
    exact = []
    for i, (queries_path, database_path, name) in enumerate(searches):
        n_q = np.load(queries_path, mmap_mode="r").shape[0]
        n_d = np.load(database_path, mmap_mode="r").shape[0]
        if (knn_method(n_q, n_d, index, device) if n_d else "exact") == "exact":
            exact.append(i)
    plans = [_grid_plan(searches[i][0], searches[i][1], k, work_dir, name=searches[i][2],
                        resume=resume, rows=rows, device=device, progress=progress)
             for i in exact]
    for i, res in zip(exact, _grid_searches(plans, pool)):
        out[i] = res
    for i, (queries_path, database_path, name) in enumerate(searches):
        if out[i] is None:
            out[i] = knn_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                                 progress=progress, resume=resume, rows=rows, index=index,
                                 nprobe=nprobe, graph_rows=graph_rows, ef_search=ef_search,
                                 device=device)
    return out


def _grid_plan(queries_path: Path, database_path: Path, k: int, work_dir: Path, *, name: str,
               resume: bool, rows: int, stale: str = "refuse",
               graphs: Optional[ShardStore] = None, ef_search: int = 0,
               device: str = "cpu", progress: bool = False) -> tuple:
    """The search as a grid of cells (:func:`_grid_cells`; off the CPU
    ``DEVICE_KNN_QUERY_ROWS`` x ``DEVICE_KNN_DATABASE_ROWS``), merged per query.  Returns
    ``(stage, finish)``: the cells' stage, and ``finish(ran)``, the merged ``(sim, idx)``."""
    n_q, n_d = (np.load(p, mmap_mode="r").shape[0] for p in (queries_path, database_path))
    kk, on_cpu = min(int(k), n_d), device == "cpu" or graphs is not None
    q_rows, d_rows = (rows, rows) if on_cpu else (DEVICE_KNN_QUERY_ROWS, DEVICE_KNN_DATABASE_ROWS)
    q_ranges, d_ranges, cell = _grid_cells(n_q, n_d, q_rows, d_rows, graphs)
    grid = {c: (q_ranges[qi], d_ranges[di], di) for (qi, di), c in cell.items()}
    key = dict({"k": kk, "rows": rows},  # other products, other cells: never mixed
               **({} if on_cpu else dict(device=device, query_rows=q_rows, database_rows=d_rows)),
               **_graphs_key(graphs, ef_search))
    queries, database = os.path.abspath(queries_path), os.path.abspath(database_path)
    stage = Stage(f"kNN ({name}, shards)", Path(work_dir) / f"{name}{SHARDS_SUFFIX}", key,
                  [Shard(i, i, i + 1) for i in range(len(grid))],  # one grid cell each
                  lambda s: KnnShardTask(
                      s.id, queries, database, grid[s.id][0], grid[s.id][1], kk,
                      graph="" if graphs is None else
                      os.path.abspath(graphs.path(graphs.shards[grid[s.id][2]].id)),
                      ef_search=int(ef_search), device=device if graphs is None else "cpu"),
                  inputs={"queries": queries_path, "database": database_path}, unit="cells",
                  bar_unit="shard", ext="npz", resume=resume, stale=stale, progress=progress,
                  task=KnnShardTask)
    return stage, lambda ran: _merged_lists(
        ran.store, Path(work_dir), name, n_q, kk,
        (_merged_cells(ran.store, [cell[qi, di] for di in range(len(d_ranges))], kk)
         for qi in range(len(q_ranges))))


def _graphs_key(graphs: Optional[ShardStore], ef_search: int) -> dict:
    """What the cells of a search walking ``graphs`` add to their key: new graphs (a rebuilt
    shard) make the old cells stale."""
    if graphs is None:
        return {}
    return dict(graphs=graphs.key, graph_bytes=[e["bytes"] for e in graphs.entries()],
                ef_search=int(ef_search))


def _grid_cells(n_q: int, n_d: int, q_rows: int, d_rows: int, graphs: Optional[ShardStore]):
    """``(query ranges, database ranges, {(query range, database range): cell id})`` of a grid
    of ``q_rows`` queries x ``d_rows`` database rows a cell (with ``graphs``: one graph's rows,
    walked through its graph; a graph's cells numbered together, so a worker walking them keeps
    that graph loaded)."""
    q_ranges = [(a, min(a + q_rows, n_q)) for a in range(0, n_q, q_rows)] or [(0, 0)]
    d_ranges = ([(a, min(a + d_rows, n_d)) for a in range(0, n_d, d_rows)] or [(0, 0)]
                if graphs is None else [(g.start, g.end) for g in graphs.shards])
    cell = ({(qi, di): qi * len(d_ranges) + di for qi in range(len(q_ranges))
             for di in range(len(d_ranges))} if graphs is None else
            {(qi, di): di * len(q_ranges) + qi for qi in range(len(q_ranges))
             for di in range(len(d_ranges))})
    return q_ranges, d_ranges, cell


def _merged_cells(store: ShardStore, cells: Sequence[int], kk: int):
    """``(sim, idx)`` of one query range from its ``cells`` (one per database range, in order):
    the ``kk`` best of each query's lists."""
    parts = [np.load(io.BytesIO(store.read(c))) for c in cells]
    sim = np.concatenate([p["sim"] for p in parts], axis=1)
    idx = np.concatenate([p["idx"] for p in parts], axis=1)
    if len(parts) > 1:  # by similarity, then the lower row (within a cell faiss lists
        # exactly tied rows in its heap's order, the higher one first as measured; the plan,
        # and so which cells merge, is the same for any workers)
        order = np.lexsort((idx, -sim), axis=1)[:, :kk]
        sim, idx = np.take_along_axis(sim, order, axis=1), np.take_along_axis(idx, order, 1)
    return sim, idx


def _grid_searches(plans: Sequence[tuple], pool) -> List[tuple]:
    """The ``(stage, finish)`` of :func:`_grid_plan` run together on ``pool``, each merged;
    ``(sim, idx)`` of each."""
    return [finish(ran) for ran, (_stage, finish)
            in zip(run_stages([stage for stage, _finish in plans], pool), plans)]


def _grid_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                  name: str, progress: bool, resume: bool, rows: int, stale: str = "refuse",
                  graphs: Optional[ShardStore] = None, ef_search: int = 0,
                  device: str = "cpu"):
    """:func:`_grid_plan`'s search, run and merged: ``(sim, idx)``."""
    return _grid_searches([_grid_plan(queries_path, database_path, k, work_dir, name=name,
                                      resume=resume, rows=rows, stale=stale, graphs=graphs,
                                      ef_search=ef_search, device=device, progress=progress)],
                          pool)[0]


def _merged_lists(store: ShardStore, work_dir: Path, name: str, n_rows: int, k: int,
                  blocks) -> tuple:
    """``(sim, idx)`` of a search's ``n_rows`` queries, from ``blocks`` (each ``(sim, idx)`` of
    the next queries, merged from ``store``'s shards), written to
    ``work_dir/<name>.lists.<tag>.npy``
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
    if path.is_file():  # damaged: named in a warning, written again from the shards
        lists = cached_npy(path, "neighbour lists", dtype, (n_rows,))
        if lists is not None:
            return lists["sim"], lists["idx"]
    for old in work_dir.glob(f"{name}.lists.*.npy"):  # an earlier run's
        old.unlink(missing_ok=True)
    with npy_writer(path, dtype, (n_rows,), "neighbour lists") as f:
        for sim, idx in blocks:
            rec = np.empty(len(sim), dtype=dtype)
            rec["sim"], rec["idx"] = sim, idx
            f.write(rec)
    lists = load_npy(path, "neighbour lists", written=True)
    return lists["sim"], lists["idx"]


def ivf_index(database_path: Path, work_dir: Path, pool, *, name: str, progress: bool = False,
              resume: bool = True, rows: int = KNN_SHARD_ROWS, seed: int = 0) -> Path:
    """The IVF index file of ``database_path`` in ``work_dir/<name>.ivf/``: reused when whole
    and built for this database; otherwise (none, truncated, another database's: a warning names
    it) built again: centroids trained here, the rows' lists found on ``pool`` (an exact
    1-NN grid search against the centroids), the index written once, atomically."""
    db = np.load(database_path, mmap_mode="r")
    nlist = ivf.n_lists(len(db))
    directory = Path(work_dir) / f"{name}.ivf"
    key = stage_key({"nlist": nlist, "seed": seed, "per_list": 64},
                    {"database": database_path})
    try:
        return ivf.check_index(directory, key)
    except ivf.StaleIndex as exc:
        if (directory / ivf.INDEX).exists():
            warnings.warn(f"{exc}; building it again", stacklevel=2)
    directory.mkdir(parents=True, exist_ok=True)
    centroids = directory / "centroids.npy"
    write_npy(centroids, ivf.train_centroids(db, nlist, seed), "kNN centroids")
    _, assign = _grid_sharded(database_path, centroids, 1, directory, pool, name="assign",
                               progress=progress, resume=resume, rows=rows, stale="restart")
    index = ivf.build_index(load_npy(centroids, "kNN centroids", mmap=False), db, assign[:, 0])
    path = ivf.write_index(index, directory, key)
    del index
    return path


def _ivf_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                 name: str, progress: bool, resume: bool, rows: int, nprobe: Optional[int]):
    index_path = ivf_index(database_path, work_dir, pool, name=name, progress=progress,
                           resume=resume, rows=rows)
    meta = (index_path.parent / ivf.META).read_text(encoding="utf-8")
    n_q = np.load(queries_path, mmap_mode="r").shape[0]
    n_d = np.load(database_path, mmap_mode="r").shape[0]
    kk = min(int(k), n_d)
    nprobe = nprobe or ivf_nprobe(n_d)
    # a rebuilt index (named in a warning) makes the old search shards stale: start over
    ran = run_stage(Stage(
        f"kNN ({name}, IVF shards)", Path(work_dir) / f"{name}{SHARDS_SUFFIX}",
        {"index": meta, "k": kk, "rows": rows, "nprobe": int(nprobe)}, (range(0, n_q, rows), n_q,
                                                                        rows),
        lambda s: KnnShardTask(s.id, os.path.abspath(queries_path),
                               os.path.abspath(database_path), (s.start, s.end), (0, n_d), kk,
                               index=os.path.abspath(index_path), nprobe=int(nprobe)),
        inputs={"queries": queries_path}, unit="queries", bar_unit="query", ext="npz",
        resume=resume, stale="restart", progress=progress, task=KnnShardTask), pool)
    parts = ((p["sim"].astype(np.float32), p["idx"]) for p in ran.parts(npy_payload))
    return _merged_lists(ran.store, Path(work_dir), name, n_q, kk, parts)


def _hnsw_sharded(queries_path: Path, database_path: Path, k: int, work_dir: Path, pool, *,
                  name: str, progress: bool, resume: bool, rows: int,
                  graph_rows: Optional[int] = None, ef_search: Optional[int] = None):
    """HNSW graphs of ``graph_rows`` database rows each (``work_dir/<name>.hnsw/``, built on
    ``pool``, one thread a graph: the same graph with any workers), then the grid search walking
    them (:mod:`triemine.embedding.hnsw`).  A graph file that is truncated or not the one the
    manifest names is built again."""
    import faiss

    n_d = np.load(database_path, mmap_mode="r").shape[0]
    planned_rows, planned_ef = hnsw.graph_plan(n_d)
    graph_rows, ef_search = graph_rows or planned_rows, ef_search or planned_ef
    plan = [Shard(i, a, min(a + graph_rows, n_d)) for i, a in enumerate(range(0, n_d, graph_rows))]
    directory = Path(work_dir) / f"{name}.hnsw"
    stage = Stage(f"kNN ({name}, HNSW graphs)", directory,
                  {"m": hnsw.M, "ef_construction": hnsw.EF_CONSTRUCTION,
                   "faiss": faiss.__version__}, plan, inputs={"database": database_path},
                  unit="rows", bar_unit="row", ext="faiss", resume=resume, stale="restart",
                  progress=progress, task=GraphShardTask,
                  stale_note="HNSW graphs built for another database or other settings")
    stage.make_task = lambda s: GraphShardTask(
        s.id, os.path.abspath(database_path), (s.start, s.end),
        str(stage.store.path(s.id).resolve()), hnsw.M, hnsw.EF_CONSTRUCTION)
    graphs = run_stage(stage, pool).store
    return _grid_sharded(queries_path, database_path, k, work_dir, pool, name=name,
                         progress=progress, resume=resume, rows=rows, stale="restart",
                         graphs=graphs, ef_search=ef_search)
