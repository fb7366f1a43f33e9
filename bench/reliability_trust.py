"""The reliability bench's trust family (issue 37 and later, :func:`bench_trust`, about a
minute): what the tools write, refuse and read back, each case counted as ``ok``,
``silent_wrong``, ``traceback`` or ``hang`` (:func:`benchlib.outcome`, :func:`benchlib.tally`).

Outputs equal to inputs for every tool (hard and symbolic links too), the Python API's bad
items and arguments and a tab inside a sentence, devices this machine lacks, ``--workers 16``
on a job of one shard, the output lock (live and stale), writes into a missing folder and onto
a full disk, cut or unfinished mining TSVs, a TSV corpus that lost most tabs.  Issue 46 adds
the families ``dedup`` (the default job's ``OUT.tsv.dedup/`` files damaged keeping their size:
the same output and a warning naming the file), ``compressed`` (outputs named
``.gz``/``.xz``/``.zst`` compressed or refused before any work; compressed mining TSVs read),
``zstd`` (compressed corpora damaged in the middle, zstd without a content checksum too),
``ranges`` (flags out of range, empty or of the wrong kind, refused before the model loads;
``--target-shards`` far beyond a tiny target, a subprocess with a 120 s guard: ``trust_hang``
must be 0) and ``late`` (refusals that came after the job, the bitext lock, eval and filter
without a sidecar); issue 57 ``orientation``, ``score_outputs`` and ``api_args`` (pairs read by
language, trie-mine-score's outputs, the front doors' arguments).  ``trust_silent_wrong``,
``trust_traceback``, ``trust_inputs_overwritten`` and ``trust_rows_lost`` must be 0.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import benchlib
from reliability_jobs import CONFIG_ARGS, job_env, mine_cmd

_outcome, _tally = benchlib.outcome, benchlib.tally
# a small mining TSV's columns (two rows)
CELLS = {"src_id": ["1", "2"], "tgt_id": ["1", "2"], "score": [-1.0, -2.0],
         "ce_word": [1.0, 2.0], "ce_token": [1.0, 2.0], "src": ["a", "b"], "tgt": ["c", "e"]}


def bench_trust(model_dir, work: Path, quick: bool = False) -> dict:
    """Issue 37's cases, each counted as ok, silent_wrong or traceback: outputs equal to inputs
    (every tool), the Python API's bad items and arguments, unknown devices, worker counts,
    the output lock, write failures (a missing folder, a full disk), cut mining TSVs and a TSV
    corpus that lost most of its tabs."""
    from triemine.testing.tiny_model import synthetic_pairs

    d = work / "trust"
    d.mkdir()
    pairs = synthetic_pairs(40, seed=5)
    src = benchlib.write_lines(d / "src.txt", [s for s, _ in pairs])
    tgt = benchlib.write_lines(d / "tgt.txt", [t for _, t in pairs])
    res: dict = {}
    examples: list = []

    def _trust_ranges_here(*a):
        return _trust_ranges(*a, quick=quick)
    cases = [_trust_outputs, _trust_api, _trust_devices, _trust_workers, _trust_lock,
             _trust_writes, _trust_cut_tsv, _trust_dedup, _trust_compressed, _trust_zstd,
             _trust_ranges_here, _trust_late, _trust_orientation, _trust_score_outputs,
             _trust_api_arguments]
    with benchlib.env_var("TRIEMINE_CACHE", d / "cache"):
        for case in cases:
            try:
                case(model_dir, d, src, tgt, res, examples)
            except Exception as exc:  # noqa: BLE001 - the case itself crashed: a traceback
                # "crashed_": no "trust_" prefix, so the sum below counts it as a traceback
                res[f"crashed_{case.__name__.lstrip('_')}_traceback"] = 1
                examples.append(f"{case.__name__}: {type(exc).__name__}: {exc}"[:300])
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


def _mined(path: Path, cells=CELLS, sidecar: bool = True) -> Path:
    """A small mining TSV of ``cells`` at ``path``, with a trie search's sidecar (``sidecar``)."""
    from triemine.io.tsv import write_rows

    write_rows(path, list(cells), cells, meta={"mode": "pre"} if sidecar else None)
    return path


def _bucc_set(d: Path, tag: str, gold: str = "1\t1\n") -> Path:
    """A two-line BUCC set ``zh-en.<tag>.{zh,en,gold}`` in ``d``; returns its gold file."""
    for lang in ("zh", "en"):
        (d / f"zh-en.{tag}.{lang}").write_text("1\ta\n2\tb\n")
    path = d / f"zh-en.{tag}.gold"
    path.write_text(gold)
    return path


def _packers() -> dict:
    """Compressors by name: gzip (no time stamp), xz, zstd with and without a content
    checksum."""
    import gzip
    import lzma

    import zstandard

    return {"gz": lambda b: gzip.compress(b, mtime=0), "xz": lzma.compress,
            "zst": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b),
            "zst-nocheck": lambda b: zstandard.ZstdCompressor().compress(b)}


def _flip_middle(path: Path, mask: int) -> None:
    """The 40 bytes in the middle of ``path`` XOR-ed with ``mask``, in place."""
    data = bytearray(path.read_bytes())
    m = len(data) // 2
    data[m:m + 40] = bytes(b ^ mask for b in data[m:m + 40])
    path.write_bytes(bytes(data))


def _no_model(d: Path) -> Path:
    """A model directory with nothing in it: a call that gets as far as loading it fails."""
    broken = d / "no-model"
    broken.mkdir(exist_ok=True)
    return broken


@contextlib.contextmanager
def _held_lock(path: Path):
    """``path`` holding a live process's lock (a sleeping child's pid, this host) while the
    body runs; yields the pid.  The lock file stays; the child is killed after."""
    import socket

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        path.write_text(f"{holder.pid} {socket.gethostname()}\n")
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def _trust_outputs(model_dir, d, src, tgt, res, examples) -> None:
    """Every tool given an output that is one of its inputs (hard and symbolic links too)."""
    from triemine.cli import eval_main, filter_main, trie_build_main

    (d / "hard.txt").unlink(missing_ok=True)
    os.link(src, d / "hard.txt")
    if not (d / "sym.txt").exists():
        (d / "sym.txt").symlink_to(tgt)
    mined = _mined(d / "m.tsv")
    gold = _bucc_set(d, "t")
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
    broken = _no_model(d)
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
    out = d / "locked.tsv"
    with _held_lock(Path(str(out) + ".lock")) as pid:
        live = _outcome(_paper(model_dir, src, tgt, out), True,
                        lambda err: f"pid {pid}" in err and ".lock" in err)
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

    gold = d / "zh-en.t.gold"
    n = 6
    cells = {"src_id": [str(i) for i in range(1, n + 1)], "tgt_id": ["1"] * n,
             "score": [-1.0] * n, "ce_word": [1.0] * n, "ce_token": [1.0] * n,
             "src": ["a"] * n, "tgt": ["c"] * n}
    outcomes, lost = [], 0
    for name, cut in (("cut at a line boundary", 4), ("header only", 1), ("unfinished", None)):
        mined = _mined(d / f"cut-{cut}.tsv", cells)
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
        _flip_middle(p, 0x5A)

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

    broken = _no_model(d)
    dec = {".gz": gzip.decompress, ".xz": lzma.decompress,
           ".zst": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)}
    mined = _mined(d / "cm.tsv")
    gold = _bucc_set(d, "c")
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
        packed.write_bytes(_packers()[suffix[1:]](mined.read_bytes()))
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
    from triemine.cli import prepare_main

    src40, tgt = _slice(d)
    data = tgt.read_bytes()
    outcomes = []
    for name, pack in _packers().items():
        path = d / f"z.{name}.en.{name.split('-')[0]}"
        path.write_bytes(pack(data))
        prep = lambda: prepare_main([str(path), "-o", str(d / "zp.en"), "--lang", "en",  # noqa
                                     "--skip", "lang,script"])
        outcomes.append((f"{name}: whole", *_outcome(prep, False)))
        _flip_middle(path, 0x21)
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

    broken = _no_model(d)
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
        argv = mine_cmd(model_dir, s40, t, d / f"ts{k}.tsv", ("--target-shards", k))
        t0 = time.perf_counter()
        try:  # the cache: bench_trust's
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                  env=job_env(d / "cache"))
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

    from triemine.cli import eval_main, filter_main, prepare_main

    broken = _no_model(d)
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
    with _held_lock(Path(str(d / "lk.bt") + ".lock")) as pid:
        outcomes.append(("--bitext another job writes", *_outcome(
            _mine(broken, src, tgt, "--config", "paper", "-o", str(d / "lk.tsv"), "--bitext",
                  str(d / "lk.bt")), True, says(f"pid {pid}", "lk.bt"))))
    cells = {"src_id": ["1", "1", "2"], "tgt_id": ["1", "2", "2"], "score": [-1.0, -2.0, -1.0],
             "ce_word": [2.0, 1.0, 1.0], "ce_token": [1.0, 1.0, 1.0], "combined": [9.0, 1.0, 9.0],
             "src": ["a", "a", "b"], "tgt": ["c", "e", "e"]}
    nosc = _mined(d / "nosidecar.tsv", cells, sidecar=False)
    gold = _bucc_set(d, "n", "1\t1\n2\t2\n")
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

    mined = _mined(d / "lm.tsv")
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
