"""A graph index for the kNN of corpora too large for the exact search: faiss ``IndexHNSWFlat``
over ranges of database rows ("graphs"), each built in one thread and searched by every query.

Why HNSW: on the haystack's million English rows its graphs find the exact top 4 of 8,624
Chinese queries with recall 0.995 (``bench/haystack_bench.py --hnsw-from``) where IVF, probing
an eighth of its lists, reached 0.975 (cross-lingual queries lie away from the English rows'
centroids, and a graph walk does not depend on them).  The rows stay float32, so the
similarities it returns are the exact inner products of the rows it finds (the margin is
computed from them).

Why several graphs, each built by one thread: faiss builds one graph with several threads in
an unspecified order (a different graph every run), but with one thread the graph depends on the
rows alone.  Graphs over consecutive row ranges (:func:`graph_plan`: a plan that depends on the
data, never on the workers) let the workers build them side by side and still give the same bits
with any number of workers.  The price: every query walks every graph, so the search cost grows
with the number of graphs; the plan keeps them few and as large as a worker's memory allows.

A graph file is written by the worker that built it (a multi-GB payload is not sent through
the pool) to a temporary name, then renamed into its shard file and named in the manifest by
the driver (:class:`triemine.distributed.shards.FilePayload`).  Searching workers memory-map
the rows (``IO_FLAG_MMAP_IFC``): the pages are shared through the page cache; only the links
are read into each process.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

# links per node and the build's candidate list (faiss's M and efConstruction), chosen with
# bench/studies/knn_index_study.py (see docs/decisions.md#hnsw-graph-parameters)
M = 32
EF_CONSTRUCTION = 64
# rows per graph (graph_plan): an eighth of the database (8 graphs built side by side), at
# least MIN_GRAPH_ROWS and at most MAX_GRAPH_ROWS (what a building worker holds; see
# docs/decisions.md#hnsw-graph-parameters)
MIN_GRAPH_ROWS = 1 << 18
MAX_GRAPH_ROWS = 1 << 22
MAX_PARALLEL_GRAPHS = 8
# the search's candidates (efSearch) for a graph of MIN_GRAPH_ROWS, scaled by the square root
# of the graph's rows: larger graphs need more candidates for the same recall (see
# docs/decisions.md#hnsw-graph-parameters)
EF_SEARCH = 512


def graph_plan(n_database: int) -> tuple:
    """``(rows per graph, efSearch)`` for a database of ``n_database`` rows."""
    rows = min(MAX_GRAPH_ROWS, max(MIN_GRAPH_ROWS, -(-n_database // MAX_PARALLEL_GRAPHS)))
    return rows, int(round(EF_SEARCH * (rows / MIN_GRAPH_ROWS) ** 0.5))


def build_graph(rows: np.ndarray, path: str, m: int = M,
                ef_construction: int = EF_CONSTRUCTION, chunk: int = 65536) -> int:
    """Build the graph of ``rows`` (L2-normalised, read in chunks from a memory map) in one
    thread and write it to ``path``; its size in bytes."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one thread: the graph depends on the rows alone
    try:
        index = faiss.IndexHNSWFlat(rows.shape[1], int(m), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(ef_construction)
        for a in range(0, rows.shape[0], chunk):
            index.add(np.ascontiguousarray(rows[a:a + chunk], dtype=np.float32))
        faiss.write_index(index, path)
    finally:
        faiss.omp_set_num_threads(threads)
    del index
    return os.path.getsize(path)


def load_graph(path: str, ef_search: int = EF_SEARCH):
    """The graph at ``path``, its rows memory-mapped, searching with ``ef_search`` candidates."""
    import faiss

    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
    index.hnsw.efSearch = int(ef_search)
    return index


def search(index, queries: np.ndarray, k: int, threads: Optional[int] = None):
    """``(sims, idx)`` of the ``k`` best rows of the graph for every query, most similar first
    (``idx`` local to the graph; ``-1`` where the walk found fewer)."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(int(threads))
    sims, idx = index.search(np.ascontiguousarray(queries, dtype=np.float32), int(k))
    return sims, idx.astype(np.int64)
