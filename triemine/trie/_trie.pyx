# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Query kernels of the compact trie (see ``triemine/trie/core.py`` for layout and building).

Layout (all flat arrays, BFS node numbering, root = node 0):

* ``keys: uint16[n_nodes]``: the token on the edge into each node (root holds 65535, unused).
* ``first_child: uint32[n_nodes + 1]``: the children of node ``v`` are the nodes
  ``first_child[v] .. first_child[v + 1] - 1``, contiguous and sorted by key, so a child is found
  by binary search over ``keys``.
* ``term_nodes: uint32[n_terminals]`` (sorted), ``term_offsets: uint32[n_terminals + 1]``,
  ``term_ids: uint32[n_ids]``: CSR from terminal node to the target line ids it ends.

``TrieCore`` keeps raw pointers into those arrays (which it also references, so that memory
mapped files stay open) and answers queries without the GIL.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint16_t, uint32_t

cnp.import_array()

ROOT_KEY = 65535
MAX_TOKEN = 65534


cdef inline int64_t _child(const uint16_t* keys, const uint32_t* fc, int64_t node,
                           int64_t tok) noexcept nogil:
    """Child of ``node`` along ``tok`` or -1 (``node`` must be a valid node id)."""
    cdef int64_t lo, hi, mid, end
    cdef uint16_t k
    if tok < 0 or tok > 65534:
        return -1
    k = <uint16_t>tok
    lo = fc[node]
    end = fc[node + 1]
    hi = end
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < k:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and keys[lo] == k:
        return lo
    return -1


cdef inline int64_t _terminal_index(const uint32_t* term_nodes, int64_t n_terminals,
                                    int64_t node) noexcept nogil:
    """Index of ``node`` in the sorted terminal-node array or -1."""
    cdef int64_t lo = 0, hi = n_terminals, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if term_nodes[mid] < node:
            lo = mid + 1
        else:
            hi = mid
    if lo < n_terminals and term_nodes[lo] == node:
        return lo
    return -1


cdef class TrieCore:
    """Pointer-level view of the trie arrays; the public class ``Trie`` derives from it."""

    cdef const uint16_t* _keys
    cdef const uint32_t* _fc
    cdef const uint32_t* _tnodes
    cdef const uint32_t* _toffs
    cdef const uint32_t* _tids
    cdef readonly int64_t n_nodes
    cdef readonly int64_t n_terminals
    cdef readonly int64_t n_ids
    cdef object _arrays

    def _attach(self, keys, first_child, term_nodes, term_offsets, term_ids):
        """Point at the five arrays (C-contiguous, right dtypes, sizes consistent)."""
        cdef const uint16_t[::1] k = keys
        cdef const uint32_t[::1] f = first_child
        cdef const uint32_t[::1] tn = term_nodes
        cdef const uint32_t[::1] to = term_offsets
        cdef const uint32_t[::1] ti = term_ids
        if f.shape[0] != k.shape[0] + 1 or to.shape[0] != tn.shape[0] + 1:
            raise ValueError("inconsistent trie array sizes")
        self._arrays = (keys, first_child, term_nodes, term_offsets, term_ids)
        self.n_nodes = k.shape[0]
        self.n_terminals = tn.shape[0]
        self.n_ids = ti.shape[0]
        self._keys = &k[0] if k.shape[0] else NULL
        self._fc = &f[0]
        self._tnodes = &tn[0] if tn.shape[0] else NULL
        self._toffs = &to[0]
        self._tids = &ti[0] if ti.shape[0] else NULL

    cdef int _check_nodes(self, const int64_t[::1] nv) except -1:
        """Batched queries accept node ids in ``[-1, n_nodes)``; raise on the first other one."""
        cdef Py_ssize_t n = nv.shape[0], i, bad = -1
        cdef int64_t nn = self.n_nodes
        with nogil:
            for i in range(n):
                if nv[i] < -1 or nv[i] >= nn:
                    bad = i
                    break
        if bad >= 0:
            self._check_node(nv[bad])
        return 0

    cdef inline int _check_node(self, int64_t node) except -1:
        if node < -1 or node >= self.n_nodes:
            raise IndexError(f"node {node} out of range (trie has {self.n_nodes} nodes; -1 = none)")
        return 0

    # -- single queries ----------------------------------------------------------------------

    cpdef int64_t step(self, int64_t node, int64_t token) except -2:
        """Child of ``node`` along ``token``, or -1 when there is none (``node`` -1 gives -1)."""
        self._check_node(node)
        if node < 0:
            return -1
        return _child(self._keys, self._fc, node, token)

    def child_range(self, int64_t node):
        """``(start, end)``: the children of ``node`` are the node ids ``start .. end-1``."""
        self._check_node(node)
        if node < 0:
            return 0, 0
        return int(self._fc[node]), int(self._fc[node + 1])

    def terminal_range(self, int64_t node):
        """``(start, end)`` into ``term_ids`` for the line ids ``node`` ends (empty if none)."""
        self._check_node(node)
        if node < 0:
            return 0, 0
        cdef int64_t t = _terminal_index(self._tnodes, self.n_terminals, node)
        if t < 0:
            return 0, 0
        return int(self._toffs[t]), int(self._toffs[t + 1])

    def walk(self, seq, int64_t node=0):
        """Follow ``seq`` from ``node``; the node reached, or -1 when it leaves the trie."""
        self._check_node(node)
        cdef int64_t tok
        for tok in seq:
            if node < 0:
                return -1
            node = _child(self._keys, self._fc, node, tok)
        return node

    # -- batched queries (GIL released) --------------------------------------------------------

    def step_many(self, nodes, tokens):
        """Vectorised :meth:`step`: ``int64[n]`` child ids, -1 where absent or node is -1."""
        cdef const int64_t[::1] nv = np.ascontiguousarray(nodes, dtype=np.int64).reshape(-1)
        cdef const int64_t[::1] tv = np.ascontiguousarray(tokens, dtype=np.int64).reshape(-1)
        cdef Py_ssize_t n = nv.shape[0], i
        if tv.shape[0] != n:
            raise ValueError(f"step_many: {n} nodes but {tv.shape[0]} tokens")
        self._check_nodes(nv)
        out = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] ov = out
        cdef int64_t node
        with nogil:
            for i in range(n):
                node = nv[i]
                ov[i] = -1 if node < 0 else _child(self._keys, self._fc, node, tv[i])
        return out

    def children_many(self, nodes):
        """Children of many nodes as flat arrays ``(offsets int64[n+1], keys int64[m],
        child_nodes int64[m])``: node ``nodes[i]`` has ``keys[offsets[i]:offsets[i+1]]``."""
        cdef const int64_t[::1] nv = np.ascontiguousarray(nodes, dtype=np.int64).reshape(-1)
        cdef Py_ssize_t n = nv.shape[0], i
        cdef int64_t node, total = 0, j, a, b, pos
        self._check_nodes(nv)
        offsets = np.empty(n + 1, dtype=np.int64)
        cdef int64_t[::1] off = offsets
        with nogil:
            off[0] = 0
            for i in range(n):
                node = nv[i]
                if node >= 0:
                    total += self._fc[node + 1] - self._fc[node]
                off[i + 1] = total
        keys = np.empty(total, dtype=np.int64)
        child = np.empty(total, dtype=np.int64)
        cdef int64_t[::1] kv = keys
        cdef int64_t[::1] cv = child
        with nogil:
            for i in range(n):
                node = nv[i]
                if node < 0:
                    continue
                a = self._fc[node]
                b = self._fc[node + 1]
                pos = off[i]
                for j in range(a, b):
                    kv[pos] = self._keys[j]
                    cv[pos] = j
                    pos += 1
        return offsets, keys, child

    def is_terminal_many(self, nodes):
        """``bool[n]``: whether each node ends at least one inserted sequence (-1 → False)."""
        cdef const int64_t[::1] nv = np.ascontiguousarray(nodes, dtype=np.int64).reshape(-1)
        cdef Py_ssize_t n = nv.shape[0], i
        cdef int64_t node
        self._check_nodes(nv)
        out = np.zeros(n, dtype=np.bool_)
        cdef cnp.npy_bool[::1] ov = out
        with nogil:
            for i in range(n):
                node = nv[i]
                if node >= 0:
                    ov[i] = _terminal_index(self._tnodes, self.n_terminals, node) >= 0
        return out

    def terminal_ids_many(self, nodes):
        """Line ids of many nodes as ``(offsets int64[n+1], ids int64[m])`` (GIL released)."""
        cdef const int64_t[::1] nv = np.ascontiguousarray(nodes, dtype=np.int64).reshape(-1)
        cdef Py_ssize_t n = nv.shape[0], i
        cdef int64_t node, total = 0, t, j, pos
        self._check_nodes(nv)
        offsets = np.empty(n + 1, dtype=np.int64)
        tidx = np.full(n, -1, dtype=np.int64)
        cdef int64_t[::1] off = offsets
        cdef int64_t[::1] tx = tidx
        with nogil:
            off[0] = 0
            for i in range(n):
                node = nv[i]
                if node >= 0:
                    t = _terminal_index(self._tnodes, self.n_terminals, node)
                    tx[i] = t
                    if t >= 0:
                        total += self._toffs[t + 1] - self._toffs[t]
                off[i + 1] = total
        ids = np.empty(total, dtype=np.int64)
        cdef int64_t[::1] iv = ids
        with nogil:
            for i in range(n):
                t = tx[i]
                if t < 0:
                    continue
                pos = off[i]
                for j in range(self._toffs[t], self._toffs[t + 1]):
                    iv[pos] = self._tids[j]
                    pos += 1
        return offsets, ids
