"""The reliability bench's job families: killed and resumed runs, concurrent runs, the sharded
job's faults, damaged caches and work files; and how its families start ``trie-mine``
(:func:`mine_cmd`, :data:`CONFIG_ARGS`).

* ``kill``, ``job_kill`` (:func:`bench_kill`): ``trie-mine`` (tiny model, a subprocess) is
  killed with SIGKILL at random moments and resumed with ``--resume`` until it finishes; the
  output is compared with an uninterrupted run: ``rows_lost``, ``rows_duplicated``,
  ``identical`` for the trie search (``--config paper``) and ``job_rows_lost``,
  ``job_rows_duplicated``, ``job_identical`` for the mining job (``--config mt-only``:
  translations, retrieval, exact scores, priors).
* ``concurrent`` (:func:`bench_concurrent`): two ``trie-mine`` processes start at once on the
  same target and the same (empty) trie cache: both must succeed, leave one cached trie, and
  write identical outputs.
* ``faults`` (issue 23, full mode only: about 80 s, :func:`bench_faults`): a Ray worker killed
  holding a shard, the driver killed between stages, a full disk while writing (a 1 MiB tmpfs,
  root only), line indexes and kNN indexes truncated or from another corpus, the merged
  embeddings truncated: ``faults_handled`` of ``faults_measured``.
* ``damage`` (issue 37, full mode only, :func:`bench_damage`): every file of the cache and the
  work directory damaged in place, truncated, emptied; a source sentence changed in place
  under ``--resume``: ``damage_silent_wrong``, ``damage_tracebacks``, ``damage_rows_lost``
  (each must be 0).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import benchlib

# the trie search alone (--config paper) and the mining job (--config mt-only: translations,
# retrieval, exact scores and priors, each stage resumable)
CONFIG_ARGS = {"paper": ("--config", "paper", "--pre-expansion", "--beam", "4",
                         "--batch-size", "4"),
               "job": ("--config", "mt-only", "--batch-size", "4"),
               "default": (),
               "ivf": ("--knn-index", "ivf"),
               "hnsw": ("--knn-index", "hnsw")}


def mine_cmd(model_dir, src, tgt, out, extra=(), config="paper") -> list:
    """The argv of ``trie-mine`` (this Python, :data:`CONFIG_ARGS` of ``config``, quiet) mining
    ``src`` against ``tgt`` into ``out``, then ``extra``."""
    return [sys.executable, "-c",
            "import sys; from triemine.cli import mine_main; sys.exit(mine_main())",
            *CONFIG_ARGS[config], "--model", str(model_dir), "--source", str(src), "--target",
            str(tgt), "-o", str(out), "-q", *extra]


def job_env(cache: Path) -> dict:
    """This process's environment with the cache ``cache`` and this checkout on the path."""
    return dict(os.environ, TRIEMINE_CACHE=str(cache), PYTHONPATH=str(benchlib.REPO))


def synthetic_corpora(base: Path, n: int, seed: int, others: int = 0, others_seed: int = 0):
    """``(base.src, base.tgt)`` written: ``n`` synthetic sources (at least 3 words), the
    translations of every other one, then ``others`` more targets (seeded ``others_seed``)."""
    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(n, seed=seed, min_len=3)
    more = synthetic_pairs(others, seed=others_seed)
    return (benchlib.write_lines(f"{base}.src", [s for s, _ in pairs]),
            benchlib.write_lines(f"{base}.tgt", [t for _, t in pairs[::2] + more]))


def bench_kill(model_dir, work: Path, kills: int, rng: random.Random, n_sources: int,
               config: str = "paper") -> dict:
    """SIGKILL ``trie-mine --config <config>`` at random moments, resume until it finishes, and
    compare with an uninterrupted run (each episode starts with an empty cache of translations
    and priors, so that every stage is interrupted somewhere)."""
    src, tgt = synthetic_corpora(work / "k", n_sources, 11, 400, 12)
    cache = work / f"kill-cache-{config}"
    ref = work / f"ref-{config}.tsv"
    with benchlib.timer() as t:
        subprocess.run(mine_cmd(model_dir, src, tgt, ref, config=config), check=True,
                       env=job_env(work / f"ref-cache-{config}"), stderr=subprocess.DEVNULL)
    full_s = t.s
    out = work / f"killed-{config}.tsv"
    ref_bytes = ref.read_bytes()
    rc = Counter(ref_bytes.decode("utf-8").splitlines())
    killed = runs = episodes = lost = dup = 0
    identical = True
    while killed < kills:  # an episode: start afresh, kill at random moments, resume until done
        episodes += 1
        for suffix in ("", ".progress", ".meta.json"):
            Path(str(out) + suffix).unlink(missing_ok=True)
        shutil.rmtree(str(out) + ".work", ignore_errors=True)
        for sub in ("translations", "priors"):
            shutil.rmtree(cache / sub, ignore_errors=True)
        resume = False
        while True:
            argv = mine_cmd(model_dir, src, tgt, out, ("--resume",) if resume else (), config)
            proc = subprocess.Popen(argv, env=job_env(cache), stderr=subprocess.DEVNULL)
            runs += 1
            if killed < kills:
                time.sleep(rng.uniform(0.05, 1.0) * full_s)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    killed += 1
                    resume = resume or Path(str(out) + ".progress").exists() or \
                        Path(str(out) + ".work").exists()
                    continue
            if proc.wait() != 0:
                raise RuntimeError("trie-mine --resume failed")
            break
        got = out.read_bytes()
        gc = Counter(got.decode("utf-8").splitlines())
        lost += sum((rc - gc).values())
        dup += sum((gc - rc).values())
        identical = identical and got == ref_bytes
    p = "" if config == "paper" else f"{config}_"
    return {f"{p}kills": killed, f"{p}runs": runs, f"{p}episodes": episodes,
            f"{p}rows": sum(rc.values()) - 1, f"{p}rows_lost": lost, f"{p}rows_duplicated": dup,
            f"{p}identical": identical, f"{p}uninterrupted_s": round(full_s, 2)}


def bench_concurrent(model_dir, work: Path, n_targets: int) -> dict:
    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(40, seed=21, min_len=3)
    src = benchlib.write_lines(work / "c.src", [s for s, _ in pairs])
    tgt = benchlib.write_lines(work / "c.tgt", [t for _, t in synthetic_pairs(n_targets, seed=22)
                                                + pairs])
    cache = work / "shared-cache"
    outs = [work / "c1.tsv", work / "c2.tsv"]
    procs = [subprocess.Popen(mine_cmd(model_dir, src, tgt, o), env=job_env(cache),
                              stderr=subprocess.PIPE) for o in outs]
    codes = [p.wait() for p in procs]
    tries = sorted(p.name for p in (cache / "tries").iterdir()) \
        if (cache / "tries").is_dir() else []
    return {"concurrent_exit_codes": codes,
            "concurrent_cached_tries": sum(1 for t in tries if t.endswith(".trie")),
            "concurrent_leftover_files": [t for t in tries if not t.endswith(".trie")],
            "concurrent_identical": all(o.is_file() for o in outs) and
            outs[0].read_bytes() == outs[1].read_bytes()}


def run_job(model_dir, src, tgt, out, cache, *extra, faults=None, timeout=600):
    env = job_env(cache)
    if faults is not None:
        env["TRIEMINE_TEST_FAULTS"] = json.dumps(faults)
    return subprocess.run(mine_cmd(model_dir, src, tgt, out, extra, config="default"), env=env,
                          capture_output=True, text=True, timeout=timeout)


def clean_refusal(proc) -> bool:
    """A run that failed the way a user should see it: exit 2, one error line, no traceback."""
    return proc.returncode == 2 and "Traceback" not in proc.stderr and "error:" in proc.stderr


def bench_faults(model_dir, work: Path, n_sources: int = 60) -> dict:
    """The default job's faults (issue 23), each 1 when handled: the output equals the
    uninterrupted run's, or the run stops with a clear error and resumes to that output.

    * ``ray_worker_killed``: ``--ray local --workers 2``, a worker SIGKILLs itself holding its
      first shard (``TRIEMINE_TEST_FAULTS``); Ray restarts it and the shard is redone.
    * ``driver_killed_between_stages``: ``--workers 2``, the driver's process group SIGKILLed as
      soon as the merged target embeddings appear; ``--resume`` reuses the embedding shards.
    * ``full_disk``: the output directory on a 1 MiB tmpfs (root only): the run stops with an
      error naming the file it could not write; grown to 64 MiB, ``--resume`` finishes it.
    * ``line_index_truncated`` / ``line_index_foreign``: the target's line index cut short, or
      replaced by the source's: a warning names it, it is rebuilt, the output is unchanged.
    * ``ivf_index_truncated`` / ``ivf_index_foreign`` (``--knn-index ivf``): the same for the
      kNN index in the job's work directory, with ``--resume``.
    * ``hnsw_graph_truncated`` / ``hnsw_graphs_foreign`` (``--knn-index hnsw``): a graph file
      cut short, or the forward search's graphs replaced by the backward search's: a warning
      names the file, the graphs are built again, the output is unchanged.
    * ``embeddings_truncated``: the merged embeddings cut short: merged again from the shards.
    """
    from triemine.distributed.shards import read_done  # the finished shards, their times

    src, tgt = synthetic_corpora(work / "f", n_sources, 31, 240, 32)
    res: dict = {}

    def job(name, *extra, cache=None, faults=None, out=None):
        out = out or work / f"{name}.tsv"
        return out, run_job(model_dir, src, tgt, out, cache or work / f"cache-{name}", *extra,
                             faults=faults)

    ref, p = job("f-ref")
    if p.returncode:
        raise RuntimeError(f"reference run failed:\n{p.stderr[-2000:]}")
    want = ref.read_bytes()

    # a Ray worker killed holding a shard
    fdir = work / "faults"
    fdir.mkdir(exist_ok=True)
    out, p = job("f-ray", "--ray", "local", "--workers", "2",
                 faults={"dir": str(fdir), "kill": [0]})
    res["ray_worker_killed"] = int(p.returncode == 0 and out.read_bytes() == want
                                   and any(fdir.glob("*kill*")))

    # the driver killed between stages (after the embeddings, before the exact scores)
    out = work / "f-kill.tsv"
    proc = subprocess.Popen(mine_cmd(model_dir, src, tgt, out, ("--workers", "2"),
                                     config="default"), env=job_env(work / "cache-f-kill"),
                            stderr=subprocess.DEVNULL, start_new_session=True)
    merged = Path(str(out) + ".work") / "emb.use.tgt.npy"
    while proc.poll() is None and not merged.exists():
        time.sleep(0.01)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    emb = Path(str(out) + ".work") / "emb.use.tgt.npy.shards"
    before = read_done(emb)
    _, p = job("f-kill", "--workers", "2", "--resume", out=out)
    res["driver_killed_between_stages"] = int(killed and p.returncode == 0 and
                                              out.read_bytes() == want and
                                              read_done(emb) == before and bool(before))

    # a full disk while writing a shard
    if os.geteuid() == 0 and shutil.which("mount"):
        fs = work / "small-fs"
        fs.mkdir()
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                             str(fs)]).returncode == 0
        if ok:
            try:
                out = fs / "full.tsv"
                _, p1 = job("f-full", out=out)
                res["full_disk_error"] = p1.stderr.strip().splitlines()[-1][:300] \
                    if p1.stderr else ""
                subprocess.run(["mount", "-o", "remount,size=64m", str(fs)], check=True)
                _, p2 = job("f-full", "--resume", out=out)
                res["full_disk"] = int(clean_refusal(p1) and str(fs) in p1.stderr
                                       and "No space left on device" in p1.stderr
                                       and p2.returncode == 0 and out.read_bytes() == want)
            finally:
                subprocess.run(["umount", str(fs)])
        else:
            res["full_disk"] = "not measured: mounting a tmpfs failed"
    else:
        res["full_disk"] = "not measured: mounting a tmpfs needs root"

    # line indexes: truncated, then another corpus's
    from triemine.io.lineindex import index_path
    cache = work / "cache-f-ref"
    idx_t, idx_s = (index_path(x, "auto", cache / "lines") for x in (tgt, src))
    idx_t.write_bytes(idx_t.read_bytes()[:-7])
    out, p = job("f-li1", cache=cache)
    res["line_index_truncated"] = int(p.returncode == 0 and out.read_bytes() == want and
                                      "truncated" in p.stderr and idx_t.name in p.stderr)
    shutil.copy(idx_s, idx_t)
    out, p = job("f-li2", cache=cache)
    res["line_index_foreign"] = int(p.returncode == 0 and out.read_bytes() == want and
                                    "another corpus" in p.stderr and idx_t.name in p.stderr)

    def killed_after_knn(out):  # the job's candidate stores removed: a resume must read the
        for d in Path(str(out) + ".work").glob("*.cols"):  # index again (a job that had scored
            shutil.rmtree(d)                               # its candidates would not need it)

    # the kNN index: truncated, then another database's (the backward search's index)
    ivf_ref, p = job("f-ivf", "--knn-index", "ivf")
    want_ivf = ivf_ref.read_bytes() if p.returncode == 0 else None
    fwd = Path(str(ivf_ref) + ".work") / "knn.use.fwd.ivf" / "index.faiss"
    bwd = Path(str(ivf_ref) + ".work") / "knn.use.bwd.ivf" / "index.faiss"
    fwd.write_bytes(fwd.read_bytes()[:-100])
    killed_after_knn(ivf_ref)
    _, p = job("f-ivf", "--knn-index", "ivf", "--resume", out=ivf_ref)
    res["ivf_index_truncated"] = int(p.returncode == 0 and ivf_ref.read_bytes() == want_ivf and
                                     "truncated or replaced" in p.stderr and str(fwd) in p.stderr)
    for f in ("index.faiss", "index.json"):
        shutil.copy(bwd.parent / f, fwd.parent / f)
    killed_after_knn(ivf_ref)
    _, p = job("f-ivf", "--knn-index", "ivf", "--resume", out=ivf_ref)
    res["ivf_index_foreign"] = int(p.returncode == 0 and ivf_ref.read_bytes() == want_ivf and
                                   "another database" in p.stderr and str(fwd) in p.stderr)

    # an HNSW graph truncated, then another database's graphs (the backward search's)
    hnsw_ref, p = job("f-hnsw", "--knn-index", "hnsw")
    want_hnsw = hnsw_ref.read_bytes() if p.returncode == 0 else None
    fwd = Path(str(hnsw_ref) + ".work") / "knn.use.fwd.hnsw"
    bwd = Path(str(hnsw_ref) + ".work") / "knn.use.bwd.hnsw"
    graph = fwd / "shard-000000.faiss"
    graph.write_bytes(graph.read_bytes()[:-100])
    killed_after_knn(hnsw_ref)
    _, p = job("f-hnsw", "--knn-index", "hnsw", "--resume", out=hnsw_ref)
    res["hnsw_graph_truncated"] = int(p.returncode == 0 and hnsw_ref.read_bytes() == want_hnsw
                                      and "truncated" in p.stderr and str(graph) in p.stderr)
    shutil.rmtree(fwd)
    shutil.copytree(bwd, fwd)
    killed_after_knn(hnsw_ref)
    _, p = job("f-hnsw", "--knn-index", "hnsw", "--resume", out=hnsw_ref)
    res["hnsw_graphs_foreign"] = int(p.returncode == 0 and hnsw_ref.read_bytes() == want_hnsw
                                     and "another database" in p.stderr
                                     and str(fwd / "manifest.json") in p.stderr)

    # the merged embeddings truncated
    merged = Path(str(ref) + ".work") / "emb.use.tgt.npy"
    merged.write_bytes(merged.read_bytes()[:-4096])
    _, p = job("f-ref", "--resume", out=ref)
    res["embeddings_truncated"] = int(p.returncode == 0 and ref.read_bytes() == want)
    res["faults_handled"] = sum(v for v in res.values() if isinstance(v, int))
    res["faults_measured"] = sum(1 for v in res.values() if isinstance(v, int)) - 1
    return res


def _damage(path: Path, how: str, rng: random.Random) -> bool:
    """``same-size``: up to 64 bytes in the file's middle each XOR-ed with a nonzero byte (the size
    kept, the bytes surely changed); ``truncated``: half of it; ``emptied``: nothing left.  False
    when the file cannot be damaged that way (an empty file)."""
    data = path.read_bytes()
    if not data:
        return False
    if how == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif how == "emptied":
        path.write_bytes(b"")
    else:
        mid = len(data) // 2
        n = max(1, min(64, len(data) - mid))
        flip = bytes(a ^ rng.randrange(1, 256) for a in data[mid:mid + n])
        path.write_bytes(data[:mid] + flip + data[mid + n:])
    return True


def _damage_kind(path: Path, cache: Path, out: Path) -> str:
    """What a damaged file is, for the per-kind counts: ``cache/<folder>``, ``work/<name>``
    (``*.cols/`` and ``*.shards/`` files by their folder's suffix), ``out/<suffix>``."""
    if cache in path.parents:
        return "cache/" + path.relative_to(cache).parts[0]
    rel = path.relative_to(out.parent).parts
    if len(rel) == 1:
        return "out/" + (rel[0][len(out.name):] or "tsv")
    inner = rel[1:]
    if len(inner) > 1:
        folder = inner[0].rsplit(".", 1)[-1]
        return f"work/{folder}/" + ("file" if folder == "cols" else re.sub(r"\d+", "N", inner[-1]))
    return "work/" + re.sub(r"\.[0-9a-f]{16}\.", ".H.", inner[0])


def _as_logged(root: Path) -> int:
    """Every shard manifest under ``root`` turned into the state of a driver killed before it
    folded its log: ``manifest.json`` with no shard done, each shard a line of ``manifest.log``
    (:mod:`triemine.distributed.shards`'s format).  Returns the number of logs written."""
    from triemine.io.checksum import json_crc32
    from triemine.distributed import shards

    n = 0
    for manifest in root.rglob(shards.MANIFEST):
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        doc.pop("manifest_crc32")
        if not doc["done"]:
            continue
        empty = {"key": doc["key"], "done": {}}
        manifest.write_text(json.dumps(dict(empty, manifest_crc32=json_crc32(empty))))
        lines = []
        for k, entry in doc["done"].items():
            entry = dict(entry, id=int(k))
            lines.append(json.dumps(dict(entry, line_crc32=json_crc32(entry))) + "\n")
        (manifest.parent / shards.LOG).write_text("".join(lines))
        n += 1
    return n


def _forked_mine(argv, cache: Path, log: Path) -> int:
    """``trie-mine ARGV`` in a forked child (the parent has imported the package, so a run costs
    its work, not the imports; the child starts from the parent's state, which ran no job), its
    stderr in ``log``; an exception that escapes the CLI is printed as a traceback there.
    Returns the exit status."""
    pid = os.fork()
    if pid == 0:  # child
        rc = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 2)
            os.dup2(fd, 1)
            sys.stderr = open(2, "w", closefd=False)
            os.environ["TRIEMINE_CACHE"] = str(cache)
            from triemine.cli import mine_main
            try:
                rc = mine_main(list(argv))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # what the user would see: a traceback
                import traceback
                traceback.print_exc()
                rc = 1
        finally:
            sys.stderr.flush()
            os._exit(rc)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def bench_damage(model_dir, work: Path, rng: random.Random, n_sources: int = 24,
                 configs=("job", "paper", "default", "ivf", "hnsw")) -> dict:
    """Issue 37: every file a run leaves (its cache, work directory, shards and sidecars, and the
    TSV) damaged three ways (same size, truncated, emptied), one at a time from a snapshot of the
    undamaged run, then the job run again with ``--resume``; and a source sentence changed in
    place (same size, mtime restored) under ``--resume``.  The shard manifests are damaged a
    second time as logs (:func:`_as_logged`: each shard a line of ``manifest.log``).  Per
    configuration (``job``: mt-only; ``paper``: the trie search; ``default``: combined; ``ivf``,
    ``hnsw``: combined with that kNN index): ``silent_wrong`` (exit 0, TSV or bitext not the
    undamaged run's), ``tracebacks``, ``rows_lost`` (an exit 0 with fewer rows), ``refused``
    (exit 2), ``warned`` (a warning named the file), ``unwarned`` (exit 0, the file was damaged,
    read again — changed by the run — and no warning named it; the TSVs a run writes whole, the
    output and the deduplicated job's ``OUT.dedup/unique.tsv``, are not counted), ``cases``
    and ``damaged`` (files damaged per kind).  Runs are forked from this process (no
    interpreter start per run)."""
    import triemine.cli  # noqa: F401  imported once, before the forks
    import triemine.api  # noqa: F401
    from triemine.mining.dedup import DEDUP_SUFFIX, JOB_TSV
    from triemine.io.tsv import META_SUFFIX

    res = {}
    for config in configs:
        root = work / f"damage-{config}"
        live, snap = root / "live", root / "snap"
        live.mkdir(parents=True)
        src, tgt = synthetic_corpora(root / "d", n_sources, 37)
        cache, out, log = live / "cache", live / "d.tsv", root / "stderr.txt"
        argv = mine_cmd(model_dir, src, tgt, out, ("--bitext", str(live / "d.bitext")),
                        config=config)[3:]

        def run(*extra):
            return _forked_mine(argv + list(extra), cache, log)
        if run() != 0:
            res[config] = "reference run failed: " + log.read_text()[-2000:]
            continue
        want, want_bitext = out.read_bytes(), (live / "d.bitext").read_bytes()
        shutil.copytree(live, snap, symlinks=True)
        logged = root / "logged"
        shutil.copytree(live, logged, symlinks=True)
        _as_logged(logged)
        files = sorted((p.relative_to(live), snap) for p in live.rglob("*")
                       if p.is_file() and not p.name.endswith(".lock") and p.name != "d.bitext")
        files += sorted((p.relative_to(logged), logged) for p in logged.rglob("manifest.log"))
        counts = {"cases": 0, "silent_wrong": 0, "tracebacks": 0, "rows_lost": 0, "refused": 0,
                  "warned": 0, "unwarned": 0, "damaged": {}}
        for rel, base in files:
            kind = _damage_kind(live / rel, cache, out)
            for how in ("same-size", "truncated", "emptied"):
                shutil.rmtree(live)
                shutil.copytree(base, live, symlinks=True)
                path = live / rel
                if not _damage(path, how, rng):
                    continue
                bad = path.read_bytes()
                counts["damaged"][kind] = counts["damaged"].get(kind, 0) + 1
                rc = run("--resume")
                err = log.read_text(errors="replace")
                counts["cases"] += 1
                tb = "Traceback" in err or rc not in (0, 2)
                counts["tracebacks"] += tb
                counts["refused"] += rc == 2
                named = path.name in err or str(rel) in err
                counts["warned"] += named
                if rc == 2:
                    print(f"refused: {config} {how} {rel}: {err.strip().splitlines()[-1]}",
                          file=sys.stderr)
                got = out.read_bytes() if out.is_file() else b""
                wrong = rc == 0 and (got != want or (live / "d.bitext").read_bytes() != want_bitext)
                counts["silent_wrong"] += wrong
                counts["rows_lost"] += rc == 0 and got.count(b"\n") < want.count(b"\n")
                reread = not path.exists() or path.read_bytes() != bad
                rewritten = path in (out, live / (out.name + DEDUP_SUFFIX) / JOB_TSV)
                if rc == 0 and not wrong and reread and not named and not rewritten \
                        and not path.name.endswith(META_SUFFIX):
                    counts["unwarned"] += 1
                    print(f"unwarned: {config} {how} {rel}", file=sys.stderr)
                if wrong or tb:
                    print(f"{'silent wrong' if wrong else 'traceback'}: {config} {how} {rel} "
                          f"(exit {rc})\n{err[-1500:]}", file=sys.stderr)
        # a source sentence changed in place, same size, mtime restored, then --resume
        shutil.rmtree(live)
        shutil.copytree(snap, live, symlinks=True)
        data = src.read_bytes()
        st = os.stat(src)
        lines = data.split(b"\n")
        rows = want.split(b"\n")[1:-1]  # a source with rows in the TSV: its first two words
        line = int(rows[len(rows) // 2].split(b"\t")[0]) - 1  # swapped (same size, same words)
        words = lines[line].split(b" ")
        j = next(i for i in range(1, len(words)) if words[i] != words[0]
                 and len(words[i]) == len(words[0]))
        words[0], words[j] = words[j], words[0]
        lines[line] = b" ".join(words)
        changed = b"\n".join(lines)
        assert len(changed) == len(data) and changed != data
        src.write_bytes(changed)
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
        rc = run("--resume")
        err = log.read_text(errors="replace")
        resumed = out.read_bytes()
        shutil.rmtree(live)
        live.mkdir()
        fresh_rc = run()
        counts["cases"] += 1
        tb = "Traceback" in err or rc not in (0, 2)
        counts["tracebacks"] += tb
        wrong = rc == 0 and resumed != out.read_bytes()
        counts["silent_wrong"] += wrong
        if wrong or tb:
            print(f"content change: {config} exit {rc}\n{err[-1500:]}", file=sys.stderr)
        fresh = out.read_bytes()  # the change shows in a fresh run; the resume refused or agreed
        counts["content_change_refused_or_recomputed"] = int(
            fresh_rc == 0 and fresh != want and (rc == 2 or resumed == fresh))
        res[config] = counts
        shutil.rmtree(root, ignore_errors=True)
    done = [c for c in res.values() if isinstance(c, dict)]
    res["damage_silent_wrong"] = sum(c["silent_wrong"] for c in done)
    res["damage_tracebacks"] = sum(c["tracebacks"] for c in done)
    res["damage_rows_lost"] = sum(c["rows_lost"] for c in done)
    res["damage_cases"] = sum(c["cases"] for c in done)
    res["damage_configs_run"] = len(done)
    res["damage_configs"] = len(configs)
    return res
