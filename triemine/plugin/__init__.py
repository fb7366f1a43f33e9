"""fairseq ``--user-dir`` for trie-mine.

``trie-mine-user-dir`` prints the directory to pass as ``--user-dir``; fairseq imports it as the
top-level module ``triemine_fairseq``, which registers the ``trie_translation`` task and the
Marian-compatible architectures by importing their (uniquely named) triemine modules.
"""
from pathlib import Path


def user_dir() -> str:
    return str(Path(__file__).resolve().parent / "triemine_fairseq")
