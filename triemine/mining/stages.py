"""Where the mining job keeps what it has computed: its stages in ``OUT.tsv.work/`` (candidate
sets as column stores, :mod:`triemine.mining.columns`, each complete once its index is
written, so a resumed job reuses them) and the caches shared between jobs
(``$TRIEMINE_CACHE/<name>``)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Optional, Sequence

from triemine.mining.candidates import CandidateSet
from triemine.mining.columns import ColumnStore, write_set, write_store
from triemine.io import cache_root

logger = logging.getLogger(__name__)


def stage_dir(work: Path, name: str) -> Path:
    return Path(work) / f"{name}.cols"


def stage(work: Path, name: str, compute: Callable,
          columns: Optional[Sequence[str]] = None) -> ColumnStore:
    """The candidates of stage ``name`` (``work/<name>.cols``): reused when complete, else
    computed and stored.  ``compute()`` returns a :class:`CandidateSet`, or (with ``columns``,
    its feature columns) an iterable of them, written block by block as they come."""
    where = stage_dir(work, name)
    store = ColumnStore.open(where)
    if store is not None and name in store.done:
        logger.info("reusing %s", where)
        return store
    cands = compute()
    if isinstance(cands, CandidateSet):
        return write_set(where, cands, done=(name,))
    return write_store(where, cands, columns, done=(name,))


def cache_dir(name: str) -> Path:
    """A cache shared between jobs (translations, target priors)."""
    return cache_root() / name
