"""Imported by fairseq through ``--user-dir``: registers trie-mine's task and architectures.

Registration happens in the triemine modules themselves, so importing them from Python and
through ``--user-dir`` in the same process registers each name once.
"""
import triemine.decoding.task  # noqa: F401  (registers task "trie_translation")
import triemine.models.marian  # noqa: F401  (registers Marian-compatible architectures)
