"""The baseline systems by name: their classes, training, the trained-model cache, and the
score columns ``trie-mine-filter --bicleaner`` / ``--classifier NAME`` add to a mining TSV.

Importing this module loads torch (every system's module); :mod:`triemine.baselines` itself
only names the systems and registers their score names.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence

from triemine.baselines import SYSTEMS, TRAINED
from triemine.baselines.autoencoder import Autoencoder
from triemine.baselines.base import Resources
from triemine.baselines.birnn import Birnn
from triemine.baselines.dual_encoder import DualEncoder
from triemine.baselines.knn import score_pairs
from triemine.baselines.opus_encoder import OpusEncoder
from triemine.baselines.text import training_pairs
from triemine.errors import InputError
from triemine.filtering.bicleaner import score_bicleaner
from triemine.io import cache_root

logger = logging.getLogger(__name__)

CLASSES = {"birnn": Birnn, "ae_mlp": Autoencoder, "dual_enc": DualEncoder, "opus_enc": OpusEncoder}

# small settings: seconds of training on one thread (tests, --quick)
TINY = {
    "birnn": dict(emb=48, hidden=48, fc=(48,), epochs=3, max_seconds=2.5, batch=32),
    "ae_mlp": dict(emb=48, hidden=48, dec_hidden=64, out_vocab=800, epochs=3, max_seconds=2.5,
                   batch=32, mlp_hidden=(64, 32), mlp_epochs=6),
    "dual_enc": dict(emb=64, hidden=128, out=64, epochs=8, max_seconds=1.5, batch=64),
}


def cache_dir() -> Path:
    """``<TRIEMINE_CACHE>/baselines``."""
    return cache_root() / "baselines"


def system_class(name: str):
    """The class of system ``name`` (:data:`~triemine.baselines.SYSTEMS`)."""
    if name not in CLASSES:
        raise InputError(f"unknown baseline {name!r} (choose from {', '.join(SYSTEMS)})")
    return CLASSES[name]


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


def with_scores(mined, *, reverse: bool = False, bicleaner: bool = False,
                bicleaner_model: Optional[str] = None, batch_size: int = 5000,
                classifiers: Sequence[str] = (), model_dir: Optional[str] = None):
    """``mined`` (a mining TSV, :class:`~triemine.io.tsv.Mined`) with the columns of
    ``trie-mine-filter --bicleaner`` (``bicleaner``) and ``--classifier NAME`` (each baseline's
    score columns), scored in the l1->l2 direction (``reverse``: the TSV is l2->l1).
    ``model_dir``: the MT model the baselines use (default: the shared zh-en model in the
    cache)."""
    src, tgt = (mined.tgt, mined.src) if reverse else (mined.src, mined.tgt)
    if bicleaner:
        mined = mined.with_column("bicleaner", score_bicleaner(
            src, tgt, model=bicleaner_model, batch_size=batch_size))
    model_dir = model_dir or str(cache_root() / "models" / "opus-mt-zh-en")
    for name in classifiers:
        for col, vals in score_pairs(load_or_train(name, model_dir), src, tgt).items():
            mined = mined.with_column(col, vals)
    return mined
