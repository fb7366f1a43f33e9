"""trie-mine: parallel sentence mining with trie-constrained NMT beam search (Chen et al. 2020).

Data flows one way: corpus -> ``triemine.trie``; source -> ``triemine.decoding`` (trie, model)
-> candidate pairs -> ``triemine.filtering`` -> ``triemine.evaluation``.
Importing this package is cheap: subpackages that need torch/fairseq import them lazily.

The main job from Python: ``triemine.mine(source, target, model=DIR)`` (:mod:`triemine.api`).
"""

__version__ = "0.2.0"

import os as _os

# OpenMP threads that sleep while they wait (libgomp reads this when torch loads it, so only an
# import of triemine before torch's has it): with spinning threads, torch's intra-op threads
# and numpy's BLAS threads fight for the cores of a shared machine
# (docs/decisions.md#openmp-threads-wait-passively).  Set either variable to keep libgomp's own
# default.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

_API = {"mine": "triemine.api", "MineOptions": "triemine.mining.options",
        "MiningResult": "triemine.mining.result", "score": "triemine.cleaning",
        "InputError": "triemine.errors", "OutputError": "triemine.errors"}

__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(name)
