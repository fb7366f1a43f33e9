"""The arithmetic a job's model computes in (``--precision``): :data:`PRECISIONS` and the rule
of which runs where (:func:`check_precision`); without torch, for the settings tree."""
from __future__ import annotations

from triemine.errors import InputError

# the arithmetic a job's model computes in (``--precision``): fp32, or the encoder and decoder in
# bfloat16 / float16 with the logits, their log-sum-exp and every sum in float32
# (docs/decisions.md#what-runs-in-half-precision)
PRECISIONS = ("fp32", "bf16", "fp16")


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
