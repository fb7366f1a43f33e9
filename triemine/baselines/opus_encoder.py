"""The shared OPUS-MT model's own encoder as a sentence embedder: no training at all.

Both languages go through the zh->en encoder (its source sentencepiece model and dictionary
cover English pieces too); the sentence vector is the mean (or max) of the final encoder states
over the real tokens, EOS included.  Mining: cosine kNN with LASER's ratio margin (k=4), the
zero-training reference for the trained baselines.
"""
from __future__ import annotations

from pathlib import Path

import torch

from triemine.baselines.base import Baseline, encode_batched
from triemine.baselines.text import Batch, PieceTokenizer
from triemine.models.model_dir import ModelDir, load_model_dir

POOLS = ("mean", "max")


class OpusEncoder(Baseline):
    name = "opus_enc"
    space = "opus_enc"
    score = "opus_enc_margin"

    def __init__(self, model_dir, pool: str = "mean", batch_size: int = 64):
        """``model_dir``: a trie-mine model directory (path or loaded ``ModelDir``)."""
        super().__init__()
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}")
        md = model_dir if isinstance(model_dir, ModelDir) else load_model_dir(Path(model_dir))
        self.encoder = md.model.encoder.eval()
        self.pad, self.eos = md.src_dict.pad(), md.src_dict.eos()
        self.tokenizer = PieceTokenizer(md.path)
        self.pool, self.batch_size = pool, batch_size
        self.stats = {"training": "none", "pool": pool, "model": str(md.path)}

    def _pooled(self, batch: Batch) -> torch.Tensor:
        """``(B, C)`` pooled encoder states of the pieces plus EOS."""
        n, width = batch.ids.shape
        toks = torch.full((n, width + 1), self.pad, dtype=torch.long)         # (B, T+1)
        toks[:, :width] = batch.ids.masked_fill(~batch.mask, self.pad)
        toks[torch.arange(n), batch.lengths] = self.eos
        enc = self.encoder(toks, src_lengths=batch.lengths + 1)
        states = enc["encoder_out"][0].transpose(0, 1)                        # (B, T+1, C)
        real = ~enc["encoder_padding_mask"][0]                                # (B, T+1)
        if self.pool == "max":
            return states.masked_fill(~real[:, :, None], float("-inf")).max(dim=1).values
        return (states * real[:, :, None]).sum(1) / real.sum(1, keepdim=True)

    def encode(self, texts, side):
        return encode_batched(self.tokenizer, list(texts), side, self._pooled, self.batch_size)
