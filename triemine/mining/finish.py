"""The mining job's last stage, a block of candidates at a time: the derived features, the
combined score and the TSV's rows.

    scored candidates (every generator's features, exact scores, priors)
      -> OUT.tsv.work/scored/: one .npy per column, then columns.json (:func:`save_scored`)
      -> per block of FINISH_BLOCK rows, read back by plain reads (:class:`ScoredColumns`):
         the block's texts read once from the corpora (memory-mapped), the derived features
         (:func:`triemine.mining.features.derived`), ``combined``, the TSV's rows

So while it finishes, the driver holds one block's columns, texts and formatted rows, whatever
the number of candidates (about 5 × 10^8 at 10^8 sources: 40 GB of columns), and every text is
read once per candidate where the derived features and the TSV writer read it three times.  The
bytes of the TSV do not depend on the block size.  A job that has saved its scored candidates
resumes from them (:func:`load_scored`) without opening the earlier stages' files.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

from triemine.mining.candidates import CandidateSet
from triemine.outfile import atomic_write, npy_chunks

# candidates per block: the driver holds one block's columns, texts and formatted rows (tens of
# MB), not every candidate's (hundreds of GB at 10^8 sources)
FINISH_BLOCK = 65536
SCORED = "scored"
_INDEX = "columns.json"  # written last: the stage is complete when it exists
_BASE = ("src", "tgt", "origin")


class ScoredColumns:
    """The scored candidates as column files (``<dir>/<column>.npy``); :meth:`block` reads rows
    ``[a, b)`` of every column with plain reads, so nothing stays mapped or resident."""

    def __init__(self, where: Path, n: int, columns: List[str]):
        self.dir, self.n, self.columns = Path(where), int(n), list(columns)
        self._layout = {}
        fmt = np.lib.format
        for name in list(_BASE) + self.columns:
            with open(self._path(name), "rb") as f:
                version = fmt.read_magic(f)
                shape, fortran, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else
                                         fmt.read_array_header_2_0)(f)
                offset = f.tell()
                whole = os.fstat(f.fileno()).st_size == offset + self.n * dtype.itemsize
                if shape != (self.n,) or fortran or dtype.hasobject or not whole:
                    raise ValueError(f"{self._path(name)}: not {self.n} rows a candidate")
                self._layout[name] = (dtype, offset)

    def __len__(self) -> int:
        return self.n

    def _path(self, name: str) -> Path:
        return self.dir / f"{name}.npy"

    def _rows(self, name: str, a: int, b: int) -> np.ndarray:
        dtype, offset = self._layout[name]
        return np.fromfile(self._path(name), dtype=dtype, count=b - a,
                           offset=offset + a * dtype.itemsize)

    def block(self, a: int, b: int) -> CandidateSet:
        return CandidateSet(self._rows("src", a, b), self._rows("tgt", a, b),
                            self._rows("origin", a, b),
                            {c: self._rows(c, a, b) for c in self.columns})


def save_scored(work: Path, cands: CandidateSet) -> ScoredColumns:
    """``cands`` as the job's scored stage (``work/scored/``), each column written atomically
    in slices (no copy of a whole column), the index last."""
    where = Path(work) / SCORED
    where.mkdir(parents=True, exist_ok=True)
    (where / _INDEX).unlink(missing_ok=True)
    clash = [c for c in cands.columns if c in _BASE or not c or "/" in c or c.startswith(".")]
    if clash:
        raise ValueError(f"column name(s) {', '.join(map(repr, clash))} cannot be a column file")
    arrays = dict(src=cands.src, tgt=cands.tgt, origin=cands.origin, **cands.columns)
    for name, arr in arrays.items():
        atomic_write(where / f"{name}.npy", npy_chunks(arr), "scored candidates")
    atomic_write(where / _INDEX, json.dumps({"n": len(cands), "columns": list(cands.columns)})
                 .encode("utf-8"), "scored candidates")
    return ScoredColumns(where, len(cands), list(cands.columns))


def load_scored(work: Path) -> Optional[ScoredColumns]:
    """The job's scored stage when it is complete, else ``None``."""
    where = Path(work) / SCORED
    try:
        index = json.loads((where / _INDEX).read_text(encoding="utf-8"))
        return ScoredColumns(where, index["n"], index["columns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def finish_tsv(out_path: Path, scored: ScoredColumns, src, tgt,
               combination: Callable[[Dict[str, np.ndarray]], np.ndarray], meta: dict,
               block: Optional[int] = None) -> np.ndarray:
    """The mining TSV of the scored candidates (one row per pair; :mod:`triemine.tsv`), written
    atomically, ``block`` candidates at a time (default ``FINISH_BLOCK``): each block's derived
    features (:func:`~triemine.mining.features.derived`) and ``combination`` (the combined
    score) computed from its texts, read once.  Returns the origin bitmask of every candidate
    (one byte each) for the summary's counts."""
    from triemine.mining.features import derived
    from triemine.tsv import column_order, write_row_blocks

    block = block or FINISH_BLOCK
    origin = np.zeros(len(scored), dtype=np.uint8)

    def finished(a: int, b: int) -> dict:
        part = scored.block(a, b)
        origin[a:b] = part.origin
        s, t = part.src.tolist(), part.tgt.tolist()
        src_texts, tgt_texts = [src.texts[i] for i in s], [tgt.texts[i] for i in t]
        local = np.arange(len(part), dtype=np.int64)  # the block's pairs index its text lists
        part = derived(CandidateSet(local, local, part.origin, part.columns), tgt_texts,
                       src_texts)
        part = part.with_columns(combined=combination(part.columns))
        return dict(part.columns, origin=part.origin.astype(np.float64),
                    src_id=[src.ids[i] for i in s], tgt_id=[tgt.ids[i] for i in t],
                    src=src_texts, tgt=tgt_texts)
    first = finished(0, min(block, len(scored)))  # also names the columns of an empty set
    columns = column_order(c for c in first if c not in ("n_tokens", "n_tokens_rev")
                           and c not in ("src_id", "tgt_id", "src", "tgt"))

    def blocks():
        yield first
        for a in range(block, len(scored), block):
            yield finished(a, min(a + block, len(scored)))
    write_row_blocks(out_path, columns, blocks(), meta=meta)
    return origin
