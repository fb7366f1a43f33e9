"""The compact trie of target sentences: building and queries (the binary file format is
:mod:`triemine.trie.fileformat`).

Layout (no Python object per node; see ``_trie.pyx`` for the query kernels):

* nodes are numbered breadth first, root = 0, so the children of a node are contiguous and
  sorted by token id;
* ``keys: uint16[n_nodes]`` is the token on the edge into a node (65535 for the root, which is
  why token ids must be < 65535);
* ``first_child: uint32[n_nodes + 1]`` (CSR): the children of ``v`` are
  ``first_child[v] .. first_child[v+1]-1``; a child is found by binary search over ``keys``;
* a terminal is the node reached by EOS (always a leaf); ``term_nodes`` (sorted),
  ``term_offsets`` and ``term_ids`` map it to the target line ids (0-based line indices of the
  corpus) it ends. Identical lines share one terminal with several ids; n-best segmentations of
  one line give several terminals with the same id.

That is 6 bytes per node plus 8 bytes per terminal and 4 per line id. Beyond 2**32 - 1 nodes
the build fails with a clear error rather than overflowing.

Building sorts nothing per node in Python: sequences are processed level by level (depth d),
grouping the active sequences by ``(parent node, token)`` with a vectorised numpy ``unique``;
the groups, in sorted order, are the new nodes of level d+1, which yields the BFS numbering.
"""
from __future__ import annotations

import itertools
import os
from typing import Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from triemine.errors import InputError
from triemine.trie import fileformat
from triemine.trie._trie import TrieCore
from triemine.trie.fileformat import FORMAT_VERSION, MAX_NODES, MAX_TOKEN, ROOT_KEY  # noqa: F401

def _readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a.flags.writeable = False
    return a


class Trie(TrieCore):
    """Compact array trie over token-id sequences that end in EOS.

    Construct with :meth:`build`, :meth:`from_arrays` or :meth:`load`. Node ids are plain ints
    (int64 in numpy); ``-1`` means "no node" and is accepted by every query.
    """

    root = 0

    def __init__(self, keys: np.ndarray, first_child: np.ndarray, term_nodes: np.ndarray,
                 term_offsets: np.ndarray, term_ids: np.ndarray, *, eos: int, depth: int,
                 n_lines: int, metadata: Optional[dict] = None, path: Optional[str] = None):
        self._attach(keys, first_child, term_nodes, term_offsets, term_ids)
        self.keys = _readonly(keys)
        self.first_child = _readonly(first_child)
        self.term_nodes = _readonly(term_nodes)
        self.term_offsets = _readonly(term_offsets)
        self.term_ids = _readonly(term_ids)
        self.eos = int(eos)
        self.depth = int(depth)
        self.n_lines = int(n_lines)
        self.metadata = dict(metadata or {})
        self.path = path

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def build(cls, sequences: Iterable[Sequence[int]], line_ids: Optional[Sequence[int]] = None,
              eos: int = 2, metadata: Optional[dict] = None, *, path: Optional[str] = None,
              lines: Optional[Sequence[int]] = None) -> "Trie":
        """Build from token-id sequences, each ending in ``eos``.

        ``line_ids[i]`` is the target line id stored at the terminal of ``sequences[i]``
        (default ``i``); a line id may repeat (n-best segmentations) and so may a sequence
        (duplicate lines). Errors raise :class:`InputError` naming ``path`` and ``lines[i]``
        (default: ``<sequences>`` and the 1-based sequence index).
        """
        seqs = sequences if isinstance(sequences, (list, tuple)) else list(sequences)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.array(list(itertools.chain.from_iterable(seqs)))
        if flat.size == 0:
            flat = flat.astype(np.int64)
        elif flat.dtype.kind not in "iu":
            pos = next(i for i, t in enumerate(itertools.chain.from_iterable(seqs))
                       if not isinstance(t, (int, np.integer)) or not -2**63 <= t < 2**63)
            seq = int(np.searchsorted(offsets, pos, side="right") - 1)
            line = seq + 1 if lines is None else int(lines[seq])
            raise InputError("token ids must be integers, got "
                             f"{list(seqs[seq])[pos - offsets[seq]]!r}",
                             "<sequences>" if path is None else path, line)
        return cls.from_arrays(flat, offsets, line_ids, eos=eos, metadata=metadata, path=path,
                               lines=lines)

    @classmethod
    def from_arrays(cls, flat_tokens: np.ndarray, offsets: np.ndarray,
                    line_ids: Optional[Sequence[int]] = None, *, eos: int = 2,
                    metadata: Optional[dict] = None, path: Optional[str] = None,
                    lines: Optional[Sequence[int]] = None) -> "Trie":
        """Build from a flat token array: sequence i is ``flat_tokens[offsets[i]:offsets[i+1]]``."""
        flat = np.asarray(flat_tokens)
        if flat.dtype.kind not in "iu":
            raise InputError(f"token ids must be integers, got dtype {flat.dtype}", path)
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.size == 0 or offsets[0] != 0 or offsets[-1] != flat.size \
                or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must start at 0, be non-decreasing and end at "
                             "len(flat_tokens)")
        n = offsets.size - 1
        if not 0 <= eos <= MAX_TOKEN:
            raise InputError(f"eos id {eos} out of range 0..{MAX_TOKEN}", path)
        if line_ids is None:
            lids = np.arange(n, dtype=np.int64)
        else:
            lids = np.asarray(line_ids, dtype=np.int64).reshape(-1)
            if lids.size != n:
                raise ValueError(f"{n} sequences but {lids.size} line ids")
        line_of = (np.arange(1, n + 1, dtype=np.int64) if lines is None
                   else np.asarray(lines, dtype=np.int64).reshape(-1))
        _validate(flat, offsets, lids, eos, path, line_of)
        return cls(*_build_arrays(flat, offsets, lids), eos=eos,
                   depth=int(np.diff(offsets).max(initial=0)),
                   n_lines=int(np.unique(lids).size), metadata=metadata)

    # -- queries -------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of distinct (sequence, line id) insertions."""
        return int(self.n_ids)

    def children(self, node: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(keys, child_ids)`` of ``node``: a zero-copy uint16 view and the int64 node ids."""
        a, b = self.child_range(node)
        return self.keys[a:b], np.arange(a, b, dtype=np.int64)

    def terminal_ids(self, node: int) -> np.ndarray:
        """The line ids that end at ``node`` (zero-copy uint32 view; empty if not terminal)."""
        a, b = self.terminal_range(node)
        return self.term_ids[a:b]

    def contains(self, seq: Sequence[int]) -> bool:
        """Whether ``seq`` (including its EOS) was inserted."""
        node = self.walk(seq)
        if node <= 0:
            return False
        a, b = self.terminal_range(node)
        return b > a

    __contains__ = contains

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays (nodes and terminals)."""
        return int(sum(a.nbytes for a in (self.keys, self.first_child, self.term_nodes,
                                          self.term_offsets, self.term_ids)))

    @property
    def node_nbytes(self) -> int:
        """Bytes of the node arrays only (``keys`` + ``first_child``)."""
        return int(self.keys.nbytes + self.first_child.nbytes)

    @property
    def dict_fingerprint(self) -> Optional[str]:
        return self.metadata.get("dict_fingerprint")

    @property
    def dict_size(self) -> Optional[int]:
        return self.metadata.get("dict_size")

    def stats(self) -> dict:
        return {
            "sequences": len(self), "lines": self.n_lines, "terminals": int(self.n_terminals),
            "nodes": int(self.n_nodes), "bytes": self.nbytes,
            "bytes_per_node": self.node_nbytes / max(1, self.n_nodes), "depth": self.depth,
            "eos": self.eos,
        }

    def __iter__(self) -> Iterator[Tuple[Tuple[int, ...], np.ndarray]]:
        """``(tokens incl. EOS, line ids)`` per terminal, in lexicographic token order."""
        keys = self.keys
        fc = self.first_child
        stack = [(0, 0)]  # (node, depth); path holds the tokens from the root to the node
        path: list = []
        while stack:
            node, d = stack.pop()
            if d:
                del path[d - 1:]
                path.append(int(keys[node]))
            a, b = int(fc[node]), int(fc[node + 1])
            if a == b:
                ids = self.terminal_ids(node)
                if ids.size:
                    yield tuple(path), ids
                continue
            stack.extend((c, d + 1) for c in range(b - 1, a - 1, -1))

    def parents(self) -> np.ndarray:
        """``int64[n_nodes]``: the parent of every node (``-1`` for the root), vectorised: in the
        BFS layout node ``v``'s parent is the last ``u`` with ``first_child[u] <= v``."""
        v = np.arange(self.n_nodes, dtype=np.int64)
        par = np.searchsorted(self.first_child, v, side="right").astype(np.int64) - 1
        par[0] = -1
        return par

    def terminal_paths(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(paths, lengths)``: ``paths[i, j]`` is the node after ``j + 1`` tokens on the way to
        terminal ``term_nodes[i]`` (``-1`` past its length); ``lengths[i]`` counts its tokens,
        EOS included.  One vectorised climb per level (``depth`` numpy steps)."""
        par = self.parents()
        n_t = int(self.n_terminals)
        paths = np.full((n_t, max(self.depth, 1)), -1, dtype=np.int64)
        cur = np.asarray(self.term_nodes, dtype=np.int64).copy()
        depth_of = np.zeros(n_t, dtype=np.int64)
        chain = []
        while True:
            alive = cur > 0
            if not alive.any():
                break
            chain.append(np.where(alive, cur, -1))
            depth_of += alive
            cur = np.where(alive, par[np.maximum(cur, 0)], 0)
        rows = np.arange(n_t)
        for k, level in enumerate(chain):  # level k is depth_of - 1 - k tokens from the root
            pos = depth_of - 1 - k
            ok = level >= 0
            paths[rows[ok], pos[ok]] = level[ok]
        return paths, depth_of

    def __reduce__(self):
        if self.path is not None:
            return (Trie.load, (self.path, False))
        return (_from_state, ((self.keys, self.first_child, self.term_nodes, self.term_offsets,
                               self.term_ids), self.eos, self.depth, self.n_lines, self.metadata))

    def __repr__(self) -> str:
        return (f"Trie(sequences={len(self)}, nodes={self.n_nodes}, terminals={self.n_terminals}, "
                f"depth={self.depth}, eos={self.eos}"
                f"{', path=' + repr(self.path) if self.path else ''})")

    # -- file format ---------------------------------------------------------------------------

    def save(self, path: os.PathLike | str) -> None:
        """Write the one-file binary format (atomically, via a temporary file;
        :mod:`triemine.trie.fileformat`)."""
        fileformat.write(path, [self.keys, self.first_child, self.term_nodes, self.term_offsets,
                                self.term_ids],
                         eos=self.eos, n_nodes=self.n_nodes, n_terminals=self.n_terminals,
                         n_ids=self.n_ids, n_lines=self.n_lines, depth=self.depth,
                         metadata=self.metadata)

    @classmethod
    def load(cls, path: os.PathLike | str, verify: bool = True) -> "Trie":
        """Memory-map a trie file (read-only, shared between processes).

        ``verify`` checks the payload CRC32 (one read of the file); the header checksum and the
        structural checks that keep queries memory-safe are always done.
        """
        a, h = fileformat.read(path, verify)
        return cls(a["keys"], a["first_child"], a["term_nodes"], a["term_offsets"], a["term_ids"],
                   eos=h["eos"], depth=h["depth"], n_lines=h["n_lines"], metadata=h["metadata"],
                   path=h["path"])


# -- helpers ---------------------------------------------------------------------------------------

def _from_state(arrays, eos, depth, n_lines, metadata) -> Trie:
    return Trie(*(np.array(a) for a in arrays), eos=eos, depth=depth, n_lines=n_lines,
                metadata=metadata)


def _validate(flat: np.ndarray, offsets: np.ndarray, lids: np.ndarray, eos: int,
              path: Optional[str], line_of: np.ndarray) -> None:
    """Raise InputError for the first bad sequence (in sequence order)."""
    n = offsets.size - 1
    if n == 0:
        return
    lengths = np.diff(offsets)
    problems = []  # (sequence index, message)

    def first(mask_idx: np.ndarray, msg) -> None:
        if mask_idx.size:
            problems.append((int(mask_idx[0]), msg))

    empty = np.flatnonzero(lengths == 0)
    first(empty, lambda i: "empty sequence (no tokens, not even EOS)")
    nonempty = lengths > 0
    last = np.where(nonempty, flat[np.maximum(offsets[1:] - 1, 0)] if flat.size else 0, -1)
    only_eos = np.flatnonzero((lengths == 1) & (last == eos))
    first(only_eos, lambda i: "empty sentence (only EOS)")
    bad_pos = np.flatnonzero((flat < 0) | (flat > MAX_TOKEN))
    if bad_pos.size:
        seq = int(np.searchsorted(offsets, bad_pos[0], side="right") - 1)
        tok = int(flat[bad_pos[0]])
        problems.append((seq, lambda i, tok=tok: f"token id {tok} out of range 0..{MAX_TOKEN} "
                         "(the compact trie stores uint16 keys, 65535 reserved)"))
    missing = np.flatnonzero(nonempty & (last != eos))
    first(missing, lambda i: f"sequence does not end with EOS ({eos})")
    eos_pos = np.flatnonzero(flat == eos)
    if eos_pos.size:
        seq_of = np.searchsorted(offsets, eos_pos, side="right") - 1
        inner = eos_pos[eos_pos != offsets[seq_of + 1] - 1]
        if inner.size:
            seq = int(np.searchsorted(offsets, inner[0], side="right") - 1)
            problems.append((seq, lambda i: f"EOS ({eos}) inside the sequence, before its end"))
    bad_lid = np.flatnonzero((lids < 0) | (lids > MAX_NODES - 1))
    first(bad_lid, lambda i: f"line id {int(lids[i])} out of range 0..{MAX_NODES - 1}")
    if problems:
        seq, msg = min(problems, key=lambda t: t[0])
        line = int(line_of[seq]) if seq < line_of.size else seq + 1
        raise InputError(msg(seq), "<sequences>" if path is None else path, line)


def _build_arrays(flat: np.ndarray, offsets: np.ndarray, lids: np.ndarray):
    """Level-by-level BFS construction (vectorised); returns the five trie arrays."""
    n = offsets.size - 1
    lengths = np.diff(offsets)
    order = np.argsort(-lengths, kind="stable")  # longest first: active sequences are a prefix
    starts = offsets[:-1][order]
    sorted_len = lengths[order]
    maxlen = int(sorted_len[0]) if n else 0
    # active[d] = number of sequences longer than d
    hist = np.bincount(lengths, minlength=maxlen + 1)
    active = n - np.cumsum(hist)
    node_of = np.zeros(n, dtype=np.int64)
    key_levels = [np.array([ROOT_KEY], dtype=np.uint16)]
    count_levels = []
    n_nodes, level_start, level_size = 1, 0, 1
    for d in range(maxlen):
        k = int(active[d])
        parent = node_of[:k]
        tok = flat[starts[:k] + d].astype(np.int64, copy=False)
        uniq, inv = np.unique((parent << 16) | tok, return_inverse=True)
        node_of[:k] = n_nodes + inv
        key_levels.append((uniq & 0xFFFF).astype(np.uint16))
        count_levels.append(np.bincount((uniq >> 16) - level_start, minlength=level_size))
        level_start, level_size = n_nodes, uniq.size
        n_nodes += uniq.size
        if n_nodes > MAX_NODES:
            raise InputError(f"the trie would exceed {MAX_NODES} nodes, the limit of its uint32 "
                             f"offsets; split the corpus")
    count_levels.append(np.zeros(level_size, dtype=np.int64))
    keys = np.concatenate(key_levels)
    first_child = np.empty(n_nodes + 1, dtype=np.uint32)
    first_child[0] = 1
    np.cumsum(np.concatenate(count_levels), out=first_child[1:], dtype=np.uint32)
    first_child[1:] += 1
    # terminals: unique (node, line id) pairs, sorted by node then id
    pairs = np.unique((node_of << 32) | lids[order]) if n else np.zeros(0, dtype=np.int64)
    tnodes, tstart = np.unique(pairs >> 32, return_index=True)
    term_offsets = np.empty(tnodes.size + 1, dtype=np.uint32)
    term_offsets[:-1] = tstart
    term_offsets[-1] = pairs.size
    return (keys, first_child, tnodes.astype(np.uint32), term_offsets,
            (pairs & 0xFFFFFFFF).astype(np.uint32))
