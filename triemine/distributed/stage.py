"""The one runner of a sharded stage: a stage is described, this module runs it.

A **stage** (:class:`Stage`) is a piece of work cut into deterministic shards: its task class's
tasks (one per shard, made by ``make_task``), its shard plan, its key (its settings and the
digests of its input files) and where its shards live.  :func:`run_stages` does for every stage
what each stage's driver used to write by hand:

* the **key**: :func:`stage_key`, the stage's settings with the content digest of each of its
  inputs (:func:`triemine.io.keys.input_digests`);
* the **store** and the **resume decision**: a :class:`~triemine.distributed.shards.ShardStore`
  in ``directory`` (with ``resume``, a manifest of the same key is continued; another key is
  refused, or with ``stale="restart"`` started over);
* the **progress bar**: one per stage, counting the shards' items, starting at those reused;
* the **execution on the pool**: every stage's pending shards queued together
  (:func:`~triemine.distributed.shards.execute_all`), each recorded as it finishes;
* the **merge**: :class:`StageRun` reads the shards back in order (:meth:`StageRun.parts`) or
  writes them to one file (:meth:`StageRun.merge_to`).

A stage's own driver builds the :class:`Stage` and reads its :class:`StageRun`: a few lines.
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from triemine.distributed.shards import (MANIFEST, Shard, ShardStore, execute_all, plan_shards,
                                         progress_bar, read_key, shard_stats)
from triemine.io import input_digests, KEY_VERSION, older_key

# a plan: the shards themselves, or ``(boundaries, n, size)`` for plan_shards
Plan = Union[Sequence[Shard], Tuple[Sequence[int], int, int]]


def stage_key(settings: Mapping[str, Any], inputs: Mapping[str, Any] = (),
              task: Optional[type] = None) -> dict:
    """A stage's key: :data:`KEY_VERSION`, its task class's name, for each ``name: path`` of
    ``inputs`` the SHA-256 of the file's content under ``name``
    (:func:`triemine.io.keys.input_digests`: a file edited in place is never resumed), then
    ``settings`` (of a settings node: :func:`triemine.config.settings.key_of`)."""
    return {"key_version": KEY_VERSION, **({"task": task.__name__} if task else {}),
            **input_digests(inputs), **settings}


@dataclass(eq=False)
class Stage:
    """One sharded stage, described (see the module docstring).

    ``name``: the progress bar's label; ``directory``: its shard directory; ``settings``: what
    its output depends on besides the inputs (JSON-serialisable); ``inputs``: ``{name: path}``
    of the files whose contents it reads (their digests join the key); ``plan``: its shards, or
    ``(boundaries, n, size)`` (:func:`~triemine.distributed.shards.plan_shards`);
    ``make_task(shard)``: the shard's task (made when it is submitted; it may read
    :attr:`store`); ``unit``/``ext``: the items a shard holds and its files' extension;
    ``bar_unit``: the progress bar's unit; ``task``: the task class (its name is in the key);
    ``resume``/``stale``: as
    :class:`~triemine.distributed.shards.ShardStore`'s; ``stale_note``: with ``resume``, a
    manifest of another key is named in a warning saying it holds this (its shards are built
    again: with ``stale="restart"``)."""

    name: str
    directory: Path
    settings: Mapping[str, Any]
    plan: Plan
    make_task: Optional[Callable[[Shard], Any]] = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    unit: str = "items"
    bar_unit: str = "item"
    ext: str = "bin"
    resume: bool = True
    stale: str = "refuse"
    progress: bool = False
    stale_note: str = ""
    task: Optional[type] = None

    @functools.cached_property
    def shards(self) -> List[Shard]:
        plan = self.plan
        if isinstance(plan, tuple) and len(plan) == 3 and isinstance(plan[1], int):
            return plan_shards(*plan)
        return list(plan)

    @functools.cached_property
    def store(self) -> ShardStore:
        """The stage's store, opened (and the resume decision made) when first asked for: a
        manifest of this key is continued (with ``resume``); one of an older
        :data:`KEY_VERSION` is named in a warning and started over; another key is refused or,
        with ``stale="restart"``, started over (named in a warning with ``stale_note``)."""
        key = stage_key(self.settings, self.inputs, self.task)
        old = (read_key(self.directory) or {}).get("settings") if self.resume else None
        resume = self.resume and not older_key(old, self.directory, "shards")
        if resume and self.stale_note and old is not None and \
                old != json.loads(json.dumps(key)):
            warnings.warn(f"{Path(self.directory) / MANIFEST}: {self.stale_note} ({old}; this "
                          f"job: {key}); building them again", stacklevel=4)
        return ShardStore(self.directory, key, self.shards, resume=resume, ext=self.ext,
                          unit=self.unit, stale=self.stale)


@dataclass
class StageRun:
    """A stage that ran: its store (every shard done) and the shard ids this run computed."""

    stage: Stage
    computed: List[int]

    @property
    def store(self) -> ShardStore:
        return self.stage.store

    def stats(self) -> dict:
        """Shard counts, the directory and the workers' CPU seconds of this run."""
        return shard_stats(self.store, self.computed)

    def computed_items(self) -> int:
        return sum(len(self.store.by_id[i]) for i in self.computed)

    def reused_items(self) -> int:
        return sum(len(self.store.by_id[i]) for i in self.store.reused)

    def parts(self, load: Callable[[bytes], Any] = bytes) -> Iterator[Any]:
        """Each shard's output in shard order, read from its file as it is asked for, passed
        through ``load``."""
        return (load(self.store.read(s.id)) for s in self.store.shards)

    def merge_to(self, out_path, head: bytes = b"") -> int:
        """``head`` and every shard's output, in order, written atomically; returns the size."""
        return self.store.merge_to(out_path, head)


def npy_payload(raw: bytes):
    """A shard's ``.npy``/``.npz`` payload, loaded (:meth:`StageRun.parts`)."""
    import numpy as np
    return np.load(io.BytesIO(raw))


def run_stages(stages: Sequence[Stage], pool) -> List[StageRun]:
    """Run every stage's pending shards on ``pool``, queued together, each stage's progress shown
    on its own bar; returns a :class:`StageRun` each, in order.  A stage without pending shards
    costs nothing on the pool.  Raises :class:`~triemine.distributed.shards.ShardFailures`
    (after every other shard is recorded) when shards failed every attempt."""
    with contextlib.ExitStack() as bars:
        runs = []
        for stage in stages:
            store = stage.store
            total = sum(len(s) for s in store.shards)
            reused = sum(len(store.by_id[i]) for i in store.reused)
            bar = bars.enter_context(progress_bar(total, reused, stage.name, stage.bar_unit,
                                                  stage.progress))
            runs.append((store, stage.make_task, lambda s, _info, bar=bar: bar.update(len(s))))
        computed = execute_all(runs, pool)
    return [StageRun(stage, ids) for stage, ids in zip(stages, computed)]


def run_stage(stage: Stage, pool) -> StageRun:
    """:func:`run_stages` of one stage."""
    return run_stages([stage], pool)[0]


@dataclass(frozen=True)
class EchoTask:
    """A task that computes nothing: its payload is its shard's range.  A stage of them costs
    only what the runner adds to every shard (the store, the manifest, the pool's round trip),
    which :func:`fixed_cost_per_shard` measures."""

    shard: int
    start: int
    end: int

    def needs(self) -> list:
        return []

    def run(self, ctx) -> Tuple[bytes, dict]:
        return f"{self.start} {self.end}\n".encode("ascii"), {}


def fixed_cost_per_shard(pool, directory, shards: int = 64) -> float:
    """Seconds the runner spends per shard of a stage of ``shards`` :class:`EchoTask` shards on
    ``pool`` (wall time of :func:`run_stage` / ``shards``; open the pool first so that its start
    is not counted); ``directory`` holds the shards and is removed after."""
    import shutil
    import time
    stage = Stage("echo", Path(directory), {"echo": shards}, [Shard(i, i, i + 1)
                                                              for i in range(shards)],
                  lambda s: EchoTask(s.id, s.start, s.end), resume=False, task=EchoTask)
    t0 = time.perf_counter()
    run_stage(stage, pool)
    seconds = (time.perf_counter() - t0) / shards
    shutil.rmtree(directory, ignore_errors=True)
    return seconds


def empty_stats() -> Dict[str, int]:
    """The shard statistics of a stage with nothing to do."""
    return {"shards": 0, "shards_computed": 0, "shards_reused": 0}
