"""The trie search's settings: one frozen object, the one home of their defaults.

:class:`SearchSettings` is what :func:`triemine.decoding.driver.mine_to_tsv` is told, what its
resume key records (:func:`triemine.decoding.driver.search_key`, written to ``OUT.tsv.progress``
and into the shard manifest) and what a shard task carries to the workers
(:class:`triemine.decoding.shards.TrieShardTask`), so the one-process and the sharded run
cannot drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional

from triemine.decoding.batching import (MIN_BLOCKS, SORT_WINDOW, block_size, device_batch,
                                        resolve_batch_size)
from triemine.config.settings import finite, setting
from triemine.io import column_order

PAPER_BEAM = 90               # the paper's beam for the trie search alone
DEFAULT_SHARD_SOURCES = 256   # a shard of the search holds at least this many sources, or
                              # a 16th of a smaller job (SearchSettings.shard_size)
MODES = ("pre", "post")


@dataclass(frozen=True)
class SearchSettings:
    """How the trie search runs (a node of the settings tree, :mod:`triemine.config.settings`: each
    field declares its default, help, range and flag).  Every field but the transient
    ``shard_sources`` (which never changes the output) is in the search's key
    (:func:`triemine.config.settings.key_of`; :func:`triemine.decoding.driver.search_key`)."""

    mode: str = setting("pre", exclusive={
        "--pre-expansion": ("pre", "trie search: mask tokens outside the trie before top-k "
                                   "(default)"),
        "--post-expansion": ("post", "trie search: ordinary top-k, then drop hypotheses that "
                                     "left the trie")})
    beam: int = setting(PAPER_BEAM, "trie search beam B (default {paper_beam} for --candidates "
                        "trie, {job_beam} inside the mining job)", flag="--beam", low=1)
    nbest: Optional[int] = setting(None, "--candidates trie: write at most K matches per source "
                                   "(default all)", flag="--nbest", low=1)
    batch_size: Optional[int] = setting(
        None, "trie search: sources per decoder batch (default 320 // beam, at most 64: 64 at "
        "beam 5, 16 at beam 20, 3 at beam 90)", flag="--batch-size", low=1)
    max_tokens: Optional[int] = setting(None, "trie search: also cap a batch at this many padded "
                                        "source tokens", flag="--max-tokens", low=1)
    sort_window: int = setting(SORT_WINDOW, "trie search: length-sorted batches within blocks of "
                               "N batches (output in input order; 1: no sorting; default "
                               "{sort_window})", flag="--sort-window", metavar="N", low=1)
    prior_weight: float = setting(0.0, "rank trie hypotheses by log P(y|x) - W * log P(y|empty "
                                  "source) (pre-expansion; default 0)", flag="--prior-weight",
                                  parse=finite)
    with_prior: bool = setting(False, "--config paper: add prior = log P(y|empty source) and "
                               "pmi columns (the mining job always has them)", flag="--priors",
                               const=True)
    token_counts: bool = setting(False)  # add n_tokens, each match's target tokens (EOS included)
    line_numbers: bool = setting(False)  # add src_line and tgt_line, each row's corpus lines
                                         # (1-based; what the mining job's trie generator reads)
    max_length: Optional[int] = setting(
        None, "skip source and target lines longer than N model tokens (EOS included); lines "
        "over the model's own limit are always skipped, counted in the summary and the TSV's "
        ".meta.json (skipped_long)", flag="--max-length", metavar="N", low=2,
        low_note=" (one piece and EOS)")
    trie_nbest: int = setting(1, "sentencepiece segmentations per target line in a built trie "
                              "(1)", flag="--trie-nbest", low=1, high=512,
                              high_note=" (sentencepiece samples at most 512 segmentations)")
    target_shards: int = setting(
        1, "trie search: split the target corpus into K line ranges with a trie each; every "
        "source is searched in each, matches merged by score keeping the beam's B best (each "
        "shard has its own beam: recall grows in practice, cost grows about K-fold; default 1)",
        flag="--target-shards", metavar="K", low=1, group="scale")
    shard_sources: Optional[int] = setting(
        None, "trie search: at least N sources per shard (default {shard_sources}, or a 16th of "
        "a smaller job; scoring shards: {score_chunk} pairs, a 4th of a smaller job, at least "
        "{min_score_chunk})", flag="--shard-size", metavar="N", low=1, group="scale",
        transient=True)
    block_sources: Optional[int] = setting(None)  # sources per block; the driver sets it for the
                                                  # job (for_job); None: sort_window batches

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
        """The columns of the search's mining TSV (:func:`triemine.io.tsv.column_order`)."""
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
        cap left unset take the device's defaults
        (:func:`~triemine.decoding.batching.device_batch`),
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
