"""Where the mining job keeps what it has computed: its stages in ``OUT.tsv.work/`` (candidate
sets as ``.npz``, each written atomically once complete, so a resumed job
reuses them) and the caches shared between jobs (``$TRIEMINE_CACHE/<name>``)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from triemine.mining.candidates import CandidateSet
from triemine.outfile import atomic_open
from triemine.paths import cache_root

logger = logging.getLogger(__name__)


def save_candidates(path: Path, cands: CandidateSet) -> None:
    """The candidate set as ``path`` (``.npz``), written atomically array by array (no copy
    of the whole set in memory, as building its bytes first made)."""
    with atomic_open(path, "candidates") as f:
        np.savez(f, src=cands.src, tgt=cands.tgt, origin=cands.origin,
                 **{f"col_{k}": v for k, v in cands.columns.items()})


def load_candidates(path: Path) -> CandidateSet:
    z = np.load(path)
    return CandidateSet(z["src"], z["tgt"], z["origin"],
                        {k[4:]: z[k] for k in z.files if k.startswith("col_")})


def stage(work: Path, name: str, compute) -> CandidateSet:
    """The candidate set of stage ``name``: reused from ``work`` when stored, else computed and
    stored."""
    path = work / f"{name}.npz"
    if path.is_file():
        logger.info("reusing %s", path)
        return load_candidates(path)
    cands = compute()
    save_candidates(path, cands)
    return cands


def cache_dir(name: str) -> Path:
    """A cache shared between jobs (translations, target priors)."""
    return cache_root() / name
