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
(:func:`load_or_train`); ``tiny=True`` trains a small model on a slice in seconds.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from triemine.errors import InputError
from triemine.filtering.registry import register_score

logger = logging.getLogger(__name__)

# system name -> (module, class); imported on first use, so that importing this package (which
# registers the score names) does not load torch
_CLASSES = {"birnn": ("birnn", "Birnn"), "ae_mlp": ("autoencoder", "Autoencoder"),
            "dual_enc": ("dual_encoder", "DualEncoder"), "opus_enc": ("opus_encoder", "OpusEncoder")}
SYSTEMS = tuple(_CLASSES)
TRAINED = ("birnn", "ae_mlp", "dual_enc")

# small settings: seconds of training on one thread (tests, --quick)
TINY = {
    "birnn": dict(emb=48, hidden=48, fc=(48,), epochs=3, max_seconds=2.5, batch=32),
    "ae_mlp": dict(emb=48, hidden=48, dec_hidden=64, out_vocab=800, epochs=3, max_seconds=2.5,
                   batch=32, mlp_hidden=(64, 32), mlp_epochs=6),
    "dual_enc": dict(emb=64, hidden=128, out=64, epochs=8, max_seconds=1.5, batch=64),
}

_SPACES = {"birnn": "the Siamese BiRNN's final states (first stage, k=10)",
           "ae": "the autoencoder's max-pooled embeddings (first stage, k=10)",
           "dual_enc": "the hard-negative dual encoder (k=4)",
           "opus_enc": "the OPUS-MT encoder, mean-pooled (k=4)"}
for _space, _what in _SPACES.items():
    register_score(f"{_space}_cos", True, f"cosine of the pair in the space of {_what}")
    register_score(f"{_space}_margin", True, f"LASER's ratio margin in the space of {_what}")
register_score("birnn", True, "Siamese BiRNN classifier P(parallel) (Grégoire & Langlais 2017)")
register_score("ae_mlp", True, "MLP similarity on autoencoded bilingual embeddings (Kim et al. 2019)")


def cache_dir() -> Path:
    """``<TRIEMINE_CACHE>/baselines``."""
    from triemine.paths import cache_root

    return cache_root() / "baselines"


def system_class(name: str):
    """The class of system ``name`` (:data:`SYSTEMS`)."""
    import importlib

    if name not in _CLASSES:
        raise InputError(f"unknown baseline {name!r} (choose from {', '.join(SYSTEMS)})")
    module, cls = _CLASSES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def train(name: str, resources, data, tiny: bool = False, seed: int = 1, **overrides):
    """Train system ``name`` with ``resources`` (:class:`~triemine.baselines.base.Resources`)
    on ``data`` (:class:`~triemine.baselines.text.TrainingPairs`); ``tiny``: the :data:`TINY`
    settings (seconds)."""
    if name not in TRAINED:
        system_class(name)
        raise InputError(f"{name} is not trained")
    cls = system_class(name)
    settings = dict(TINY[name] if tiny else {}, seed=seed, **overrides)
    return cls.train(resources, data, cls.Config(), **settings)


def load_or_train(name: str, model_dir, resources=None, tiny: bool = False, retrain: bool = False,
                  cache: Optional[Path] = None, data=None):
    """The cached model of ``name`` (trained from ``devsets/zh-en/train`` and saved first when
    missing); ``opus_enc`` is built from ``model_dir`` (a path or a loaded ``ModelDir``)."""
    cls = system_class(name)
    if name not in TRAINED:
        return cls(model_dir)
    from triemine.baselines.base import Resources
    from triemine.baselines.text import training_pairs

    path = Path(cache or cache_dir()) / f"{name}{'-tiny' if tiny else ''}.pt"
    resources = resources or Resources.from_model_dir(getattr(model_dir, "path", model_dir))
    if path.is_file() and not retrain:
        try:
            return cls.load(path, resources)
        except InputError as exc:  # e.g. a target sentencepiece model appeared since: retrain
            logger.warning("%s; training %s again", exc, name)
    if data is None:
        data = training_pairs(heldout=100, limit=3000, mono=1000) if tiny else training_pairs()
    model = train(name, resources, data, tiny=tiny)
    model.save(path)
    return model
