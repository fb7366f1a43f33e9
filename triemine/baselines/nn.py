"""Small torch modules shared by the baselines (shapes: B batch, T pieces, E/H/D widths)."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from triemine.baselines.text import Batch


class PieceEmbedding(nn.Module):
    """Token embeddings ``(B, T) -> (B, T, E)``.

    With ``pretrained`` (``(V, 512)``, the OPUS-MT matrix) the table is frozen and a trainable
    linear layer maps it to ``E``; without it (tiny runs) a trainable ``(vocab, E)`` table.
    The frozen table is a buffer that is not saved: it is reloaded from the model directory.
    """

    def __init__(self, out_dim: int, pretrained: Optional[torch.Tensor] = None, vocab: int = 0):
        super().__init__()
        if pretrained is not None:
            self.register_buffer("table", pretrained.float(), persistent=False)
            self.proj = nn.Linear(pretrained.shape[1], out_dim)
            self.own = None
        else:
            self.table = None
            self.proj = None
            self.own = nn.Embedding(vocab, out_dim)

    @classmethod
    def of(cls, resources, out_dim: int) -> "PieceEmbedding":
        """For :class:`~triemine.baselines.base.Resources` (pretrained table when it has one)."""
        return cls(out_dim, resources.pretrained, resources.tokenizer.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.own is not None:
            return self.own(ids)
        return self.proj(nn.functional.embedding(ids, self.table))

    def mean(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(B, E)``: mean over the ``mask``ed positions (projected after averaging: the
        projection is linear, so this equals the mean of :meth:`forward` and costs T times less)."""
        w = (mask.float() / mask.sum(1, keepdim=True).clamp(min=1))[:, :, None]   # (B, T, 1)
        if self.own is not None:
            return (self.own(ids) * w).sum(1)
        return self.proj((nn.functional.embedding(ids, self.table) * w).sum(1))


class GruEncoder(nn.Module):
    """Bidirectional GRU over embedded pieces.

    ``forward(batch) -> (states (B, T, 2H), final (B, 2H))``: every position's forward/backward
    states and the concatenated last forward and first backward states.
    """

    def __init__(self, embed: PieceEmbedding, emb_dim: int, hidden: int):
        super().__init__()
        self.embed = embed
        self.gru = nn.GRU(emb_dim, hidden, batch_first=True, bidirectional=True)
        self.out_dim = 2 * hidden

    def forward(self, batch: Batch):
        x = self.embed(batch.ids)
        packed = pack_padded_sequence(x, batch.lengths, batch_first=True, enforce_sorted=False)
        out, h = self.gru(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=batch.ids.shape[1])
        return states, torch.cat([h[0], h[1]], dim=1)

    def max_pool(self, batch: Batch) -> torch.Tensor:
        """``(B, 2H)``: element-wise max over the real positions (Kim et al., 2019)."""
        states, _ = self(batch)
        return states.masked_fill(~batch.mask[:, :, None], float("-inf")).max(dim=1).values


def mlp(sizes: Sequence[int], dropout: float = 0.0) -> nn.Sequential:
    """Linear layers of ``sizes`` with ReLU (and dropout) between them; no final activation."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
            if dropout:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class PairHead(nn.Module):
    """Pair classifier ``(u (B, D), v (B, D)) -> logit (B,)`` on ``[u*v, |u-v|]`` (Grégoire &
    Langlais 2017), or ``[u, v, u*v, |u-v|]`` with ``with_inputs`` (the MLP of Kim et al. 2019)."""

    def __init__(self, dim: int, hidden: Sequence[int], with_inputs: bool = False,
                 dropout: float = 0.0):
        super().__init__()
        self.with_inputs = with_inputs
        self.net = mlp([dim * (4 if with_inputs else 2), *hidden, 1], dropout)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        feats = [u * v, (u - v).abs()]
        if self.with_inputs:
            feats = [u, v] + feats
        return self.net(torch.cat(feats, dim=1)).squeeze(1)


class DanEncoder(nn.Module):
    """Deep averaging network (Iyyer et al. 2015, as in Guo et al. 2018): mean of piece
    embeddings and of hashed piece-bigram embeddings, then feed-forward layers.

    ``forward(batch) -> (B, D)`` (not normalised).  The bigram table (``bigram_buckets`` rows)
    has sparse gradients (only the rows a batch uses): train it with
    ``torch.optim.SparseAdam`` (:func:`adam_for`).
    """

    def __init__(self, embed: PieceEmbedding, emb_dim: int, hidden: int, out_dim: int,
                 bigram_buckets: int = 1 << 15, bigram_init: float = 0.01):
        super().__init__()
        self.embed = embed
        self.buckets = int(bigram_buckets)
        self.bigrams = nn.Embedding(self.buckets, emb_dim, sparse=True)
        nn.init.normal_(self.bigrams.weight, std=bigram_init)  # small: start from the unigrams
        self.ff = nn.Sequential(nn.Linear(2 * emb_dim, hidden), nn.Tanh(),
                                nn.Linear(hidden, hidden),
                                nn.Tanh(), nn.Linear(hidden, out_dim))

    def forward(self, batch: Batch) -> torch.Tensor:
        mask = batch.mask.float()                                     # (B, T)
        uni = self.embed.mean(batch.ids, batch.mask)                  # (B, E)
        ids = batch.ids
        big = (ids[:, :-1] * 1000003 + ids[:, 1:]) % self.buckets     # (B, T-1)
        bmask = mask[:, 1:]                                           # (B, T-1)
        bi = (self.bigrams(big) * bmask[:, :, None]).sum(1) / bmask.sum(1,
                                                                        keepdim=True).clamp(min=1)
        return self.ff(torch.cat([uni, bi], dim=1))


def adam_for(net: nn.Module, lr: float) -> list:
    """Optimizers for ``net``'s trainable parameters, to step together: SparseAdam for the
    tables of its ``nn.Embedding(sparse=True)`` modules (their gradients are sparse), Adam for
    the rest."""
    sparse = {id(m.weight): m.weight for m in net.modules()
              if isinstance(m, nn.Embedding) and m.sparse and m.weight.requires_grad}
    dense = [p for p in net.parameters() if p.requires_grad and id(p) not in sparse]
    out = [torch.optim.Adam(dense, lr=lr)] if dense else []
    return out + ([torch.optim.SparseAdam(list(sparse.values()), lr=lr)] if sparse else [])
