"""Multilingual sentence encoders and margin-based kNN candidates.

Encoders are named once, in :data:`ENCODERS`; :func:`get_encoder` builds one by name.  Every
encoder maps a list of sentences to L2-normalised float32 rows (``encode(texts) -> (n, dim)``),
so cosine similarity is an inner product (see :mod:`triemine.embedding.knn`).
"""
from triemine.embedding.encoders import ENCODERS, SentenceEncoder, get_encoder, register_encoder  # noqa: F401
