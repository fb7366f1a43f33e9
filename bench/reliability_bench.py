#!/usr/bin/env python3
"""Reliability: damaged inputs never crash, an interrupted run resumes exactly, concurrent runs
agree.

Measurements (issue 9 and later), each a count that must be 0 (or true):

1. **Trie files**: byte flips, truncations, random headers, random bytes and a valid file of
   another format version, written as files and loaded as ``trie-mine --trie`` loads them
   (``triemine.decoding.task.load_trie_for_dict``), then queried. ``trie_crashes`` counts every
   outcome other than a clean load or an ``InputError`` (what the CLI turns into exit 2).
2. **Text inputs**: mining TSVs, gold files, corpora and thresholds files mutated the same way and
   given to ``trie-mine-eval`` / ``trie-mine-filter`` in-process. ``text_tracebacks`` counts
   exceptions that escaped the CLI (a traceback for the user); exit codes must be 0 or 2.
3. **Kill and resume**: ``trie-mine`` (tiny model, a subprocess) is killed with SIGKILL at random
   moments and resumed with ``--resume`` until it finishes; the output is compared with an
   uninterrupted run: ``rows_lost``, ``rows_duplicated``, ``identical`` for the trie search
   (``--config paper``) and ``job_rows_lost``, ``job_rows_duplicated``, ``job_identical`` for the
   mining job (``--config mt-only``: translations, retrieval, exact scores, priors).
4. **Concurrent runs**: two ``trie-mine`` processes start at once on the same target and the same
   (empty) trie cache: both must succeed, leave one cached trie, and write identical outputs.
5. **Faults of the sharded default job** (issue 23, full mode only: about 80 s): a Ray worker
   killed holding a shard, the driver killed between stages, a full disk while writing (a
   1 MiB tmpfs, root only), line indexes and kNN indexes truncated or from another corpus, the
   merged embeddings truncated (:func:`bench_faults`): ``faults_handled`` of ``faults_measured``.
6. **Content digests** (issue 37, :func:`bench_digest`): SHA-256 GB/s on a synthetic file,
   extrapolated to 10^8 lines a side; the sample's corpora hashed uncached and cached.
7. **Damaged caches and work files** (issue 37, full mode only, :func:`bench_damage`): every
   file of the cache and the work directory damaged in place, truncated, emptied; a source
   sentence changed in place under ``--resume``: ``damage_silent_wrong``, ``damage_tracebacks``,
   ``damage_rows_lost`` (each must be 0).
8. **What the tools write** (issue 37, :func:`bench_trust`, about a minute): outputs equal to
   inputs for every tool (hard and symbolic links too), the Python API's bad items and
   arguments and a tab inside a sentence, devices this machine lacks, ``--workers 16`` on a
   job of one shard, the output lock (live and stale), writes into a missing folder and onto
   a full disk, cut or unfinished mining TSVs, a TSV corpus that lost most tabs: each case
   ``ok``, ``silent_wrong`` or ``traceback``; ``trust_silent_wrong``, ``trust_traceback``,
   ``trust_inputs_overwritten`` and ``trust_rows_lost`` must be 0.  Issue 46 adds the families
   ``dedup`` (the default job's ``OUT.tsv.dedup/`` files damaged keeping their size: the same
   output and a warning naming the file), ``compressed`` (outputs named ``.gz``/``.xz``/``.zst``
   compressed or refused before any work; compressed mining TSVs read), ``zstd`` (compressed
   corpora damaged in the middle, zstd without a content checksum too), ``ranges`` (flags out of
   range, empty or of the wrong kind, refused before the model loads; ``--target-shards`` far
   beyond a tiny target, a subprocess with a 120 s guard: ``trust_hang`` must be 0) and ``late``
   (refusals that came after the job, the bitext lock, eval and filter without a sidecar).
9. **A Ray cluster started with ``ray start``** (issue 42, full mode only: about a minute): two
   nodes with token authentication on loopback addresses; ``--ray ADDRESS`` with no cluster, no
   token, a wrong token, a silent port: one line, exit 2, ``ray_connect_failure_s`` at most 30;
   a node SIGKILLed mid-job: ``ray_node_lost`` 1 when the output is the uninterrupted bytes
   (:func:`bench_ray_cluster`).

Half of the damaged trie files keep valid checksums (the payload is damaged and both checksums
recomputed), so that the structural checks, not the CRC, must catch them.

``--quick`` (about a minute on an idle box once the tiny model is cached; most of it is starting
``trie-mine`` processes): 1,000 trie files, 250 text files, 2 kills of each configuration while
mining 100 sources, a 500-line target for the concurrent runs. Full: 10,000 trie files, 2,000
text files, 20 kills of each over 400 sources, a 5,000-line target. Last line: one JSON object.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import benchlib  # noqa: E402
from benchlib import cached_tiny_model, machine  # noqa: E402
from reliability_judge import bench_judge  # noqa: E402

import numpy as np  # noqa: E402


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random damage: byte flips, a truncation, a random header, or random bytes."""
    kind = rng.randrange(5)
    b = bytearray(data)
    if kind == 0 and b:  # flip 1-8 bytes
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= rng.randint(1, 255)
    elif kind == 1:  # truncate
        b = b[:rng.randrange(max(len(b), 1))]
    elif kind == 2:  # random header bytes
        n = min(len(b), rng.randint(8, 96))
        b[:n] = bytes(rng.randrange(256) for _ in range(n))
    elif kind == 3:  # insert or delete a run of bytes
        i = rng.randrange(max(len(b), 1))
        if rng.random() < 0.5:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            del b[i:i + rng.randint(1, 16)]
    else:  # random bytes of a random length
        b = bytearray(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    return bytes(b)


# -- 1. trie files -------------------------------------------------------------------------------

def bench_tries(model, work: Path, n: int, rng: random.Random) -> dict:
    import struct
    import zlib

    from triemine.decoding.task import load_trie_for_dict
    from triemine.errors import InputError
    from triemine.trie import Trie
    from triemine.trie.fileformat import _HEADER

    seqs = [model.encode_target(t).tolist() for t in ("ta tb", "ta tc td", "te", "tf tg th ti")]
    good = work / "good.trie"
    Trie.build(seqs, eos=model.tgt_dict.eos(), metadata={
        "dict_size": len(model.tgt_dict)}).save(good)
    data = good.read_bytes()
    fields = list(_HEADER.unpack(data[:_HEADER.size]))
    fields[1] += 1  # a valid file of another format version
    head = _HEADER.pack(*fields)
    other_version = head[:-4] + struct.pack("<I", zlib.crc32(head[:-4])) + data[_HEADER.size:]
    def with_checksums(content: bytes) -> bytes:
        """Damage the payload only and recompute both checksums: what a buggy or hostile
        writer produces, which only the structural checks can catch."""
        body = bytearray(mutate(content[_HEADER.size:],
                                rng) if rng.random() < 0.5 else content[_HEADER.size:])
        if body:
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
        f = list(_HEADER.unpack(content[:_HEADER.size]))
        f[9] = zlib.crc32(bytes(body))
        h = _HEADER.pack(*f)
        return h[:-4] + struct.pack("<I", zlib.crc32(h[:-4])) + bytes(body)

    path = work / "bad.trie"
    outcome = {"clean_error": 0, "loaded": 0, "crashes": 0}
    examples = []
    for i in range(n):
        content = (other_version if i == 0 else
                   with_checksums(data) if i % 2 else mutate(data, rng))
        path.write_bytes(content)
        try:
            trie = load_trie_for_dict(path, model.tgt_dict)
            nodes = np.arange(trie.n_nodes)
            trie.children_many(nodes)
            trie.step_many(nodes, np.full(trie.n_nodes, seqs[0][0]))
            list(trie)
            outcome["loaded"] += 1
        except InputError:
            outcome["clean_error"] += 1
        except Exception as exc:  # noqa: BLE001 - what we count
            outcome["crashes"] += 1
            if len(examples) < 5:
                examples.append(f"{type(exc).__name__}: {exc}")
    return {"trie_files": n, "trie_crashes": outcome["crashes"], "trie_clean_errors":
            outcome["clean_error"], "trie_loaded": outcome["loaded"],
            "trie_crash_examples": examples}


# -- 2. text inputs ------------------------------------------------------------------------------

def bench_text(work: Path, n: int, rng: random.Random) -> dict:
    import contextlib
    import io

    from triemine.cli import eval_main, filter_main

    d = work / "bucc"
    d.mkdir(exist_ok=True)
    zh = "".join(f"zh-{i}\t中文句子{i}。\n" for i in range(1, 9))
    en = "".join(f"en-{i}\tEnglish sentence {i}.\n" for i in range(1, 9))
    gold = "zh-1\ten-1\nzh-2\ten-2\nzh-3\ten-3\n"
    header = "src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt\tpmi\n"
    rows = "".join(f"zh-{i}\ten-{j}\t{-i - j:.3f}\t{(i + j) / 4:.3f}\t{(i + j) / 5:.3f}\t"
                   f"中文句子{i}。\tEnglish sentence {j}.\t{2.0 - (i != j):.2f}\n"
                   for i in range(1, 9) for j in (i, i % 8 + 1))
    thresholds = json.dumps({"version": 1, "filter": "ce", "rule": "best-per-source",
                             "rank_by": "ce_word", "thresholds": {"zh-en": {"ce_word": 2.5}}})
    originals = {"zh-en.t.zh": zh, "zh-en.t.en": en, "zh-en.t.gold": gold, "m.tsv": header + rows,
                 "th.json": thresholds}

    def write_all(skip=None):
        for name, text in originals.items():
            if name != skip:
                (d / name).write_bytes(text.encode("utf-8"))

    def calls():
        g, m, th = str(d / "zh-en.t.gold"), str(d / "m.tsv"), str(d / "th.json")
        return [lambda: eval_main([m, "--gold", g, "--filter", "ce", "--folds", "2"]),
                lambda: eval_main([m, "--gold", g, "--filter", "ce", "--thresholds", th]),
                lambda: eval_main([m, "--gold", g, "--filter", "pmi", "--rule", "one-to-one",
                                   "--rank-by", "pmi"]),
                lambda: filter_main([m, "--thresholds", th, "-o", str(d / "out.tsv")])]

    tracebacks, bad_codes, codes = 0, 0, {}
    examples = []
    names = list(originals)
    for i in range(n):
        target = names[i % len(names)]
        write_all()
        (d / target).write_bytes(mutate(originals[target].encode("utf-8"), rng))
        for call in calls():
            out = io.StringIO()
            try:
                with contextlib.redirect_stderr(out), contextlib.redirect_stdout(io.StringIO()):
                    code = call()
            except SystemExit as exc:  # argparse errors: exit 2 with a message
                code = exc.code
            except Exception as exc:  # noqa: BLE001 - a traceback for the user
                tracebacks += 1
                if len(examples) < 5:
                    examples.append(f"{target}: {type(exc).__name__}: {exc}")
                continue
            codes[code] = codes.get(code, 0) + 1
            if code not in (0, 2):
                bad_codes += 1
    return {"text_files": n, "text_calls": sum(codes.values()) + tracebacks,
            "text_tracebacks": tracebacks, "text_bad_exit_codes": bad_codes,
            "text_exit_codes": {str(k): v for k, v in sorted(codes.items(), key=str)},
            "text_traceback_examples": examples}


# -- 3. kill and resume, 4. concurrent runs ------------------------------------------------------

# the trie search alone (--config paper) and the mining job (--config mt-only: translations,
# retrieval, exact scores and priors, each stage resumable)
CONFIG_ARGS = {"paper": ("--config", "paper", "--pre-expansion", "--beam", "4",
                         "--batch-size", "4"),
               "job": ("--config", "mt-only", "--batch-size", "4"),
               "default": (),
               "ivf": ("--knn-index", "ivf"),
               "hnsw": ("--knn-index", "hnsw")}


def _mine_cmd(model_dir, src, tgt, out, extra=(), config="paper"):
    return [sys.executable, "-c",
            "import sys; from triemine.cli import mine_main; sys.exit(mine_main())",
            *CONFIG_ARGS[config], "--model", str(model_dir), "--source", str(src), "--target",
            str(tgt),
            "-o", str(out), "-q", *extra]


def _env(cache: Path) -> dict:
    return dict(os.environ, TRIEMINE_CACHE=str(cache), PYTHONPATH=str(REPO))


def bench_kill(model_dir, work: Path, kills: int, rng: random.Random, n_sources: int,
               config: str = "paper") -> dict:
    """SIGKILL ``trie-mine --config <config>`` at random moments, resume until it finishes, and
    compare with an uninterrupted run (each episode starts with an empty cache of translations
    and priors, so that every stage is interrupted somewhere)."""
    import shutil

    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(n_sources, seed=11, min_len=3)
    src, tgt = work / "k.src", work / "k.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs[::2]) +
                   "".join(t + "\n" for _, t in synthetic_pairs(400, seed=12)), encoding="utf-8")
    cache = work / f"kill-cache-{config}"
    ref = work / f"ref-{config}.tsv"
    with benchlib.timer() as t:
        subprocess.run(_mine_cmd(model_dir, src, tgt, ref, config=config), check=True,
                       env=_env(work / f"ref-cache-{config}"), stderr=subprocess.DEVNULL)
    full_s = t.s
    out = work / f"killed-{config}.tsv"
    ref_bytes = ref.read_bytes()
    from collections import Counter
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
            proc = subprocess.Popen(_mine_cmd(model_dir, src, tgt, out, ("--resume",
                                                                         ) if resume else (),
                                              config=config),
                                    env=_env(cache), stderr=subprocess.DEVNULL)
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
    src, tgt = work / "c.src", work / "c.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in synthetic_pairs(n_targets, seed=22)) +
                   "".join(t + "\n" for _, t in pairs), encoding="utf-8")
    cache = work / "shared-cache"
    outs = [work / "c1.tsv", work / "c2.tsv"]
    procs = [subprocess.Popen(_mine_cmd(model_dir, src, tgt, o), env=_env(cache),
                              stderr=subprocess.PIPE) for o in outs]
    codes = [p.wait() for p in procs]
    tries = sorted(p.name for p in (cache / "tries").iterdir()) \
        if (cache / "tries").is_dir() else []
    return {"concurrent_exit_codes": codes,
            "concurrent_cached_tries": sum(1 for t in tries if t.endswith(".trie")),
            "concurrent_leftover_files": [t for t in tries if not t.endswith(".trie")],
            "concurrent_identical": all(o.is_file() for o in outs) and
            outs[0].read_bytes() == outs[1].read_bytes()}


def _run_job(model_dir, src, tgt, out, cache, *extra, faults=None, timeout=600):
    env = _env(cache)
    if faults is not None:
        env["TRIEMINE_TEST_FAULTS"] = json.dumps(faults)
    return subprocess.run(_mine_cmd(model_dir, src, tgt, out, extra, config="default"), env=env,
                          capture_output=True, text=True, timeout=timeout)


def _clean(proc) -> bool:
    """A run that failed the way a user should see it: exit 2, one error line, no traceback."""
    return proc.returncode == 2 and "Traceback" not in proc.stderr and "error:" in proc.stderr


def _done_entries(shard_dir: Path) -> dict:
    """The manifest's finished shards (their ``finished`` times show whether they were redone)."""
    from triemine.distributed.shards import read_done

    return read_done(shard_dir)


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
    import shutil

    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(n_sources, seed=31, min_len=3)
    src, tgt = work / "f.src", work / "f.tgt"
    src.write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(b + "\n" for _, b in pairs[::2]) +
                   "".join(b + "\n" for _, b in synthetic_pairs(240, seed=32)), encoding="utf-8")
    res: dict = {}

    def job(name, *extra, cache=None, faults=None, out=None):
        out = out or work / f"{name}.tsv"
        return out, _run_job(model_dir, src, tgt, out, cache or work / f"cache-{name}", *extra,
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
    proc = subprocess.Popen(_mine_cmd(model_dir, src, tgt, out, ("--workers", "2"),
                                      config="default"), env=_env(work / "cache-f-kill"),
                            stderr=subprocess.DEVNULL, start_new_session=True)
    merged = Path(str(out) + ".work") / "emb.use.tgt.npy"
    while proc.poll() is None and not merged.exists():
        time.sleep(0.01)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    emb = Path(str(out) + ".work") / "emb.use.tgt.npy.shards"
    before = _done_entries(emb)
    _, p = job("f-kill", "--workers", "2", "--resume", out=out)
    res["driver_killed_between_stages"] = int(killed and p.returncode == 0 and
                                              out.read_bytes() == want and
                                              _done_entries(emb) == before and bool(before))

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
                res["full_disk"] = int(_clean(p1) and "No space left on device" in p1.stderr and
                                       str(fs) in p1.stderr and p2.returncode == 0 and
                                       out.read_bytes() == want)
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


# -- 8. what the tools write (issue 37) ----------------------------------------------------------

_outcome, _tally = benchlib.outcome, benchlib.tally  # one home: benchlib


def bench_trust(model_dir, work: Path, quick: bool = False) -> dict:
    """Issue 37's cases, each counted as ok, silent_wrong or traceback: outputs equal to inputs
    (every tool), the Python API's bad items and arguments, unknown devices, worker counts,
    the output lock, write failures (a missing folder, a full disk), cut mining TSVs and a TSV
    corpus that lost most of its tabs."""
    from triemine.testing.tiny_model import synthetic_pairs

    d = work / "trust"
    d.mkdir()
    pairs = synthetic_pairs(40, seed=5)
    src, tgt = d / "src.txt", d / "tgt.txt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    res: dict = {}
    examples: list = []

    def _trust_ranges_here(*a):
        return _trust_ranges(*a, quick=quick)
    cases = [_trust_outputs, _trust_api, _trust_devices, _trust_workers, _trust_lock,
             _trust_writes, _trust_cut_tsv, _trust_dedup, _trust_compressed, _trust_zstd,
             _trust_ranges_here, _trust_late, _trust_orientation, _trust_score_outputs,
             _trust_api_arguments]
    old_cache = os.environ.get("TRIEMINE_CACHE")
    os.environ["TRIEMINE_CACHE"] = str(d / "cache")
    try:
        for case in cases:
            try:
                case(model_dir, d, src, tgt, res, examples)
            except Exception as exc:  # noqa: BLE001 - the case itself crashed: a traceback
                res[f"{case.__name__.lstrip('_')}_traceback"] = 1
                examples.append(f"{case.__name__}: {type(exc).__name__}: {exc}"[:300])
    finally:
        if old_cache is None:
            os.environ.pop("TRIEMINE_CACHE", None)
        else:
            os.environ["TRIEMINE_CACHE"] = old_cache
    kinds = ("cases", "ok", "silent_wrong", "traceback", "hang", "inputs_overwritten",
             "rows_lost")
    for kind in kinds:
        res[f"trust_{kind}"] = sum(v for k, v in res.items() if k.endswith(f"_{kind}") and
                                   not k.startswith("trust_"))
    res["trust_examples"] = examples
    return res


def _paper(model_dir, src, tgt, out, *extra):
    from triemine.cli import mine_main
    return lambda: mine_main([*CONFIG_ARGS["paper"], "--model", str(model_dir), "--source",
                              str(src), "--target", str(tgt), "-o", str(out), "-q", *extra])


def _trust_outputs(model_dir, d, src, tgt, res, examples) -> None:
    """Every tool given an output that is one of its inputs (hard and symbolic links too)."""
    from triemine.cli import eval_main, filter_main, trie_build_main
    from triemine.io.tsv import write_rows

    (d / "hard.txt").unlink(missing_ok=True)
    os.link(src, d / "hard.txt")
    if not (d / "sym.txt").exists():
        (d / "sym.txt").symlink_to(tgt)
    mined = d / "m.tsv"
    cells = {"src_id": ["1", "2"], "tgt_id": ["1", "2"], "score": [-1.0, -2.0],
             "ce_word": [1.0, 2.0], "ce_token": [1.0, 2.0], "src": ["a", "b"], "tgt": ["c", "e"]}
    write_rows(mined, list(cells), cells, meta={"mode": "pre"})
    gold = d / "zh-en.t.gold"
    gold.write_text("1\t1\n")
    for name in ("zh-en.t.zh", "zh-en.t.en"):
        (d / name).write_text("1\ta\n2\tb\n")
    (d / "o.tsv.work").mkdir(exist_ok=True)
    inner = d / "o.tsv.work" / "src.txt"
    inner.write_bytes(src.read_bytes())
    ckpt = Path(model_dir) / "checkpoint.pt"
    inputs = [src, tgt, mined, Path(str(mined) + ".meta.json"), gold, d / "zh-en.t.zh", inner,
              ckpt]
    before = {p: p.read_bytes() for p in inputs}
    both = lambda err: "must not be an input" in err or "different files" in err  # noqa: E731
    o = d / "o.tsv"
    calls = {
        "mine -o=source": _paper(model_dir, src, tgt, src),
        "mine -o=target": _paper(model_dir, src, tgt, tgt),
        "mine -o=hardlink(source)": _paper(model_dir, src, tgt, d / "hard.txt"),
        "mine -o=symlink(target)": _paper(model_dir, src, tgt, d / "sym.txt"),
        "mine --bitext=-o": _paper(model_dir, src, tgt, o, "--bitext", str(o)),
        "mine --bitext=source": _paper(model_dir, src, tgt, o, "--bitext", str(src)),
        "mine --bitext=-o.meta.json": _paper(model_dir, src, tgt, o, "--bitext",
                                             str(o) + ".meta.json"),
        "mine -o=checkpoint": _paper(model_dir, src, tgt, ckpt),
        "mine source in -o.work": _paper(model_dir, inner, tgt, o),
        "filter -o=mined": lambda: filter_main([str(mined), "--ce-max", "9", "-o", str(mined)]),
        "filter --bitext=mined.meta": lambda: filter_main([str(mined), "--ce-max", "9",
                                                           "--bitext", str(mined) + ".meta.json"]),
        "eval --json=gold": lambda: eval_main([str(mined), "--gold", str(gold), "--json",
                                               str(gold)]),
        "eval --save-thresholds=corpus": lambda: eval_main([str(mined), "--gold", str(gold),
                                                            "--save-thresholds",
                                                            str(d / "zh-en.t.zh")]),
        "trie-build -o=corpus": lambda: trie_build_main([str(tgt), "-o", str(tgt), "--spm",
                                                         str(Path(model_dir) / "target.spm"),
                                                         "--dict", str(ckpt)]),
    }
    _tally(res, "outputs", [(n, *_outcome(c, True, both)) for n, c in calls.items()], before,
           examples)


def _trust_api(model_dir, d, src, tgt, res, examples) -> None:
    """``triemine.mine`` given bad items and arguments, and a tab inside a sentence (kept as
    text: the ids are the items' positions, the text the whole item)."""
    import triemine

    targets = [t for t in tgt.read_text(encoding="utf-8").splitlines()]
    bad = {"items: None": ([None], {}), "items: int": ([3], {}), "items: bytes": ([b"x"], {}),
           "items: newline": (["a\nb"], {}), "items: empty list": ([], {}),
           "source: bytes": (b"path", {}), "threshold: str": (["a"],
                                                              {"threshold": {"combined": "abc"}}),
           "threshold: nan": (["a"], {"threshold": {"combined": float("nan")}}),
           "option: unknown": (["a"], {"bream": 3}), "option: workers str": (["a"],
                                                                             {"workers": "2"})}
    outcomes = []
    for name, (source, kw) in bad.items():
        named = name.split(":")[0].replace("items", "source")
        kind, text = _outcome(lambda: triemine.mine(source, targets, model=model_dir, **kw), True,
                              lambda err: named.split()[0] in err and "triemine-" not in err)
        outcomes.append((name, kind, text))
    sources = [s for s in src.read_text(encoding="utf-8").splitlines()][:8]
    sources[3] = "id3\t" + sources[3]

    def tab():
        r = triemine.mine(sources, targets, model=model_dir, config="paper",
                          threshold={"ce_word": 1e9}, max_length=200)
        rows = [i for i, s in enumerate(r.candidates.src_ids) if s == "4"]
        ids_ok = set(r.candidates.src_ids) <= {str(i) for i in range(1, 9)}
        text_ok = all(r.candidates.src[i] == sources[3].replace("\t", " ") for i in rows)
        return 0 if ids_ok and text_ok else 1
    outcomes.append(("items: a tab inside a sentence", *_outcome(tab, False)))
    _tally(res, "api", outcomes, {}, examples)


def _trust_devices(model_dir, d, src, tgt, res, examples) -> None:
    """``--device`` this machine lacks: refused (exit 2, what is available) before the model
    loads (the model here cannot load: a later check would say so instead)."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    broken = d / "no-model"
    broken.mkdir(exist_ok=True)
    devices = ["tpu", "garbage", f"cuda:{gpus + 2}"] + ([] if gpus else ["cuda"])
    _tally(res, "devices", [(dev, *_outcome(_paper(broken, src, tgt, d / "dev.tsv", "--device",
                                                   dev), True,
                                            lambda err: "available" in err))
                            for dev in devices], {}, examples)


def _trust_workers(model_dir, d, src, tgt, res, examples) -> None:
    """``--workers 16`` on a job of one shard a stage: one worker started, and one warning line
    when the workers outnumber the cores."""
    from triemine.distributed import local

    started = []
    real = local._Proc

    def counted(*a, **k):
        started.append(1)
        return real(*a, **k)
    local._Proc = counted
    try:
        with _Logged("triemine.distributed") as lines:
            kind, text = _outcome(_paper(model_dir, src, tgt, d / "w.tsv", "--workers", "16",
                                         "--shard-size", "100000"), False)
    finally:
        local._Proc = real
    cores = len(os.sched_getaffinity(0))
    warned = sum("--workers 16" in ln and "\n" not in ln for ln in lines)
    res["workers_warning"] = lines[:1]
    if kind == "ok" and (len(started) != 1 or (16 > cores and warned != 1)):
        kind = "silent_wrong"
    res["workers_started_for_one_shard"] = len(started)
    _tally(res, "workers", [("--workers 16, one shard", kind, text)], {}, examples)


def _trust_lock(model_dir, d, src, tgt, res, examples) -> None:
    """A second job on a locked output: refused naming the lock and the pid; a stale lock
    (a dead pid): taken over with a warning, the job runs."""
    import socket

    out = d / "locked.tsv"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        Path(str(out) + ".lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        live = _outcome(_paper(model_dir, src, tgt, out), True,
                        lambda err: f"pid {holder.pid}" in err and ".lock" in err)
    finally:
        holder.kill()
        holder.wait()
    stale = _outcome(_paper(model_dir, src, tgt, out), False)
    if stale[0] == "ok" and (not out.is_file() or Path(str(out) + ".lock").exists()):
        stale = ("silent_wrong", stale[1])
    _tally(res, "lock", [("live holder", *live), ("stale lock", *stale)], {}, examples)


def _trust_writes(model_dir, d, src, tgt, res, examples) -> None:
    """Writes that fail (a missing folder; a full disk, as ``fsync`` failing with ENOSPC):
    an error naming the final file, no temporary file left, the old file kept."""
    import errno

    from triemine.errors import OutputError
    from triemine.filtering.selection import write_bitext, write_thresholds
    from triemine.io.outfile import write_text
    from triemine.io.tsv import write_meta

    outcomes = []
    real_fsync = os.fsync

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    writers = {"write_bitext": lambda p: write_bitext([("a", "b")] * 100, p),
               "thresholds": lambda p: write_thresholds({"filter": "ce"}, p),
               "meta": lambda p: write_meta(Path(str(p)[:-len(".meta.json")]), {"a": 1}),
               "reports (outfile.write_text)": lambda p: write_text(p, "x", "report", hint="")}
    for name, write in writers.items():
        for how in ("missing folder", "full disk"):
            folder = d / f"w-{name}-{how.split()[0]}"
            folder.mkdir(exist_ok=True)
            path = (folder / "missing" / "f.meta.json") if how == "missing folder" else \
                folder / "f.meta.json"
            if how == "full disk":
                path.write_text("old\n")
                os.fsync = full
            try:
                write(path)
                kind, text = "silent_wrong", "no error"
            except OutputError as exc:
                text = str(exc)
                left = [p.name for p in folder.rglob("*") if ".tmp" in p.name]
                kept = how != "full disk" or path.read_text() == "old\n"
                kind = ("ok" if str(path) in text and ".tmp" not in text and not left and kept
                        else "silent_wrong")
            except Exception as exc:  # noqa: BLE001
                kind, text = "traceback", f"{type(exc).__name__}: {exc}"
            finally:
                os.fsync = real_fsync
            outcomes.append((f"{name}: {how}", kind, text))
    _tally(res, "writes", outcomes, {}, examples)


def _trust_cut_tsv(model_dir, d, src, tgt, res, examples) -> None:
    """Mining TSVs cut at a line boundary, header-only, or of a run that has not finished,
    given to trie-mine-eval and -filter (refused, or their rows are counted lost); a TSV
    corpus that lost most of its tabs given to trie-mine (refused, or a silent plain read)."""
    from triemine.cli import eval_main, filter_main
    from triemine.io.tsv import write_rows

    gold = d / "zh-en.t.gold"
    n = 6
    cells = {"src_id": [str(i) for i in range(1, n + 1)], "tgt_id": ["1"] * n,
             "score": [-1.0] * n, "ce_word": [1.0] * n, "ce_token": [1.0] * n,
             "src": ["a"] * n, "tgt": ["c"] * n}
    outcomes, lost = [], 0
    for name, cut in (("cut at a line boundary", 4), ("header only", 1), ("unfinished", None)):
        mined = d / f"cut-{cut}.tsv"
        write_rows(mined, list(cells), cells, meta={"mode": "pre"})
        if cut is None:
            meta = json.loads(Path(str(mined) + ".meta.json").read_text())
            Path(str(mined) + ".meta.json").write_text(json.dumps(dict(meta, rows=None)))
            lines = mined.read_text().splitlines(keepends=True)[:3]
        else:
            lines = mined.read_text().splitlines(keepends=True)[:cut]
        mined.write_text("".join(lines))
        for tool, call in (("eval", lambda: eval_main([str(mined), "--gold", str(gold)])),
                           ("filter", lambda: filter_main([str(mined), "--ce-max", "9", "-o",
                                                           str(d / "k.tsv")]))):
            kind, text = _outcome(call, True, lambda err: ".meta.json" in err)
            lost += (n - len(lines) + 1) if kind == "silent_wrong" else 0
            outcomes.append((f"{tool}: {name}", kind, text))
    lossy = d / "lossy.tsv"  # a TSV corpus with 6 of 10 tabs lost
    lossy.write_text("".join(f"s{i}\t{s}\n" if i < 4 else f"s{i} {s}\n"
                             for i, s in enumerate(src.read_text().splitlines()[:10])))
    outcomes.append(("corpus: most tabs lost", *_outcome(
        _paper(model_dir, lossy, tgt, d / "lossy-out.tsv"), True,
        lambda err: "4 of 10" in err)))
    res["cut_rows_lost"] = lost
    _tally(res, "cut", outcomes, {}, examples)


# -- 8b. the newer surfaces (issue 46) ------------------------------------------------------------

class _Logged:
    """The log records of logger ``name`` (default ``triemine``) while the body runs (the CLI's
    warnings), as lines."""

    def __init__(self, name: str = "triemine"):
        self.name = name

    def __enter__(self):
        import logging

        class Lines(logging.Handler):
            def __init__(self):
                super().__init__()
                self.lines = []

            def emit(self, record):
                self.lines.append(record.getMessage())
        self.handler = Lines()
        logging.getLogger(self.name).addHandler(self.handler)
        return self.handler.lines

    def __exit__(self, *exc):
        import logging
        logging.getLogger(self.name).removeHandler(self.handler)


def _last_line(err: str) -> str:
    """The refusal's own line: the last line of stderr (argparse prints its usage above it)."""
    lines = err.strip().splitlines()
    return lines[-1] if lines else ""


def _slice(d: Path, n_targets: int = 240):
    """The issue's 40-source x ``n_targets``-line slice of the synthetic pair."""
    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(n_targets, seed=5)
    src, tgt = d / "slice.src", d / f"slice{n_targets}.tgt"
    src.write_text("".join(s + "\n" for s, _ in pairs[:40]), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return src, tgt


def _mine(model_dir, src, tgt, *extra):
    from triemine.cli import mine_main
    return lambda: mine_main(["--model", str(model_dir), "--source", str(src), "--target",
                              str(tgt), "-q", *extra])


def _trust_dedup(model_dir, d, src, tgt, res, examples) -> None:
    """The default job's ``OUT.tsv.dedup/`` files damaged keeping their size (random bytes,
    a kept target's letters, an array, a key), the job run again with and without
    ``--resume``: the same TSV and bitext bytes and a warning naming the file, or it is silent
    wrong; a resume refused for a changed setting names that setting."""
    src, tgt = _slice(d)
    out, bt = d / "dd.tsv", d / "dd.bt"
    run = _mine(model_dir, src, tgt, "-o", str(out), "--bitext", str(bt), "--threshold",
                "combined=-1e9")
    outcomes = [("first run", *_outcome(run, False))]
    want = (out.read_bytes(), bt.read_bytes()) if out.is_file() and bt.is_file() else None
    folder = Path(str(out) + ".dedup")

    def random_bytes(p):
        data = bytearray(p.read_bytes())
        m = len(data) // 2
        data[m:m + 40] = bytes(b ^ 0x5A for b in data[m:m + 40])
        p.write_bytes(bytes(data))

    def letters(p):  # one kept target's letters replaced, the size kept
        lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
        i, text = lines[3].split("\t", 1)
        lines[3] = i + "\t" + text[::-1].replace("\n", "") + "\n"
        p.write_text("".join(lines), encoding="utf-8")
    damages = [("target.unique.tsv", random_bytes, False), ("target.unique.tsv", letters, True),
               ("source.unique.tsv", letters, False), ("target.lines.npy", random_bytes, True),
               ("source.key.json", random_bytes, False)]
    for name, damage, resume in damages:
        path = folder / name
        if want is None or not path.is_file():
            outcomes.append((f"{name}: not written", "silent_wrong", str(path)))
            continue
        size = path.stat().st_size
        damage(path)
        assert path.stat().st_size == size
        with _Logged() as lines:
            kind, text = _outcome(lambda: run() if not resume else _mine(
                model_dir, src, tgt, "-o", str(out), "--bitext", str(bt), "--threshold",
                "combined=-1e9", "--resume")(), False)
        same = (out.read_bytes(), bt.read_bytes()) == want
        named = any(name in ln for ln in lines)
        if kind == "ok" and not (same and named):
            kind, text = "silent_wrong", f"identical={same} named={named}: {text[-150:]}"
        outcomes.append((f"{name}: {damage.__name__}{' --resume' if resume else ''}", kind,
                         text))
    outcomes.append(("resume with another --min-margin", *_outcome(
        _mine(model_dir, src, tgt, "-o", str(out), "--resume", "--min-margin", "0.5"), True,
        lambda err: "min_margin" in err and err.count("\n") == 1)))
    _tally(res, "dedup", outcomes, {}, examples)


def _trust_compressed(model_dir, d, src, tgt, res, examples) -> None:
    """Outputs named ``.gz``/``.xz``/``.zst``: compressed (their bytes decompress) or refused
    before any work naming the flag; compressed mining TSVs read by eval and filter."""
    import gzip
    import lzma

    import zstandard

    from triemine.cli import eval_main, filter_main, prepare_main
    from triemine.io.tsv import write_rows

    broken = d / "no-model"
    broken.mkdir(exist_ok=True)
    dec = {".gz": gzip.decompress, ".xz": lzma.decompress,
           ".zst": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)}
    cells = {"src_id": ["1", "2"], "tgt_id": ["1", "2"], "score": [-1.0, -2.0],
             "ce_word": [1.0, 2.0], "ce_token": [1.0, 2.0], "src": ["a", "b"], "tgt": ["c", "e"]}
    mined = d / "cm.tsv"
    write_rows(mined, list(cells), cells, meta={"mode": "pre"})
    gold = d / "zh-en.c.gold"
    gold.write_text("1\t1\n")
    for name in ("zh-en.c.zh", "zh-en.c.en"):
        (d / name).write_text("1\ta\n2\tb\n")
    outcomes = []
    for suffix, unpack in dec.items():
        outcomes.append((f"mine -o o.tsv{suffix}", *_outcome(
            _paper(broken, src, tgt, d / f"co.tsv{suffix}"), True,
            lambda err: "-o" in err and "drop the" in err and err.count("\n") == 1)))
        outcomes.append((f"filter -o k.tsv{suffix}", *_outcome(
            lambda: filter_main([str(mined), "--ce-max", "9", "-o", str(d / f"ck.tsv{suffix}")]),
            True, lambda err: "drop the" in err)))
        written = {"filter --bitext": (d / f"cb{suffix}", lambda p: filter_main(
                       [str(mined), "--ce-max", "9", "--bitext", str(p)])),
                   "eval --json": (d / f"ce.json{suffix}", lambda p: eval_main(
                       [str(mined), "--gold", str(gold), "--json", str(p)])),
                   "prepare -o": (d / f"cp.en{suffix}", lambda p: prepare_main(
                       [str(tgt), "-o", str(p), "--lang", "en", "--skip", "lang,script"]))}
        for what, (path, call) in written.items():
            kind, text = _outcome(lambda: call(path), False)
            if kind == "ok":
                try:
                    unpack(path.read_bytes())
                except Exception as exc:  # noqa: BLE001 - plain text under a compressed name
                    kind, text = "silent_wrong", f"not {suffix} data: {exc}"
            outcomes.append((f"{what} {path.name}", kind, text))
        packed = d / f"cm.tsv{suffix}"  # a compressed mining TSV read back
        codec = {".gz": lambda b: gzip.compress(b, mtime=0), ".xz": lzma.compress,
                 ".zst": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b)}
        packed.write_bytes(codec[suffix](mined.read_bytes()))
        Path(str(packed) + ".meta.json").write_bytes(Path(str(mined) + ".meta.json").read_bytes())
        outcomes.append((f"eval on m.tsv{suffix}", *_outcome(
            lambda: eval_main([str(packed), "--gold", str(gold)]), False)))
        outcomes.append((f"filter on m.tsv{suffix}", *_outcome(
            lambda: filter_main([str(packed), "--ce-max", "9", "-o", str(d / "cf.tsv")]),
            False)))
    _tally(res, "compressed", outcomes, {}, examples)


def _trust_zstd(model_dir, d, src, tgt, res, examples) -> None:
    """Compressed corpora damaged in the middle (40 bytes): gzip, xz, checksummed zstd and
    zstd without a content checksum read once before the damage: each refused, naming the
    file, by ``trie-mine-prepare`` and by ``trie-mine`` (never mined)."""
    import gzip
    import lzma

    import zstandard

    from triemine.cli import prepare_main

    src40, tgt = _slice(d)
    data = tgt.read_bytes()
    packers = {"gz": lambda b: gzip.compress(b, mtime=0), "xz": lzma.compress,
               "zst": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
               "zst-nocheck": lambda b: zstandard.ZstdCompressor().compress(b)}
    outcomes = []
    for name, pack in packers.items():
        path = d / f"z.{name}.en.{name.split('-')[0]}"
        path.write_bytes(pack(data))
        prep = lambda: prepare_main([str(path), "-o", str(d / "zp.en"), "--lang", "en",  # noqa
                                     "--skip", "lang,script"])
        outcomes.append((f"{name}: whole", *_outcome(prep, False)))
        raw = bytearray(path.read_bytes())
        m = len(raw) // 2
        raw[m:m + 40] = bytes(b ^ 0x21 for b in raw[m:m + 40])
        path.write_bytes(bytes(raw))
        named = lambda err, p=path: str(p) in err and err.count("\n") == 1  # noqa: E731
        outcomes.append((f"{name}: damaged, prepare", *_outcome(prep, True, named)))
        outcomes.append((f"{name}: damaged, trie-mine", *_outcome(
            _paper(model_dir, src40, path, d / "zm.tsv"), True, named)))
    _tally(res, "zstd", outcomes, {}, examples)


def _trust_ranges(model_dir, d, src, tgt, res, examples, quick: bool = False) -> None:
    """Flags out of range, empty or of the wrong kind: one line naming the flag, exit 2, before
    the model loads (the model here cannot load); ``--target-shards`` far beyond a tiny target
    corpus finishes (a subprocess, 120 s: a hang otherwise)."""
    from triemine.cli import prepare_main

    broken = d / "no-model"
    broken.mkdir(exist_ok=True)
    flag_in = lambda flag: (lambda err: flag in _last_line(err)  # noqa: E731
                            and "missing model file" not in err)
    o = ("-o", str(d / "r.tsv"))
    cases = {"--trie-nbest 513": (["--config", "paper", "--trie-nbest", "513", *o], "--trie-nbest"),
             "--trie-nbest 513 (trie,knn)": (["--candidates", "trie,knn", "--trie-nbest", "513",
                                              *o], "--trie-nbest"),
             "--target-spm text file": (["--config", "paper", "--target-spm", str(src), *o],
                                        "--target-spm"),
             "--target-spm ''": (["--config", "paper", "--target-spm", "", *o], "--target-spm"),
             "--trie ''": (["--config", "paper", "--trie", "", *o], "--trie"),
             "--reverse-model ''": (["--reverse-model", "", *o], "--reverse-model"),
             "-o ''": (["-o", ""], "-o"),
             "--bitext ''": (["--bitext", "", *o], "--bitext"),
             "--encoder bogus": (["--encoder", "bogus", *o], "--encoder"),
             "--target-shards 0": (["--config", "paper", "--target-shards", "0", *o],
                                   "--target-shards")}
    outcomes = [(name, *_outcome(_mine(broken, src, tgt, *argv), True, flag_in(flag)))
                for name, (argv, flag) in cases.items()]
    cwd_hidden = [p for p in os.listdir(".") if p in (".work", ".dedup", ".lock")]
    if cwd_hidden:
        outcomes.append(("-o '' left files", "silent_wrong", str(cwd_hidden)))
    for flag, value in (("--max-chars", "-1"), ("--max-words", "0"), ("--min-chars", "-3")):
        outcomes.append((f"prepare {flag} {value}", *_outcome(lambda: prepare_main(
            [str(tgt), "-o", str(d / "rp.en"), "--lang", "en", flag, value]), True,
            flag_in(flag.lstrip("-").replace("-", "_")))))
    outcomes.append(("prepare --lang EN", *_outcome(lambda: prepare_main(
        [str(tgt), "-o", str(d / "rp.en"), "--lang", "EN", "--skip", "lang,script"]), False)))
    # many target shards on a tiny target: a subprocess with a hang guard
    shards = [("100000", 48)] if quick else [("240", 240), ("1000", 240), ("100000", 240)]
    for k, n in shards:
        s40, t = _slice(d, n)
        argv = [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
                "sys.exit(mine_main(sys.argv[1:]))", *CONFIG_ARGS["paper"], "--model",
                str(model_dir), "--source", str(s40), "--target", str(t), "-o",
                str(d / f"ts{k}.tsv"), "-q", "--target-shards", k]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                  env=dict(os.environ, PYTHONPATH=str(REPO)))
            kind = "ok" if proc.returncode == 0 and "--target-shards" in proc.stderr else \
                "silent_wrong"
            text = proc.stderr[-300:]
        except subprocess.TimeoutExpired:
            kind, text = "hang", "ran past 120 s"
        res[f"target_shards_{k}_on_{n}_s"] = round(time.perf_counter() - t0, 1)
        outcomes.append((f"--target-shards {k} on {n} lines", kind, text))
    _tally(res, "ranges", outcomes, {}, examples)


def _trust_late(model_dir, d, src, tgt, res, examples) -> None:
    """Refusals that used to come after the whole job, now before the model loads: a missing
    ``--bitext`` folder, ``hf`` with a compressed name or onto a folder of other files,
    ``--bitext-format`` without ``--bitext``, ``-o`` into a missing folder (never a temporary
    name), a ``--bitext`` another job writes (its lock); eval without a sidecar (refused unless
    told the rule), filter's message for it; a read-only output folder (the output named)."""
    import errno
    import socket

    from triemine.cli import eval_main, filter_main, prepare_main
    from triemine.io.tsv import write_rows

    broken = d / "no-model"
    broken.mkdir(exist_ok=True)
    hf = d / "hf-other"
    hf.mkdir(exist_ok=True)
    (hf / "notes.txt").write_text("mine\n")
    before = {hf / "notes.txt": b"mine\n"}
    says = lambda *parts: (lambda err: all(p in _last_line(err) for p in parts)  # noqa: E731
                           and ".tmp" not in err and "missing model file" not in err)
    o = ("-o", str(d / "l.tsv"))
    cases = {"--bitext into a missing folder": (["--bitext", str(d / "nope" / "b.txt"), *o],
                                                says("nope", "does not exist")),
             "--bitext-format hf with .gz": (["--bitext", str(d / "b.gz"), "--bitext-format",
                                              "hf", *o], says("b.gz", "drop the .gz")),
             "--bitext-format hf onto other files": (["--bitext", str(hf), "--bitext-format", "hf",
                                                      *o], says(str(hf), "not a bitext folder")),
             "--bitext-format without --bitext": (["--bitext-format", "tmx", *o],
                                                  says("--bitext-format", "give --bitext")),
             "-o into a missing folder": (["-o", str(d / "nope" / "o.tsv")],
                                          says("nope", "does not exist"))}
    outcomes = [(name, *_outcome(_mine(broken, src, tgt, "--config", "paper", *argv), True, ok))
                for name, (argv, ok) in cases.items()]
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        Path(str(d / "lk.bt") + ".lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        outcomes.append(("--bitext another job writes", *_outcome(
            _mine(broken, src, tgt, "--config", "paper", "-o", str(d / "lk.tsv"), "--bitext",
                  str(d / "lk.bt")), True, says(f"pid {holder.pid}", "lk.bt"))))
    finally:
        holder.kill()
        holder.wait()
    cells = {"src_id": ["1", "1", "2"], "tgt_id": ["1", "2", "2"], "score": [-1.0, -2.0, -1.0],
             "ce_word": [2.0, 1.0, 1.0], "ce_token": [1.0, 1.0, 1.0], "combined": [9.0, 1.0, 9.0],
             "src": ["a", "a", "b"], "tgt": ["c", "e", "e"]}
    nosc = d / "nosidecar.tsv"
    write_rows(nosc, list(cells), cells)
    gold = d / "zh-en.n.gold"
    gold.write_text("1\t1\n2\t2\n")
    for name in ("zh-en.n.zh", "zh-en.n.en"):
        (d / name).write_text("1\ta\n2\tb\n")
    outcomes.append(("eval without a sidecar", *_outcome(
        lambda: eval_main([str(nosc), "--gold", str(gold)]), True,
        says("nosidecar.tsv", ".meta.json", "--rule"))))
    outcomes.append(("eval without a sidecar, --rule given", *_outcome(
        lambda: eval_main([str(nosc), "--gold", str(gold), "--rule", "one-to-one", "--rank-by",
                           "combined"]), False)))
    outcomes.append(("filter without a sidecar", *_outcome(
        lambda: filter_main([str(nosc), "-o", str(d / "nk.tsv")]), True,
        lambda err: "no .meta.json sidecar" in err and "names no known" not in err)))
    real_open, real_unlink = open, os.unlink

    def read_only(path, mode="r", *a, **k):  # a read-only file system, as EROFS
        if "w" in mode and ".tmp" in os.fspath(path):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_open(path, mode, *a, **k)

    def unlink(path, *a, **k):
        if ".tmp" in os.fspath(path):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_unlink(path, *a, **k)
    import builtins
    builtins.open, os.unlink = read_only, unlink
    try:
        ro = _outcome(lambda: prepare_main([str(tgt), "-o", str(d / "ro.en"), "--lang", "en",
                                            "--skip", "lang,script"]), True,
                      says("ro.en", "cannot write"))
    finally:
        builtins.open, os.unlink = real_open, real_unlink
    outcomes.append(("prepare into a read-only folder", *ro))
    _tally(res, "late", outcomes, before, examples)


# -- issue 57: pairs by language, trie-mine-score's outputs, the front doors' arguments -----------

ZH_EN_PAIRS = [("你好。", "Hello."), ("再见！", "Bye!"), ("谢谢", "Thanks")]


def _zh_en_model(d: Path) -> Path:
    """A zh->en model directory that passes every check made before loading; its checkpoint is
    empty, so a call that gets as far as loading it fails (a refusal that comes too late)."""
    m = d / "zh-en-model"
    m.mkdir(exist_ok=True)
    (m / "triemine-model.json").write_text(json.dumps({"format": 1, "source_lang": "zh",
                                                       "target_lang": "en"}), encoding="utf-8")
    for name in ("checkpoint.pt", "dict.zh.txt", "dict.en.txt", "source.spm"):
        (m / name).write_bytes(b"")
    return m


def _tmx_of(path: Path, first: str, second: str, srclang: str) -> Path:
    """:data:`ZH_EN_PAIRS` as a TMX, English ``<tuv>`` (tagged ``first``) before Chinese
    (``second``), the header's ``srclang``."""
    tus = "".join(f'<tu><tuv xml:lang="{first}"><seg>{t}</seg></tuv><tuv xml:lang="{second}">'
                  f"<seg>{s}</seg></tuv></tu>\n" for s, t in ZH_EN_PAIRS)
    path.write_text(f'<?xml version="1.0"?>\n<tmx version="1.4"><header srclang="{srclang}"/>'
                    f"<body>\n{tus}</body></tmx>\n", encoding="utf-8")
    return path


def _trust_orientation(model_dir, d, src, tgt, res, examples) -> None:
    """Pairs read the model's way round by language, never by order: TMX with region subtags,
    an en->zh memory, HF ``translation`` objects listing ``en`` first (read right: ok; read
    reversed: silent_wrong); files of another language pair refused naming file and languages,
    before the model loads."""
    from triemine.cleaning import given_pairs, score

    m = _zh_en_model(d)
    files = {
        "tmx en-US/zh-CN srclang zh": _tmx_of(d / "o1.tmx", "en-US", "zh-CN", "zh"),
        "tmx srclang en (en->zh memory)": _tmx_of(d / "o2.tmx", "en", "zh", "en"),
        "tmx en-GB/zh-Hant-TW": _tmx_of(d / "o3.tmx", "en-GB", "zh-Hant-TW", "zh-Hant"),
    }
    hf = d / "o4.jsonl"
    hf.write_text("".join(json.dumps({"translation": {"en": t, "zh": s}}, ensure_ascii=False)
                          + "\n" for s, t in ZH_EN_PAIRS), encoding="utf-8")
    files["hf translation en first"] = hf
    hf2 = d / "o5.jsonl"
    hf2.write_text("".join(json.dumps({"translation": {"en-US": t, "zh-CN": s}},
                                      ensure_ascii=False) + "\n" for s, t in ZH_EN_PAIRS),
                   encoding="utf-8")
    files["hf translation en-US first"] = hf2

    def right(path):
        def call():
            bt = given_pairs(path, "auto", ("zh", "en"))
            return 0 if list(zip(bt.src, bt.tgt)) == ZH_EN_PAIRS else 1
        return call
    outcomes = [(name, *_outcome(right(p), False)) for name, p in files.items()]
    de = d / "o6.jsonl"
    de.write_text(json.dumps({"translation": {"de": "Hallo", "en": "Hello"}}) + "\n",
                  encoding="utf-8")
    other = {"hf de-en for a zh-en model": de,
             "tmx de/en for a zh-en model": _tmx_of(d / "o7.tmx", "en", "de-DE", "de")}
    for name, path in other.items():
        outcomes.append((name, *_outcome(
            lambda path=path: score(path, model=m, output=d / "o.tsv"), True,
            lambda err, path=path: path.name in err and "do not fit the model's zh->en" in err)))
    _tally(res, "orientation", outcomes, {}, examples)


def _trust_score_outputs(model_dir, d, src, tgt, res, examples) -> None:
    """trie-mine-score's outputs: ``-o NAME.gz``/``.xz``/``.zst`` written compressed (the scores
    TSV the tool's readers read back), a NUL byte never copied into it, a ``--bitext`` another
    job writes refused (its lock; trie-mine-filter's and trie-mine-eval's outputs too), a
    ``--bitext`` into a missing folder refused before the scores TSV is written."""
    import socket

    import numpy as np

    from triemine.cleaning import score
    from triemine.cleaning.job import write_scores
    from triemine.cleaning.pairs import Bitext
    from triemine.io import decompressed, sniff

    m = _zh_en_model(d)
    pairs = d / "s.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in ZH_EN_PAIRS), encoding="utf-8")
    outcomes = []
    for suffix in (".gz", ".xz", ".zst"):
        def compressed(suffix=suffix):
            bt = Bitext("p", "list")
            for i, (a, b) in enumerate(ZH_EN_PAIRS, 1):
                bt.add(i, a, b + "\0")
            out = d / f"scores.tsv{suffix}"
            write_scores(out, bt, {"prob": np.full(3, 0.5)}, ["scored"] * 3)
            codec = sniff(out)
            if codec is None or codec.suffix != suffix:
                return 1
            text = b"".join(decompressed(out, codec)).decode("utf-8")
            return 0 if len(text.splitlines()) == 4 and "\0" not in text else 1
        outcomes.append((f"-o scores.tsv{suffix}", *_outcome(compressed, False)))
    kept = d / "kept.txt"
    lock = Path(str(kept) + ".lock")
    lock.write_text(f"{os.getpid()} {socket.gethostname()}\n")
    outcomes.append(("--bitext locked by another job", *_outcome(
        lambda: score(pairs, model=m, output=d / "so.tsv", bitext=str(kept)), True,
        lambda err: "another job" in err)))
    lock.unlink()
    from triemine.cli import eval_main, filter_main
    from triemine.io.tsv import write_rows

    mined = d / "lm.tsv"
    cells = {"src_id": ["1", "2"], "tgt_id": ["1", "2"], "score": [-1.0, -2.0],
             "ce_word": [1.0, 2.0], "ce_token": [1.0, 2.0], "src": ["a", "b"], "tgt": ["c", "e"]}
    write_rows(mined, list(cells), cells, meta={"mode": "pre"})
    (d / "lg.gold").write_text("1\t1\n")
    held = {"filter -o": (filter_main, [str(mined), "--ce-max", "9", "-o"]),
            "filter --bitext": (filter_main, [str(mined), "--ce-max", "9", "--bitext"]),
            "eval --json": (eval_main, [str(mined), "--gold", str(d / "lg.gold"), "--json"]),
            "eval --report": (eval_main, [str(mined), "--gold", str(d / "lg.gold"), "--report"])}
    for name, (main, argv) in held.items():
        out = d / f"held-{name.split()[-1].strip('-')}.out"
        lock = Path(str(out) + ".lock")
        lock.write_text(f"{os.getpid()} {socket.gethostname()}\n")
        outcomes.append((f"{name} locked by another job", *_outcome(
            lambda main=main, argv=argv, out=out: main(argv + [str(out)]), True,
            lambda err, out=out: "another job" in err and not out.exists())))
        lock.unlink()
    outcomes.append(("--bitext into a missing folder", *_outcome(
        lambda: score(pairs, model=m, output=d / "so.tsv", bitext=str(d / "none" / "k.txt")),
        True, lambda err: "does not exist" in err and not (d / "so.tsv").exists())))
    _tally(res, "score_outputs", outcomes, {}, examples)


def _trust_api_arguments(model_dir, d, src, tgt, res, examples) -> None:
    """Every bad argument of ``triemine.score`` / ``trie-mine-score`` refused before the model
    loads (the model here cannot load: a later refusal says so instead), and ``--min-prob``
    with a threshold refused by every front door."""
    from triemine.cleaning import score
    from triemine.cli import filter_main, mine_main, score_main

    import triemine

    m = _zh_en_model(d)
    pairs = d / "a.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in ZH_EN_PAIRS), encoding="utf-8")
    (d / "a.zh").write_text("你好\n", encoding="utf-8")
    o = d / "ao.tsv"
    bad = {"k=0": ({"k": 0}, "k: "), "k=-3": ({"k": -3}, "k: "),
           "min_prob='abc'": ({"min_prob": "abc"}, "--min-prob"),
           "workers='2'": ({"workers": "2"}, "workers"), "workers=-1": ({"workers": -1}, "workers"),
           "output=None": ({"output": None}, "output"),
           "encoder='bogus'": ({"encoder": "bogus"}, "bogus"),
           "langs='zh'": ({"langs": "zh"}, "--langs"),
           "langs=('xx','yy')": ({"langs": ("xx", "yy")}, "--langs"),
           "config mt-only with threshold": ({"config": "mt-only", "threshold": 3.0}, "mt-only"),
           "bicleaner, missing model": ({"bicleaner": True, "bicleaner_model": str(d / "no.yaml")},
                                        "Bicleaner model not found"),
           "min_prob with threshold": ({"min_prob": 0.5, "threshold": 1.0}, "not both")}
    outcomes = []
    for name, (kw, want) in bad.items():
        kw = {"model": m, "output": o, **kw}
        outcomes.append((f"score({name})", *_outcome(
            lambda kw=kw: score(pairs, **kw), True,
            lambda err, want=want: want in err and "checkpoint" not in err)))
    outcomes.append(("score((a.zh, missing.en))", *_outcome(
        lambda: score((str(d / "a.zh"), str(d / "missing.en")), model=m, output=o), True,
        lambda err: "missing.en" in err and "no such file" in err)))
    base = [str(pairs), "--model", str(m), "-o", str(o)]
    cli = {"trie-mine-score --workers -1": (score_main, base + ["--workers", "-1"], "workers"),
           "trie-mine-score --langs xx yy": (score_main, base + ["--langs", "xx", "yy"],
                                             "--langs"),
           "trie-mine-filter --min-prob --threshold": (
               filter_main, [str(pairs), "--bitext", str(d / "fb.txt"), "--min-prob", "0.5",
                             "--threshold", "combined=3"], "not both"),
           "trie-mine --min-prob --threshold": (
               mine_main, ["--model", str(m), "--source", str(src), "--target", str(tgt), "-o",
                           str(d / "mo.tsv"), "--bitext", str(d / "mb.txt"), "--min-prob", "0.5",
                           "--threshold", "combined=3"], "not both")}
    for name, (main, argv, want) in cli.items():
        outcomes.append((name, *_outcome(lambda main=main, argv=argv: main(argv), True,
                                         lambda err, want=want: want in _last_line(err)
                                         and "checkpoint" not in err)))
    for name, kw, want in (("mine(min_prob='abc')", {"min_prob": "abc"}, "min_prob"),
                           ("mine(min_prob, threshold)",
                            {"min_prob": 0.5, "threshold": {"combined": 3.0}}, "not both")):
        outcomes.append((name, *_outcome(
            lambda kw=kw: triemine.mine(["你好"], ["Hello"], model=m, **kw), True,
            lambda err, want=want: want in err)))
    _tally(res, "api_args", outcomes, {}, examples)


def bench_digest(work: Path, size_mb: int = 1024) -> dict:
    """The content digest's cost (issue 37): SHA-256 GB/s of one thread over a ``size_mb`` MiB
    synthetic file (page-cached after its first read), extrapolated to 10^8 lines a side (the
    BUCC sample's mean line length), and the sample's two corpora hashed uncached then cached
    (``content_sha256`` read against the file's stamp)."""
    import shutil

    from triemine.io import keys, paths

    big = work / "digest.bin"
    with open(big, "wb") as f:
        block = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
        for _ in range(size_mb // 64):
            f.write(block)
    keys.file_sha256(big)  # into the page cache
    t = time.perf_counter()
    keys.file_sha256(big)
    gbs = big.stat().st_size / (time.perf_counter() - t) / 1e9
    big.unlink()
    sample = [paths.shared_path(*paths.BUCC_ZH_EN, f"zh-en.sample.{s}") for s in ("zh", "en")]
    per_line = sum(p.stat().st_size for p in sample) / sum(
        p.read_bytes().count(b"\n") for p in sample)
    cache = work / "digest-cache"
    os.environ["TRIEMINE_CACHE"], old = str(cache), os.environ.get("TRIEMINE_CACHE")
    try:
        t = time.perf_counter()
        for p in sample:
            keys.content_sha256(p)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        for p in sample:
            keys.content_sha256(p)
        warm = time.perf_counter() - t
    finally:
        if old is None:
            os.environ.pop("TRIEMINE_CACHE")
        else:
            os.environ["TRIEMINE_CACHE"] = old
        shutil.rmtree(cache, ignore_errors=True)
    return {"digest": "sha256", "digest_threads": 1, "digest_file_mb": size_mb,
            "digest_gb_s": round(gbs, 2), "digest_bytes_per_line": round(per_line, 1),
            "digest_1e8_lines_a_side_s": round(2e8 * per_line / 1e9 / gbs, 1),
            "digest_sample_cold_s": round(cold, 4), "digest_sample_cached_s": round(warm, 5)}


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
    import re

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
    import shutil

    import triemine.cli  # noqa: F401  imported once, before the forks
    import triemine.api  # noqa: F401
    from triemine.testing.tiny_model import synthetic_pairs
    from triemine.mining.dedup import DEDUP_SUFFIX, JOB_TSV
    from triemine.io.tsv import META_SUFFIX

    pairs = synthetic_pairs(n_sources, seed=37, min_len=3)
    res = {}
    for config in configs:
        root = work / f"damage-{config}"
        live, snap = root / "live", root / "snap"
        live.mkdir(parents=True)
        src, tgt = root / "d.src", root / "d.tgt"
        src.write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
        tgt.write_text("".join(b + "\n" for _, b in pairs[::2]), encoding="utf-8")
        cache, out, log = live / "cache", live / "d.tsv", root / "stderr.txt"
        argv = _mine_cmd(model_dir, src, tgt, out, ("--bitext", str(live / "d.bitext")),
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


def bench_ray_cluster(model_dir, work: Path, n_sources: int = 60) -> dict:
    """A Ray cluster started as users start one (``ray start --head`` and a second node, token
    authentication, loopback addresses: :class:`triemine.testing.ray_cluster.LocalCluster`),
    about a minute:

    * ``ray_connect_failures``: ``trie-mine --ray ADDRESS`` with no cluster there, no token, a
      wrong token, and a port where nothing answers: each exit 2 with one line, in seconds
      (``ray_connect_failure_s``; the goal is 30 s at most);
    * ``ray_unshared_cache`` (root only): a third node that does not see the driver's cache
      (:func:`_ray_unshared_cache`): the job stops at once with one line naming it;
    * ``ray_node_lost``: the default job with ``--ray ADDRESS``, each shard made to last 2 s;
      once one is done, node 2's raylet and workers are SIGKILLed: the job finishes on the head
      with the uninterrupted run's bytes, the shard the node held redone (1 when all of it).
    The cluster's processes are stopped by pid, not by ``ray stop`` (other clusters live on)."""
    import socket

    from triemine.testing.tiny_model import synthetic_pairs
    from triemine.testing.ray_cluster import LocalCluster, free_loopback_port

    pairs = synthetic_pairs(n_sources, seed=31, min_len=3)
    src, tgt = work / "r.src", work / "r.tgt"
    src.write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(b + "\n" for _, b in pairs[::2]) +
                   "".join(b + "\n" for _, b in synthetic_pairs(240, seed=32)), encoding="utf-8")
    ref = work / "r-ref.tsv"
    subprocess.run(_mine_cmd(model_dir, src, tgt, ref, config="default"), check=True,
                   env=_env(work / "r-cache"), stderr=subprocess.DEVNULL)
    res: dict = {}
    root = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # Ray's socket paths must stay short
    cluster = LocalCluster(root, nodes=2, cpus=1)
    try:
        t = time.perf_counter()
        cluster.start()
        res["ray_cluster_start_s"] = round(time.perf_counter() - t, 2)

        def run(address, **env):
            out = work / "r-refused.tsv"
            e = dict(cluster.client_env(**env), TRIEMINE_CACHE=str(work / "r-cache"),
                     PYTHONPATH=str(REPO))
            t0 = time.perf_counter()
            p = subprocess.run(_mine_cmd(model_dir, src, tgt, out, ("--ray", address),
                                         config="default"), env=e, capture_output=True,
                               text=True, timeout=120)
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            return (p.returncode == 2 and len(lines) == 1 and not out.exists(),
                    round(time.perf_counter() - t0, 2), lines[-1][:200] if lines else "")

        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(4)
            cases = {"no_cluster": (f"127.0.0.1:{free_loopback_port()}", {}),
                     "no_token": (cluster.address, {"RAY_AUTH_TOKEN_PATH": None}),
                     "wrong_token": (cluster.address, {"RAY_AUTH_TOKEN": "not-the-token"}),
                     "silent_port": ("127.0.0.1:%d" % silent.getsockname()[1], {})}
            outcomes = {name: run(address, **env) for name, (address, env) in cases.items()}
        res["ray_connect_failures"] = {k: {"one_line_exit_2": ok, "s": s, "line": line}
                                       for k, (ok, s, line) in outcomes.items()}
        res["ray_connect_failure_s"] = max(s for _ok, s, _line in outcomes.values())
        res["ray_connect_failures_clean"] = int(all(ok for ok, _s, _l in outcomes.values()))
        res.update(_ray_unshared_cache(cluster, model_dir, src, tgt, work))

        faults = work / "r-faults"
        faults.mkdir(exist_ok=True)
        out = work / "r-lost.tsv"
        env = dict(cluster.client_env(), TRIEMINE_CACHE=str(work / "r-cache-lost"),
                   PYTHONPATH=str(REPO),
                   TRIEMINE_TEST_FAULTS=json.dumps({"dir": str(faults), "delay": 2.0}))
        t = time.perf_counter()
        job = subprocess.Popen(_mine_cmd(model_dir, src, tgt, out, ("--ray", cluster.address),
                                         config="default"), env=env, stderr=subprocess.PIPE,
                               text=True)
        killed = cluster.kill_node_when_busy(1, faults / "started.log", job)
        _, err = job.communicate(timeout=600)
        res["ray_node_lost_s"] = round(time.perf_counter() - t, 2)
        res["ray_node_lost_killed_pids"] = len(killed)
        res["ray_node_lost_exit"] = job.returncode
        res["ray_node_lost_redone"] = err.count("died holding shard")
        res["ray_node_lost"] = int(bool(killed) and job.returncode == 0 and out.is_file()
                                   and out.read_bytes() == ref.read_bytes()
                                   and res["ray_node_lost_redone"] > 0)
        if not res["ray_node_lost"]:
            res["ray_node_lost_stderr"] = err[-1500:]
    finally:
        res["ray_cluster_left_processes"] = len(cluster.stop())
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    return res


def _ray_unshared_cache(cluster, model_dir, src, tgt, work: Path) -> dict:
    """A third node that does not see the driver's cache (``ray_unshared_cache`` 1 when the
    job stops with one line naming the node and the directory): started in a mount namespace
    where the cache is an empty tmpfs (root only), lost again afterwards."""
    import shutil

    if os.geteuid() != 0 or not shutil.which("unshare"):
        return {"ray_unshared_cache": "not measured: a mount namespace needs root"}
    cache = work / "r-cache-hidden"
    cache.mkdir(exist_ok=True)
    hide = ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs none "{cache}" && exec "$@"', "sh"]
    try:
        cluster.add_node(2, prefix=hide)
    except RuntimeError as exc:
        return {"ray_unshared_cache": f"not measured: {str(exc).splitlines()[0][:200]}"}
    try:
        out = work / "r-unshared.tsv"
        env = dict(cluster.client_env(), TRIEMINE_CACHE=str(cache), PYTHONPATH=str(REPO))
        t = time.perf_counter()
        p = subprocess.run(_mine_cmd(model_dir, src, tgt, out, ("--ray", cluster.address),
                                     config="default"), env=env, capture_output=True,
                           text=True, timeout=300)
        last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        return {"ray_unshared_cache_s": round(time.perf_counter() - t, 2),
                "ray_unshared_cache_line": last[:300],
                "ray_unshared_cache": int(_clean(p) and not out.exists() and
                                          f"node {cluster.ip(2)} does not see {cache}" in last)}
    finally:
        cluster.kill_node(2)


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="fewer files and kills (about 1 min)")
    ap.add_argument("--trie-files", type=int, default=None)
    ap.add_argument("--text-files", type=int, default=None)
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--only", default=None,
                    help="comma-separated measurements to run (tries, text, kill, job_kill, "
                         "concurrent, faults, digest, damage, trust, judge, ray_cluster); the "
                         "others are reported as not run")
    args = ap.parse_args(argv)
    run = benchlib.start("reliability_bench", args)
    n_trie = args.trie_files or (1000 if args.quick else 10000)
    n_text = args.text_files or (250 if args.quick else 2000)
    kills = args.kills if args.kills is not None else (2 if args.quick else 20)
    rng = random.Random(args.seed)
    import torch
    torch.set_num_threads(1)
    from triemine.models.model_dir import load_model_dir

    t0 = run.elapsed()
    model_dir, trained_s = cached_tiny_model()
    model = load_model_dir(model_dir)
    report = {"bench": "reliability_bench", "quick": bool(args.quick), "seed": args.seed,
              "machine": machine(), "threads": 1, "tiny_model_trained_s": trained_s}
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        work = Path(tmp)
        for name, fn in (("tries", lambda: bench_tries(model, work, n_trie, rng)),
                         ("text", lambda: bench_text(work, n_text, rng)),
                         ("kill", lambda: bench_kill(model_dir, work, kills, rng,
                                                     100 if args.quick else 400)),
                         ("job_kill", lambda: bench_kill(model_dir, work, kills, rng,
                                                         100 if args.quick else 400, "job")),
                         ("concurrent", lambda: bench_concurrent(model_dir, work,
                                                                 500 if args.quick else 5000)),
                         ("faults", lambda: bench_faults(model_dir, work)
                          if not args.quick else {"faults": "not run in --quick (about 80 s)"}),
                         ("digest", lambda: bench_digest(work, 256 if args.quick else 1024)),
                         ("damage", lambda: bench_damage(model_dir, work, rng)
                          if not args.quick else {"damage": "not run in --quick"}),
                         ("trust", lambda: bench_trust(model_dir, work, quick=args.quick)),
                         ("judge", lambda: bench_judge(model_dir, work, quick=args.quick)),
                         ("ray_cluster", lambda: bench_ray_cluster(model_dir, work)
                          if not args.quick else
                          {"ray_cluster": "not run in --quick (about a minute)"})):
            if args.only and name not in args.only.split(","):
                report[name] = "not run (--only)"
                continue
            with benchlib.timer() as t:
                res = fn()
            res[f"{name}_s"] = round(t.s, 2)
            print(json.dumps(res, ensure_ascii=False), file=sys.stderr, flush=True)
            report.update(res)
    report["seconds"] = round(run.elapsed() - t0, 2)
    goals = {"tries": lambda r: r["trie_crashes"] == 0,
             "text": lambda r: r["text_tracebacks"] == 0 and r["text_bad_exit_codes"] == 0,
             "kill": lambda r: r["rows_lost"] == 0 and r["rows_duplicated"] == 0 and r["identical"],
             "job_kill": lambda r: (r["job_rows_lost"] == 0 and r["job_rows_duplicated"] == 0
                                    and r["job_identical"]),
             "concurrent": lambda r: (r["concurrent_exit_codes"] == [0, 0] and
                                      r["concurrent_cached_tries"] == 1 and
                                      r["concurrent_identical"]),
             "faults": lambda r: r.get("faults_handled") == r.get("faults_measured"),
             "digest": lambda r: True,
             "damage": lambda r: (r.get("damage_silent_wrong") == 0
                                  and r.get("damage_tracebacks") == 0
                                  and r.get("damage_rows_lost") == 0
                                  and r.get("damage_configs_run") == r.get("damage_configs")),
             "trust": lambda r: (r["trust_silent_wrong"] == 0 and r["trust_traceback"] == 0
                                 and r["trust_hang"] == 0
                                 and r["trust_inputs_overwritten"] == 0
                                 and r["trust_rows_lost"] == 0),

             "judge": lambda r: (r["judge_silent_wrong"] == 0 and r["judge_traceback"] == 0
                                 and r["judge_late"] == 0
                                 and r["judge_inputs_overwritten"] == 0),
             "ray_cluster": lambda r: (r["ray_connect_failures_clean"] == 1 and
                                       r["ray_unshared_cache"] != 0 and  # or not measured
                                       r["ray_connect_failure_s"] <= 30 and
                                       r["ray_node_lost"] == 1 and
                                       r["ray_cluster_left_processes"] == 0)}
    report["ok"] = all(ok(report) for name, ok in goals.items()
                       if not str(report.get(name, "")).startswith("not run"))
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
