#!/usr/bin/env python3
"""Reliability: damaged inputs never crash, an interrupted run resumes exactly, concurrent runs agree.

Four measurements (issue 9), each a count that must be 0 (or true):

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
        body = bytearray(mutate(content[_HEADER.size:], rng) if rng.random() < 0.5 else content[_HEADER.size:])
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
            outcome["clean_error"], "trie_loaded": outcome["loaded"], "trie_crash_examples": examples}


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
    rows = "".join(f"zh-{i}\ten-{j}\t{-i - j:.3f}\t{(i + j) / 4:.3f}\t{(i + j) / 5:.3f}\t中文句子{i}。\t"
                   f"English sentence {j}.\t{2.0 - (i != j):.2f}\n" for i in range(1, 9) for j in (i, i % 8 + 1))
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
CONFIG_ARGS = {"paper": ("--config", "paper", "--pre-expansion", "--beam", "4", "--batch-size", "4"),
               "job": ("--config", "mt-only", "--batch-size", "4"),
               "default": ()}


def _mine_cmd(model_dir, src, tgt, out, extra=(), config="paper"):
    return [sys.executable, "-c", "import sys; from triemine.cli import mine_main; sys.exit(mine_main())",
            *CONFIG_ARGS[config], "--model", str(model_dir), "--source", str(src), "--target", str(tgt),
            "-o", str(out), "-q", *extra]


def _env(cache: Path) -> dict:
    return dict(os.environ, TRIEMINE_CACHE=str(cache), PYTHONPATH=str(REPO))


def bench_kill(model_dir, work: Path, kills: int, rng: random.Random, n_sources: int,
               config: str = "paper") -> dict:
    """SIGKILL ``trie-mine --config <config>`` at random moments, resume until it finishes, and
    compare with an uninterrupted run (each episode starts with an empty cache of translations
    and priors, so that every stage is interrupted somewhere)."""
    import shutil

    from triemine.decoding.testing import synthetic_pairs

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
            proc = subprocess.Popen(_mine_cmd(model_dir, src, tgt, out, ("--resume",) if resume else (),
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
    from triemine.decoding.testing import synthetic_pairs

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
    tries = sorted(p.name for p in (cache / "tries").iterdir()) if (cache / "tries").is_dir() else []
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

    from triemine.decoding.testing import synthetic_pairs

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
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(fs)]).returncode == 0
        if ok:
            try:
                out = fs / "full.tsv"
                _, p1 = job("f-full", out=out)
                res["full_disk_error"] = p1.stderr.strip().splitlines()[-1][:300] if p1.stderr else ""
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
    from triemine.lineindex import index_path
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


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="fewer files and kills (about 1 min)")
    ap.add_argument("--trie-files", type=int, default=None)
    ap.add_argument("--text-files", type=int, default=None)
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--only", default=None,
                    help="comma-separated measurements to run (tries, text, kill, job_kill, "
                         "concurrent, faults); the others are reported as not run")
    args = ap.parse_args(argv)
    run = benchlib.start("reliability_bench", args)
    n_trie = args.trie_files or (1000 if args.quick else 10000)
    n_text = args.text_files or (250 if args.quick else 2000)
    kills = args.kills if args.kills is not None else (2 if args.quick else 20)
    rng = random.Random(args.seed)
    import torch
    torch.set_num_threads(1)
    from triemine.decoding.model_dir import load_model_dir

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
                          if not args.quick else {"faults": "not run in --quick (about 80 s)"})):
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
             "faults": lambda r: r.get("faults_handled") == r.get("faults_measured")}
    report["ok"] = all(ok(report) for name, ok in goals.items()
                       if not str(report.get(name, "")).startswith("not run"))
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
