"""triemine.decoding: trie-constrained beam search, the fairseq plugin task and the trie search's
driver.

Public API (imported lazily, fairseq is heavy): ``load_model_dir``, ``SearchSettings``, ``mine``,
``mine_batches``, ``mine_to_tsv``, ``get_trie``, ``Match``, ``TrieConstrainedBeamSearch``,
``TrieSequenceGenerator``.

Modules: ``settings`` (:class:`SearchSettings`, the one home of the search's defaults),
``batching`` (blocks and decoder batches), ``runner`` (the search over sources in memory:
``mine``, ``mine_batches``), ``matches`` (:class:`Match`, TSV rows), ``trie_cache``
(``get_trie``), ``driver`` (``mine_to_tsv``: a corpus to a mining TSV, in this process or on a
pool), ``lengths`` (the over-long-line rule), ``search`` / ``generator`` (the constrained
search), ``task`` (the fairseq task),
``model_spec`` (a model directory as a worker resource), ``shards`` (the search's shard task).
Model directories load in :mod:`triemine.models.model_dir` (``load_model_dir`` and ``ModelDir``
are re-exported here); importing this package registers the ``trie_translation`` task there
(:func:`~triemine.models.model_dir.register_before_load`), so a checkpoint may name it.
"""
from triemine.models.model_dir import register_before_load

_API = {
    "load_model_dir": "triemine.models.model_dir", "ModelDir": "triemine.models.model_dir",
    "SearchSettings": "triemine.decoding.settings",
    "mine": "triemine.decoding.runner", "mine_batches": "triemine.decoding.runner",
    "mine_to_tsv": "triemine.decoding.driver", "MineSummary": "triemine.decoding.driver",
    "get_trie": "triemine.decoding.trie_cache",
    "Match": "triemine.decoding.matches",
    "TrieConstrainedBeamSearch": "triemine.decoding.search",
    "TrieSequenceGenerator": "triemine.decoding.generator",
}

__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(name)


def _register_task() -> None:
    """The ``trie_translation`` task (and through it the Marian architectures)."""
    import triemine.decoding.task  # noqa: F401  heavy: fairseq (registers on import)


register_before_load(_register_task)
