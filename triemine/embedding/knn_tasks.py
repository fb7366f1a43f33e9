"""The kNN stage's shard tasks and the indexes they keep loaded in a worker.

* :class:`KnnShardTask`: exact top-k inner products of a range of query rows against a range of
  database rows (both ``.npy`` files, memory-mapped); payload: ``.npz`` bytes of ``sim``
  (float32) and ``idx`` (int64, global rows).  With ``index``, an IVF index
  (:mod:`triemine.embedding.ivf`) is searched instead; with ``graph``, the rows' HNSW graph
  (:mod:`triemine.embedding.hnsw`) is walked.
* :class:`GraphShardTask`: the HNSW graph of a range of database rows, built in one thread;
  payload: a :class:`~triemine.distributed.shards.FilePayload`, the graph file the worker wrote.

Both are tasks of :mod:`triemine.distributed.tasks`; :mod:`triemine.embedding.knn_shards` plans
them.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import ClassVar, Tuple

import numpy as np

from triemine.distributed.shards import TMP, FilePayload
from triemine.distributed.tasks import WorkerContext
from triemine.embedding import hnsw, ivf
from triemine.embedding.knn import knn


@dataclass(frozen=True)
class IvfIndex:
    """An IVF index file, memory-mapped (its pages shared), probing ``nprobe`` lists."""

    path: str
    nprobe: int

    def load(self, ctx: WorkerContext):
        return ivf.load_index(self.path, self.nprobe)


@dataclass(frozen=True)
class HnswGraph:
    """An HNSW graph file, its rows memory-mapped; one held at a time (the links of 10^6 rows
    are about 0.3 GB)."""

    single: ClassVar[bool] = True
    path: str
    ef_search: int

    def load(self, ctx: WorkerContext):
        return hnsw.load_graph(self.path, self.ef_search)


@dataclass(frozen=True)
class KnnShardTask:
    shard: int
    queries: str             # .npy of L2-normalised float32 rows
    database: str
    rows: Tuple[int, int]    # query rows [a, b)
    base: Tuple[int, int]    # database rows [a, b)
    k: int
    index: str = ""          # an IVF index file (triemine.embedding.ivf) searched instead
    nprobe: int = 0
    graph: str = ""          # the HNSW graph of the base rows (triemine.embedding.hnsw) instead
    ef_search: int = 0
    device: str = "cpu"      # an exact search's device (triemine.embedding.knn.device_knn)

    def needs(self) -> list:
        if self.index:
            return [IvfIndex(self.index, self.nprobe)]
        if self.graph:
            return [HnswGraph(self.graph, self.ef_search)]
        return []

    def run(self, ctx: WorkerContext) -> Tuple[bytes, dict]:
        q = np.load(self.queries, mmap_mode="r")[self.rows[0]:self.rows[1]]
        if self.index:
            return self._ivf_search(ctx, q)
        if self.graph:
            return self._graph_search(ctx, q)
        d = np.load(self.database, mmap_mode="r")[self.base[0]:self.base[1]]
        sim, idx = knn(q, d, self.k, device=self.device)
        buf = io.BytesIO()
        np.savez(buf, sim=sim, idx=idx + self.base[0])
        return buf.getvalue(), {"queries": len(q), "database": len(d)}

    def _ivf_search(self, ctx: WorkerContext, q) -> Tuple[bytes, dict]:
        """The index's ``k`` best for each query; a query whose probed lists held fewer than
        ``k`` rows is searched again over every list."""
        index = ctx.get(IvfIndex(self.index, self.nprobe))
        index.nprobe = self.nprobe
        sim, idx = ivf.search(index, q, self.k)
        short = np.flatnonzero((idx < 0).any(axis=1))
        if len(short):
            index.nprobe = index.nlist
            sim[short], idx[short] = ivf.search(index, np.asarray(q)[short], self.k)
            index.nprobe = self.nprobe
        buf = io.BytesIO()
        np.savez(buf, sim=sim, idx=idx)
        return buf.getvalue(), {"queries": len(q), "exhaustive": int(len(short))}

    def _graph_search(self, ctx: WorkerContext, q) -> Tuple[bytes, dict]:
        """The graph's ``k`` best for each query (global rows); a query for which the walk found
        fewer than ``k`` rows is searched exactly over the graph's rows."""
        index = ctx.get(HnswGraph(self.graph, self.ef_search))
        index.hnsw.efSearch = self.ef_search
        sim, idx = hnsw.search(index, q, self.k)
        short = np.flatnonzero((idx < 0).any(axis=1))
        if len(short):
            d = np.load(self.database, mmap_mode="r")[self.base[0]:self.base[1]]
            sim[short], idx[short] = knn(np.asarray(q)[short], d, self.k)
        buf = io.BytesIO()
        np.savez(buf, sim=sim, idx=idx + self.base[0])
        return buf.getvalue(), {"queries": len(q), "exhaustive": int(len(short))}


@dataclass(frozen=True)
class GraphShardTask:
    shard: int
    database: str            # .npy of L2-normalised float32 rows
    base: Tuple[int, int]    # the graph's rows [a, b)
    out: str                 # the shard file: the worker writes <out>.tmp<pid>, the driver renames
    m: int
    ef_construction: int

    def needs(self) -> list:
        return []

    def run(self, ctx: WorkerContext) -> Tuple[FilePayload, dict]:
        rows = np.load(self.database, mmap_mode="r")[self.base[0]:self.base[1]]
        tmp = f"{self.out}{TMP}{os.getpid()}"
        try:
            size = hnsw.build_graph(rows, tmp, self.m, self.ef_construction)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return FilePayload(tmp), {"rows": len(rows), "graph_bytes": size}
