"""The shard plan, the store and its manifest, execute() over several stores, a full disk
while a shard is written (triemine.distributed).

Tiny synthetic model (tests/conftest.py); the corpora, the single-process reference and the
environment: tests/distributed/conftest.py.
"""
import json
import os

import pytest

from triemine.distributed import Shard, ShardFailures, ShardStore, execute, plan_shards
from triemine.distributed.shards import read_done
from triemine.distributed.local import InlinePool
from triemine.errors import InputError

pytestmark = pytest.mark.usefixtures("shard_env")


# -- the plan and the manifest
# ----------------------------------------------------------------------

def test_plan_shards_cuts_only_at_boundaries_and_ignores_the_worker_count():
    bounds = [0, 3, 5, 9, 12, 13, 20]
    shards = plan_shards(bounds, 25, 4)
    assert [(s.start, s.end) for s in shards] == [(0, 5), (5, 9), (9, 13), (13, 20), (20, 25)]
    assert [s.id for s in shards] == list(range(5))
    assert plan_shards([0], 7, 100) == [Shard(0, 0, 7)]
    assert plan_shards(range(0, 4500, 2000), 4500, 2000) == [
        Shard(0, 0, 2000), Shard(1, 2000, 4000), Shard(2, 4000, 4500)]


def test_store_resumes_only_with_the_same_key_and_reports_failed_shards(tmp_path):
    from triemine.distributed.local import InlinePool

    shards = plan_shards(range(10), 10, 3)

    class Task:
        def __init__(self, shard):
            self.shard = shard.id

    store = ShardStore(tmp_path / "s", {"a": 1}, shards, ext="txt")
    store.record(shards[0], b"zero\n", {"rows": 1})
    again = ShardStore(tmp_path / "s", {"a": 1}, shards, resume=True, ext="txt")
    assert again.reused == [0] and [s.id for s in again.pending()] == [1, 2, 3]
    with pytest.raises(InputError, match="cannot resume"):
        ShardStore(tmp_path / "s", {"a": 2}, shards, resume=True)
    fresh = ShardStore(tmp_path / "s", {"a": 1}, shards, resume=False, ext="txt")
    assert fresh.reused == [] and len(fresh.pending()) == 4

    class Failing(InlinePool):  # shard 2 always fails; the others are recorded
        def warm(self, task):
            pass

        def next_result(self):
            shard_id, _ = self._queue.popleft()
            if shard_id == 2:
                return shard_id, False, "RuntimeError: boom"
            return shard_id, True, (f"{shard_id}\n".encode(), {})
    with pytest.raises(ShardFailures) as exc:
        execute(fresh, Task, Failing(max_attempts=3))
    assert exc.value.failures == {2: "RuntimeError: boom"}
    assert "shard 2 (items 6-9) failed 3 time(s): RuntimeError: boom" in str(exc.value)
    assert sorted(int(k) for k in fresh.done) == [0, 1, 3]


def test_execute_all_queues_every_stores_shards_together_and_raises_a_runs_failures_last(
        tmp_path):
    """Several stores at once: every pending shard of every store is submitted before the first
    result is asked for (a store of one shard does not hold the other workers idle); each store
    records its own shards under its own ids; a shard that fails every attempt is raised after
    the other stores' shards are recorded, naming that store's shard."""
    from triemine.distributed import execute_all
    from triemine.distributed.local import InlinePool

    a = ShardStore(tmp_path / "a", {"a": 1}, plan_shards(range(4), 4, 1), ext="txt")
    b = ShardStore(tmp_path / "b", {"b": 1}, plan_shards(range(1), 1, 1), ext="txt")
    c = ShardStore(tmp_path / "c", {"c": 1}, plan_shards(range(2), 2, 1), ext="txt")
    events = []

    class Task:
        def __init__(self, store, shard):
            self.name, self.shard = store, shard.id

    class Recording(InlinePool):
        def warm(self, task):
            pass

        def submit(self, shard_id, task):
            events.append(("submit", task.name, task.shard))
            super().submit(shard_id, task)

        def next_result(self):
            shard_id, task = self._queue.popleft()
            events.append(("result", task.name, task.shard))
            if (task.name, task.shard) in (("c", 1), ("a", 3)):
                return shard_id, False, f"RuntimeError: boom {task.name}"
            return shard_id, True, (f"{task.name}{task.shard}\n".encode(), {})
    done = []
    runs = [(a, lambda s: Task("a", s), None), (b, lambda s: Task("b", s),
                                                lambda s, _i: done.append(s.id)),
            (c, lambda s: Task("c", s), None)]
    with pytest.raises(ShardFailures) as exc:
        execute_all(runs, Recording(max_attempts=2))
    first_result = next(i for i, e in enumerate(events) if e[0] == "result")
    assert events[:first_result] == [("submit", "a", 0), ("submit", "a", 1), ("submit", "a", 2),
                                     ("submit", "a", 3), ("submit", "b", 0), ("submit", "c", 0),
                                     ("submit", "c", 1)]
    assert exc.value.failures == {3: "RuntimeError: boom a"}  # the first failing store's
    assert str(exc.value).startswith("2 shard(s) failed")  # both stores' failures named
    assert "a: shard 3 (items 3-4) failed 2 time(s): RuntimeError: boom a" in str(exc.value)
    assert "c: shard 1 (items 1-2) failed 2 time(s): RuntimeError: boom c" in str(exc.value)
    assert [a.read(i) for i in range(3)] == [f"a{i}\n".encode() for i in range(3)]
    assert b.read(0) == b"b0\n" and done == [0] and sorted(c.done) == ["0"]
    again_a = ShardStore(tmp_path / "a", {"a": 1}, plan_shards(range(4), 4, 1), resume=True,
                         ext="txt")
    again_c = ShardStore(tmp_path / "c", {"c": 1}, plan_shards(range(2), 2, 1), resume=True,
                         ext="txt")
    events.clear()
    assert execute_all([(again_a, lambda s: Task("x", s), None), (again_c, lambda s: Task("y", s),
                                                                  None)], Recording()) == [[3], [1]]
    assert again_c.read(1) == b"y1\n" and again_a.read(3) == b"x3\n"
    assert events == [("submit", "x", 3), ("submit", "y", 1), ("result", "x", 3),
                      ("result", "y", 1)]
    with pytest.raises(ShardFailures) as one:  # one store failing: named as before, alone
        execute_all([(ShardStore(tmp_path / "d", {"d": 1}, plan_shards(range(4), 4, 1),
                                 ext="txt"), lambda s: Task("a", s), None)], Recording())
    assert str(one.value).startswith("1 shard(s) failed") and "\n  shard 3 (items" in str(one.value)


def test_execute_all_makes_each_task_when_it_submits_it_a_window_at_a_time(tmp_path,
                                                                          monkeypatch):
    """A task (a scoring shard's pairs: 150 kB of Python ints) is made when it is submitted,
    at most IN_FLIGHT at a time, and dropped when its shard is recorded or has failed every
    attempt: the driver never holds every pending shard's payload (20 GB of pairs at
    3 x 10^8 candidates); a failed attempt is resubmitted with the task already made."""
    from triemine.distributed import execute_all, shards
    from triemine.distributed.local import InlinePool

    monkeypatch.setattr(shards, "IN_FLIGHT", 2)
    store = ShardStore(tmp_path / "a", {"a": 1}, plan_shards(range(5), 5, 1), ext="txt")
    made, events = [], []

    class Task:
        def __init__(self, shard):
            made.append(shard.id)
            self.shard = shard.id

    class Recording(InlinePool):
        tries = 0

        def warm(self, task):
            events.append(("warm", task.shard))

        def submit(self, shard_id, task):
            events.append(("submit", task.shard))
            super().submit(shard_id, task)

        def next_result(self):
            shard_id, task = self._queue.popleft()
            events.append(("result", task.shard))
            if task.shard == 1 and self.tries < 1:  # one failed attempt
                self.tries += 1
                return shard_id, False, "RuntimeError: once"
            if task.shard == 3:
                return shard_id, False, "RuntimeError: always"
            return shard_id, True, (f"{task.shard}\n".encode(), {})
    with pytest.raises(ShardFailures, match="shard 3"):
        execute_all([(store, Task, None)], Recording(max_attempts=2))
    assert made == [0, 1, 2, 3, 4]  # each task once: the warm-up's and the resubmitted ones too
    assert events == [("warm", 0), ("submit", 0), ("submit", 1), ("result", 0), ("submit", 2),
                      ("result", 1), ("submit", 1), ("result", 2), ("submit", 3),
                      ("result", 1), ("submit", 4), ("result", 3), ("submit", 3),
                      ("result", 4), ("result", 3)]
    assert sorted(int(k) for k in store.done) == [0, 1, 2, 4]


class _Task:
    """A shard's task: its id."""

    def __init__(self, shard):
        self.shard = shard.id


class _Echo(InlinePool):
    """A pool whose tasks return their shard's id as its output, ``repeat`` times."""

    repeat = 1

    def warm(self, task):
        pass

    def next_result(self):
        shard_id, _ = self._queue.popleft()
        return shard_id, True, (f"{shard_id}\n".encode() * self.repeat, {})


def test_a_finished_shard_is_a_line_of_the_log_folded_into_the_manifest(tmp_path):
    """Recording a shard appends one line to manifest.log (a rewrite of the manifest for every
    shard wrote terabytes at 1.5 x 10^5 shards); a reader and a resumed store see the manifest
    and the log together, a line cut short by a killed driver is ignored (its shard redone),
    and opening the store or ending a run folds the log into manifest.json."""
    plan = plan_shards(range(6), 6, 2)
    store = ShardStore(tmp_path / "s", {"a": 1}, plan, ext="txt")
    manifest = (tmp_path / "s" / "manifest.json").read_bytes()
    for s in plan[:2]:
        store.record(s, f"{s.id}\n".encode())
    assert (tmp_path / "s" / "manifest.json").read_bytes() == manifest  # not rewritten
    log = (tmp_path / "s" / "manifest.log").read_text().splitlines()
    assert [json.loads(line)["id"] for line in log] == [0, 1]
    assert sorted(read_done(tmp_path / "s")) == ["0", "1"]
    with open(tmp_path / "s" / "manifest.log", "ab") as f:  # shard 2 recorded, the driver
        f.write(b'\xff\xfe junk\n{"start": 4, "end": 6, "by')  # killed while it wrote its line
    (tmp_path / "s" / "shard-000002.txt").write_text("2\n")
    again = ShardStore(tmp_path / "s", {"a": 1}, plan, resume=True, ext="txt")
    assert again.reused == [0, 1] and not (tmp_path / "s" / "manifest.log").exists()
    assert sorted(json.loads((tmp_path / "s" / "manifest.json").read_text())["done"]) == ["0", "1"]

    assert execute(again, _Task, _Echo()) == [2]
    assert sorted(json.loads((tmp_path / "s" / "manifest.json").read_text())["done"]) == \
        ["0", "1", "2"] and not (tmp_path / "s" / "manifest.log").exists()


def test_in_process_shards_are_recorded_one_by_one(tmp_path):
    """Without workers each shard is computed when the driver asks for its result, so every
    earlier shard is on disk and in the manifest before the next one runs (one payload in
    memory; a killed run keeps them)."""
    from triemine.distributed.local import InlinePool

    plan = plan_shards(range(12), 12, 3)
    store = ShardStore(tmp_path / "s", {"a": 1}, plan, ext="txt")
    seen = []

    class Worker:
        def warm(self, task):
            pass

        def run(self, task):
            seen.append((task.shard, sorted(int(k) for k in store.done)))
            return f"{task.shard}\n".encode(), {}

    class Task:
        def __init__(self, shard):
            self.shard = shard.id

    pool = InlinePool()
    pool._worker = Worker()
    assert execute(store, Task, pool) == [0, 1, 2, 3]
    assert seen == [(0, []), (1, [0]), (2, [0, 1]), (3, [0, 1, 2])]


def test_a_full_disk_while_writing_a_shard_names_the_file_keeps_the_rest_and_resumes(
        tmp_path, monkeypatch):
    """ENOSPC while a shard file is written: an OutputError naming that file, no partial file,
    the shards before it recorded; once there is space again, a resumed run redoes only the
    missing ones."""
    import errno

    from triemine.io import outfile
    from triemine.errors import OutputError

    plan = plan_shards(range(10), 10, 3)

    Task = _Task

    class Echo(_Echo):
        repeat = 1000

    real_fsync, calls = os.fsync, []

    def fsync(fd):  # the first write of shard 1's file finds no space
        name = os.readlink(f"/proc/self/fd/{fd}")
        if "shard-000001" in name and not calls:
            calls.append(name)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)
    monkeypatch.setattr(outfile.os, "fsync", fsync)
    store = ShardStore(tmp_path / "s", {"a": 1}, plan, ext="txt")
    with pytest.raises(OutputError) as exc:
        execute(store, Task, Echo())
    assert str(tmp_path / "s" / "shard-000001.txt") in str(exc.value)
    assert "No space left on device" in str(exc.value) and "--resume" in str(exc.value)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["manifest.json",
                                                                  "shard-000000.txt"]
    monkeypatch.setattr(outfile.os, "fsync", real_fsync)
    again = ShardStore(tmp_path / "s", {"a": 1}, plan, resume=True, ext="txt")
    assert again.reused == [0]
    assert execute(again, Task, Echo()) == [1, 2, 3]
    assert [again.read(i) for i in range(4)] == [f"{i}\n".encode() * 1000 for i in range(4)]
