"""The benchmark harness: every ``bench/*_bench.py`` parses, times, measures and records through it.

A script builds its parser with :func:`parser` (the shared ``--quick``, ``--record`` and
``--results-dir`` flags, then its own), starts a :class:`Run` with :func:`start` once its
arguments are parsed, and ends with ``return run.finish(results)``, which prints ``results`` as
the last line of stdout (one JSON object) and, with ``--record``, appends one record to
``<results dir>/<bench>.jsonl``::

    {"bench", "commit", "dirty", "date", "quick", "command", "machine", "threads", "cache",
     "wall_s", "peak_rss_mb", "results"}

The results directory is ``--results-dir``, else ``$TRIEMINE_BENCH_RESULTS``, else
``bench/results`` of this checkout. ``scripts/results_table.py`` renders the records.

Peak memory (``peak_rss_mb``): ``self`` and ``children`` are ``getrusage``'s ``ru_maxrss`` of this
process and of its waited-for descendants (the largest single one, not their sum; a process not
yet waited for, such as a still-running pool worker or a daemon started by Ray that outlives the
run, is missing). With psutil (installed, or the copy Ray ships), ``tree`` is the largest sum of the
resident sets of this
process and all its descendants seen by a sampler every ``SAMPLE_S`` seconds (it sees concurrent
workers, Ray's included, but misses peaks shorter than a sample; ``tree_by`` names it); without
psutil both are ``None``.

Importing this module puts this checkout first on ``sys.path`` (a bench measures the package it
sits beside) and sets ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` (fairseq's checkpoints) unless set.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
RESULTS_ENV = "TRIEMINE_BENCH_RESULTS"
SAMPLE_S = 0.5
# generated files: writing a record must not make the next benchmark's tree dirty
_NOT_CODE = (":(exclude)bench/results", ":(exclude)docs/results.md")


class BenchParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose namespace also carries ``command``: the script (relative to the
    checkout) and the arguments it parsed."""

    def names(self, text: str, known, what: str) -> list:
        """The comma-separated names of ``text`` (a flag's value), each one of ``known``; an
        argparse error naming the unknown ones (``what``: "run", "configuration", ...)."""
        names = [n for n in text.split(",") if n]
        bad = [n for n in names if n not in known]
        if bad:
            self.error(f"unknown {what}(s) {', '.join(bad)}")
        return names

    def parse_args(self, args=None, namespace=None):
        ns = super().parse_args(args, namespace)
        script = Path(sys.argv[0]).resolve()
        try:
            script = script.relative_to(REPO)
        except ValueError:
            pass
        ns.command = [str(script)] + [str(a) for a in (sys.argv[1:] if args is None else args)]
        return ns


def parser(doc: str, quick: str = "small inputs (< 1 minute on an idle box)",
           model: bool = False) -> BenchParser:
    """The parser of a benchmark: its description is the first paragraph of ``doc``, with the
    shared flags ``--quick`` (help ``quick``), ``--record`` and ``--results-dir``, and with
    ``model`` the ``--model`` of :func:`shared_model_dir`."""
    ap = BenchParser(description=(doc or "").split("\n\n")[0].strip())
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--record", action="store_true",
                    help="append this run's record to <results dir>/<bench>.jsonl")
    ap.add_argument("--results-dir", default=None,
                    help=f"where --record writes (default ${RESULTS_ENV}, else bench/results)")
    if model:
        ap.add_argument("--model", default=None,
                        help="model dir (default <cache>/models/opus-mt-zh-en)")
    return ap


def work_dir(arg, prefix: str) -> Path:
    """The scratch folder ``arg`` (made if missing), else a new temporary one named ``prefix``..."""
    work = Path(arg) if arg else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return work


class timer:
    """``with timer() as t: ...`` then ``t.s``: the wall seconds of the block (``perf_counter``)
    and ``t.cpu``: this process's CPU seconds in it (``process_time``, all its threads, no child
    process); inside the block ``t.elapsed()`` gives the wall seconds so far."""

    def __enter__(self):
        self.s = self.cpu = None
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def __exit__(self, *exc):
        self.s, self.cpu = self.elapsed(), time.process_time() - self.c0
        return False


def _maxrss_mb(who) -> float:
    import resource

    rss = resource.getrusage(who).ru_maxrss
    return round(rss / (2 ** 20 if sys.platform == "darwin" else 1024), 1)  # bytes on macOS


def peak_rss_mb() -> dict:
    """``{"self", "children"}``: ``ru_maxrss`` in MiB of this process and of the largest
    waited-for descendant so far."""
    import resource

    return {"self": _maxrss_mb(resource.RUSAGE_SELF),
            "children": _maxrss_mb(resource.RUSAGE_CHILDREN)}


def proc_status_kb(field: str) -> int:
    """A field of ``/proc/self/status`` in KiB (``VmRSS``: resident now; ``VmHWM``: its peak
    since the start or the last :func:`reset_peak_rss`); Linux only."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> None:
    """Start this process's peak RSS (``VmHWM``) over from its current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class _TreeSampler(threading.Thread):
    """The largest summed RSS of this process and its descendants, sampled (psutil)."""

    def __init__(self, psutil):
        super().__init__(daemon=True, name="benchlib-rss")
        self.psutil, self.peak, self.done = psutil, 0, threading.Event()
        self.me = psutil.Process()

    def sample(self) -> None:
        total = 0
        try:
            procs = [self.me] + self.me.children(recursive=True)
        except self.psutil.Error:
            return
        for p in procs:
            try:
                total += p.memory_info().rss
            except self.psutil.Error:  # it ended between the listing and the read
                pass
        self.peak = max(self.peak, total)

    def run(self) -> None:
        while not self.done.wait(SAMPLE_S):
            self.sample()

    def stop(self) -> float:
        self.done.set()
        self.join()
        self.sample()
        return round(self.peak / 2 ** 20, 1)


def _psutil():
    """psutil if installed, else the copy Ray ships in ``ray/thirdparty_files``, else None."""
    try:
        import psutil
        return psutil
    except ImportError:
        pass
    import importlib.util

    try:
        spec = importlib.util.find_spec("ray")
    except (ImportError, ValueError):
        spec = None
    for where in (spec.submodule_search_locations or []) if spec else []:
        third = Path(where) / "thirdparty_files"
        if (third / "psutil").is_dir():
            sys.path.append(str(third))
            try:
                import psutil
                return psutil
            except ImportError:
                sys.path.remove(str(third))
    return None


def git_state(repo: Path = REPO) -> tuple:
    """``(commit, dirty)`` of the checkout at ``repo``: the HEAD commit and whether tracked or
    untracked (not ignored) files differ from it, generated results left out; ``(None, None)``
    when ``repo`` is not a git checkout or git is missing."""
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", ".",
                                 *_NOT_CODE], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit, bool(status.strip())


def _cpu_model() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return model


def gpus() -> list:
    """Names of the CUDA devices torch sees (``[]`` without torch, CUDA or a device)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - a broken driver is "no GPU" for the record, not a failure
        return []


def loadavg():
    """The load average over 1, 5 and 15 minutes (``None`` where the OS has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


# the CPU flags a record names: the matrix units the bf16 and int8 products' rates depend on
CPU_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")


def cpu_flags() -> dict:
    """Which of :data:`CPU_FLAGS` this CPU has (``/proc/cpuinfo``'s first ``flags`` line,
    :func:`triemine.scoring.precision.cpu_flags`; each ``None`` where it cannot be read)."""
    from triemine.scoring.precision import cpu_flags as flags_of

    have = flags_of()
    return {k: k in have for k in CPU_FLAGS} if have else dict.fromkeys(CPU_FLAGS)


def machine_facts() -> dict:
    """CPU model and flags (:func:`cpu_flags`), visible cores, OS, Python, torch, GPUs and the
    load average (1, 5, 15 min)."""
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    try:
        cores_usable = len(os.sched_getaffinity(0))
    except AttributeError:
        cores_usable = os.cpu_count()
    return {"cpu": _cpu_model(), "cpu_flags": cpu_flags(), "cores": os.cpu_count(),
            "cores_usable": cores_usable,
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "torch": torch_version, "gpus": gpus(), "summary": machine(),
            "loadavg": loadavg()}


def threads() -> dict:
    """The threads this process computes with: ``OMP_NUM_THREADS`` as set and torch's
    intra-op threads (``None`` when torch is not installed)."""
    try:
        import torch

        torch_threads = torch.get_num_threads()
    except ImportError:
        torch_threads = None
    return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "torch": torch_threads}


def _cache_state() -> dict:
    """The cache root and what it held at the start (its top-level folders other than the
    imported models): a run on a warm cache reuses tries, priors or translations."""
    try:
        from triemine.io.paths import cache_root

        root = cache_root()
        held = sorted(p.name for p in root.iterdir() if p.name not in ("models", "bicleaner"))
    except (ImportError, OSError):
        return {"root": None, "held_at_start": None}
    return {"root": str(root), "held_at_start": held}


def results_dir(arg=None) -> Path:
    """Where records go: ``arg``, else ``$TRIEMINE_BENCH_RESULTS``, else ``bench/results``."""
    return Path(arg or os.environ.get(RESULTS_ENV) or REPO / "bench" / "results")


class Run:
    """One benchmark run: the clock, the memory sampler, the commit and load at its start."""

    def __init__(self, bench: str, args):
        self.bench, self.args = bench, args
        self.quick = bool(getattr(args, "quick", False))
        self.record = bool(getattr(args, "record", False))
        self.command = list(getattr(args, "command", None) or sys.argv)
        self.commit, self.dirty = git_state()
        self.date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.load_start = loadavg()
        self.cache = _cache_state()
        psutil = _psutil()
        self.sampler = _TreeSampler(psutil) if psutil is not None else None
        if self.sampler is not None:
            self.sampler.start()
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        """Wall seconds since the run started."""
        return time.perf_counter() - self.t0

    def record_of(self, results: dict) -> dict:
        """The record of this run with ``results`` (stops the clock and the sampler)."""
        wall = self.elapsed()
        tree = self.sampler.stop() if self.sampler is not None else None
        facts = machine_facts()
        facts["loadavg_start"], facts["loadavg_end"] = self.load_start, facts.pop("loadavg")
        return {"bench": self.bench, "commit": self.commit, "dirty": self.dirty, "date": self.date,
                "quick": self.quick, "command": self.command, "machine": facts,
                "threads": threads(), "cache": self.cache, "wall_s": round(wall, 2),
                "peak_rss_mb": {**peak_rss_mb(), "tree": tree,
                                "tree_by": f"psutil {self.sampler.psutil.__version__} sampled "
                                           f"every {SAMPLE_S} s" if self.sampler else None},
                "results": results}

    def finish(self, results: dict) -> int:
        """Print ``results`` as the last line of stdout; with ``--record``, append the run's
        record to ``<results dir>/<bench>.jsonl``. Returns 0 (the script's exit status)."""
        rec = self.record_of(results)
        if self.record:
            out = results_dir(getattr(self.args, "results_dir", None)) / f"{self.bench}.jsonl"
            out.parent.mkdir(parents=True, exist_ok=True)
            line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
            # one write() on an O_APPEND descriptor: runs that end together never interleave
            fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            print(f"{self.bench}: record appended to {out}", file=sys.stderr, flush=True)
        print(json.dumps(results, ensure_ascii=False), flush=True)
        return 0


def start(bench: str, args) -> Run:
    """Start the run of benchmark ``bench`` (its script's stem) with parsed ``args``."""
    return Run(bench, args)


def machine() -> str:
    """CPU model, visible cores and OS, e.g. 'AMD EPYC 7B13, 2 cores, Linux 6.1'."""
    return f"{_cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def cached_tiny_model(name: str = "decode-tiny-model-v2", updates: int = 300):
    """``(path, seconds spent training)``: the tiny synthetic model of the benchmarks, trained once
    into ``<cache>/bench/NAME`` (atomically, so concurrent benchmarks cannot see half a model)."""
    from triemine.testing.tiny_model import build_tiny_model
    from triemine.io.paths import cache_root

    tiny = cache_root() / "bench" / name
    if (tiny / "triemine-model.json").is_file():
        return tiny, 0.0
    tiny.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix=f"{name}.", dir=tiny.parent)
    build_tiny_model(tmp, updates=updates)
    try:
        os.replace(tmp, tiny)
    except OSError:  # another process won the race: keep its model
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return tiny, round(time.perf_counter() - t0, 2)


def shared_model_dir(arg, prog: str):
    """The imported OPUS-MT model directory (``arg`` or ``<cache>/models/opus-mt-zh-en``); exits
    with a clear message when it has not been imported."""
    from triemine.io.paths import cache_root

    model_dir = Path(arg) if arg else cache_root() / "models" / "opus-mt-zh-en"
    if not (model_dir / "checkpoint.pt").is_file():
        sys.exit(f"{prog}: no imported model at {model_dir} (make model)")
    return model_dir


def shared_model(arg, prog: str):
    """The model of :func:`shared_model_dir` loaded on the CPU, with torch's intra-op threads
    set to ``OMP_NUM_THREADS`` (default 1)."""
    import torch

    from triemine.models.model_dir import load_model_dir

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))
    return load_model_dir(shared_model_dir(arg, prog))


def bucc_sets(work, quick: bool, keys=("sample", "transfer")) -> dict:
    """``{"sample": gold, "transfer": gold}``: the BUCC zh-en sample and the zh-en transfer set
    (those of ``keys``); with ``quick``, slices of them in ``work`` (16 gold + 16 other sources,
    their gold targets and 300 other target lines)."""
    from triemine.evaluation.slices import write_bucc_slice
    from triemine.io.paths import BUCC_ZH_EN, DEVSET_ZH_EN, shared_path

    sets = {"sample": (BUCC_ZH_EN, "zh-en.sample.gold"),
            "transfer": (DEVSET_ZH_EN, "zh-en.dev.gold")}
    golds = {}
    for key in keys:
        gold = shared_path(*sets[key][0], sets[key][1])
        if quick:
            # a split name of its own per set: outputs are named after the gold file
            gold, _ = write_bucc_slice(gold, Path(work) / key, n_gold=16, n_other=16,
                                       split=f"quick{key}", n_other_targets=300)
        golds[key] = Path(gold)
    return golds


def tuned_and_transferred(rows: dict, golds: dict, filt: str, rank_by: str,
                          rule: str = "one-to-one") -> tuple:
    """``(tuned, figures)``: mining rows ``rows["sample"]`` evaluated on ``golds["sample"]`` with
    the threshold tuned on its gold (``tuned``, 2-fold held out too), that threshold applied
    unchanged to ``rows["transfer"]`` on ``golds["transfer"]``, and the transfer set tuned on its
    own gold; ``figures``: ``threshold``, ``rule``, ``filter`` and the strict P/R/F1 of each
    (``sample_tuned``, ``sample_heldout``, ``transfer``, ``transfer_tuned``)."""
    from triemine.evaluation.bucc import read_bucc
    from triemine.evaluation.pipeline import Direction, evaluate

    sb, tb = read_bucc(golds["sample"]), read_bucc(golds["transfer"])
    kw = dict(filt=filt, rank_by=rank_by, rule=rule)
    tuned = evaluate([Direction(rows["sample"])], sb, folds=2, **kw)
    th = {"zh-en": next(iter(tuned.thresholds.values()))}
    transfer = evaluate([Direction(rows["transfer"])], tb, thresholds=th,
                        thresholds_source=f"fixed:tuned-on:{Path(golds['sample']).name}", **kw)
    transfer_tuned = evaluate([Direction(rows["transfer"])], tb, **kw)
    for line in (tuned.signature("strict"), transfer.signature("strict")):
        print(line, flush=True)
    return tuned, {"threshold": th["zh-en"], "rule": rule, "filter": filt,
                   "sample_tuned": tuned.strict.as_dict(),
                   "sample_heldout": tuned.heldout_strict.as_dict(),
                   "transfer": transfer.strict.as_dict(),
                   "transfer_tuned": transfer_tuned.strict.as_dict()}


def bucc_unpaired_sources() -> list:
    """``[(id, text)]`` of the BUCC zh-en sample's Chinese sentences without a gold pair, in
    file order (Wikipedia text with nothing to find in unrelated English)."""
    from triemine.evaluation.bucc import read_bucc
    from triemine.io.paths import BUCC_ZH_EN, shared_path

    b = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    gold_src = {s for s, _ in b.gold}
    return [(i, t) for i, t in zip(b.src.ids, b.src.texts) if i not in gold_src]


def de_en_rows(lines) -> list:
    """``[("de-en-<n>", text)]`` of the 0-based line numbers ``lines`` of
    ``parallel/de-en/train.en`` (``n`` = the 1-based line number)."""
    from triemine.evaluation.splits import de_en_english

    en = de_en_english()
    return [(f"de-en-{j + 1}", en[j]) for j in lines]


def write_lines(path, lines) -> Path:
    """``lines`` at ``path``, each ended by a newline (UTF-8); returns ``path``."""
    path = Path(path)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@contextlib.contextmanager
def env_var(name: str, value):
    """``os.environ[name]`` set to ``value`` while the body runs (``None``: left as it is), then
    restored (removed when it was not set)."""
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = str(value)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def write_corpus(path, rows) -> None:
    """``rows`` (``(id, text)``) as ``id<TAB>text`` lines at ``path``; a file that already holds
    exactly them is left alone (a job resumed in the same folder sees the same input)."""
    data = "".join(f"{i}\t{t}\n" for i, t in rows)
    path = Path(path)
    if not (path.is_file() and path.read_text(encoding="utf-8") == data):
        path.write_text(data, encoding="utf-8")


def mine_corpora(model, config: str, source, target, output, **given) -> tuple:
    """``(result, wall_s, resumed)``: the mining job of named configuration ``config``
    (:func:`triemine.api.run`, one-to-one selection at the configuration's shipped cut) of corpus
    files ``source`` against ``target`` into the mining TSV ``output``, with the settings
    ``given`` by field name (:meth:`~triemine.api.MineOptions.of`'s, e.g. ``second_look=True``);
    its stages resume from ``<output>.work`` when an earlier run left it (``resumed``: then
    ``wall_s`` is not the job's)."""
    from triemine.api import MineOptions, run as run_job

    resumed = Path(str(output) + ".work").is_dir()
    t0 = time.perf_counter()
    result = run_job(MineOptions.of(config, **given), model, str(source), str(target),
                     str(output), select=True, resume=True)
    return result, round(time.perf_counter() - t0, 1), resumed


# -- reliability cases: each call counted as ok, silent_wrong or traceback ------------------------

def outcome(call, expect_refusal: bool, ok_message=lambda err: True) -> tuple:
    """``(kind, stderr)`` of an in-process CLI or API call: ``ok`` (refused with exit 2 or an
    InputError whose message passes ``ok_message``, or accepted when no refusal is expected),
    ``silent_wrong`` (accepted what must be refused, or refused without saying why) or
    ``traceback`` (any other exception escaped)."""
    import io

    from triemine.errors import InputError

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = call()
    except SystemExit as exc:  # argparse's refusal
        code = exc.code
    except InputError as exc:  # the Python API's refusal
        err.write(str(exc))
        code = 2
    except Exception as exc:  # noqa: BLE001 - a traceback for the user
        return "traceback", f"{type(exc).__name__}: {exc}"
    text = err.getvalue()
    if "Traceback" in text:
        return "traceback", text
    if not expect_refusal:
        return ("ok" if code in (0, None) else "silent_wrong"), text
    return ("ok" if code == 2 and ok_message(text) else "silent_wrong"), text


def tally(res: dict, prefix: str, outcomes, inputs_before: dict, examples: list) -> None:
    """Add the ``(name, kind, stderr)`` outcomes to the counts of ``res``; inputs whose bytes
    changed since ``inputs_before`` count as overwritten."""
    for name, kind, text in outcomes:
        res[f"{prefix}_cases"] = res.get(f"{prefix}_cases", 0) + 1
        res[f"{prefix}_{kind}"] = res.get(f"{prefix}_{kind}", 0) + 1
        if kind != "ok" and len(examples) < 8:
            examples.append(f"{name}: {kind}: {text.strip()[-200:]}")
    res[f"{prefix}_inputs_overwritten"] = res.get(f"{prefix}_inputs_overwritten", 0) + sum(
        1 for p, data in inputs_before.items() if not p.is_file() or p.read_bytes() != data)


def simulated_reader(run, is_true, true_precision: float, n: int, seeds: int) -> dict:
    """``{"reader_coverage", "reader_interval_width"}``: for each of ``seeds`` seeds, a sheet of
    ``n`` kept pairs of ``run`` (:func:`triemine.evaluation.review.read_run`) drawn as
    ``trie-mine-review`` draws it, answered ``y`` where ``is_true(key)`` (a pair's ``(src_id,
    tgt_id)``) and ``n`` elsewhere; the share of seeds whose 95 % interval holds
    ``true_precision``, and the intervals' mean width (None without seeds)."""
    import numpy as np

    from triemine.evaluation.review import draw
    from triemine.evaluation.review_answers import Answers, summarize

    hits, widths = 0, []
    for seed in range(seeds):
        sheet = draw(run, n=n, seed=seed, below=0)
        answers = Answers("answers.tsv", sheet.fingerprint, sheet.params())
        for no, p in enumerate(sheet.pairs, 3):
            key = (p["src_id"], p["tgt_id"])
            answers.rows[key] = ("y" if is_true(key) else "n", no)
        s = summarize(run, sheet, answers)
        hits += s["low"] <= true_precision <= s["high"]
        widths.append(s["high"] - s["low"])
    return {"reader_coverage": round(hits / max(seeds, 1), 3),
            "reader_interval_width": round(float(np.mean(widths)), 4) if widths else None}
