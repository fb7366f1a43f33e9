"""Candidate sets on disk: the one format of the mining job's stages.

A store is a directory with one sealed ``.npy`` per column (:mod:`triemine.io.checksum`;
``src.npy``,
``tgt.npy``: int64 line indices; ``origin.npy``: uint8 generator bits; every feature column
float64) and ``columns.json`` (sealed JSON: the row count, the feature columns in order, the
stages done), written last::

    OUT.tsv.work/knn.cols/           a generator's candidates (sorted by source, then target)
    OUT.tsv.work/candidates.cols/    every generator's, united and filtered; the exact scores
                                     and priors are added to it as columns, stage by stage

A store is written block by block as its rows are computed (:func:`write_store`: every column
file is streamed, its header written last) and read block by block (:meth:`ColumnStore.block`:
plain reads, nothing stays mapped), so a stage holds one block of candidates, not the set: at
10^8 sources a side the set is about 3 x 10^8 candidates, 10 GB of columns before any score.
Columns are replaced whole and atomically (:meth:`ColumnStore.put_columns`), the index after
them, so a stage cut short is done again and a finished one is never done twice.  A resumed job
opens a store with :meth:`ColumnStore.open`, which verifies every column's checksum: a damaged
store (an index or a column file truncated, emptied or changed in place) is named in a warning
and its stage computed again.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from triemine.mining.candidates import CandidateSet
from triemine.io import atomic_write, dumps_sealed, npy_writer, read_sealed, TRAILER, verify_npy
from triemine.errors import DamagedFile

logger = logging.getLogger(__name__)

BLOCK = 65536  # rows a block when a stage reads a store
INDEX = "columns.json"  # written last: a store is complete when it exists
BASE = {"src": np.dtype(np.int64), "tgt": np.dtype(np.int64), "origin": np.dtype(np.uint8)}


class ColumnStore:
    """A complete store (module docstring): ``n`` rows, feature ``columns``, stages ``done``."""

    def __init__(self, where: Path, n: int, columns: Sequence[str], done: Sequence[str] = (),
                 verify: bool = False):
        """The store's column files, their headers read (with ``verify``, their checksums too:
        :class:`~triemine.errors.DamagedFile` when one does not hold)."""
        self.dir, self.n = Path(where), int(n)
        self.columns, self.done = list(columns), list(done)
        self._layout = {}
        fmt = np.lib.format
        for name in list(BASE) + self.columns:
            path = self.path(name)
            want = BASE.get(name, np.dtype(np.float64))
            if verify:
                dtype, shape, offset = verify_npy(path, "candidate column")
                if shape != (self.n,) or dtype != want:
                    raise DamagedFile(path, f"{shape} {dtype}, not {self.n} rows of {want}",
                                      "candidate column")
                self._layout[name] = (dtype, offset)
                continue
            with open(path, "rb") as f:
                version = fmt.read_magic(f)
                shape, fortran, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else
                                         fmt.read_array_header_2_0)(f)
                offset = f.tell()
                whole = os.fstat(f.fileno()).st_size == \
                    offset + self.n * dtype.itemsize + TRAILER.size
                if shape != (self.n,) or fortran or dtype.hasobject or not whole:
                    raise ValueError(f"{path}: not {self.n} rows a candidate")
                self._layout[name] = (dtype, offset)

    @classmethod
    def open(cls, where: Path) -> Optional["ColumnStore"]:
        """The store at ``where`` when it is complete and undamaged (every checksum verified),
        else ``None``: not written to the end, or damaged (a warning names the file; the
        caller computes the stage again)."""
        try:
            index = read_sealed(Path(where) / INDEX, "candidate store index")
            return cls(where, index["n"], index["columns"], index.get("done", ()), verify=True)
        except FileNotFoundError:
            return None
        except DamagedFile as exc:
            logger.warning("%s; computing the stage again", exc)
            return None
        except (OSError, KeyError, TypeError, ValueError) as exc:
            logger.warning("%s: damaged candidate store (%s); computing the stage again",
                           where, exc)
            return None

    def __len__(self) -> int:
        return self.n

    def path(self, name: str) -> Path:
        return self.dir / f"{name}.npy"

    def rows(self, name: str, a: int, b: int) -> np.ndarray:
        """Rows ``[a, b)`` of column ``name``, read into memory."""
        dtype, offset = self._layout[name]
        return np.fromfile(self.path(name), dtype=dtype, count=max(b - a, 0),
                           offset=offset + a * dtype.itemsize)

    def mapped(self, name: str) -> np.ndarray:
        """Column ``name`` memory-mapped read-only (for index arrays handed to the sharded
        scorer, which reads them a shard at a time)."""
        if not self.n:  # nothing to map
            return np.zeros(0, dtype=self._layout[name][0])
        return np.load(self.path(name), mmap_mode="r")

    def block(self, a: int, b: int) -> CandidateSet:
        return CandidateSet(self.rows("src", a, b), self.rows("tgt", a, b),
                            self.rows("origin", a, b),
                            {c: self.rows(c, a, b) for c in self.columns})

    def bounds(self, block: Optional[int] = None) -> List[tuple]:
        """The rows ``[a, b)`` of each block of ``block`` rows (default ``BLOCK``)."""
        block = block or BLOCK
        return [(a, min(a + block, self.n)) for a in range(0, self.n, block)]

    def blocks(self, block: Optional[int] = None) -> Iterator[CandidateSet]:
        for a, b in self.bounds(block):
            yield self.block(a, b)

    def first_row_of_source(self, source: int) -> int:
        """The first row whose source is ``source`` or later (the rows are sorted by source)."""
        if not self.n:
            return 0
        return int(np.searchsorted(self.mapped("src"), source, side="left"))

    def put_columns(self, names: Sequence[str], blocks: Iterable[Dict[str, np.ndarray]],
                    stage: str) -> "ColumnStore":
        """Columns ``names`` replaced (or added) from ``blocks`` (one dict a block of
        :meth:`bounds`, in order), each file atomically, then the index naming ``stage`` done.
        ``names[0]`` is renamed in last: a stage whose work is that column's NaN rows, cut
        short between two renames, finds that work still to do."""
        with _column_files(self.dir, {n: np.dtype(np.float64) for n in names},
                           "candidate columns") as files:
            for part in blocks:
                files.write(part)
            if files.n != self.n:  # before any file replaces its column
                raise ValueError(f"{self.dir}: {files.n} rows written for {self.n} candidates")
        return self._indexed(self.columns + [n for n in names if n not in self.columns], stage)

    def mark(self, stage: str) -> "ColumnStore":
        """The store with ``stage`` done (its index rewritten)."""
        return self._indexed(self.columns, stage)

    def _indexed(self, columns: List[str], stage: str) -> "ColumnStore":
        _write_index(self.dir, self.n, columns, self.done + [stage])
        return ColumnStore(self.dir, self.n, columns, self.done + [stage])


def write_store(where: Path, blocks: Iterable[CandidateSet], columns: Sequence[str],
                done: Sequence[str] = ()) -> ColumnStore:
    """A new store at ``where`` (what was there is removed first) from ``blocks``, written as
    they come; every block has the feature ``columns`` (in any order)."""
    where = Path(where)
    clash = [c for c in columns if c in BASE or not c or "/" in c or c.startswith(".")]
    if clash:
        raise ValueError(f"column name(s) {', '.join(map(repr, clash))} cannot be a column file")
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    dtypes = dict(BASE, **{c: np.dtype(np.float64) for c in columns})
    with _column_files(where, dtypes, "candidates") as files:
        for part in blocks:
            if set(part.columns) != set(columns):
                raise ValueError(f"a block with columns {sorted(part.columns)}, not "
                                 f"{sorted(columns)}")
            files.write(dict(part.columns, src=part.src, tgt=part.tgt, origin=part.origin))
    _write_index(where, files.n, columns, done)
    return ColumnStore(where, files.n, columns, done)


def write_set(where: Path, cands: CandidateSet, done: Sequence[str] = ()) -> ColumnStore:
    """``cands`` as a store (:func:`write_store` of one block)."""
    return write_store(where, [cands], list(cands.columns), done)


def _write_index(where: Path, n: int, columns: Sequence[str], done: Sequence[str]) -> None:
    atomic_write(Path(where) / INDEX, dumps_sealed(
        {"n": int(n), "columns": list(columns), "done": list(done)}), "candidates")


@contextlib.contextmanager
def _column_files(where: Path, dtypes: Dict[str, np.dtype], what: str):
    """Column files (``with _column_files(...) as files: files.write(block)``), each a sealed
    ``.npy`` (:func:`~triemine.io.checksum.npy_writer`) whose header is written once the row count
    is known.  On a clean exit every file replaces its column, the first column last
    (a stage's work is that column's NaN rows: a crash between two renames leaves it to do);
    on an error the files not yet renamed stay as they were (an OSError names its file)."""
    where = Path(where)
    with contextlib.ExitStack() as stack:
        files = _Writer(dtypes)
        for name in dtypes:  # entered in order, so closed (and renamed) in reverse
            for stale in where.glob(f"{name}.npy.tmp*"):  # a killed writer's (GBs at scale)
                stale.unlink(missing_ok=True)
            files.f[name] = stack.enter_context(npy_writer(where / f"{name}.npy", dtypes[name],
                                                           what=what))
        yield files


class _Writer:
    """The open column files of :func:`_column_files` and the rows written to them."""

    def __init__(self, dtypes: Dict[str, np.dtype]):
        self.dtypes, self.n, self.f = dtypes, 0, {}

    def write(self, part: Dict[str, np.ndarray]) -> None:
        n = None
        for name, dtype in self.dtypes.items():
            arr = np.ascontiguousarray(part[name], dtype=dtype)
            if n is not None and len(arr) != n:
                raise ValueError(f"column {name}: {len(arr)} rows in a block of {n}")
            n = len(arr)
            self.f[name].write(arr.data)
        self.n += n or 0
