"""What every benchmark reports about where it ran (imported by the bench scripts)."""
from __future__ import annotations

import os
import platform


def machine() -> str:
    """CPU model, visible cores and OS, e.g. 'AMD EPYC 7B13, 2 cores, Linux 6.1'."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def cached_tiny_model(name: str = "decode-tiny-model-v2", updates: int = 300):
    """``(path, seconds spent training)``: the tiny synthetic model of the benchmarks, trained once
    into ``<cache>/bench/NAME`` (atomically, so concurrent benchmarks cannot see half a model)."""
    import tempfile
    import time

    from triemine.decoding.testing import build_tiny_model
    from triemine.paths import cache_root

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
    import sys
    from pathlib import Path

    from triemine.paths import cache_root

    model_dir = Path(arg) if arg else cache_root() / "models" / "opus-mt-zh-en"
    if not (model_dir / "checkpoint.pt").is_file():
        sys.exit(f"{prog}: no imported model at {model_dir} (make model)")
    return model_dir


def bucc_sets(work, quick: bool) -> dict:
    """``{"sample": gold, "transfer": gold}``: the BUCC zh-en sample and the zh-en transfer set;
    with ``quick``, slices of both in ``work`` (16 gold + 16 other sources, their gold targets and
    300 other target lines; 30 / 30 / 600 until 2026-11-24, when bucc_bench --quick outgrew a
    minute)."""
    from pathlib import Path

    from triemine.evaluation.slices import write_bucc_slice
    from triemine.paths import BUCC_ZH_EN, DEVSET_ZH_EN, shared_path

    sets = {"sample": (BUCC_ZH_EN, "zh-en.sample.gold"), "transfer": (DEVSET_ZH_EN, "zh-en.dev.gold")}
    golds = {}
    for key, (where, name) in sets.items():
        gold = shared_path(*where, name)
        if quick:
            # a split name of its own per set: outputs are named after the gold file
            gold, _ = write_bucc_slice(gold, Path(work) / key, n_gold=16, n_other=16,
                                       split=f"quick{key}", n_other_targets=300)
        golds[key] = Path(gold)
    return golds
