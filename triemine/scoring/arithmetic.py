"""What the bits of the exact scores depend on besides the model and the texts, for the keys of
what keeps them (the mining job's work directory, the priors' caches); free of torch, so the
modules that only name these keys import nothing heavy.  Re-exported by
:mod:`triemine.scoring.forced`.
"""
from __future__ import annotations


# the version of the fp32 scores' arithmetic on the CPU: a change that moves their bits (batch
# sizes, which library computes a product) bumps it, and the keys of what keeps scores across
# runs (the mining job's work directory, the priors' cache) name it, so a resumed job or a warm
# cache never mixes old bits with new.  2: the output projection through numpy's BLAS.
ARITHMETIC = 2


def arithmetic(device: str = "cpu") -> str:
    """What the bits of the scores depend on besides the model and the texts, for the keys of
    what keeps them (``ARITHMETIC`` on the CPU, as before devices were told apart; off the CPU
    the device too, whose products and batches are others)."""
    return str(ARITHMETIC) if device == "cpu" else f"{ARITHMETIC} on {device}"


def weights_device(model) -> str:
    """The device of a loaded model directory's weights (``"cpu"``, ``"cuda:0"``, ...)."""
    return str(next(model.model.parameters()).device)
