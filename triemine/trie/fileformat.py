"""The trie's one-file binary format: header, checksums and the structural checks of a loaded file.

File layout: a fixed little-endian header (magic ``TRIEMINE``, format version, EOS id, the array
sizes, depth, number of corpus lines, metadata length, a CRC32 of the payload and one of the
header itself), then the five arrays of :mod:`triemine.trie.core` (``keys``, ``first_child``,
``term_nodes``, ``term_offsets``, ``term_ids``), each padded to 8 bytes, then the metadata as JSON.
Reading memory-maps the arrays (shared between processes) and checks everything a query relies on.
"""
from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from triemine.errors import TrieFormatError
from triemine.io import atomic_open

MAGIC = b"TRIEMINE"
FORMAT_VERSION = 1
ROOT_KEY = 65535
MAX_TOKEN = 65534
MAX_NODES = 2**32 - 1
# magic, version, eos, n_nodes, n_terminals, n_ids, n_lines, depth, meta_len, payload_crc,
# header_crc
_HEADER = struct.Struct("<8sIIQQQQQQII")
_CRC_CHUNK = 1 << 24


def _align8(n: int) -> int:
    return (n + 7) & ~7


def write(path: os.PathLike | str, sections: Sequence[np.ndarray], *, eos: int, n_nodes: int,
          n_terminals: int, n_ids: int, n_lines: int, depth: int, metadata: dict) -> None:
    """Write the five trie arrays, the header and the metadata atomically (a temporary file
    renamed into place)."""
    path = Path(path)
    meta = json.dumps(metadata, sort_keys=True).encode("utf-8")
    blobs = []
    for a in sections:
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        blobs.append(raw + b"\0" * (_align8(len(raw)) - len(raw)))
    blobs.append(meta)
    crc = 0
    for b in blobs:
        crc = zlib.crc32(b, crc)
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, eos, n_nodes, n_terminals,
                        n_ids, n_lines, depth, len(meta), crc, 0)
    head = head[:-4] + struct.pack("<I", zlib.crc32(head[:-4]))
    with atomic_open(path, "trie", hint="") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


def read(path: os.PathLike | str, verify: bool = True) -> Tuple[Dict[str, np.ndarray], dict]:
    """The five arrays of a trie file, memory-mapped read-only, and its header fields (``eos``,
    ``depth``, ``n_lines``, ``metadata``, ``path``); a :class:`TrieFormatError` for anything
    truncated, foreign, of another version, corrupted or structurally unsafe to query."""
    p = os.fspath(path)
    try:
        if os.path.isdir(p):
            raise IsADirectoryError(21, "is a directory")
        size = os.path.getsize(p)
    except OSError as exc:
        raise TrieFormatError(f"cannot open trie file: {exc.strerror}", p) from None
    if size < _HEADER.size:
        if size >= len(MAGIC):
            with open(p, "rb") as f:
                if f.read(len(MAGIC)) != MAGIC:
                    raise TrieFormatError("not a triemine trie file (bad magic)", p)
        raise TrieFormatError(f"truncated: {size} bytes, the header alone needs {_HEADER.size}", p)
    with open(p, "rb") as f:
        head = f.read(_HEADER.size)
    (magic, version, eos, n_nodes, n_term, n_ids, n_lines, depth, meta_len, payload_crc,
     head_crc) = _HEADER.unpack(head)
    if magic != MAGIC:
        raise TrieFormatError("not a triemine trie file (bad magic)", p)
    if version != FORMAT_VERSION:
        raise TrieFormatError(
            f"trie format version {version}; this triemine reads version {FORMAT_VERSION} "
            f"(rebuild the trie with trie-build)", p)
    if zlib.crc32(head[:-4]) != head_crc:
        raise TrieFormatError("corrupted header (checksum mismatch)", p)
    if n_nodes < 1 or n_nodes > MAX_NODES or n_ids > MAX_NODES or n_term > n_nodes:
        raise TrieFormatError("corrupted header (impossible sizes)", p)
    layout = [("keys", np.uint16, n_nodes), ("first_child", np.uint32, n_nodes + 1),
              ("term_nodes", np.uint32, n_term), ("term_offsets", np.uint32, n_term + 1),
              ("term_ids", np.uint32, n_ids)]
    pos = _HEADER.size
    spans = []
    for name, dt, count in layout:
        spans.append((name, dt, count, pos))
        pos += _align8(np.dtype(dt).itemsize * count)
    expected = pos + meta_len
    if size < expected:
        raise TrieFormatError(f"truncated: {size} bytes, expected {expected}", p)
    if size > expected:
        raise TrieFormatError(f"{size - expected} unexpected trailing bytes after the trie", p)
    mm = np.memmap(p, dtype=np.uint8, mode="r")
    if verify:
        crc = 0
        body = memoryview(mm)[_HEADER.size:]
        for i in range(0, len(body), _CRC_CHUNK):
            crc = zlib.crc32(body[i:i + _CRC_CHUNK], crc)
        if crc != payload_crc:
            raise TrieFormatError("corrupted data (payload checksum mismatch)", p)
    arrays = {name: np.frombuffer(mm, dtype=np.dtype(dt).newbyteorder("<"), count=count,
                                  offset=off)
              for name, dt, count, off in spans}
    try:
        metadata = json.loads(bytes(mm[pos:pos + meta_len]).decode("utf-8")) if meta_len else {}
        if not isinstance(metadata, dict):
            raise ValueError("metadata is not a JSON object")
    except (UnicodeDecodeError, ValueError) as exc:
        raise TrieFormatError(f"corrupted metadata ({exc})", p) from None
    _check_structure(arrays, n_nodes, n_ids, p, eos=eos, depth=depth, n_lines=n_lines,
                     metadata=metadata)
    return arrays, {"eos": eos, "depth": depth, "n_lines": n_lines, "metadata": metadata,
                    "path": p}


_META_TYPES = {"dict_size": int, "dict_fingerprint": str, "eos": int, "nbest": int, "lines": int,
               "empty_lines": int, "format_version": int, "spm_sha256": (str, type(None))}


def _check_structure(a: dict, n_nodes: int, n_ids: int, path: str, *, eos: Optional[int] = None,
                     depth: Optional[int] = None, n_lines: Optional[int] = None,
                     metadata: Optional[dict] = None) -> None:
    """O(n) checks of a loaded file, so that a file with valid checksums but wrong content (written
    by a buggy or hostile tool) can neither crash queries nor silently change what they return:

    * offsets: ``first_child`` starts at 1, ends at ``n_nodes``, is non-decreasing and points
      forward (BFS order); terminal tables sorted and in range;
    * what the search relies on: the root's key is the root marker, every other key a token id;
      the keys of each child array strictly increase (binary search); every leaf is an EOS node
      and a terminal, and every EOS node a leaf (no dead ends, no unreachable matches);
    * header fields equal what the arrays imply (``depth``, ``n_lines``) and metadata values have
      their types (``dict_size`` an integer, ...).
    """
    def bad(problem: str):
        raise TrieFormatError(f"corrupted trie structure ({problem})", path)

    fc = np.asarray(a["first_child"], dtype=np.int64)
    idx = np.arange(n_nodes, dtype=np.int64)
    ok = int(fc[0]) == 1 and int(fc[-1]) == n_nodes
    ok = ok and bool(np.all(fc[1:] >= fc[:-1]))
    ok = ok and bool(np.all((fc[1:] == fc[:-1]) | (fc[:-1] > idx)))
    tn, to = a["term_nodes"], a["term_offsets"]
    ok = ok and (tn.size == 0 or (int(tn[-1]) < n_nodes and bool(np.all(tn[1:] > tn[:-1]))))
    ok = ok and int(to[0]) == 0 and int(to[-1]) == n_ids and bool(np.all(to[1:] >= to[:-1]))
    if not ok:
        bad("offsets out of order or out of range")
    if eos is None:
        return
    keys = np.asarray(a["keys"])
    if int(keys[0]) != ROOT_KEY or (n_nodes > 1 and int(keys[1:].max()) > MAX_TOKEN):
        bad("node keys out of range")
    n_child = np.diff(fc)
    parent = np.repeat(idx, n_child)  # parent of nodes 1..n-1, one linear pass
    same = parent[1:] == parent[:-1]
    if np.any(keys[2:][same] <= keys[1:-1][same]):
        bad("the children of a node are not sorted by token")
    leaf = n_child == 0
    is_eos = keys == eos
    is_eos[0] = False
    is_term = np.zeros(n_nodes, dtype=bool)
    is_term[np.asarray(tn, dtype=np.int64)] = True
    if n_nodes > 1 and (np.any(leaf[1:] != is_eos[1:]) or np.any(is_term != is_eos)):
        bad("leaves, EOS nodes and terminals disagree")
    if np.any(np.diff(np.asarray(to, dtype=np.int64)) == 0):
        bad("a terminal without line ids")
    levels, lo, hi = 0, 0, 1  # BFS levels: children of [lo, hi) are [fc[lo], fc[hi])
    while True:
        lo, hi = int(fc[lo]), int(fc[hi])
        if lo >= hi:
            break
        levels += 1
    if depth is not None and depth != levels:
        bad(f"header depth {depth}, the nodes have {levels} levels")
    if n_lines is not None and n_lines != int(np.unique(np.asarray(a["term_ids"])).size):
        bad(
            f"header says {n_lines} lines, the terminals hold "
            f"{int(np.unique(np.asarray(a['term_ids'])).size)}"
        )
    for key, typ in _META_TYPES.items():
        if metadata and key in metadata:
            v = metadata[key]
            if isinstance(v, bool) or not isinstance(v, typ):
                raise TrieFormatError(f"corrupted metadata ({key} is {v!r}, not of type "
                                      f"{getattr(typ, '__name__', 'str or null')})", path)
