"""trie-mine: parallel sentence mining with trie-constrained NMT beam search (Chen et al. 2020).

Data flows one way: corpus -> ``triemine.trie``; source -> ``triemine.decoding`` (trie, model)
-> candidate pairs -> ``triemine.filtering`` -> ``triemine.evaluation``.
Importing this package is cheap: subpackages that need torch/fairseq import them lazily.

The main job from Python: ``triemine.mine(source, target, model=DIR)`` (:mod:`triemine.api`).
"""

__version__ = "0.2.0"

_API = {"mine": "triemine.api", "MineOptions": "triemine.mining.options",
        "MiningResult": "triemine.mining.result", "score": "triemine.cleaning",
        "InputError": "triemine.errors", "OutputError": "triemine.errors"}

__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(name)
