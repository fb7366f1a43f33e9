"""What a worker runs: any task of :mod:`triemine.distributed.tasks`, keeping what it loaded.

A task is a small picklable description (paths and ranges, never tensors) that names the
resources it needs (a model directory, trie files, corpora, an encoder, an index); the worker
loads each once (:class:`~triemine.distributed.tasks.WorkerContext`: a trie file memory-mapped,
its pages shared by every process of the node through the page cache; a corpus's line offsets)
and runs any number of tasks, of any stage, without knowing their types.  A task returns
``(payload, info)``; the driver writes the payload
(:class:`triemine.distributed.shards.ShardStore`).

Fault injection for the tests (``TRIEMINE_TEST_FAULTS``, JSON, read at each task): ``{"dir":
DIR, "kill": [ids], "fail": [ids], "delay": seconds}`` kills the worker process (SIGKILL) the
first time it runs a shard of ``kill`` (a marker file in ``DIR`` makes it once), raises in
every run of a shard of ``fail``, sleeps ``delay`` seconds per shard, appends ``<id> <pid>`` to
``DIR/started.log`` when a worker process begins a shard and ``<id>`` to ``DIR/computed.log``
for every shard computed.
"""
from __future__ import annotations

import json
import os
import signal
import time
from typing import Any, Optional, Tuple

from triemine.distributed.tasks import Resource, Task, WorkerContext

FAULTS_ENV = "TRIEMINE_TEST_FAULTS"


def _faults() -> dict:
    text = os.environ.get(FAULTS_ENV)
    return json.loads(text) if text else {}


def _before(shard: int) -> dict:
    faults = _faults()
    if not faults:
        return faults
    if faults.get("dir"):
        with open(os.path.join(faults["dir"], "started.log"), "a") as f:
            f.write(f"{shard} {os.getpid()}\n")
    if shard in faults.get("fail", ()):
        raise RuntimeError(f"injected failure of shard {shard}")
    if shard in faults.get("kill", ()):
        marker = os.path.join(faults["dir"], f"killed-{shard}")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    if faults.get("delay"):
        time.sleep(float(faults["delay"]))
    return faults


def _after(shard: int, faults: dict) -> None:
    if faults.get("dir"):
        with open(os.path.join(faults["dir"], "computed.log"), "a") as f:
            f.write(f"{shard}\n")


class ShardWorker:
    """Runs tasks; keeps what they loaded (:attr:`ctx`) for the next task.

    ``threads``: torch intra-op threads of this worker (``None`` leaves torch's setting)."""

    def __init__(self, threads: Optional[int] = None):
        if threads:
            import torch
            torch.set_num_threads(int(threads))
        self.ctx = WorkerContext()

    def pid(self) -> int:
        return os.getpid()

    def adopt(self, resource: Resource, obj: Any) -> None:
        """``obj``, already loaded in this process (a model), as what ``resource`` loads."""
        self.ctx.adopt(resource, obj)

    def warm(self, task: Task) -> int:
        """Load what ``task`` needs (its ``needs()``) without computing; returns the pid."""
        self.ctx.warm(task)
        return os.getpid()

    def run(self, task: Task) -> Tuple[Any, dict]:
        """``task.run(ctx)``, its info with the wall and CPU seconds and the pid added."""
        faults = _before(task.shard)
        t0, c0 = time.perf_counter(), time.process_time()
        payload, info = task.run(self.ctx)
        _after(task.shard, faults)
        info.update(seconds=round(time.perf_counter() - t0, 3),
                    cpu_s=round(time.process_time() - c0, 3), pid=os.getpid())
        return payload, info
