"""The trie search's settings: one frozen object, the one home of their defaults.

:class:`SearchSettings` is what :func:`triemine.decoding.driver.mine_to_tsv` is told, what its
resume key records (:meth:`SearchSettings.resume_key`, written to ``OUT.tsv.progress`` and into
the shard manifest) and what a shard task carries to the workers
(:class:`triemine.decoding.shards.TrieShardTask`), so the one-process and the sharded run
cannot drift apart.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import List, Optional

from triemine.decoding.batching import (MIN_BLOCKS, SORT_WINDOW, block_size, device_batch,
                                        resolve_batch_size)
from triemine.decoding.fingerprint import model_fingerprint
from triemine.decoding.lengths import LENGTH_RULE
from triemine.paths import content_sha256
from triemine.tsv import column_order

PAPER_BEAM = 90               # the paper's beam for the trie search alone
DEFAULT_SHARD_SOURCES = 256   # a shard of the search holds at least this many sources, or
                              # a 16th of a smaller job (SearchSettings.shard_size)
MODES = ("pre", "post")


@dataclass(frozen=True)
class SearchSettings:
    """How the trie search runs.  Fields that change the output are in :meth:`resume_key`
    (``max_length``, ``token_counts``, ``line_numbers`` and ``trie_nbest`` only when not their
    default, so older sidecars still resume); ``target_shards`` is keyed by the shard
    manifest, the one path that searches several tries; ``shard_sources`` never changes the
    output."""

    mode: str = "pre"                  # pre- or post-expansion
    beam: int = PAPER_BEAM             # beam B
    nbest: Optional[int] = None        # rows for the best K matches per source (None: all)
    batch_size: Optional[int] = None   # sources per decoder batch (None: resolve_batch_size)
    max_tokens: Optional[int] = None   # also cap a batch at this many padded source tokens
    sort_window: int = SORT_WINDOW     # length-sorted batches within blocks of this many batches
    prior_weight: float = 0.0          # lambda of prior-corrected pre-expansion
    with_prior: bool = False           # add the prior and pmi columns (implied by prior_weight)
    token_counts: bool = False         # add n_tokens, each match's target tokens (EOS included)
    line_numbers: bool = False         # add src_line and tgt_line, each row's corpus lines
                                       # (1-based; what the mining job's trie generator reads)
    max_length: Optional[int] = None   # skip lines longer than this many model tokens
    trie_nbest: int = 1                # segmentations per target line in a built trie
    target_shards: int = 1             # K tries over line ranges of the target corpus
    shard_sources: Optional[int] = None  # sources a shard holds at least (None: shard_size's
                                         # default)
    block_sources: Optional[int] = None  # sources per block; the driver sets it for the job
                                         # (for_job); None: sort_window batches

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be 'pre' or 'post', got {self.mode!r}")
        if self.sort_window < 1:
            raise ValueError("sort_window must be >= 1")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.target_shards < 1:
            raise ValueError("target shards must be >= 1")
        if self.shard_sources is not None and self.shard_sources < 1:
            raise ValueError("shard size must be >= 1")

    @property
    def priors(self) -> bool:
        """Whether the search needs node priors (and writes the prior columns)."""
        return bool(self.with_prior or self.prior_weight)

    @property
    def columns(self) -> List[str]:
        """The columns of the search's mining TSV (:func:`triemine.tsv.column_order`)."""
        return column_order(["score", "ce_word", "ce_token"]
                            + (["prior", "pmi"] if self.priors else [])
                            + (["n_tokens"] if self.token_counts else [])
                            + (["src_line", "tgt_line"] if self.line_numbers else []))

    @property
    def sources_per_batch(self) -> int:
        """``batch_size`` resolved (:func:`~triemine.decoding.batching.resolve_batch_size`)."""
        return resolve_batch_size(self.batch_size, self.beam)

    @property
    def sources_per_block(self) -> int:
        """Non-empty sources per block (:func:`~triemine.decoding.batching.plan_blocks`)."""
        if self.block_sources is not None:
            return self.block_sources
        return self.sort_window * self.sources_per_batch

    def on_device(self, device: str) -> "SearchSettings":
        """These settings as a search on ``device`` runs them: off the CPU a batch and a token
        cap left unset take the device's defaults (:func:`~triemine.decoding.batching.device_batch`),
        so they are in the resume key and the shards' tasks; on the CPU unchanged."""
        sources, tokens = device_batch(self.beam, device)
        if sources is None:
            return self
        return replace(self, batch_size=self.batch_size if self.batch_size is not None else sources,
                       max_tokens=self.max_tokens if self.max_tokens is not None else tokens)

    def for_job(self, n_nonempty: int) -> "SearchSettings":
        """These settings with the blocks of a job of ``n_nonempty`` sources
        (:func:`~triemine.decoding.batching.block_size`), as the driver runs them and sends them
        to the workers, who plan their slices with the same blocks."""
        return replace(self, block_sources=block_size(n_nonempty, self.sources_per_batch,
                                                      self.sort_window))

    def shard_size(self, n_sources: int) -> int:
        """Sources a shard holds at least: ``shard_sources`` when given, else
        ``DEFAULT_SHARD_SOURCES`` but at most ``1 / MIN_BLOCKS`` of the job, so that a small job
        still has shards for several workers."""
        if self.shard_sources is not None:
            return self.shard_sources
        return max(1, min(DEFAULT_SHARD_SOURCES, -(-int(n_sources) // MIN_BLOCKS)))

    def resume_key(self, model, source_path, target_path, n_sources: int) -> dict:
        """What the output depends on, as the sidecars record it and resume checks it (the same
        bytes for the one-process and the sharded run)."""
        return {"model": model_fingerprint(model),
                "source": os.path.abspath(source_path), "target": os.path.abspath(target_path),
                # what the corpora hold, not only where they are: a corpus edited in place
                # (even keeping its size and mtime) is never resumed
                "source_sha256": content_sha256(source_path),
                "target_sha256": content_sha256(target_path),
                "mode": self.mode, "beam": self.beam, "nbest": self.nbest,
                "batch_size": self.sources_per_batch, "sort_window": self.sort_window,
                "max_tokens": self.max_tokens, "n_sources": n_sources,
                "prior_weight": self.prior_weight, "with_prior": self.priors,
                "lengths": LENGTH_RULE,  # the batches are cut by these counts
                **({"max_length": self.max_length} if self.max_length else {}),
                **({"trie_nbest": self.trie_nbest} if self.trie_nbest != 1 else {}),
                **({"token_counts": True} if self.token_counts else {}),
                **({"line_numbers": True} if self.line_numbers else {}),
                **({"block_sources": self.sources_per_block}
                   if self.sources_per_block != self.sort_window * self.sources_per_batch
                   and self.sort_window > 1 else {})}
