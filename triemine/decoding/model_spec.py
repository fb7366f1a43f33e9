"""A model directory as a worker resource: what a shard task names to have its model loaded.

:class:`ModelSpec` is a resource of :mod:`triemine.distributed.tasks` (the key of a worker's
cache: one load per worker for every task that names it); :func:`model_spec` names a loaded
model; :func:`inline_model_pool` runs shards in this process with the model as loaded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from triemine.models.model_dir import load_model_dir
from triemine.distributed.local import InlinePool


@dataclass(frozen=True)
class ModelSpec:
    """A model directory (absolute ``path``), its target SentencePiece model and its device."""

    path: str
    target_spm: Optional[str] = None
    device: str = "cpu"

    def load(self, ctx):
        return load_model_dir(self.path, target_spm=self.target_spm, device=self.device)


def model_spec(model, device: str = "cpu") -> ModelSpec:
    """The spec of ``model`` (a :class:`~triemine.models.model_dir.ModelDir`) on ``device``."""
    spm = getattr(model, "target_spm_path", None)
    return ModelSpec(os.path.abspath(model.path), os.path.abspath(spm) if spm else None, device)


def inline_model_pool(model, device: str = "cpu") -> InlinePool:
    """This process as a pool for shards that need ``model``, as loaded (no second load); a
    shard that fails is not tried again, as the code would fail the same way."""
    return InlinePool(max_attempts=1, loaded={model_spec(model, device): model})
