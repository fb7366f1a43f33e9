"""An approximate inner-product index for corpora too large for the exact kNN: faiss
``IndexIVFFlat`` with a quantiser trained on a seeded sample, stored as one file that every worker
memory-maps.

Why IVF-Flat: the vectors stay float32 and the similarities it returns are the exact inner
products of the rows it finds (the margin is computed from them), the recall is tuned by one knob
(``nprobe``) and measured (``bench/haystack_bench.py``: ``knn_recall_vs_exact``), and training
and adding are cheap next to embedding the corpus.  Product quantisation would shrink the index
(a 10^8-row, 512-dim database is 205 GB as float32) at the price of approximate similarities;
that is the next step for corpora whose index cannot be memory-mapped from local disk.

The index file ``<dir>/index.faiss`` is written once, atomically, with ``<dir>/index.json``
beside it: the key it was built for (the database's fingerprint, lists, seed), the file's size
and its CRC32.  An index whose key is not the job's or whose file is not the size or the CRC32
written there (truncated, replaced, changed in place) is never used: :func:`load_index` raises
:class:`StaleIndex` naming the file and the
reason, and the caller rebuilds it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import numpy as np

from triemine.io import crc32_range
from triemine.embedding.knn import set_faiss
from triemine.errors import OutputError

INDEX = "index.faiss"
META = "index.json"


class StaleIndex(Exception):
    """An index file that must not be used; the message names it and says why."""


def n_lists(n_database: int) -> int:
    """Inverted lists for a database of ``n`` rows: about 4·sqrt(n) (faiss's guideline of
    4-16·sqrt(n)), at least 1."""
    return max(1, min(n_database, int(4 * np.sqrt(max(n_database, 1)))))


def train_centroids(database: np.ndarray, nlist: int, seed: int = 0, per_list: int = 64,
                    niter: int = 10) -> np.ndarray:
    """``(nlist, dim)`` float32 centroids of spherical k-means on a seeded sample of
    ``per_list · nlist`` rows (all rows when fewer), read in row order from a memory map."""
    import faiss

    n = database.shape[0]
    take = min(n, per_list * nlist)
    rows = np.sort(np.random.default_rng(seed).choice(n, take, replace=False)) if take < n \
        else np.arange(n)
    sample = np.ascontiguousarray(database[rows], dtype=np.float32)
    set_faiss(sample.shape[1])
    km = faiss.Kmeans(sample.shape[1], nlist, niter=niter, seed=seed, spherical=True,
                      max_points_per_centroid=per_list, verbose=False)
    km.train(sample)
    return np.ascontiguousarray(km.centroids, dtype=np.float32)


def build_index(centroids: np.ndarray, database: np.ndarray, assign: np.ndarray,
                rows: int = 65536):
    """An ``IndexIVFFlat`` over ``database`` whose row ``i`` is in list ``assign[i]`` (its
    nearest centroid, computed in shards by the caller), added in chunks of ``rows``."""
    import faiss

    dim = centroids.shape[1]
    quantiser = faiss.IndexFlatIP(dim)
    quantiser.add(np.ascontiguousarray(centroids, dtype=np.float32))
    index = faiss.IndexIVFFlat(quantiser, dim, len(centroids), faiss.METRIC_INNER_PRODUCT)
    index.is_trained = True
    for a in range(0, database.shape[0], rows):
        x = np.ascontiguousarray(database[a:a + rows], dtype=np.float32)
        lists = np.ascontiguousarray(assign[a:a + rows], dtype=np.int64)
        ids = np.arange(a, a + len(x), dtype=np.int64)
        index.add_core(len(x), faiss.swig_ptr(x), faiss.swig_ptr(ids), faiss.swig_ptr(lists))
    index.own_fields = True  # the quantiser lives as long as the index
    quantiser.this.disown()
    return index


def write_index(index, directory: Path, key: dict) -> Path:
    """``directory/index.faiss`` and its ``index.json``, each written atomically (the JSON last,
    so an index without a matching JSON is rebuilt, never used)."""
    import faiss

    directory.mkdir(parents=True, exist_ok=True)
    path, meta = directory / INDEX, directory / META
    if meta.exists():
        meta.unlink()
    try:
        tmp = directory / f"{INDEX}.tmp{os.getpid()}"
        faiss.write_index(index, str(tmp))
        os.replace(tmp, path)
        tmp = directory / f"{META}.tmp{os.getpid()}"
        size = path.stat().st_size
        with open(path, "rb") as f:
            crc = crc32_range(f, 0, size)
        tmp.write_text(json.dumps({"key": key, "bytes": size, "crc32": crc}), encoding="utf-8")
        os.replace(tmp, meta)
    except (OSError, RuntimeError) as exc:  # faiss reports a failed write as a RuntimeError
        tmp.unlink(missing_ok=True)
        raise OutputError(tmp, exc, "kNN index") from None
    return path


def check_index(directory: Path, key: dict) -> Path:
    """The index file of ``directory`` when it is whole and built for ``key``; else
    :class:`StaleIndex` naming the file and the reason."""
    path, meta = directory / INDEX, directory / META
    if not path.exists():
        raise StaleIndex(f"{path}: no index file")
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise StaleIndex(f"{path}: its {META} is missing or damaged (an interrupted build)") \
            from None
    if info.get("key") != key:
        raise StaleIndex(f"{path}: built for another database or other settings "
                         f"({info.get('key')} , this job: {key})")
    size = path.stat().st_size
    if size != info.get("bytes"):
        raise StaleIndex(f"{path}: {size} bytes, {info.get('bytes')} when written "
                         "(truncated or replaced)")
    try:
        with open(path, "rb") as f:
            crc = crc32_range(f, 0, size)
    except EOFError:
        crc = None
    if crc != info.get("crc32"):
        raise StaleIndex(f"{path}: damaged (checksum mismatch: changed after it was written)")
    return path


def load_index(path, nprobe: int, mmap: bool = True):
    """The index at ``path`` (memory-mapped: pages shared between processes) probing ``nprobe``
    lists per query."""
    import faiss

    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP if mmap else 0)
    index.nprobe = int(nprobe)
    return index


def search(index, queries: np.ndarray, k: int, threads: Optional[int] = None):
    """``(sims, idx)`` of the ``k`` best rows for every query (``-1`` / ``-inf``-like padding
    where fewer were found), most similar first."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    set_faiss(q.shape[1], threads)
    sims, idx = index.search(q, int(k))
    return sims, idx.astype(np.int64)
