"""The model fingerprint of resume keys: which directory, which weights.

Its own module so that everything keyed by a model (the trie search's ``.progress``, the shard
manifests, the mining job's ``settings.json``) reads it from one place that imports nothing back.
Node priors and other caches that only depend on the weights use
:attr:`triemine.models.model_dir.ModelDir.weights_digest` directly.
"""
from __future__ import annotations

import os


def model_fingerprint(model) -> str:
    """``<model dir>@<checkpoint sha256 prefix>``: a resumed run must use the very same weights."""
    root = getattr(model, "path", None)
    if root is None:
        return "unknown"
    return f"{os.path.abspath(root)}@{model.weights_digest}"
