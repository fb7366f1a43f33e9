"""Scale-out (triemine.distributed): worker processes and Ray actors give the single-process
output byte for byte, a killed worker is retried, a killed driver resumes from the manifest, a
shard that always fails is reported by id; target shards merge the matches of several tries.

Tiny synthetic model (tests/conftest.py).  Ray runs as one local cluster per module (2 CPUs, on
127.0.0.1, no dashboard, usage statistics off); nothing reaches another machine.
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from triemine import paths
from triemine.cli import mine_main
from triemine.testing.tiny_model import synthetic_pairs
from triemine.distributed import Shard, ShardFailures, ShardStore, execute, plan_shards
from triemine.distributed.shards import read_done
from triemine.distributed.local import InlinePool
from triemine.distributed.worker import FAULTS_ENV
from triemine.errors import InputError

PAIRS = synthetic_pairs(48, seed=11)
OTHER = [t for _, t in synthetic_pairs(40, seed=12)]


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(FAULTS_ENV, raising=False)


@pytest.fixture
def corpora(tmp_path):
    """TSV source (48 lines, line 7 empty) and target (48 lines, three of them the same)."""
    src = tmp_path / "src.tsv"
    lines = [f"s{i}\t{s}\n" for i, (s, _) in enumerate(PAIRS)]
    lines[7] = "s7\t\n"
    src.write_text("".join(lines), encoding="utf-8")
    tgt_texts = [t for _, t in PAIRS[:24]] + OTHER[:24]
    tgt_texts[5] = tgt_texts[40] = tgt_texts[2]
    tgt = tmp_path / "tgt.tsv"
    tgt.write_text("".join(f"t{i}\t{t}\n" for i, t in enumerate(tgt_texts)), encoding="utf-8")
    return src, tgt


def _paper(model_dir, src, tgt, *extra):
    return ["--config", "paper", "--model", str(model_dir), "--source", str(src), "--target",
            str(tgt), "--beam", "5", "--batch-size", "2", "--sort-window", "2", "-q", *extra]


@pytest.fixture
def single(tiny_model_dir, corpora, tmp_path):
    """The single-process trie search output (the reference every sharded run must equal)."""
    src, tgt = corpora
    out = tmp_path / "single.tsv"
    assert mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out))) == 0
    return out


def _faults(tmp_path, monkeypatch=None, **kw):
    d = tmp_path / "faults"
    d.mkdir(exist_ok=True)
    spec = json.dumps(dict(kw, dir=str(d)))
    if monkeypatch is not None:
        monkeypatch.setenv(FAULTS_ENV, spec)
    return d, spec


def _computed(d):
    log = d / "computed.log"
    return [int(x) for x in log.read_text().split()] if log.is_file() else []


# -- the plan and the manifest ----------------------------------------------------------------------

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

    from triemine import outfile
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


# -- worker processes -------------------------------------------------------------------------------

def test_workers_give_the_single_process_bytes_even_when_a_worker_is_killed(
        tiny_model_dir, corpora, single, tmp_path, monkeypatch, capsys):
    """--workers 2: the merged TSV (and its meta sidecar) equal the single-process run's; the
    worker that SIGKILLs itself in the middle of shard 1 is replaced and the shard redone."""
    src, tgt = corpora
    d, _ = _faults(tmp_path, monkeypatch, kill=[1])
    out = tmp_path / "workers.tsv"
    capsys.readouterr()
    rc = mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out), "--workers", "2",
                          "--shard-size", "8"))
    assert rc == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["shards"] == 6 and summary["shards_computed"] == 6
    assert out.read_bytes() == single.read_bytes()
    meta = lambda p: json.loads(open(str(p) + ".meta.json").read())  # noqa: E731
    assert meta(out) == meta(single)
    assert (d / "killed-1").exists()                     # the worker did die in shard 1 ...
    assert sorted(_computed(d)) == list(range(6))        # ... and every shard was computed once
    manifest = json.loads((tmp_path / "workers.tsv.shards" / "manifest.json").read_text())
    assert manifest["done"]["1"]["attempts"] == 2
    assert len({e["pid"] for e in manifest["done"].values()}) >= 2


def test_killed_driver_resumes_from_the_manifest(tiny_model_dir, corpora, single, tmp_path):
    """SIGKILL of the trie-mine process (its workers die with it); --resume redoes only the
    shards the manifest lacks, and the output is the single-process output."""
    src, tgt = corpora
    d, spec = _faults(tmp_path, delay=0.4)
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    env[FAULTS_ENV] = spec
    out = tmp_path / "killed.tsv"
    cmd = [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
           "sys.exit(mine_main(sys.argv[1:]))",
           *_paper(tiny_model_dir, src, tgt, "-o", str(out), "--workers", "2",
                   "--shard-size", "4")]
    manifest = tmp_path / "killed.tsv.shards" / "manifest.json"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    before = {}
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        before = read_done(manifest.parent)  # the manifest and its log
        if len(before) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_done(manifest.parent)
    assert len(before) >= 3 and not out.exists()
    first_run = _computed(d)
    time.sleep(1.0)  # workers die with their driver (PR_SET_PDEATHSIG): nothing more computed
    assert _computed(d) == first_run
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stderr.strip().splitlines()[-1])
    assert summary["shards_reused"] == len(before)
    assert summary["shards_computed"] == summary["shards"] - len(before) > 0
    after = json.loads(manifest.read_text())["done"]
    for k, entry in before.items():  # finished shards were not redone
        assert after[k]["finished"] == entry["finished"]
    second_run = _computed(d)[len(first_run):]
    assert not set(second_run) & {int(k) for k in before}
    assert out.read_bytes() == single.read_bytes()


def test_mining_job_scores_on_workers_identically(tiny_model_dir, corpora, tmp_path, capsys):
    """--config mt-only: the exact scores of the candidate pairs, computed by two worker
    processes, give the single-process TSV byte for byte."""
    src, tgt = corpora
    base = ["--config", "mt-only", "--model", str(tiny_model_dir), "--source", str(src),
            "--target", str(tgt), "-q"]
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(base + ["-o", str(one)]) == 0
    assert mine_main(base + ["-o", str(two), "--workers", "2"]) == 0, capsys.readouterr().err
    assert one.read_bytes() == two.read_bytes()
    assert (tmp_path / "two.tsv.work" / "scores.shards" / "manifest.json").is_file()


def test_scoring_shards_are_whole_chunks_and_bitwise_equal(tiny_model, corpora, tmp_path):
    from triemine.corpus import read_corpus
    from triemine.mining.score_shards import exact_scores_sharded
    from triemine.distributed.local import InlinePool
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.features import exact_scores

    src, tgt = corpora
    s, t = read_corpus(src), read_corpus(tgt)
    rng = np.random.default_rng(0)
    ok = [i for i in range(len(s)) if s.texts[i]]
    pairs = np.unique(np.stack([rng.choice(ok, 300), rng.integers(0, len(t), 300)], 1), axis=0)
    score = np.full(len(pairs), np.nan)
    score[::7] = -1.5  # already scored (e.g. by the trie search): skipped, kept
    cands = CandidateSet(pairs[:, 0], pairs[:, 1], np.ones(len(pairs)), {"score": score})
    ref = exact_scores(tiny_model, cands, s.texts, t.texts, chunk=40)
    got, stats = exact_scores_sharded(tiny_model, cands, src, tgt, tmp_path / "w", InlinePool(),
                                      chunk=40)
    assert stats["shards"] == -(-int(np.isnan(score).sum()) // 40)
    assert got.col("score").tobytes() == ref.col("score").tobytes()
    assert got.col("n_tokens").tobytes() == ref.col("n_tokens").tobytes()


def test_the_searchs_line_columns_name_the_corpus_lines_in_every_shard(tiny_model, corpora,
                                                                       tmp_path):
    """The line columns the mining job's trie generator reads (``src_line``, ``tgt_line``) are
    each row's corpus lines in one process and in shards of a few sources alike."""
    from triemine.decoding.driver import mine_to_tsv
    from triemine.decoding.settings import SearchSettings
    from triemine.tsv import read_mined

    src, tgt = corpora
    search = SearchSettings(beam=3, batch_size=2, sort_window=2, token_counts=True,
                            line_numbers=True, shard_sources=4)
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    mine_to_tsv(tiny_model, src, tgt, one, search=search)
    mine_to_tsv(tiny_model, src, tgt, two, search=search, pool=InlinePool())
    assert one.read_bytes() == two.read_bytes()
    assert len(json.loads((tmp_path / "two.tsv.shards" / "manifest.json").read_text(
        encoding="utf-8"))["done"]) > 4
    m = read_mined(two)
    lines = src.read_text(encoding="utf-8").splitlines()
    targets = tgt.read_text(encoding="utf-8").splitlines()
    assert len(m) > 10 and m.columns[-2:] == ["src_line", "tgt_line"]
    assert [lines[int(i) - 1].split("\t")[0] for i in m.col("src_line")] == m.src_ids
    assert [targets[int(i) - 1].split("\t")[0] for i in m.col("tgt_line")] == m.tgt_ids


def test_priors_on_shards_are_the_single_process_bits_and_restart_on_other_lines(
        tiny_model, corpora, tmp_path):
    """The targets' priors are pairs with the empty source (-1) on the same sharded path as the
    exact scores: whole chunks, the single process's bits.  A later run that needs other lines
    (a shared cache filled in between) starts the shards over instead of refusing to resume."""
    from triemine.corpus import read_corpus
    from triemine.mining.score_shards import forced_scores_sharded
    from triemine.distributed.local import InlinePool
    from triemine.mining.features import forced_scores

    src, tgt = corpora
    t = read_corpus(tgt)
    need = np.arange(len(t), dtype=np.int64)
    empty = np.full(len(need), -1)
    ref, ntok = forced_scores(tiny_model, empty, need, [], t.texts, chunk=10)
    got, got_ntok, stats = forced_scores_sharded(tiny_model, empty, need, src, tgt,
                                                 tmp_path / "w", InlinePool(), name="priors",
                                                 chunk=10, stale="restart")
    assert stats["shards"] == -(-len(need) // 10) and stats["shards_computed"] == stats["shards"]
    assert got.tobytes() == ref.tobytes() and got_ntok.tobytes() == ntok.tobytes()
    assert np.all(ref < 0)
    # the same lines again: every shard reused
    _, _, again = forced_scores_sharded(tiny_model, empty, need, src, tgt, tmp_path / "w",
                                        InlinePool(), name="priors", chunk=10, stale="restart")
    assert again["shards_reused"] == again["shards"] and again["shards_computed"] == 0
    # fewer lines left to compute: started over, right values for the new lines
    part, _, over = forced_scores_sharded(tiny_model, empty[:15], need[5:20], src, tgt,
                                          tmp_path / "w", InlinePool(), name="priors",
                                          chunk=10, stale="restart")
    assert over["shards_reused"] == 0 and over["shards_computed"] == 2
    np.testing.assert_allclose(part, ref[5:20], rtol=0, atol=1e-4)
    # the exact scores' stores still refuse to resume another set of pairs
    with pytest.raises(InputError, match="cannot resume"):
        forced_scores_sharded(tiny_model, empty[:15], need[:15], src, tgt, tmp_path / "w",
                              InlinePool(), name="priors", chunk=10)


def _mt_only_one_and_two_workers(model_dir, corpora, tmp_path, monkeypatch):
    """``mt-only`` in one process and on 2 workers, each with an empty cache: both TSVs."""
    src, tgt = corpora
    base = ["--config", "mt-only", "--model", str(model_dir), "--source", str(src),
            "--target", str(tgt), "-q"]
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-one"))
    assert mine_main(base + ["-o", str(one)]) == 0
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-two"))
    assert mine_main(base + ["-o", str(two), "--workers", "2"]) == 0
    return one, two


def test_mining_job_computes_priors_on_workers_with_an_empty_cache(tiny_model_dir, corpora,
                                                                     tmp_path, monkeypatch):
    """With --workers the targets' priors are computed by the workers too (nothing cached), and
    the TSV is the single process's, byte for byte."""
    one, two = _mt_only_one_and_two_workers(tiny_model_dir, corpora, tmp_path, monkeypatch)
    manifest = json.loads((tmp_path / "two.tsv.work" / "priors.shards" / "manifest.json")
                          .read_text(encoding="utf-8"))
    assert manifest["done"] and os.getpid() not in {e["pid"] for e in manifest["done"].values()}
    assert one.read_bytes() == two.read_bytes()


def test_a_target_corpus_of_several_prior_ranges_gives_the_same_tsv_on_workers(
        tiny_model_dir, corpora, tmp_path, monkeypatch):
    """A target corpus of several PRIOR_RANGE ranges: the driver finds and computes the priors a
    range at a time, each range a sharded job of its own on the workers, and the TSV is the
    single process's (the same ranges, the same chunks), byte for byte; the cache holds them."""
    from triemine.mining import features

    monkeypatch.setattr(features, "PRIOR_RANGE", 16)  # 48 target lines: 3 ranges
    one, two = _mt_only_one_and_two_workers(tiny_model_dir, corpora, tmp_path, monkeypatch)
    assert one.read_bytes() == two.read_bytes()
    work = tmp_path / "two.tsv.work"
    done = sorted(p.name for p in work.iterdir() if p.name.startswith("priors"))
    assert done == ["priors.1.shards", "priors.2.shards", "priors.shards"]
    for name in done:
        assert json.loads((work / name / "manifest.json").read_text(encoding="utf-8"))["done"]
    (cached,) = (tmp_path / "cache-two" / "priors").iterdir()
    assert np.isfinite(np.load(cached)).sum() > 32  # lines of every range


def test_a_small_scoring_job_is_cut_into_shards_for_several_workers():
    """1,198 pairs were one 2,000-pair chunk, one shard: two workers scored them at 0.94x of
    one (haystack_bench --quick); a chunk is now a quarter of a smaller job, at least 256."""
    from triemine.mining.features import MIN_SCORE_CHUNK, SCORE_CHUNK, score_chunk

    assert score_chunk(1198) == 300 and len(plan_shards(range(0, 1198, 300), 1198, 300)) == 4
    assert score_chunk(6842) == 1711 and score_chunk(10 ** 6) == SCORE_CHUNK == 2000
    assert score_chunk(1) == MIN_SCORE_CHUNK == 256


# -- options and errors ------------------------------------------------------------------------------

def test_options_that_do_not_apply_are_refused(tiny_model_dir, corpora, tmp_path, capsys):
    src, tgt = corpora
    out = str(tmp_path / "x.tsv")
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-o", out]
    for argv, msg in ((["--config", "mt-only", "--target-shards", "2"], "--target-shards applies"),
                      (["--config", "mt-only", "--workers", "2", "--shard-size", "5"],
                       "--shard-size applies"),
                      (["--config", "paper", "--shard-size", "5"], "--shard-size applies"),
                      (["--config", "paper", "--workers", "0"], "--workers must be >= 1"),
                      (["--config", "paper", "--workers", "2", "--debug"], "not with --workers"),
                      (["--config", "paper", "--target-shards", "0"], "--target-shards must")):
        with pytest.raises(SystemExit) as exc:
            mine_main(base + argv)
        assert exc.value.code == 2
        assert msg in capsys.readouterr().err


def test_single_machine_path_imports_without_ray_and_names_the_extra(tiny_model_dir, corpora,
                                                                       tmp_path, monkeypatch,
                                                                       capsys):
    code = ("import sys; import triemine.cli, triemine.distributed, triemine.mining.score_shards, "
            "triemine.distributed.local, triemine.mining.run; assert 'ray' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    src, tgt = corpora
    rc = mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(tmp_path / "r.tsv"), "--ray"))
    err = capsys.readouterr().err
    assert rc == 2 and "triemine[ray]" in err and "Traceback" not in err


def test_cuda_actors_ask_for_one_gpu_each_and_need_a_gpu():
    from triemine.distributed import make_pool

    pool = make_pool(2, ray="local", device="cuda")
    assert pool.options()["num_gpus"] == 1 and pool.options()["num_cpus"] == 1
    assert make_pool(2, ray="local").options()["num_gpus"] == 0
    # an actor's one GPU is its cuda: a device index is refused before any work
    from triemine.api import MineOptions
    from triemine.errors import InputError

    with pytest.raises(InputError, match="--device cuda:1 with --ray"):
        MineOptions.of(ray="local", device="cuda:1").check()
    MineOptions.of(ray="local", device="cuda").check()


# -- target shards ------------------------------------------------------------------------------------

def test_merge_matches_unites_lines_orders_by_score_and_keeps_the_beam():
    from triemine.decoding.matches import Match
    from triemine.decoding.shards import merge_matches

    def m(tokens, score, lines):
        return Match(0, 0, tuple(lines), tuple(tokens), score, len(tokens), -score / len(tokens),
                     0.0, "")
    merged = merge_matches([[m([5, 2], -1.0, [3]), m([6, 7, 2], -6.0, [1])],
                            [m([5, 2], -1.0, [30]), m([8, 2], -0.5, [40])]], beam=2)
    assert [x.tokens for x in merged] == [(8, 2), (5, 2)]
    assert merged[1].tgt_line_ids == (3, 30) and [x.rank for x in merged] == [0, 1]


def test_target_shards_find_at_least_what_one_trie_finds_with_a_wide_beam(
        tiny_model_dir, corpora, tmp_path):
    """Two tries, each searched with its own beam: with a beam as wide as the corpus, every
    pair the one trie finds is found again with the same score (and more: each half's beam
    explores what the whole trie's beam pruned), with the target ids of the whole corpus."""
    from triemine.tsv import read_mined

    src, tgt = corpora
    outs = {}
    for k in (1, 2):
        out = tmp_path / f"k{k}.tsv"
        assert mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out), "--beam", "48",
                                "--target-shards", str(k))) == 0
        outs[k] = read_mined(out)
    rows = {k: {(a, b): s for a, b, s in zip(m.src_ids, m.tgt_ids, m.col("score"))}
            for k, m in outs.items()}
    assert rows[1].keys() <= rows[2].keys() and len(rows[2]) > len(rows[1]) > 48
    assert all(abs(rows[1][key] - rows[2][key]) < 1e-4 for key in rows[1])
    tgt_text = dict(line.rstrip("\n").split("\t") for line in open(tgt, encoding="utf-8"))
    m = outs[2]
    assert all(tgt_text[i] == t for i, t in zip(m.tgt_ids, m.tgt))
    # line 2's sentence is also lines 5 and 40 (the other half): one match, all three ids
    assert {b for (a, b) in rows[2] if a == "s2"} >= {"t2", "t5", "t40"}


# -- Ray ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray cluster for the module: 2 CPUs, 127.0.0.1 only, no dashboard."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only (read at import)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, address="local")
    assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in ray.nodes())
    yield ray
    ray.shutdown()


def test_ray_actors_give_the_single_process_bytes_after_an_actor_dies(
        ray_cluster, tiny_model_dir, corpora, single, tmp_path, monkeypatch, capsys):
    src, tgt = corpora
    d, _ = _faults(tmp_path, monkeypatch, kill=[2])  # the actor SIGKILLs itself in shard 2
    out = tmp_path / "ray.tsv"
    rc = mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out), "--ray", "--workers", "2",
                          "--shard-size", "8"))
    assert rc == 0, capsys.readouterr().err
    assert out.read_bytes() == single.read_bytes()
    assert (d / "killed-2").exists() and sorted(_computed(d)) == list(range(6))


def test_ray_reports_a_shard_that_always_fails_by_id(ray_cluster, tiny_model_dir, corpora,
                                                    tmp_path, monkeypatch, capsys):
    src, tgt = corpora
    d, _ = _faults(tmp_path, monkeypatch, fail=[3])
    out = tmp_path / "fail.tsv"
    rc = mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out), "--ray", "local",
                          "--workers", "2", "--shard-size", "8"))
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "1 shard(s) failed" in err
    assert re.search(r"shard 3 \(sources \d+-\d+\) failed 3 time\(s\): RuntimeError: "
                     r"injected failure of shard 3", err), err
    assert "Traceback" not in err
    assert sorted(_computed(d)) == [0, 1, 2, 4, 5]  # the others are done and recorded
    manifest = json.loads((tmp_path / "fail.tsv.shards" / "manifest.json").read_text())
    assert sorted(manifest["done"]) == ["0", "1", "2", "4", "5"]


def _count_actors(monkeypatch):
    """The actors every RayPool creates from now on (a list that grows with each one)."""
    from triemine.distributed.ray_backend import RayPool

    made = []
    real = RayPool._start
    monkeypatch.setattr(RayPool, "_start", lambda self, i: (made.append(i), real(self, i))[1])
    return made


def test_ray_actors_are_created_for_the_shards_a_stage_has(ray_cluster, tiny_model, corpora,
                                                           tmp_path, monkeypatch):
    """``workers=4``: opening the pool creates no actor, a stage of one shard one, a later stage
    of two shards one more, a nested ``with`` keeps them and a stage of 6 shards adds actors up
    to 4 (two of which cannot start on the 2 CPUs: the others do the work); every stage gives
    the one-process bits."""
    from triemine.corpus import read_corpus
    from triemine.mining.score_shards import forced_scores_sharded
    from triemine.distributed.ray_backend import RayPool
    from triemine.mining.features import forced_scores

    made = _count_actors(monkeypatch)
    src, tgt = corpora
    s, t = read_corpus(src), read_corpus(tgt)
    idx = np.arange(12, dtype=np.int64)

    def stage(pool, chunk):
        ref = forced_scores(tiny_model, idx, idx, s.texts, t.texts, chunk=chunk)
        work = tmp_path / f"w{len(list(tmp_path.glob('w*')))}"  # a new job each time
        got = forced_scores_sharded(tiny_model, idx, idx, src, tgt, work, pool, chunk=chunk)
        assert got[2]["shards"] == 12 // chunk and got[2]["shards_computed"] == 12 // chunk
        assert got[0].tobytes() == ref[0].tobytes() and got[1].tobytes() == ref[1].tobytes()

    pool = RayPool("local", workers=4)
    with pool:
        assert made == [] and pool.workers == 4
        stage(pool, 12)
        assert len(made) == len(pool._actors) == 1
        stage(pool, 6)
        assert len(made) == len(pool._actors) == 2
        with pool:
            stage(pool, 12)
            assert len(made) == 2
            stage(pool, 2)
            assert len(made) == len(pool._actors) == 4 and pool.replaced == 0
        assert len(pool._actors) == 4
    assert pool._actors == [] and len(made) == 4


def test_ray_local_with_more_workers_than_cores_warns_and_starts_what_the_shards_need(
        ray_cluster, tiny_model_dir, corpora, single, tmp_path, monkeypatch, caplog):
    """``--ray local --workers 64`` on a job of one search shard: the warning of the local
    pool, one actor, the one-process bytes."""
    made = _count_actors(monkeypatch)
    src, tgt = corpora
    out = tmp_path / "many.tsv"
    with caplog.at_level("WARNING"):
        rc = mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out), "--ray", "local",
                              "--workers", "64", "--shard-size", "48"))
    assert rc == 0 and out.read_bytes() == single.read_bytes()
    assert len(made) == 1
    assert any(re.search(r"--workers 64: 64 x 1 threads on \d+ cores", r.getMessage())
               for r in caplog.records), caplog.text


# -- the embedding stage: sentence embeddings and kNN in shards ---------------------------------

class _RecordingPool(InlinePool):
    """Runs in this process and logs ``("submit", *what(task))`` and ``("result",)`` in
    ``events``: whether shards were queued together shows in the order."""

    def __init__(self, events, what):
        super().__init__()
        self.events, self.what = events, what

    def submit(self, shard_id, task):
        self.events.append(("submit", *self.what(task)))
        super().submit(shard_id, task)

    def next_result(self):
        self.events.append(("result",))
        return super().next_result()


def test_translation_shards_are_one_pass_lines_on_workers_and_resume(tiny_model, corpora,
                                                                      tmp_path, monkeypatch):
    """The translation-retrieval generator's translations in line shards of whole batches: the
    very lines of one pass over the corpus, in this process and on 2 workers; a run that
    stopped after some shards redoes only the others, whoever runs next; the merged file is the
    cache every later call reads (its shards gone), and a cache file that is not one line a
    source is made again."""
    from triemine.corpus import read_corpus
    from triemine.distributed import make_pool
    from triemine.decoding.model_spec import inline_model_pool
    from triemine.mining.translate_shards import cached_translations
    from triemine.mining.translate import make_translator, translate_lines

    src, _ = corpora
    texts = read_corpus(src).texts
    want = translate_lines(make_translator(tiny_model, beam=2), texts, batch=4)
    assert want[7] == "" and sum(bool(w) for w in want) == len(texts) - 1
    inline = inline_model_pool(tiny_model)

    def run(pool, name, **kw):
        return cached_translations(tiny_model, src, tmp_path / f"cache.{name}", pool, beam=2,
                                   **{"lines": 8, "batch": 4, **kw})
    d, _ = _faults(tmp_path, monkeypatch, fail=[2])
    with pytest.raises(ShardFailures, match="shard 2"):
        run(inline, "one")
    assert sorted(_computed(d)) == [0, 1, 3, 4, 5]
    assert not list((tmp_path / "cache.one").glob("*.txt"))
    _faults(tmp_path, monkeypatch)  # no failure now; still logging what is computed
    got, stats = run(inline, "one")
    assert got == want and stats["shards_reused"] == 5 and stats["shards_computed"] == 1
    assert sorted(_computed(d)) == [0, 1, 2, 3, 4, 5]  # only shard 2 redone
    (cached,) = (tmp_path / "cache.one").glob("*.txt")
    assert cached.read_text(encoding="utf-8") == "".join(w + "\n" for w in want)
    assert not list((tmp_path / "cache.one").glob("*.shards"))
    assert run(inline, "one")[0] == want and len(_computed(d)) == 6  # read from the cache
    cached.write_text("".join(w + "\n" for w in want[:20]), encoding="utf-8")  # cut short
    assert run(inline, "one")[0] == want and len(_computed(d)) == 12
    monkeypatch.delenv(FAULTS_ENV)
    with make_pool(2) as pool:
        got, stats = run(pool, "two")
    assert got == want and stats["shards_computed"] == 6
    assert len(stats["worker_cpu_s"]) == 2 and str(os.getpid()) not in stats["worker_cpu_s"]
    with pytest.raises(ValueError, match="whole batches of 4"):
        run(inline, "three", lines=6)


def test_the_fairseq_translator_decodes_a_whole_batch_together_off_the_cpu(tiny_model, corpora,
                                                                            monkeypatch):
    """The fairseq decoder's sub-batch: SUB_BATCH sources on the CPU, the whole batch on any
    other device (measured on an H200: 720 sentences a second against 154 in 32s); the
    translations of the tiny model are the same whatever the sub-batch."""
    from triemine.corpus import read_corpus
    from triemine.decoding import generator
    from triemine.mining import translate

    texts = list(read_corpus(corpora[0]).texts)
    sizes = []
    real = generator.TrieSequenceGenerator.generate
    monkeypatch.setattr(generator.TrieSequenceGenerator, "generate", lambda self, models, sample,
                        **kw: (sizes.append(sample["net_input"]["src_tokens"].size(0)),
                               real(self, models, sample, **kw))[1])
    got = {}
    for device in ("cpu", "cpu:0"):
        sizes.clear()
        got[device] = translate.translate_lines(
            translate.make_translator(tiny_model, beam=2, device=device, backend="fairseq"),
            texts, batch=translate.TRANSLATE_BATCH)
        want = translate.SUB_BATCH if device == "cpu" else translate.DEVICE_SUB_BATCH
        assert max(sizes) == min(want, sum(bool(t.strip()) for t in texts)), device
    assert got["cpu"] == got["cpu:0"]
    assert translate.DEVICE_SUB_BATCH == translate.TRANSLATE_BATCH > translate.SUB_BATCH
    one = translate.make_translator(tiny_model, beam=2, backend="fairseq", sub=3)
    sizes.clear()
    assert translate.translate_lines(one, texts) == got["cpu"] and max(sizes) == 3
    # the job's translation cache names the sub-batch off the CPU (other padding, other bits)
    from triemine.decoding.model_spec import inline_model_pool
    from triemine.mining.translate_shards import cached_translations

    cache = corpora[0].parent / "translations"
    for device in ("cpu", "cpu:0"):
        lines, _ = cached_translations(tiny_model, corpora[0], cache,
                                       inline_model_pool(tiny_model, device), beam=2,
                                       device=device)
        assert lines == got["cpu"]
    assert len(list(cache.glob("*.txt"))) == 2
    monkeypatch.setattr(translate, "DEVICE_SUB_BATCH", 5)  # another sub-batch: another cache
    cached_translations(tiny_model, corpora[0], cache, inline_model_pool(tiny_model, "cpu:0"),
                        beam=2, device="cpu:0")
    assert len(list(cache.glob("*.txt"))) == 3


def test_embedding_shards_are_the_single_calls_bits_and_resume(tmp_path, monkeypatch):
    """Line shards of whole encoder batches give the very rows of one encode() call; a run that
    stopped after some shards redoes only the others; the merged file is reused when complete."""
    from triemine.embedding.embed_shards import embed_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding import get_encoder

    texts = [f"sentence number {i} about {'cats' if i % 3 else 'the weather'}" for i in range(600)]
    texts[5] = ""  # an empty line: a zero row
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    ref = get_encoder("use").encode(texts)
    d, _ = _faults(tmp_path, monkeypatch, fail=[1])
    with pytest.raises(ShardFailures, match="shard 1"):
        embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert sorted(_computed(d)) == [0, 2] and not (tmp_path / "e.npy").exists()
    _faults(tmp_path, monkeypatch)  # no failure now; still logging what is computed
    got = embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert sorted(_computed(d)) == [0, 1, 2]  # only shard 1 redone
    assert got.shape == ref.shape and np.asarray(got).tobytes() == ref.tobytes()
    assert not np.asarray(got)[5].any()
    again = embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert isinstance(again, np.memmap) and np.asarray(again).tobytes() == ref.tobytes()
    assert sorted(_computed(d)) == [0, 1, 2]  # reused, nothing computed
    # the merge recorded the digest of what it wrote: the kNN's keys do not read the file back
    real = paths.file_sha256
    monkeypatch.setattr(paths, "file_sha256", lambda path: pytest.fail(f"{path} read whole"))
    assert paths.content_sha256(tmp_path / "e.npy") == hashlib.sha256(
        (tmp_path / "e.npy").read_bytes()).hexdigest()
    monkeypatch.setattr(paths, "file_sha256", real)
    data = (tmp_path / "e.npy").read_bytes()
    (tmp_path / "e.npy").write_bytes(data[: len(data) // 2])  # truncated: merged again
    fixed = embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert np.asarray(fixed).tobytes() == ref.tobytes() and sorted(_computed(d)) == [0, 1, 2]
    with pytest.raises(ValueError, match="whole batches"):
        embed_sharded("use", corpus, len(texts), tmp_path / "f.npy", InlinePool(), lines=100)
    # two corpora at once (a job's sources and targets): every shard of both submitted before
    # the first result, the same files and bits as one call each; a finished one is reused
    from triemine.embedding.embed_shards import embed_corpora

    small = tmp_path / "s.txt"
    small.write_text("a short one\nanother\n", encoding="utf-8")
    events = []

    def Recording():
        return _RecordingPool(events, lambda t: (os.path.basename(t.corpus), t.start))
    (tmp_path / "e.npy").unlink()
    both = embed_corpora("use", [(corpus, len(texts), tmp_path / "e.npy"),
                                 (small, 2, tmp_path / "s.npy")], Recording(), lines=256,
                         resume=False)
    assert events[:events.index(("result",))] == [("submit", "c.txt", 0), ("submit", "c.txt", 256),
                                                  ("submit", "c.txt", 512), ("submit", "s.txt", 0)]
    assert np.asarray(both[0]).tobytes() == ref.tobytes()
    assert np.asarray(both[1]).tobytes() == get_encoder("use").encode(["a short one",
                                                                       "another"]).tobytes()
    events.clear()
    again = embed_corpora("use", [(corpus, len(texts), tmp_path / "e.npy"),
                                  (small, 2, tmp_path / "s.npy")], Recording(), lines=256)
    assert events == [] and [np.asarray(a).tobytes() for a in again] == \
        [np.asarray(a).tobytes() for a in both]


def test_knn_grid_shards_merge_to_the_exhaustive_search(tmp_path):
    """A grid of query x database shards merged per query ranks exactly as one exhaustive
    search: the same neighbours and similarities (ties to the lower row)."""
    from triemine.embedding.knn_shards import knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import knn

    rng = np.random.default_rng(5)
    q = rng.normal(size=(53, 16)).astype(np.float32)
    db = rng.normal(size=(71, 16)).astype(np.float32)
    db[40] = db[3]  # a tie: the lower row first
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    db /= np.linalg.norm(db, axis=1, keepdims=True)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "d.npy", db)
    ref_sim, ref_idx = knn(q, db, 4)
    sim, idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path, InlinePool(),
                           name="t", rows=10)
    assert sim.shape == (53, 4) and idx.shape == (53, 4)
    manifest = json.loads((tmp_path / "t.shards" / "manifest.json").read_text())
    assert len(manifest["done"]) == 6 * 8  # 53 queries x 71 rows in cells of 10 x 10
    np.testing.assert_allclose(sim, ref_sim, rtol=0, atol=1e-6)
    exact = np.abs(np.diff(ref_sim, axis=1)).min(axis=1) > 1e-6  # rows without a near-tie
    assert (idx[exact] == ref_idx[exact]).all()
    tie = np.flatnonzero((idx == 3).any(axis=1) & (idx == 40).any(axis=1))
    for r in tie:
        assert list(idx[r]).index(3) < list(idx[r]).index(40)
    one_sim, one_idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                                   InlinePool(), name="t")  # one cell: the exhaustive call
    assert one_sim.tobytes() == ref_sim.tobytes() and one_idx.tobytes() == ref_idx.tobytes()
    # the merged lists are a file the driver maps, not memory it holds; a resumed run whose cells
    # are all reused maps the same file, one with a cell computed again merges a new one
    assert isinstance(sim, np.memmap) and isinstance(idx, np.memmap)
    (lists,) = tmp_path.glob("t.lists.*.npy")
    stamp = lists.stat().st_mtime_ns
    again = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path, InlinePool(),
                        name="t", rows=10)
    assert [a.tobytes() for a in again] == [sim.tobytes(), idx.tobytes()]
    assert list(tmp_path.glob("t.lists.*.npy")) == [lists] and lists.stat().st_mtime_ns == stamp
    (tmp_path / "t.shards" / "shard-000007.npz").unlink()
    with pytest.warns(UserWarning, match="shard-000007.npz: shard file missing"):
        redone = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path, InlinePool(),
                             name="t", rows=10)
    assert [a.tobytes() for a in redone] == [sim.tobytes(), idx.tobytes()]
    (merged,) = tmp_path.glob("t.lists.*.npy")
    assert merged != lists  # merged again, the old file removed


def test_knn_searches_queue_both_directions_together_with_the_bits_of_one_call_each(tmp_path):
    """A job's two directions: every cell of both submitted before the first result (each
    direction of a small job is one cell, and one after the other a worker idles through each),
    and the same neighbour lists, bit for bit, as one knn_sharded call each."""
    from triemine.embedding.knn_shards import knn_searches, knn_sharded
    from triemine.distributed.local import InlinePool

    rng = np.random.default_rng(8)
    for name, rows in (("x", 30), ("y", 50)):
        a = rng.normal(size=(rows, 16)).astype(np.float32)
        np.save(tmp_path / f"{name}.npy", a / np.linalg.norm(a, axis=1, keepdims=True))
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    events = []

    def Recording():
        return _RecordingPool(events, lambda t: (os.path.basename(t.queries), t.rows))
    both = knn_searches([(x, y, "fwd"), (y, x, "bwd")], 4, tmp_path / "both", Recording(),
                        rows=20)
    first = events.index(("result",))
    assert sorted(events[:first]) == sorted(
        [("submit", "x.npy", r) for r in ((0, 20), (20, 30)) for _ in range(3)]
        + [("submit", "y.npy", r) for r in ((0, 20), (20, 40), (40, 50)) for _ in range(2)])
    for (sim, idx), (q, d, name) in zip(both, [(x, y, "fwd"), (y, x, "bwd")]):
        one = knn_sharded(q, d, 4, tmp_path / "one", InlinePool(), name=name, rows=20)
        assert sim.tobytes() == one[0].tobytes() and idx.tobytes() == one[1].tobytes()


def test_default_job_on_workers_embeds_and_searches_in_shards_identically(tiny_model_dir,
                                                                         corpora, tmp_path,
                                                                         monkeypatch):
    """The default configuration (USE candidates) with --workers 2: embeddings, kNN, exact
    scores and priors on the workers, the single process's TSV byte for byte."""
    src, tgt = corpora
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-one"))
    assert mine_main(base + ["-o", str(one)]) == 0
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-two"))
    assert mine_main(base + ["-o", str(two), "--workers", "2"]) == 0
    work = tmp_path / "two.tsv.work"
    for part in ("emb.use.src.npy.shards", "emb.use.tgt.npy.shards", "knn.use.fwd.shards",
                 "knn.use.bwd.shards", "scores.shards", "priors.shards"):
        assert json.loads((work / part / "manifest.json").read_text())["done"], part
    assert one.read_bytes() == two.read_bytes()


def _clustered(tmp_path, seed: int):
    """700 queries near 6,000 L2-normalised rows in 40 clusters, saved as q.npy and d.npy."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, 32))
    db = (centres[rng.integers(0, 40, 6000)] + 0.35 * rng.normal(size=(6000, 32))).astype(np.float32)
    q = (db[rng.choice(6000, 700, replace=False)] + 0.2 * rng.normal(size=(700, 32))).astype(np.float32)
    for a in (q, db):
        a /= np.linalg.norm(a, axis=1, keepdims=True)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "d.npy", db)
    return q, db


def test_ivf_knn_sharded_is_the_same_on_any_pool_finds_the_neighbours_and_rebuilds_bad_index(
        tmp_path):
    """The approximate index: the same bits in this process and on 2 worker processes, recall@4
    against the exact search on clustered data, similarities that are the found rows' exact inner
    products, and an index file that is truncated or another database's is named and rebuilt."""
    from triemine.distributed import make_pool
    from triemine.embedding.knn_shards import knn_method, knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import knn

    q, db = _clustered(tmp_path, seed=11)
    args = dict(name="t", rows=256, index="ivf", nprobe=8)
    sim, idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                           InlinePool(), **args)
    assert sim.shape == (700, 4) and idx.min() >= 0
    with make_pool(2) as pool:
        sim2, idx2 = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "two",
                                 pool, **args)
    assert sim2.tobytes() == sim.tobytes() and idx2.tobytes() == idx.tobytes()
    ref_sim, ref_idx = knn(q, db, 4)
    recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(idx.tolist(), ref_idx.tolist())])
    assert recall >= 0.95
    np.testing.assert_allclose(sim, np.einsum("qd,qkd->qk", q, db[idx]), atol=1e-5)
    assert (sim <= ref_sim + 1e-6).all()  # never better than the exact k-th best
    manifest = json.loads((tmp_path / "one" / "t.shards" / "manifest.json").read_text())
    assert len(manifest["done"]) == 3  # 700 queries in shards of 256

    index_file = tmp_path / "one" / "t.ivf" / "index.faiss"
    index_file.write_bytes(index_file.read_bytes()[:-100])
    with pytest.warns(UserWarning, match=r"index\.faiss.*truncated or replaced"):
        again = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                            InlinePool(), **args)
    assert again[1].tobytes() == idx.tobytes()
    np.save(tmp_path / "d2.npy", db[::-1].copy())  # another database, the same file size
    (tmp_path / "one" / "t.ivf").rename(tmp_path / "old.ivf")
    (tmp_path / "one" / "t.ivf").mkdir()
    for f in ("index.faiss", "index.json"):
        (tmp_path / "one" / "t.ivf" / f).write_bytes((tmp_path / "old.ivf" / f).read_bytes())
    with pytest.warns(UserWarning, match="another database"):
        rev = knn_sharded(tmp_path / "q.npy", tmp_path / "d2.npy", 4, tmp_path / "one",
                          InlinePool(), **args)
    assert (rev[1] == 5999 - idx).mean() > 0.95  # rows of the reversed database

    from triemine.embedding.knn_shards import ivf_nprobe
    from triemine.embedding.ivf import n_lists
    assert ivf_nprobe(1_000_000) == 500 and n_lists(1_000_000) == 4000  # an eighth
    assert ivf_nprobe(48) == n_lists(48) == 27  # a small index: every list
    assert knn_method(8624, 1_000_000) == "exact"  # the haystack: about 9 x 10^9 pairs
    assert knn_method(1_000_000, 1_000_000) == "hnsw"
    assert knn_method(10**9, 1000) == "exact"  # a small database: nothing to cluster
    # off the CPU the exact search at any size (a GPU's products; docs/scale.md), unless told
    assert knn_method(10**8, 10**8, device="cuda") == "exact"
    assert knn_method(10**8, 10**8, "hnsw", device="cuda") == "hnsw"
    with pytest.raises(ValueError):
        knn_method(1, 1, "annoy")


def test_knn_index_ivf_on_the_cli_builds_an_index_and_finds_the_exact_candidates(
        tiny_model_dir, corpora, tmp_path, monkeypatch):
    """``--knn-index ivf`` runs the job on the IVF index (built in the work directory, searched
    in shards); on 48 targets every list is probed, so the candidates are the exact search's.
    With ``--config paper`` (the trie search alone) the option is refused."""
    from triemine.tsv import read_mined

    src, tgt = corpora
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    exact, ivf = tmp_path / "exact.tsv", tmp_path / "ivf.tsv"
    assert mine_main(base + ["-o", str(exact), "--knn-index", "exact"]) == 0
    assert mine_main(base + ["-o", str(ivf), "--knn-index", "ivf"]) == 0
    assert (tmp_path / "ivf.tsv.work" / "knn.use.fwd.ivf" / "index.faiss").is_file()
    assert not (tmp_path / "exact.tsv.work" / "knn.use.fwd.ivf").exists()
    a, b = read_mined(exact), read_mined(ivf)
    assert list(zip(a.src_ids, a.tgt_ids)) == list(zip(b.src_ids, b.tgt_ids))
    np.testing.assert_allclose(a.col("use_cos"), b.col("use_cos"), atol=1e-5)
    with pytest.raises(SystemExit):
        mine_main(base + ["-o", str(tmp_path / "m.tsv"), "--config", "paper", "--knn-index", "ivf"])


def test_hnsw_knn_sharded_builds_graphs_on_the_pool_gives_the_same_bits_and_rebuilds_bad_graph(
        tmp_path):
    """The graph index: 6,000 rows in 3 graphs of 2,048 built on the pool (one thread each),
    700 queries in 3 shards x 3 graphs; the same bits in this process and on 2 worker processes,
    recall@4 against the exact search, exact similarities of the rows found; a graph file that is
    truncated is built again (alone), a worker's leftover temporary file is removed."""
    from triemine.distributed import make_pool
    from triemine.embedding.knn_shards import knn_method, knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import knn

    q, db = _clustered(tmp_path, seed=5)
    args = dict(name="t", rows=256, index="hnsw", graph_rows=2048, ef_search=64)
    sim, idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                           InlinePool(), **args)
    assert sim.shape == (700, 4) and idx.min() >= 0 and idx.max() < 6000
    with make_pool(2) as pool:
        sim2, idx2 = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "two",
                                 pool, **args)
    assert sim2.tobytes() == sim.tobytes() and idx2.tobytes() == idx.tobytes()
    graphs = tmp_path / "one" / "t.hnsw"
    files = sorted(p.name for p in graphs.iterdir())
    assert files == ["manifest.json"] + [f"shard-{i:06d}.faiss" for i in range(3)]
    for g in range(3):  # the graph files themselves: one thread, the same bytes
        assert (graphs / f"shard-{g:06d}.faiss").read_bytes() == \
            (tmp_path / "two" / "t.hnsw" / f"shard-{g:06d}.faiss").read_bytes()
    ref_sim, ref_idx = knn(q, db, 4)
    recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(idx.tolist(), ref_idx.tolist())])
    assert recall >= 0.98
    np.testing.assert_allclose(sim, np.einsum("qd,qkd->qk", q, db[idx]), atol=1e-5)
    assert (sim <= ref_sim + 1e-6).all()
    cells = json.loads((tmp_path / "one" / "t.shards" / "manifest.json").read_text())
    assert len(cells["done"]) == 9  # and every query found 4 rows walking each graph:
    assert sum(e["exhaustive"] for e in cells["done"].values()) == 0  # no exhaustive fallback

    g1 = graphs / "shard-000001.faiss"
    g1.write_bytes(g1.read_bytes()[:-100])
    (graphs / "shard-000002.faiss.tmp999").write_bytes(b"a killed worker's partial graph")
    before = {g: (graphs / f"shard-{g:06d}.faiss").stat().st_mtime_ns for g in (0, 2)}
    with pytest.warns(UserWarning, match=r"shard-000001\.faiss: shard file missing, truncated"):
        again = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                            InlinePool(), **args)
    assert again[0].tobytes() == sim.tobytes() and again[1].tobytes() == idx.tobytes()
    assert g1.stat().st_size == (tmp_path / "two" / "t.hnsw" / g1.name).stat().st_size
    assert {g: (graphs / f"shard-{g:06d}.faiss").stat().st_mtime_ns for g in (0, 2)} == before
    assert not list(graphs.glob("*.tmp*"))
    np.save(tmp_path / "d2.npy", db[::-1].copy())  # another database: its graphs are rebuilt
    with pytest.warns(UserWarning, match=r"t\.hnsw/manifest\.json: HNSW graphs built for another"):
        rev = knn_sharded(tmp_path / "q.npy", tmp_path / "d2.npy", 4, tmp_path / "one",
                          InlinePool(), **args)
    assert (rev[1] == 5999 - idx).mean() > 0.95
    assert knn_method(10, 10, "hnsw") == "hnsw"
    from triemine.embedding.hnsw import graph_plan  # measured at 10^6, grown with the database
    assert graph_plan(1_000_000) == (262144, 512) and graph_plan(6000) == (262144, 512)
    assert graph_plan(10**7) == (1_250_000, 1118) and graph_plan(10**8) == (4_194_304, 2048)


def test_knn_index_hnsw_on_the_cli_finds_the_exact_candidates(tiny_model_dir, corpora,
                                                               tmp_path, monkeypatch):
    """``--knn-index hnsw``: a graph of the 48 targets (and one of the 48 sources) in the work
    directory; on so few rows the walk finds the exact neighbours, so the candidates are the
    exact search's, and two workers give the same bytes."""
    from triemine.tsv import read_mined

    src, tgt = corpora
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    exact, one, two = tmp_path / "exact.tsv", tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(base + ["-o", str(exact), "--knn-index", "exact"]) == 0
    assert mine_main(base + ["-o", str(one), "--knn-index", "hnsw"]) == 0
    assert mine_main(base + ["-o", str(two), "--knn-index", "hnsw", "--workers", "2"]) == 0
    assert (tmp_path / "one.tsv.work" / "knn.use.fwd.hnsw" / "shard-000000.faiss").is_file()
    assert one.read_bytes() == two.read_bytes()
    a, b = read_mined(exact), read_mined(one)
    assert list(zip(a.src_ids, a.tgt_ids)) == list(zip(b.src_ids, b.tgt_ids))
    np.testing.assert_allclose(a.col("use_cos"), b.col("use_cos"), atol=1e-5)
