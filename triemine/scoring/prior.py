"""Node priors: log P(prefix | empty source) for every node of a trie, computed once per
(target corpus, model) and stored beside the trie.

The prior of a target prefix depends only on the prefix, i.e. on its trie node, so one
teacher-forced pass over the trie's sequences (:class:`~triemine.scoring.forced.ForcedScorer`
with an empty source) gives every node's cumulative prior.  The search uses it to rank
hypotheses by ``log P(y|x) - lambda * log P(y|empty)`` (prior-corrected pre-expansion) and every
match gets its sentence prior (the prior of its terminal node) for free, which is what the
pointwise mutual information needs.

File: ``<trie file>.prior.<model fingerprint>.a<arithmetic>.npy`` (a sealed ``.npy``,
:mod:`triemine.io.checksum`: damaged, it is rebuilt with a warning; float32, one value per node,
root 0; the arithmetic is :data:`triemine.scoring.forced.ARITHMETIC`, so a newer scorer's bits
are never mixed with a cached older pass's).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import numpy as np

from triemine.io import cached_npy, load_npy, write_npy
from triemine.scoring import forced_scoring

logger = logging.getLogger(__name__)


def compute_node_priors(model, trie, progress: bool = False,
                        max_tokens: Optional[int] = None) -> np.ndarray:
    """``float32[n_nodes]``: cumulative log P(tokens from the root to the node | empty source)."""
    import torch

    paths, lengths = trie.terminal_paths()
    keys = np.asarray(trie.keys, dtype=np.int64)
    seqs = [torch.from_numpy(keys[paths[i, :lengths[i]]]) for i in range(len(lengths))]
    scorer = forced_scoring().ForcedScorer(model, max_tokens=max_tokens)
    _, per_tok = scorer.prior(seqs, progress=progress, per_token=True)
    prior = np.zeros(int(trie.n_nodes), dtype=np.float32)
    for i, lp in enumerate(per_tok):  # one vectorised write per sequence
        prior[paths[i, :lengths[i]]] = np.cumsum(lp.astype(np.float64))
    return prior


def prior_path(trie_path, model) -> Path:
    """Where the node priors of the trie at ``trie_path`` under ``model``'s weights are kept."""
    tag = model.weights_digest if getattr(model, "path", None) is not None else "unknown"
    # computed where the weights are: that device's bits
    device = forced_scoring().weights_device(model)
    where = "" if device == "cpu" else "." + "".join(c if c.isalnum() else "-" for c in device)
    return Path(f"{trie_path}.prior.{tag}.a{forced_scoring().ARITHMETIC}{where}.npy")


def get_node_priors(model, trie, progress: bool = False) -> np.ndarray:
    """Node priors of ``trie`` (a trie loaded from a file) under ``model``, computed once and
    memory-mapped from the file beside the trie afterwards."""
    if getattr(trie, "path", None) is None:
        return compute_node_priors(model, trie, progress)
    path = prior_path(trie.path, model)
    arr = cached_npy(path, "node priors cache", np.float32, (int(trie.n_nodes),))
    if arr is not None:
        return arr
    prior = compute_node_priors(model, trie, progress)
    write_npy(path, prior, "node priors")
    logger.info("node priors written to %s", path)
    return load_npy(path, "node priors cache", written=True)
