"""The mining job's last stage, a block of candidates at a time: the derived features, the
combined score and the TSV's rows.

    scored candidates (every generator's features, exact scores, priors)
      -> OUT.tsv.work/candidates.cols/ (:mod:`triemine.mining.columns`), marked ``scored``
      -> per block of FINISH_BLOCK rows, read back by plain reads (:meth:`ColumnStore.block`):
         the block's texts read once from the corpora (memory-mapped), the derived features
         (:func:`triemine.mining.features.derived`), ``combined``, the TSV's rows

So while it finishes, the driver holds one block's columns, texts and formatted rows, whatever
the number of candidates (about 5 × 10^8 at 10^8 sources: 40 GB of columns), and every text is
read once per candidate where the derived features and the TSV writer read it three times.  The
bytes of the TSV do not depend on the block size.  A job that has scored its candidates resumes
from them (:func:`load_scored`) without opening the earlier stages' files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Optional

import numpy as np

from triemine.mining.candidates import CandidateSet
from triemine.mining.columns import ColumnStore, write_set
from triemine.mining.features import derived
from triemine.mining.stages import stage_dir
from triemine.io import column_order, write_row_blocks

# candidates per block: the driver holds one block's columns, texts and formatted rows (tens of
# MB), not every candidate's (hundreds of GB at 10^8 sources)
FINISH_BLOCK = 65536
CANDIDATES = "candidates"  # the job's store: every generator's candidates, united, then scored
SCORED = "scored"          # the stage after which the store holds every column the TSV needs


def save_scored(work: Path, cands: CandidateSet) -> ColumnStore:
    """``cands`` as the job's scored store (for a caller that holds them whole)."""
    return write_set(stage_dir(work, CANDIDATES), cands, done=(CANDIDATES, SCORED))


def load_scored(work: Path) -> Optional[ColumnStore]:
    """The job's store when it is scored (complete and whole), else ``None``."""
    store = ColumnStore.open(stage_dir(work, CANDIDATES))
    return store if store is not None and SCORED in store.done else None


def finish_tsv(out_path: Path, scored: ColumnStore, src, tgt,
               combination: Callable[[Dict[str, np.ndarray]], np.ndarray], meta: dict,
               block: Optional[int] = None, judge: Optional[Callable] = None) -> np.ndarray:
    """The mining TSV of the scored candidates (one row per pair; :mod:`triemine.io.tsv`), written
    atomically, ``block`` candidates at a time (default ``FINISH_BLOCK``): each block's derived
    features (:func:`~triemine.mining.features.derived`) and ``combination`` (the combined
    score) computed from its texts, read once.  Returns how many candidates have each origin
    bitmask (256 counts, for the summary's; it kept every candidate's bitmask, a byte each)."""
    block = block or FINISH_BLOCK
    histogram = np.zeros(256, dtype=np.int64)

    def finished(a: int, b: int) -> dict:
        part = scored.block(a, b)
        histogram[:] += np.bincount(part.origin, minlength=256)
        s, t = part.src.tolist(), part.tgt.tolist()
        src_texts, tgt_texts = [src.texts[i] for i in s], [tgt.texts[i] for i in t]
        local = np.arange(len(part), dtype=np.int64)  # the block's pairs index its text lists
        part = derived(CandidateSet(local, local, part.origin, part.columns), tgt_texts,
                       src_texts)
        part = part.with_columns(combined=combination(part.columns))
        if judge is not None:
            part = part.with_columns(**judge(part.columns, src_texts, tgt_texts))
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
    return histogram
