"""The arithmetic a job's model computes in (``--precision``): :data:`PRECISIONS`, the rule of
which runs where (:func:`check_precision`) and the one this machine's CPU computes fastest
(``auto``, :func:`auto_precision`, the :data:`DEFAULT`; :func:`resolve_precision` turns it into
the one a job runs before any work, so keys and records never say ``auto``); without torch, for
the settings tree."""
from __future__ import annotations

from triemine.errors import InputError

# the arithmetic a job's model computes in (``--precision``): fp32, or the encoder and decoder in
# bfloat16 / float16 with the logits, their log-sum-exp and every sum in float32
# (docs/decisions.md#what-runs-in-half-precision)
PRECISIONS = ("fp32", "bf16", "fp16")
AUTO = "auto"  # --precision auto: the one auto_precision picks, resolved before any work
DEFAULT = AUTO  # a job's arithmetic unless its configuration or the user names one
# the CPU flags (/proc/cpuinfo) of a unit that multiplies bf16 natively: AMX, AVX-512 BF16
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def check_precision(precision: str, device: str = "cpu") -> str:
    """``precision`` when a job can compute in it on ``device``: one of :data:`PRECISIONS`, fp16
    off the CPU only (torch's fp16 products on the CPU are several times slower than fp32:
    docs/decisions.md#fp16-on-the-cpu-is-refused).  An :class:`~triemine.errors.InputError` naming
    the choices otherwise."""
    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r}: choose from {', '.join(PRECISIONS)}")
    if precision == "fp16" and str(device).split(":")[0] == "cpu":
        raise InputError("--precision fp16 runs on a GPU only (torch's fp16 products on the CPU "
                         "are several times slower than fp32): use bf16 or fp32 on the CPU")
    return precision


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset:
    """The flags of the first processor of ``path`` (empty where there is no such file)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def auto_precision(device: str = "cpu", flags=None, trie_search: bool = False) -> str:
    """The arithmetic ``--precision auto`` resolves to: ``bf16`` on a CPU with a bf16 matrix
    unit (:data:`BF16_FLAGS` among ``flags``, default this machine's :func:`cpu_flags`), whose
    exact scores then run in bf16 tiles (:mod:`triemine.scoring.tiled`); ``fp32`` elsewhere,
    off the CPU (whose half path is not the tiles') and for a job with the trie search (which
    computes in fp32)."""
    if trie_search or str(device).split(":")[0] != "cpu":
        return "fp32"
    flags = cpu_flags() if flags is None else frozenset(flags)
    return "bf16" if flags & set(BF16_FLAGS) else "fp32"



def resolve_precision(precision: str, device: str = "cpu", trie_search: bool = False) -> str:
    """``precision``, or the one :func:`auto_precision` picks for ``device`` (and a job with the
    trie search) when it is :data:`AUTO`; not checked (:func:`check_precision` does that)."""
    if precision == AUTO:
        return auto_precision(device, trie_search=trie_search)
    return precision
