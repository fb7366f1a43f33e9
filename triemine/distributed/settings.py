"""Where the shards run: the pool's node of the settings tree (:mod:`triemine.config.settings`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from triemine.config.settings import setting


@dataclass(frozen=True)
class PoolSettings:
    """``workers`` local processes, or Ray actors (``ray``: an address) when given; neither: the
    job runs in this process.  Both transient: the output is the same bytes on any pool."""

    workers: Optional[int] = setting(
        None, "N local worker processes (each loads the model once and memory-maps the cached "
        "trie); with --ray: N actors (default one per CPU of the cluster, one per GPU with "
        "--device cuda)", flag="--workers", metavar="N", low=1, group="scale", transient=True)
    ray: Optional[str] = setting(
        None, "run the workers as Ray actors: local (default: a private cluster on 127.0.0.1), "
        "auto (the cluster of this machine) or a Ray address; needs the extra triemine[ray]",
        flag="--ray", nargs="?", const="local", metavar="ADDRESS", group="scale",
        transient=True)

    @property
    def sharded(self) -> bool:
        return self.workers is not None or self.ray is not None
