"""Siamese BiRNN parallel-sentence classifier (Grégoire & Langlais, 2017).

One bidirectional GRU encodes both languages (shared weights); a pair's final forward/backward
states ``u``, ``v`` (``(B, 2H)``) give ``[u*v, |u-v|]``, fed to fully connected layers and a
sigmoid: P(parallel).  Training: every positive pair with ``negatives`` (m=7) random targets,
drawn again at every step (so every epoch), binary cross-entropy.  The decision threshold at best
F1 is measured on held-out pairs (reported); for mining the threshold is tuned on BUCC data.

As a miner it needs candidates: the first stage is the cosine kNN of its own encoder's final
states (each source's and each target's ``neighbours`` nearest), rescored by the classifier.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np
import torch
from torch import nn

from triemine.baselines.base import Budget, PairClassifierBaseline
from triemine.baselines.nn import GruEncoder, PairHead, PieceEmbedding
from triemine.baselines.protocols import best_f1
from triemine.baselines.text import pad_batch


@dataclass
class BirnnConfig:
    emb: int = 128
    hidden: int = 128
    fc: Tuple[int, ...] = (128,)
    negatives: int = 7
    batch: int = 64
    lr: float = 2e-3
    epochs: int = 4
    max_seconds: float = 240.0
    max_steps: int = 0  # 0: epochs and seconds bind
    seed: int = 1


class BirnnNet(nn.Module):
    def __init__(self, resources, c: BirnnConfig):
        super().__init__()
        self.encoder = GruEncoder(PieceEmbedding.of(resources, c.emb), c.emb, c.hidden)
        self.head = PairHead(self.encoder.out_dim, c.fc)

    def final(self, batch) -> torch.Tensor:
        """``(B, 2H)`` final states."""
        return self.encoder(batch)[1]


class Birnn(PairClassifierBaseline):
    name = "birnn"
    space = "birnn"
    score = "birnn"
    Config = BirnnConfig
    Net = BirnnNet

    @staticmethod
    def _negatives(n: int, m: int, gen: torch.Generator) -> torch.Tensor:
        """``(n, m)`` indices of other rows of the batch (never the row itself)."""
        m = min(m, n - 1)
        offsets = torch.rand(n, n - 1, generator=gen).argsort(dim=1)[:, :m] + 1
        return (torch.arange(n)[:, None] + offsets) % n

    @classmethod
    def fit(cls, net, resources, c, data):
        tok = resources.tokenizer
        src, tgt = tok.ids(data.src, "src"), tok.ids(data.tgt, "tgt")
        rng = np.random.default_rng(c.seed)
        gen = torch.Generator().manual_seed(c.seed)
        opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=c.lr)
        loss_fn = nn.BCEWithLogitsLoss()
        budget = Budget(c.epochs, c.max_seconds, c.max_steps)
        net.train()
        for idx in budget.batches(len(src), c.batch, rng):
            if len(idx) < 2:
                continue
            u = net.final(pad_batch([src[i] for i in idx]))
            v = net.final(pad_batch([tgt[i] for i in idx]))
            neg = cls._negatives(len(idx), c.negatives, gen)
            pos_logit = net.head(u, v)
            neg_logit = net.head(u.repeat_interleave(neg.shape[1], 0), v[neg.reshape(-1)])
            logits = torch.cat([pos_logit, neg_logit])
            labels = torch.cat([torch.ones_like(pos_logit), torch.zeros_like(neg_logit)])
            loss = loss_fn(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            budget.record(loss.item())
        net.eval()
        stats = budget.describe()
        if data.held_src:
            model = cls(net, resources, c)
            stats["heldout"] = model.heldout_f1(data.held_src, data.held_tgt, c.negatives, c.seed)
        return stats

    def heldout_f1(self, src_texts, tgt_texts, m: int, seed: int) -> dict:
        """Classifier F1 at its best threshold on held-out pairs, each with ``m`` random
        negatives."""
        u, v = self.encode(src_texts, "src"), self.encode(tgt_texts, "tgt")
        n = len(u)
        neg = self._negatives(n, m, torch.Generator().manual_seed(seed)).numpy()
        s = np.repeat(np.arange(n), neg.shape[1])
        scores = np.concatenate([self.head(u, v), self.head(u[s], v[neg.reshape(-1)])])
        labels = np.concatenate([np.ones(n), np.zeros(len(s))])
        best = best_f1(scores, labels)
        return {"threshold": round(best["threshold"], 4), "f1": best["F1"], "pairs": n,
                "negatives_per_pair": m}

    def encoder_fn(self, side):
        return self.net.final
