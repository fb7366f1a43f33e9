"""How the trie search cuts its sources into blocks and decoder batches (pure, no model).

A *block* is the unit of output, progress, resume and sharding: consecutive sources, written
together in input order.  Within a block the non-empty sources are decoded in length-sorted
*batches*.  Both plans are deterministic and local (planned again from any block start they give
the same blocks), which is what resume and the shards of :mod:`triemine.distributed` rely on.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

# A default batch aims at this many decoder rows per step (sources x beam), at most MAX_BATCH
# sources: 64 at beam 5, 16 at beam 20, 3 at beam 90 (see docs/decisions.md#trie-search-batches).
ROWS_PER_STEP = 320
MAX_BATCH = 64
# Off the CPU a default batch aims at this many rows, at most DEVICE_MAX_BATCH sources (see
# docs/decisions.md#device-batch-sizes).  A smaller card takes --batch-size.
DEVICE_ROWS_PER_STEP = 5120
DEVICE_MAX_BATCH = 1024
# ... and its padded source tokens times the beam at most this (a batch of 32,768 source tokens at
# beam 5): the decoder keeps every row's keys and values of its source (24 KB a source token a row
# for OPUS-MT's six layers), which for 5,120 rows of 200-token sources would be 25 GB
# (see docs/decisions.md#device-token-cap).
DEVICE_ROW_TOKENS = 163840
# Sources are decoded in batches of similar length within blocks of this many batches.
SORT_WINDOW = 8
# A job is cut into at least this many blocks when it has the sources for them (never blocks of
# less than one batch), so that a small job still has blocks for several workers' shards
# (see docs/decisions.md#minimum-blocks-per-job).
MIN_BLOCKS = 16


def plan_batches(lengths: Sequence[int], batch_size: int,
                 max_tokens: Optional[int] = None) -> List[Tuple[int, int]]:
    """Consecutive ``[start, end)`` ranges in input order; deterministic (resume relies on it).

    A range holds at most ``batch_size`` non-empty sources and, with ``max_tokens``, at most that
    many padded source tokens (``count * longest``); zero lengths (empty lines) are free.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    plan, start, count, longest = [], 0, 0, 0
    for i, n in enumerate(lengths):
        if n:
            new_longest = max(longest, n)
            if count and (count + 1 > batch_size or
                          (max_tokens is not None and (count + 1) * new_longest > max_tokens)):
                plan.append((start, i))
                start, count, new_longest = i, 0, n
            count += 1
            longest = new_longest
    if start < len(lengths):
        plan.append((start, len(lengths)))
    return plan


def device_batch(beam: int, device: str) -> Tuple[Optional[int], Optional[int]]:
    """``(sources, padded source tokens)`` of a default batch of a search on ``device``:
    ``(None, None)`` on the CPU (:func:`resolve_batch_size` decides, no token cap), else
    ``DEVICE_ROWS_PER_STEP // beam`` sources (1 to ``DEVICE_MAX_BATCH``) and
    ``DEVICE_ROW_TOKENS // beam`` tokens."""
    if device == "cpu":
        return None, None
    beam = max(1, int(beam))
    return (max(1, min(DEVICE_MAX_BATCH, DEVICE_ROWS_PER_STEP // beam)),
            max(1, DEVICE_ROW_TOKENS // beam))


def resolve_batch_size(batch_size: Optional[int], beam: int) -> int:
    """``batch_size``, or by default ``ROWS_PER_STEP // beam`` sources (1 to ``MAX_BATCH``)."""
    if batch_size is None:
        return max(1, min(MAX_BATCH, ROWS_PER_STEP // max(1, int(beam))))
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    return int(batch_size)


def block_size(n_sources: int, batch_size: int, sort_window: int = SORT_WINDOW) -> int:
    """Non-empty sources per block for a job of ``n_sources``: ``sort_window`` batches, but no
    more than ``n_sources / MIN_BLOCKS`` and never less than one batch."""
    if sort_window < 1 or batch_size < 1:
        raise ValueError("sort_window and batch_size must be >= 1")
    return min(sort_window * batch_size, max(batch_size, -(-int(n_sources) // MIN_BLOCKS)))


def plan_blocks(lengths: Sequence[int], batch_size: int, max_tokens: Optional[int] = None,
                sort_window: int = SORT_WINDOW, block: Optional[int] = None
                ) -> List[Tuple[int, int]]:
    """Consecutive ``[start, end)`` blocks, the units of output, progress and resume: up to
    ``block`` non-empty sources each (default ``sort_window * batch_size``; the driver passes
    :func:`block_size` of the whole job, so that a shard planned on its own slice gets the same
    blocks); :func:`block_batches` cuts a block into decoder batches, more than ``sort_window``
    of them when ``max_tokens`` binds.  With ``sort_window`` 1 a block is one batch of
    :func:`plan_batches`.  Greedy and local: planned again from any block start with the same
    ``block`` it gives the same blocks."""
    if sort_window < 1:
        raise ValueError("sort_window must be >= 1")
    if sort_window == 1:
        return plan_batches(np.asarray(lengths).tolist(), batch_size, max_tokens)
    return _every_nth(lengths, block if block is not None else batch_size * sort_window)


def _every_nth(lengths: Sequence[int], size: int, chunk: int = 1 << 22
               ) -> List[Tuple[int, int]]:
    """:func:`plan_batches` without ``max_tokens``, vectorised (a job's block plan over 10^8
    sources, from an array of their lengths, ``chunk`` at a time: no Python object nor index a
    source): a range starts at every ``size``-th non-empty source, the first at 0."""
    if size < 1:
        raise ValueError("block size must be >= 1")
    n = len(lengths)
    if not n:
        return []
    bounds, seen = [0], 0  # seen: the non-empty sources before this chunk
    for a in range(0, n, chunk):
        nz = np.flatnonzero(np.asarray(lengths[a:a + chunk]))
        first = (-seen) % size  # the chunk's first non-empty source whose count is a multiple
        starts = nz[first::size] + a
        bounds.extend(starts[1:].tolist() if seen == 0 and first == 0 else starts.tolist())
        seen += len(nz)
    bounds.append(n)
    return list(zip(bounds[:-1], bounds[1:]))


def block_batches(lengths: Sequence[int], start: int, end: int, batch_size: int,
                  max_tokens: Optional[int] = None) -> List[List[int]]:
    """Decoder batches of block ``[start, end)``: its non-empty sources sorted by length (stable),
    cut greedily at ``batch_size`` sources and ``max_tokens`` padded tokens (similar lengths waste
    less padding and finish together).  Deterministic: the output does not depend on it beyond
    float rounding, and resume works per block."""
    order = sorted((i for i in range(start, end) if lengths[i]), key=lambda i: lengths[i])
    batches: List[List[int]] = []
    for i in order:
        n = lengths[i]
        cur = batches[-1] if batches else None
        if cur and len(cur) < batch_size and \
                (max_tokens is None or (len(cur) + 1) * n <= max_tokens):
            cur.append(i)
        else:
            batches.append([i])
    return batches
