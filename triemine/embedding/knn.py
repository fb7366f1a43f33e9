"""Exact k-nearest-neighbour search and LASER's ratio margin (Artetxe & Schwenk, 2019).

Embeddings are L2-normalised float32 rows, so the inner product is the cosine.  The search is an
exact faiss inner-product search (``faiss.knn``, what an ``IndexFlatIP`` runs, without copying the
rows into one: one brute-force pass, BLAS inside faiss): exact results at BUCC scale
(10^4-10^5 sentences per side) in seconds, and the same call serves larger corpora shard by shard.

Ratio margin of a pair ``(x, y)``::

    margin(x, y) = cos(x, y) / ( (sum_{z in NN_k(x)} cos(x, z)) / 2k + (sum_{z in NN_k(y)} cos(y,
    z)) / 2k )

where ``NN_k(x)`` are the k nearest targets of source ``x`` and ``NN_k(y)`` the k nearest sources of
target ``y``.  It corrects cosine for hubness: a pair scores high only when it stands out from both
sentences' neighbourhoods.
"""
from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from triemine.io import load_npy, npy_writer
from triemine.errors import OutputError

# the kNN searches a job may ask for (triemine.embedding.knn_shards.knn_method: auto picks by size)
KNN_INDEXES = ("auto", "exact", "ivf", "hnsw")


def _as_f32(a: np.ndarray, name: str) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float32)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-d array of embeddings, got shape {a.shape}")
    return a


# faiss searches a block of queries by matrix products (BLAS) only from a size on, and one by one
# below it; from this many queries on the products are faster
# (see docs/decisions.md#faiss-blas-threshold)
BLAS_FROM_QUERIES = 4


def blas_threshold(dim: int, version: str) -> int:
    """The value of faiss's ``distance_compute_blas_threshold`` that sends a block of
    ``BLAS_FROM_QUERIES`` or more queries of ``dim`` dimensions to the matrix products: faiss
    compares it with the number of queries up to 1.13, with queries x dimensions from 1.14 (whose
    default of 128,000 searched 249 USE queries one by one)."""
    major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    return BLAS_FROM_QUERIES * (dim if major_minor >= (1, 14) else 1)


def set_faiss(dim: int, threads: Optional[int] = None) -> None:
    """faiss's threads (when given) and :func:`blas_threshold` for ``dim``-dimensional rows, set
    before every faiss search or training of this package, so that no result depends on which
    search a process ran before (the threshold is faiss's one process-wide setting)."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(int(threads))
    faiss.cvar.distance_compute_blas_threshold = blas_threshold(dim, faiss.__version__)


# Off the CPU the exact search is torch's float32 products (TF32 off), DEVICE_QUERY_BLOCK queries
# against DEVICE_ROW_BLOCK database rows at a time (a 2 GB block of similarities), each block's top
# k merged into every query's running best on the device; the database is copied to the device a
# block at a time, once per call (float16 is not used: see docs/decisions.md#device-knn).
DEVICE_QUERY_BLOCK = 8192
DEVICE_ROW_BLOCK = 65536


def search_arithmetic(device: str = "cpu") -> str:
    """What the search's bits depend on besides the vectors and the plan (faiss's version and
    BLAS rule, which the indexes use on any device; off the CPU also torch's version, the
    device and the blocks of the exact cells): part of the mining job's resume key, so a
    resumed job never mixes cells of another.  The device is named as given: a job resumed on
    another model of GPU, or sharded over actors of several models, mixes their last bits."""
    import faiss

    cpu = f"faiss {faiss.__version__}, BLAS from {BLAS_FROM_QUERIES} queries"
    if device == "cpu":
        return cpu
    import torch

    return (f"{cpu}; exact cells: torch {torch.__version__} on {device}, float32, blocks of "
            f"{DEVICE_QUERY_BLOCK} x {DEVICE_ROW_BLOCK}")


@contextlib.contextmanager
def matmul_precision(tf32: bool = False):
    """torch's float32 matrix products on CUDA devices exact (``tf32`` False) or TF32 for the
    duration, whatever was set before (restored after): through ``fp32_precision`` where torch
    has it, whose legacy ``allow_tf32`` flag raises once the newer setting was used."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        old = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = old
    else:
        old = matmul.allow_tf32
        matmul.allow_tf32 = tf32
        try:
            yield
        finally:
            matmul.allow_tf32 = old


def topk_blocks(q, blocks, k: int, query_block: int = DEVICE_QUERY_BLOCK):
    """``(sims, idx)`` tensors (``len(q) x k``, float32 and int64, on ``q``'s device): the ``k``
    largest inner products of every row of ``q`` (a tensor) with the rows of ``blocks``, an
    iterable of ``(first row, tensor of rows)`` on ``q``'s device and of its dtype, unsorted among
    ties; each block's top k merged into every query's running best, ``query_block`` queries at
    a time (the similarities a product holds: ``query_block x`` block rows)."""
    import torch

    best_s = torch.full((len(q), k), -np.inf, dtype=torch.float32, device=q.device)
    best_i = torch.full((len(q), k), -1, dtype=torch.int64, device=q.device)
    for b, rows in blocks:
        kk = min(k, rows.shape[0])
        for a in range(0, len(q), query_block):
            s, i = (q[a:a + query_block] @ rows.T).topk(kk, dim=1)
            s = torch.cat([best_s[a:a + query_block], s.float()], 1)
            i = torch.cat([best_i[a:a + query_block], i + b], 1)
            top = s.topk(k, dim=1)
            best_s[a:a + query_block] = top.values
            best_i[a:a + query_block] = i.gather(1, top.indices)
    return best_s, best_i


# half-precision kNN: candidates a query keeps from the half products, re-scored in float32
HALF_CANDIDATES = 4  # times k
HALF_TYPES = {"bf16": "bfloat16", "fp16": "float16"}


def device_knn(q: np.ndarray, d: np.ndarray, k: int, device: str,
               query_block: int = DEVICE_QUERY_BLOCK, row_block: int = DEVICE_ROW_BLOCK,
               precision: str = "fp32"):
    """:func:`knn`'s search as torch products on ``device`` (:func:`topk_blocks`): ``(sims,
    idx)`` of the ``k`` best rows of ``d`` (``k <= len(d)``) for every row of ``q``, most
    similar first, ties to the lower row among the k kept (which of several rows tied at the
    k-th place is kept is torch's ``topk``'s choice).  ``d`` may be memory-mapped: it is copied
    to the device a block of ``row_block`` rows at a time.

    ``precision`` ``"bf16"`` / ``"fp16"``: the products in that half type, keeping
    ``HALF_CANDIDATES * k`` rows a query, which are then re-scored exactly (float32 inner
    products of the float32 rows) and the best ``k`` of those kept: the sims are float32
    values; a true neighbour is lost only when the half products rank it below that many
    others."""
    import torch

    half = HALF_TYPES.get(precision)
    if half is None and precision != "fp32":
        raise ValueError(f"unknown precision {precision!r} (fp32, bf16 or fp16)")
    dtype = getattr(torch, half) if half else torch.float32
    kk = min(HALF_CANDIDATES * k, d.shape[0]) if half else k
    with matmul_precision(tf32=False), torch.no_grad():  # exact float32, whatever was set
        qt = torch.from_numpy(np.array(q, dtype=np.float32)).to(device)  # copies: maps stay
        blocks = ((b, torch.from_numpy(np.array(d[b:b + row_block], dtype=np.float32))
                   .to(device).to(dtype)) for b in range(0, d.shape[0], row_block))
        best_s, best_i = topk_blocks(qt.to(dtype), blocks, kk, query_block)
        if half:
            best_s, best_i = _rescore(qt, d, best_i, k)
        sims, idx = best_s.cpu().numpy(), best_i.cpu().numpy()
    order = np.lexsort((idx, -sims), axis=1)  # by similarity, then the lower row
    return np.take_along_axis(sims, order, 1), np.take_along_axis(idx, order, 1)


def _rescore(qt, d: np.ndarray, cand, k: int):
    """The ``k`` best of each query's candidate rows ``cand`` (``n x m`` row numbers of ``d``)
    by their exact float32 inner products with the query (``qt``, on the device)."""
    import torch

    rows, inv = np.unique(cand.cpu().numpy(), return_inverse=True)
    dt = torch.from_numpy(np.array(d[rows], dtype=np.float32)).to(qt.device)
    pos = torch.from_numpy(inv.reshape(cand.shape)).to(qt.device)
    exact = torch.einsum("qd,qmd->qm", qt, dt[pos])
    top = exact.topk(k, dim=1)
    return top.values, cand.gather(1, top.indices)


def knn(queries: np.ndarray, database: np.ndarray, k: int, threads: Optional[int] = None,
        device: str = "cpu"):
    """``(sims, idx)``, each (n_queries, k'): the k' = min(k, len(database)) most similar rows of
    ``database`` for every query, most similar first (exact inner-product search: faiss on the
    CPU, :func:`device_knn` on any other ``device``)."""
    q, d = _as_f32(queries, "queries"), (database if device != "cpu" else
                                          _as_f32(database, "database"))
    if d.ndim != 2:
        raise ValueError(f"database: expected a 2-d array of embeddings, got shape {d.shape}")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"dimension mismatch: queries {q.shape[1]}, database {d.shape[1]}")
    k = min(int(k), d.shape[0])
    if k < 1 or q.shape[0] == 0:
        return (np.zeros((q.shape[0], 0), dtype=np.float32),
                np.zeros((q.shape[0], 0), dtype=np.int64))
    if device != "cpu":
        return device_knn(q, d, k, device)
    import faiss

    set_faiss(d.shape[1], threads)
    # faiss's search without an index: the very function IndexFlatIP.search calls (the same
    # bits), with no copy of the database into one (see
    # docs/decisions.md#exact-knn-without-an-index)
    sims, idx = faiss.knn(q, d, k, metric=faiss.METRIC_INNER_PRODUCT)
    return sims, idx.astype(np.int64)


@dataclass
class MarginNeighbours:
    """kNN of both sides and the mean similarity of every sentence to its k neighbours.

    ``fwd_idx``/``fwd_sim`` (n_src, k): nearest targets of each source; ``bwd_idx``/``bwd_sim``
    (n_tgt, k): nearest sources of each target; ``src_mean`` (n_src,), ``tgt_mean`` (n_tgt,).
    """

    fwd_idx: np.ndarray
    fwd_sim: np.ndarray
    bwd_idx: np.ndarray
    bwd_sim: np.ndarray
    src_mean: np.ndarray
    tgt_mean: np.ndarray
    k: int

    def margin(self, src: np.ndarray, tgt: np.ndarray, cos: np.ndarray) -> np.ndarray:
        """Ratio margin of pairs ``(src[i], tgt[i])`` whose cosine is ``cos[i]``."""
        denom = (self.src_mean[src] + self.tgt_mean[tgt]) / 2.0
        return np.asarray(cos, dtype=np.float64) / np.maximum(denom.astype(np.float64), 1e-6)


def row_means(sim, path: Optional[Path] = None, block: int = 1 << 20) -> np.ndarray:
    """The margin's neighbourhood term of every sentence: the mean of each row of ``sim``
    (n, k), float32 (float64 for float64 rows; 0 for rows with no neighbours), ``block`` rows at
    a time, so that ``sim`` may be a memory-mapped list of 10^8 rows.  With ``path`` the means
    are written there (a sealed ``.npy``, :mod:`triemine.io.checksum`, atomically) and returned
    memory-mapped: the driver's heap
    then holds none of their 4 bytes a sentence (400 MB a side at 10^8); their pages are the
    kernel's to drop.  The same bits for any ``block``, with or without ``path`` (each row's
    mean is its own reduction)."""
    n, k = (sim.shape[0], sim.shape[1]) if np.ndim(sim) == 2 else (len(sim), 0)
    dtype = np.result_type(getattr(sim, "dtype", np.float32), np.float32)  # float32 or float64
    blocks = ((sim[a:a + block].mean(axis=1).astype(dtype, copy=False) if k else
               np.zeros(min(block, n - a), dtype=dtype)) for a in range(0, n, block))
    if path is None:
        return np.concatenate(list(blocks)) if n else np.zeros(0, dtype=dtype)
    with npy_writer(Path(path), dtype, (n,), "neighbour means") as f:
        for part in blocks:
            f.write(part)
    return load_npy(path, "neighbour means", written=True)


def margin_neighbours(src_emb: np.ndarray, tgt_emb: np.ndarray, k: int = 4,
                      threads: Optional[int] = None) -> MarginNeighbours:
    """Both kNN searches that the ratio margin needs (``k`` as in LASER's ``bucc.py``: 4)."""
    fwd_sim, fwd_idx = knn(src_emb, tgt_emb, k, threads)
    bwd_sim, bwd_idx = knn(tgt_emb, src_emb, k, threads)
    return MarginNeighbours(fwd_idx, fwd_sim, bwd_idx, bwd_sim, row_means(fwd_sim),
                            row_means(bwd_sim), k)


def cosine_of_pairs(src_emb: np.ndarray, tgt_emb: np.ndarray, src: np.ndarray,
                    tgt: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """``cos(src_emb[src[i]], tgt_emb[tgt[i]])`` for every pair, in chunks (no n x m matrix)."""
    out = np.empty(len(src), dtype=np.float64)
    for s in range(0, len(src), chunk):
        a = src_emb[src[s:s + chunk]]
        b = tgt_emb[tgt[s:s + chunk]]
        out[s:s + chunk] = np.einsum("ij,ij->i", a, b, dtype=np.float64)
    return out


MARGIN_BLOCK = (
    1 << 20
)  # neighbour-list rows a block of margin_candidates (about 100 MB of temporaries at k = 4)


def _best_by_margin(nb: MarginNeighbours, rows: np.ndarray, forward: bool, per: int):
    """``(best, margin)``, each (len(rows), per'): the ``per`` entries of the neighbour lists of
    ``rows`` (sources when ``forward``, else targets) with the highest margin, best first (ties
    to the earlier entry); the entries are target rows when ``forward``, else source rows."""
    idx = np.asarray(nb.fwd_idx[rows] if forward else nb.bwd_idx[rows])
    sim = np.asarray(nb.fwd_sim[rows] if forward else nb.bwd_sim[rows])
    mine = np.repeat(rows, idx.shape[1])
    m = (nb.margin(mine, idx.reshape(-1), sim.reshape(-1)) if forward else
         nb.margin(idx.reshape(-1), mine, sim.reshape(-1))).reshape(idx.shape)
    order = np.argsort(-m, axis=1, kind="stable")[:, :per]
    return np.take_along_axis(idx, order, axis=1), np.take_along_axis(m, order, axis=1)


def margin_candidates(nb: MarginNeighbours, per_source: int = 1, per_target: int = 1,
                      min_margin: Optional[float] = None, block: int = MARGIN_BLOCK):
    """Candidate pairs from the neighbour lists: each source's ``per_source`` best targets and
    each target's ``per_target`` best sources by margin (LASER's "max" strategy with
    ``per_source = per_target = 1``: the union of the forward and backward best), those with a
    margin of at least ``min_margin`` when it is given.

    A pair both directions propose is one pair with the forward list's margin (the two
    searches may differ in the last bits of its cosine).  The lists are read ``block`` rows at a
    time and cut as they are read, so the temporaries stay at about ``block`` x k entries
    whatever the corpora's size (the lists themselves may be memory-mapped); the result does
    not depend on ``block``.

    Returns ``(src, tgt, margin)``: unique pairs, sorted by (src, tgt); the concatenation of
    :func:`margin_candidate_blocks`.
    """
    parts = list(margin_candidate_blocks(nb, per_source, per_target, min_margin, block,
                                         sources=max(nb.fwd_idx.shape[0], 1)))
    if not parts:
        return (np.zeros(0, dtype=np.int64),) * 2 + (np.zeros(0),)
    return tuple(np.concatenate(p) for p in zip(*parts))


MARGIN_SOURCES = 1 << 18  # sources a range of margin_candidate_blocks


def margin_candidate_blocks(nb: MarginNeighbours, per_source: int = 1, per_target: int = 1,
                            min_margin: Optional[float] = None, block: int = MARGIN_BLOCK,
                            sources: Optional[int] = None, spill=None):
    """:func:`margin_candidates` a range of ``sources`` sources at a time: yields
    ``(src, tgt, margin)`` of the pairs whose source is in the next range, sorted, so that the
    ranges' results, concatenated, are :func:`margin_candidates`'s, bit for bit.

    A target's best sources may lie in any range: they are found first, a ``block`` of targets
    at a time, and kept by range until their range comes (in files of ``spill``, a directory,
    when there is more than one range; else in memory), so a caller that writes each range as
    it comes holds one range's candidates, not the set.
    """
    n_src, n_tgt = nb.fwd_idx.shape[0], nb.bwd_idx.shape[0]
    width = max(n_tgt, 1)
    sources = max(int(sources or MARGIN_SOURCES), 1)
    ranges = list(range(0, n_src, sources))

    def cut(m, *cols):  # the pairs at or over min_margin
        ok = m >= min_margin if min_margin is not None else slice(None)
        return (m[ok],) + tuple(c[ok] for c in cols)
    per_source = min(per_source, nb.fwd_idx.shape[1]) if n_src else 0
    per_target = min(per_target, nb.bwd_idx.shape[1]) if n_tgt else 0
    backward = _Ranges(len(ranges), spill if len(ranges) > 1 else None)
    try:  # the spill files go even when the caller stops early or fails
        for a in range(0, n_tgt if per_target > 0 else 0, block):
            rows = np.arange(a, min(a + block, n_tgt), dtype=np.int64)
            best, m = _best_by_margin(nb, rows, False, per_target)
            # cut first: only the pairs kept need the test below
            m, s, t = cut(m.reshape(-1), best.reshape(-1), np.repeat(rows, best.shape[1]))
            if per_source > 0:  # proposed forward too: the forward copy (and its margin) stands
                fwd_best, _ = _best_by_margin(nb, s, True, per_source)
                fresh = ~(fwd_best == t[:, None]).any(axis=1)
                s, t, m = s[fresh], t[fresh], m[fresh]
                del fwd_best, fresh
            backward.add(s // sources, s, t, m)
            del best, m, s, t  # not alive while the next block computes
        for r, lo in enumerate(ranges):
            hi = min(lo + sources, n_src)
            keys, margins = [], []
            for a in range(lo, hi if per_source > 0 else lo, block):
                rows = np.arange(a, min(a + block, hi), dtype=np.int64)
                best, m = _best_by_margin(nb, rows, True, per_source)
                m, key = cut(m.reshape(-1), (rows[:, None] * width + best).reshape(-1))
                keys.append(key)
                margins.append(m)
            s, t, m = backward.take(r)
            keys.append(s * width + t)
            margins.append(m)
            key, m = np.concatenate(keys), np.concatenate(margins)
            key, first = np.unique(key, return_index=True)  # a list naming a row twice: its first
            yield key // width, key % width, m[first]
    finally:
        backward.close()


class _Ranges:
    """Backward candidates ``(src, tgt, margin)`` kept by source range, in the order added:
    in memory, or appended to one file a range in ``spill``."""

    _REC = np.dtype([("s", "<i8"), ("t", "<i8"), ("m", "<f8")])

    def __init__(self, n: int, spill=None):
        self.spill = Path(spill) if spill is not None else None
        self.parts = [[] for _ in range(n)] if self.spill is None else None
        if self.spill is not None:
            try:
                if self.spill.exists():
                    shutil.rmtree(self.spill)
                self.spill.mkdir(parents=True)
            except OSError as exc:
                raise OutputError(self.spill, exc, "margin candidates' spill directory") from None

    def _file(self, r: int):
        return self.spill / f"range-{r:07d}.bin"

    def add(self, r: np.ndarray, s: np.ndarray, t: np.ndarray, m: np.ndarray) -> None:
        order = np.argsort(r, kind="stable")
        r, s, t, m = r[order], s[order], t[order], m[order]
        ids, starts = np.unique(r, return_index=True)
        for i, a, b in zip(ids.tolist(), starts.tolist(), starts[1:].tolist() + [len(r)]):
            if self.spill is None:
                self.parts[i].append((s[a:b], t[a:b], m[a:b]))
                continue
            rec = np.empty(b - a, dtype=self._REC)
            rec["s"], rec["t"], rec["m"] = s[a:b], t[a:b], m[a:b]
            try:
                with open(self._file(i), "ab") as f:
                    f.write(rec.data)
            except OSError as exc:
                raise OutputError(self._file(i), exc, "margin candidates' spill file") from None

    def take(self, r: int):
        if self.spill is None:
            parts, self.parts[r] = self.parts[r], []
            if not parts:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
            return tuple(np.concatenate(p) for p in zip(*parts))
        path = self._file(r)
        rec = np.fromfile(path, dtype=self._REC) if path.is_file() else np.zeros(0, self._REC)
        path.unlink(missing_ok=True)
        return (np.ascontiguousarray(rec["s"]), np.ascontiguousarray(rec["t"]),
                np.ascontiguousarray(rec["m"]))

    def close(self) -> None:
        if self.spill is not None:
            shutil.rmtree(self.spill, ignore_errors=True)
