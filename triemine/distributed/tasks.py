"""The protocol between a stage and the workers: tasks, the resources they need, the context.

The launcher (:mod:`triemine.distributed`) runs tasks without knowing what they compute; each
stage defines its own task next to its code (the trie search in :mod:`triemine.decoding.shards`,
exact scores in :mod:`triemine.mining.score_shards`, translations in
:mod:`triemine.mining.translate_shards`, embeddings in :mod:`triemine.embedding.embed_shards`,
kNN cells and HNSW graphs in :mod:`triemine.embedding.knn_tasks`).

A **task** is a frozen, picklable dataclass (paths and ranges, never tensors: it crosses process
and Ray boundaries) with

* ``shard: int``: the shard it computes (the fault-injection hooks of
  :mod:`triemine.distributed.worker` read it);
* ``needs(self) -> Sequence[resource]``: what it needs loaded in a worker, which
  :meth:`WorkerContext.warm` loads before the first shard;
* ``run(self, ctx) -> (payload, info)``: the shard's output (``bytes``, or a
  :class:`~triemine.distributed.shards.FilePayload`) and a JSON-serialisable ``dict`` the
  manifest records; it asks ``ctx`` (a :class:`WorkerContext`) for its resources.

A **resource** is a frozen, hashable dataclass naming what a worker loads once and keeps (a model
directory, a trie file, a corpus, an encoder, an index): the resource itself is the key of the
worker's cache, and ``load(self, ctx) -> object`` builds it (asking ``ctx`` for the resources it
builds on).  A resource class with ``single = True`` (a class attribute) is held one at a time:
loading another of its class drops the one held first (an HNSW graph's links: 0.3 GB at 10^6
rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Hashable, Protocol, Sequence, Tuple

from triemine.io import open_corpus


class Resource(Protocol):
    def load(self, ctx: "WorkerContext") -> Any: ...


class Task(Protocol):
    shard: int

    def needs(self) -> Sequence[Resource]: ...

    def run(self, ctx: "WorkerContext") -> Tuple[Any, dict]: ...


class WorkerContext:
    """A worker's loaded resources, by their spec; kept for the worker's next tasks."""

    def __init__(self) -> None:
        self._loaded: Dict[Hashable, Any] = {}

    def get(self, resource: Resource) -> Any:
        """``resource``, loaded now (``resource.load(self)``) unless held already."""
        if resource in self._loaded:
            return self._loaded[resource]
        if getattr(resource, "single", False):  # one of its class at a time
            for held in [r for r in self._loaded if type(r) is type(resource)]:
                del self._loaded[held]
        obj = resource.load(self)
        self._loaded[resource] = obj
        return obj

    def adopt(self, resource: Resource, obj: Any) -> None:
        """``obj``, already loaded in this process, as what ``resource`` loads."""
        self._loaded[resource] = obj

    def warm(self, task: Task) -> None:
        """Load what ``task`` needs, without computing."""
        for resource in task.needs():
            self.get(resource)


@dataclass(frozen=True)
class Corpus:
    """A corpus file as :func:`triemine.io.corpus.open_corpus` reads it (line offsets: the texts are
    read on demand)."""

    path: str

    def load(self, ctx: WorkerContext):
        return open_corpus(self.path)
