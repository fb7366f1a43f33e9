"""trie-mine: parallel sentence mining with trie-constrained NMT beam search (Chen et al., ACL 2020).

Data flows one way: corpus -> ``triemine.trie``; source -> ``triemine.decoding`` (trie, model)
-> candidate pairs -> ``triemine.filtering`` -> ``triemine.evaluation``.
Importing this package is cheap: subpackages that need torch/fairseq import them lazily.
"""

__version__ = "0.1.0"
