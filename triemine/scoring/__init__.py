"""Exact sentence scores of the MT model: log P(y | x) by teacher forcing and the target priors
log P(y | empty source) (:mod:`triemine.scoring.forced`, :mod:`triemine.scoring.prior`)."""


def forced_scoring():
    """:mod:`triemine.scoring.forced`, imported on first use: it loads torch and fairseq
    (seconds), which a caller that only plans work or names files need not pay for."""
    from triemine.scoring import forced

    return forced


# the arithmetic a job's model computes in (``--precision``): fp32, or the encoder and decoder in
# bfloat16 / float16 with the logits, their log-sum-exp and every sum in float32
# (docs/decisions.md#half-precision-scores)
PRECISIONS = ("fp32", "bf16", "fp16")


def check_precision(precision: str, device: str = "cpu") -> str:
    """``precision`` when a job can compute in it on ``device``: one of :data:`PRECISIONS`, fp16
    off the CPU only (torch's fp16 products on the CPU are several times slower than fp32:
    docs/decisions.md#half-precision-scores).  An :class:`~triemine.errors.InputError` naming
    the choices otherwise."""
    from triemine.errors import InputError

    if precision not in PRECISIONS:
        raise InputError(f"--precision {precision!r}: choose from {', '.join(PRECISIONS)}")
    if precision == "fp16" and str(device).split(":")[0] == "cpu":
        raise InputError("--precision fp16 runs on a GPU only (torch's fp16 products on the CPU "
                         "are several times slower than fp32): use bf16 or fp32 on the CPU")
    return precision
