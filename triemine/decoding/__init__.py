"""triemine.decoding: trie-constrained beam search, the fairseq plugin task and the miner.

Public API (imported lazily, fairseq is heavy): ``load_model_dir``, ``mine``, ``mine_batches``,
``mine_to_tsv``, ``get_trie``, ``Match``, ``TrieConstrainedBeamSearch``,
``TrieSequenceGenerator``.
"""

_API = {
    "load_model_dir": "triemine.decoding.model_dir", "ModelDir": "triemine.decoding.model_dir",
    "mine": "triemine.decoding.mine", "mine_batches": "triemine.decoding.mine",
    "mine_to_tsv": "triemine.decoding.mine", "get_trie": "triemine.decoding.mine",
    "Match": "triemine.decoding.mine",
    "TrieConstrainedBeamSearch": "triemine.decoding.search",
    "TrieSequenceGenerator": "triemine.decoding.generator",
}

__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        import importlib
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(name)
