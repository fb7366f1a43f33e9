"""The pool starts no more workers than a stage has shards; more workers than cores or memory is
warned in one line.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
lock across two processes.
"""

import pytest

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- 7. worker counts ------------------------------------------------------------------------------

def test_the_pool_starts_no_more_workers_than_the_shards_need(monkeypatch):
    from triemine.distributed import local
    from triemine.distributed.shards import execute_all

    started = []

    class FakeProc:  # what ProcessPool starts, without a process
        def __init__(self, ctx, threads):
            from types import SimpleNamespace

            started.append(self)
            self.task = None
            self.conn = SimpleNamespace(send=lambda *_: None, close=lambda: None)
            self.proc = SimpleNamespace(join=lambda timeout=None: None, is_alive=lambda: False)

    monkeypatch.setattr(local, "_Proc", FakeProc)
    pool = local.ProcessPool(8)
    with pool:
        pool.reserve(1)
        assert len(started) == 1
        pool.reserve(3)
        assert len(started) == 3
        pool.reserve(100)
        assert len(started) == 8

    class Store:  # one stage of `shards` pending shards
        def __init__(self, shards):
            self.shards = [type("S", (), {"id": i})() for i in range(shards)]

        def pending(self):
            return self.shards

        def compact(self):
            pass

    class Pool:
        workers, max_attempts = 8, 1
        reserved = []

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def reserve(self, n):
            self.reserved.append(n)

        def submit(self, pid, task):
            self.done = getattr(self, "done", []) + [pid]

        def next_result(self):
            return self.done.pop(0), False, "no work here"

    pool = Pool()
    with pytest.raises(Exception):  # every shard "fails": what counts is the reservation
        execute_all([(Store(1), lambda s: s, None)], pool)
    assert pool.reserved == [1]


def test_more_workers_than_cores_or_memory_is_warned_in_one_line(caplog):
    from triemine.distributed import check_workers, worker_memory

    assert worker_memory(10**8) == 2 * 10**8 + (256 << 20)
    check_workers(1, 1, 1)
    assert not caplog.records
    check_workers(4096, 1, 10**9)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert "--workers 4096" in line and "cores" in line and "\n" not in line
