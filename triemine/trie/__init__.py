"""Compact array trie of target sentences (see :mod:`triemine.trie.core` for the layout).

``Trie`` is the data structure; ``build_trie_from_corpus`` turns a text corpus into one through
sentencepiece and a fairseq dictionary (:mod:`triemine.trie.build`, which imports those two only
when it reads a corpus).
"""
from triemine.trie.build import BuildStats, build_trie_from_corpus, dictionary_fingerprint
from triemine.trie.core import FORMAT_VERSION, MAX_TOKEN, Trie

__all__ = ["Trie", "FORMAT_VERSION", "MAX_TOKEN", "build_trie_from_corpus", "BuildStats",
           "dictionary_fingerprint"]
