"""Deterministic shard plans, the manifest of finished shards, atomic shard files and the merge.

The one home of the shard mechanism; the engines (:mod:`.local`, :mod:`.ray_backend`) only run
tasks and report ``(task, ok, value)``.

A shard directory holds::

    manifest.json        {"key": {settings, shard ranges}, "done": {id: {bytes, crc32, ...}},
                         "manifest_crc32": CRC32 of the rest}, atomic
    manifest.log         one JSON line a shard recorded since manifest.json was written, each
                         with its ``line_crc32``
    shard-000007.<ext>   the output of shard 7, written atomically before the manifest names it

A finished shard is one line appended to the log (and synced), not a rewrite of the manifest:
at 1.5 x 10^5 scoring shards (3 x 10^8 candidates) rewriting it every time wrote terabytes.
The log is folded into ``manifest.json`` when the store is opened and when a run of shards ends
(:meth:`ShardStore.compact`); :func:`read_done` reads both, as a resumed run does (a line cut
short by a killed driver is ignored: its shard is redone).  A resumed run names in a warning a
manifest whose checksum does not hold (every shard is computed again) and a whole log line that
does not parse or whose checksum does not hold (its shard is computed again).

A shard whose output is too large to send through the pool (a graph index of GBs) is written by
its worker to a temporary file beside its shard file and returned as a :class:`FilePayload`; the
driver renames it into place, then names it in the manifest, so the rule holds for it too.

The manifest is written by the driver alone, after the shard's file is complete on disk, so a
killed worker or a killed driver can never leave a shard recorded but incomplete; a file without
a manifest entry (driver killed between the two writes) is simply redone.  A resumed run reads
every recorded shard's file whole against its recorded length and CRC32: one damaged since
(truncated, emptied, changed in place) is named in a warning and computed again.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import time
import warnings
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from triemine.io import atomic_write, crc32_range, json_crc32
from triemine.errors import InputError, OutputError, TrieMineError

MANIFEST = "manifest.json"
LOG = "manifest.log"
TMP = ".tmp"  # a worker's FilePayload: <shard file>.tmp<pid>
SHARDS_SUFFIX = ".shards"  # a stage's shard directory: <its output or name>.shards/


@dataclass(frozen=True)
class FilePayload:
    """A shard's output that its worker wrote itself, whole, at ``path`` (``<shard file>.tmp<pid>``
    on a filesystem the driver shares): the driver renames it into the shard file."""

    path: str


@dataclass(frozen=True)
class Shard:
    """``[start, end)`` of the sharded sequence (source lines or candidate pairs)."""

    id: int
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def describe(self, unit: str = "items") -> str:
        return f"shard {self.id} ({unit} {self.start}-{self.end})"


def plan_shards(boundaries: Sequence[int], n: int, size: int) -> List[Shard]:
    """Contiguous shards over ``[0, n)`` that start only at ``boundaries`` (sorted; e.g. the
    starts of the blocks of :func:`~triemine.decoding.batching.plan_blocks`): each shard ends at the
    first boundary at or after ``start + size`` (the last ends at ``n``).  Depends only on the
    data and ``size``, never on the number of workers, so a run may resume with other workers."""
    if size < 1:
        raise ValueError("shard size must be >= 1")
    cuts = sorted({int(b) for b in boundaries if 0 < int(b) < n})
    shards: List[Shard] = []
    start = 0
    for b in cuts:
        if b >= start + size:
            shards.append(Shard(len(shards), start, b))
            start = b
    if start < n or not shards:
        shards.append(Shard(len(shards), start, n))
    return shards


class ShardFailures(TrieMineError):
    """Shards that failed every attempt; the others are done and recorded (a rerun with
    ``--resume`` redoes only these)."""

    def __init__(self, failures: Dict[int, str], shards: Dict[int, Shard], attempts: int,
                 unit: str = "items", where: str = "", more: Sequence["ShardFailures"] = ()):
        """``failures`` of one store's ``shards`` (``where``: the store, named when several
        failed together); ``more``: the other stores' failures of the same run, in the message
        and the count (``failures`` stays this store's)."""
        self.failures = dict(failures)
        self.lines = [f"{where}{shards[i].describe(unit)} failed {attempts} time(s): "
                      f"{failures[i]}" for i in sorted(failures)]
        lines = self.lines + [line for m in more for line in m.lines]
        super().__init__(f"{len(lines)} shard(s) failed; the others are recorded in the "
                         "manifest (rerun with --resume to redo only the failed ones):\n  "
                         + "\n  ".join(lines))


class ShardStore:
    """The shard directory of one job: which shards are done, their files, the merge.

    ``settings`` (JSON-serialisable) and the shard ranges form the manifest's key: with
    ``resume`` a manifest of another key is refused (``cannot resume``), or with
    ``stale="restart"`` started over (for work whose items legitimately change between runs: the
    targets' priors left to compute after a shared cache grew); without ``resume`` the directory
    starts over.
    """

    def __init__(self, directory, settings: dict, shards: Sequence[Shard], resume: bool = False,
                 ext: str = "bin", unit: str = "items", stale: str = "refuse"):
        self.dir = Path(directory)
        self.shards = list(shards)
        self.by_id = {s.id: s for s in self.shards}
        self.ext = ext
        self.unit = unit
        self.key = json.loads(json.dumps({"settings": settings,
                                          "shards": [[s.start, s.end] for s in self.shards]}))
        self.done: Dict[str, dict] = {}
        manifest = self.dir / MANIFEST
        if self.dir.is_dir():
            old = _read_manifest(self.dir, warn=resume)
            if resume and old is not None and old.get("key") != self.key:
                if stale == "restart":
                    old, resume = None, False
                else:
                    raise InputError("cannot resume: the sharded run used other settings, corpora "
                                     "or shard size (run without --resume to start over)",
                                     manifest)
            if resume and old is not None:
                self.done = {k: v for k, v in old.get("done", {}).items()
                             if self._complete(int(k), v)}
                for k in sorted(set(old.get("done", {})) - set(self.done), key=int):
                    warnings.warn(f"{self.path(int(k))}: shard file missing, truncated, "
                                  "damaged or replaced since it was recorded; computing it again",
                                  stacklevel=2)
            else:
                shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.dir.glob(f"shard-*{TMP}*"):  # a killed worker's or driver's leftovers
            tmp.unlink(missing_ok=True)
        self.reused = sorted(int(k) for k in self.done)
        self.compact()

    def _complete(self, shard_id: int, entry: dict) -> bool:
        """The shard's file is there, of its recorded length and CRC32 (read whole: a shard
        damaged in place keeping its size is computed again, never merged)."""
        path = self.path(shard_id)
        if not (shard_id in self.by_id and path.is_file()
                and path.stat().st_size == entry.get("bytes")):
            return False
        try:
            with open(path, "rb") as f:
                return crc32_range(f, 0, entry["bytes"]) == entry.get("crc32")
        except (OSError, EOFError, TypeError):
            return False

    def compact(self) -> None:
        """``manifest.json`` rewritten with every recorded shard, then the log removed (a
        driver killed between the two leaves entries in both: the same ones)."""
        doc = {"key": self.key, "done": self.done}
        atomic_write(self.dir / MANIFEST,
                     json.dumps(dict(doc, manifest_crc32=json_crc32(doc)),
                                indent=1).encode("utf-8"),
                     "shard manifest")
        (self.dir / LOG).unlink(missing_ok=True)

    def _log(self, shard_id: int) -> None:
        entry = dict(self.done[str(shard_id)], id=shard_id)
        line = json.dumps(dict(entry, line_crc32=json_crc32(entry))) + "\n"
        try:
            with open(self.dir / LOG, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise OutputError(self.dir / LOG, exc, "shard manifest") from None

    def path(self, shard_id: int) -> Path:
        return self.dir / f"shard-{shard_id:06d}.{self.ext}"

    def is_done(self, shard_id: int) -> bool:
        return str(shard_id) in self.done

    def pending(self) -> List[Shard]:
        return [s for s in self.shards if not self.is_done(s.id)]

    def record(self, shard: Shard, payload, info: Optional[dict] = None) -> None:
        """Write the shard's output (bytes, or a :class:`FilePayload` to rename) atomically, then
        name it in the manifest."""
        if isinstance(payload, FilePayload):
            os.replace(payload.path, self.path(shard.id))
            size = self.path(shard.id).stat().st_size
            with open(self.path(shard.id), "rb") as f:
                crc = crc32_range(f, 0, size)
        else:
            atomic_write(self.path(shard.id), payload, "shard file")
            size, crc = len(payload), zlib.crc32(payload)
        self.done[str(shard.id)] = {"start": shard.start, "end": shard.end, "bytes": size,
                                    "crc32": crc, "finished": time.time(), **(info or {})}
        self._log(shard.id)

    def read(self, shard_id: int) -> bytes:
        return self.path(shard_id).read_bytes()

    def entries(self) -> List[dict]:
        return [self.done[str(s.id)] for s in self.shards]

    def merge_to(self, out_path, head: bytes = b"") -> int:
        """``head`` and every shard's output in shard order, written atomically to ``out_path``;
        returns the size.  Every shard must be done."""
        missing = [s.id for s in self.shards if not self.is_done(s.id)]
        if missing:
            raise RuntimeError(f"cannot merge: shard(s) {missing} not done")
        atomic_write(Path(out_path), itertools.chain(
            [head], (self.path(s.id).read_bytes() for s in self.shards)), "merged output")
        return len(head) + sum(self.done[str(s.id)]["bytes"] for s in self.shards)


# tasks submitted to a pool at a time: each is made when it is submitted, so the driver holds
# this many tasks' payloads (a scoring shard's pairs: 2,000 of them as Python ints, about
# 150 kB), not every pending shard's (20 GB of pairs at 3 x 10^8 candidates); enough to keep
# hundreds of workers busy
IN_FLIGHT = 1024


def _read_manifest(directory: Path, warn: bool = False) -> Optional[dict]:
    """The manifest of a shard directory with the log's entries folded in, or ``None`` (none,
    or damaged: with ``warn``, named in a warning).  The log is read first: a run that folds it
    into the manifest between the two reads leaves both entries in the manifest read second.
    A log line that is damaged is left out (its shard is redone), with ``warn`` named in a
    warning; the last line, when it has no line end, silently (a driver killed writing it)."""
    path = Path(directory) / MANIFEST
    try:
        raw = (Path(directory) / LOG).read_bytes()
    except OSError:
        raw = b""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        crc = old.pop("manifest_crc32")
        if crc != json_crc32(old):
            raise ValueError("checksum mismatch")
    except OSError:
        return None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # UnicodeDecodeError too
        if warn:
            warnings.warn(f"{path}: damaged shard manifest ({type(exc).__name__}: {exc}); "
                          "computing its shards again", stacklevel=3)
        return None
    done = dict(old.get("done", {}))
    lines = raw.split(b"\n")
    for number, line in enumerate(lines[:-1], 1):  # lines[-1]: after the last line end
        try:
            entry = json.loads(line.decode("utf-8"))
            crc = entry.pop("line_crc32")
            if crc != json_crc32(entry):
                raise ValueError("checksum mismatch")
            done[str(int(entry.pop("id")))] = entry
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if warn:
                warnings.warn(f"{Path(directory) / LOG}: line {number}: damaged shard record "
                              f"({type(exc).__name__}: {exc}); its shard is computed again",
                              stacklevel=3)
    return dict(old, done=done)


def read_key(directory) -> Optional[dict]:
    """The key (``{"settings": ..., "shards": ...}``) of a directory's manifest, or ``None``
    (none, or damaged)."""
    return (_read_manifest(Path(directory)) or {}).get("key")


def read_done(directory) -> Dict[str, dict]:
    """The shards a directory's manifest and log record as finished (for a reader outside the
    run: a progress view, a test)."""
    return (_read_manifest(Path(directory)) or {}).get("done", {})


def execute(store: ShardStore, make_task: Callable[[Shard], object], pool,
            on_done: Optional[Callable[[Shard, dict], None]] = None) -> List[int]:
    """Run every shard the manifest lacks on ``pool``; record each as it finishes.

    A task whose attempt fails (an exception in the worker, a worker that died) is resubmitted
    until it has failed ``pool.max_attempts`` times; the other shards go on, and at the end the
    shards that never succeeded are raised as :class:`ShardFailures`.  Returns the ids computed.
    """
    return execute_all([(store, make_task, on_done)], pool)[0]


def execute_all(runs: Sequence[tuple], pool) -> List[List[int]]:
    """:func:`execute` for several shard stores at once: ``runs`` of ``(store, make_task,
    on_done)``, all their pending shards queued on ``pool`` together (in run order; at most
    ``IN_FLIGHT`` at a time, or two a worker of a larger pool, each task made when it is
    submitted), so the workers share them (a job's two searches or two corpora of a few shards
    each: one after the other, a lone shard leaves a worker idle).  Each store records its own
    shards as
    they finish; a run's shards that failed every attempt are raised, as :class:`ShardFailures`,
    after every run's other shards are recorded.  Returns the ids computed, per run."""
    n = len(runs)
    queued: Dict[int, tuple] = {}  # pool id (shard id x runs + run: one run, the shard id) -> ...
    for r, (store, _make_task, _on_done) in enumerate(runs):
        queued.update({s.id * n + r: (r, s) for s in store.pending()})
    computed: List[List[int]] = [[] for _ in runs]
    if not queued:
        return computed
    attempts: Dict[int, int] = defaultdict(int)
    failures: Dict[int, str] = {}
    tasks: Dict[int, object] = {}  # the tasks in flight: made when submitted, dropped when done
    waiting = iter(list(queued))

    def submit_next() -> bool:
        pid = next(waiting, None)
        if pid is None:
            return False
        if pid not in tasks:
            r, shard = queued[pid]
            tasks[pid] = runs[r][1](shard)
        pool.submit(pid, tasks[pid])
        return True
    try:
        with pool:
            if hasattr(pool, "reserve"):  # as many workers as the shards need, at most
                pool.reserve(len(queued))
            if hasattr(pool, "warm"):  # load the model everywhere, before the first shard
                first = next(iter(queued))
                r, shard = queued[first]
                tasks[first] = runs[r][1](shard)
                pool.warm(tasks[first])
            # enough for every worker of a large pool (two each), at least one
            window = max(1, IN_FLIGHT, 2 * (getattr(pool, "workers", None) or 0))
            inflight = sum(submit_next() for _ in range(window))
            while inflight:
                pid, ok, value = pool.next_result()
                inflight -= 1
                r, shard = queued[pid]
                store, _make, on_done = runs[r]
                if ok:
                    del tasks[pid]
                    payload, info = value
                    store.record(shard, payload, dict(info, attempts=attempts[pid] + 1))
                    computed[r].append(shard.id)
                    if on_done is not None:
                        on_done(shard, info)
                    inflight += submit_next()
                    continue
                attempts[pid] += pool.attempts_used(value)
                if attempts[pid] < pool.max_attempts:
                    pool.submit(pid, tasks[pid])
                    inflight += 1
                else:
                    del tasks[pid]
                    failures[pid] = str(value)
                    inflight += submit_next()
    finally:  # the log folded into each manifest; where that fails, the log stands in
        for store, _make, _on_done in runs:
            with contextlib.suppress(OSError, TrieMineError):
                store.compact()
    failed = [(store, {queued[pid][1].id: why for pid, why in failures.items()
                       if queued[pid][0] == r})
              for r, (store, _make, _on_done) in enumerate(runs)]
    failed = [(store, mine) for store, mine in failed if mine]
    if failed:  # one error; the stores are named when several failed

        def error(store, mine, more=()):
            return ShardFailures(mine, store.by_id, pool.max_attempts, store.unit,
                                 where=f"{store.dir.name}: " if len(failed) > 1 else "",
                                 more=more)
        raise error(*failed[0], more=[error(*f) for f in failed[1:]])
    return computed


def progress_bar(total_n: int, initial: int, desc: str, unit: str, enabled: bool):
    """A tqdm bar of ``total_n`` items starting at ``initial`` (shards reused), shown when
    ``enabled``."""
    from tqdm import tqdm
    return tqdm(total=total_n, initial=initial, desc=desc, unit=unit, disable=not enabled,
                dynamic_ncols=True)


def shard_stats(store: ShardStore, computed: Sequence[int]) -> dict:
    """Counts, and the CPU seconds each worker process spent on this run's shards."""
    cpu: dict = {}
    for i in computed:
        e = store.done[str(i)]
        cpu[str(e.get("pid"))] = round(cpu.get(str(e.get("pid")), 0.0) + e.get("cpu_s", 0.0), 3)
    return {"shards": len(store.shards), "shards_computed": len(computed),
            "shards_reused": len(store.reused), "shard_dir": str(store.dir),
            "worker_cpu_s": cpu}


def total(entries: Iterable[dict], key: str) -> int:
    return int(sum(e.get(key, 0) for e in entries))
