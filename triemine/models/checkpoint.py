"""Loading fairseq checkpoints on torch >= 2.6.

fairseq pickles its config (argparse/omegaconf objects) into checkpoints, which torch's default
``weights_only=True`` loader refuses. fairseq calls ``torch.load`` itself, so the only switch is
torch's ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``, read at each call: it is set for the duration of
the load and restored afterwards. Only load checkpoints you trust (full unpickling runs code).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

_FLAG = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


@contextmanager
def trusted_checkpoint_loading() -> Iterator[None]:
    old = os.environ.get(_FLAG)
    os.environ[_FLAG] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(_FLAG, None)
        else:
            os.environ[_FLAG] = old


def load_ensemble(checkpoint: str, arg_overrides: Optional[Dict[str, Any]] = None):
    """``fairseq.checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides)``."""
    from fairseq import checkpoint_utils

    with trusted_checkpoint_loading():
        return checkpoint_utils.load_model_ensemble_and_task([checkpoint],
                                                             arg_overrides=arg_overrides)
