"""Parallel-mining baselines trained here, scored by the same evaluation code as trie-mine.

Systems (``SYSTEMS``; see docs/baselines.md):

* ``birnn``    -- Siamese BiGRU classifier (Grégoire & Langlais, 2017); score ``birnn``;
* ``ae_mlp``   -- autoencoding bilingual embeddings + MLP similarity (Kim et al., 2019);
  score ``ae_mlp`` (also ``ae_cos``, ``ae_margin``);
* ``dual_enc`` -- dual encoder with hard negatives (Guo et al., 2018); score ``dual_enc_margin``;
* ``opus_enc`` -- the OPUS-MT encoder, mean-pooled, ratio margin: no training; score
  ``opus_enc_margin``.

The trained ones learn only from ``devsets/zh-en/train`` (plus monolingual English for the
autoencoder), tokenise with the OPUS-MT source sentencepiece model and start from its (frozen)
embedding matrix.  Trained models are cached in ``<cache>/baselines/<name>.pt``
(:func:`triemine.baselines.systems.load_or_train`); ``tiny=True`` trains a small model on a slice
in seconds.

Importing this package registers the systems' score names
(:func:`triemine.filtering.registry.register_score`) and loads no torch; the systems themselves
are in :mod:`triemine.baselines.systems`.
"""
from __future__ import annotations

from triemine.filtering.registry import register_score

SYSTEMS = ("birnn", "ae_mlp", "dual_enc", "opus_enc")  # classes: triemine.baselines.systems
TRAINED = ("birnn", "ae_mlp", "dual_enc")

_SPACES = {"birnn": "the Siamese BiRNN's final states (first stage, k=10)",
           "ae": "the autoencoder's max-pooled embeddings (first stage, k=10)",
           "dual_enc": "the hard-negative dual encoder (k=4)",
           "opus_enc": "the OPUS-MT encoder, mean-pooled (k=4)"}
for _space, _what in _SPACES.items():
    register_score(f"{_space}_cos", True, f"cosine of the pair in the space of {_what}")
    register_score(f"{_space}_margin", True, f"LASER's ratio margin in the space of {_what}")
register_score("birnn", True, "Siamese BiRNN classifier P(parallel) (Grégoire & Langlais 2017)")
register_score("ae_mlp", True,
               "MLP similarity on autoencoded bilingual embeddings (Kim et al. 2019)")
