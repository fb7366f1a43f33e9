"""Bilingual sentence embeddings by autoencoding, with an MLP similarity (Kim et al., 2019).

A source (zh) BiGRU encoder and a target (en) BiGRU encoder share one GRU decoder that writes
English: trained on translation (zh -> en, the training pairs) and autoencoding (en -> en, the
training pairs' English and monolingual English of ``parallel/de-en/train.en``), one batch of
each per step.  The sentence embedding is the max-pool of the encoder states (``(B, 2H)``); the
decoder sees only it (initial state and every input), so it must carry the sentence.  The
decoder's output vocabulary is the ``out_vocab`` most frequent pieces of the English it is
trained on (the rest is UNK), predicted through an adaptive softmax (Grave et al., 2017): a
head over the ``cutoffs[0]`` most frequent pieces and one cluster a tail, the rarer pieces in
smaller-dimensional tails: a normalised ``out_vocab``-way distribution that costs about as much
as a ``cutoffs[0]``-way softmax for most positions (its measured gain over the full softmax:
docs/decisions.md).

On top, a similarity MLP (two hidden ReLU layers, sigmoid) over ``[u, v, u*v, |u-v|]`` of the
normalised embeddings, trained with the frozen encoders on the training pairs against their
hardest negatives (each source's most cosine-similar wrong targets).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np
import torch
from torch import nn

from triemine.baselines.base import Budget, PairClassifierBaseline, hardest_negatives
from triemine.baselines.nn import GruEncoder, PairHead, PieceEmbedding
from triemine.baselines.text import PAD, Batch, pad_batch

EOS, UNK, BOS = 1, 2, 3  # output vocabulary ids (0 is PAD)


@dataclass
class AutoencoderConfig:
    emb: int = 128
    hidden: int = 128
    dec_hidden: int = 192
    out_vocab: int = 3000
    # adaptive softmax: the head holds the output ids below the first cutoff, each tail those up
    # to the next one (cutoffs >= out_vocab are dropped; none left: a full softmax)
    cutoffs: Tuple[int, ...] = (250, 1000)
    max_target: int = 30
    batch: int = 64
    lr: float = 3e-3  # 1e-3 left the loss 6 % higher after 120 updates (docs/decisions.md)
    epochs: int = 3
    max_seconds: float = 300.0
    max_steps: int = 0  # 0: epochs and seconds bind
    mlp_hidden: Tuple[int, ...] = (256, 128)
    mlp_negatives: int = 3
    mlp_epochs: int = 8
    mlp_batch: int = 256
    seed: int = 1


class SharedDecoder(nn.Module):
    """GRU decoder conditioned on a sentence vector ``(B, S)``; ``loss(sent, target) -> scalar``
    (mean cross-entropy of the target's pieces and EOS, teacher-forced), over an adaptive
    softmax when some of ``c.cutoffs`` lie inside ``(4, c.out_vocab)``."""

    def __init__(self, vocab_size: int, c: AutoencoderConfig, sent_dim: int):
        super().__init__()
        self.register_buffer("out_map", torch.full((vocab_size,), UNK, dtype=torch.long))
        self.max_target = c.max_target
        self.embed = nn.Embedding(c.out_vocab, c.emb)
        self.init = nn.Linear(sent_dim, c.dec_hidden)
        self.gru = nn.GRU(c.emb + sent_dim, c.dec_hidden, batch_first=True)
        cut = sorted(
            {int(x) for x in c.cutoffs if 4 < int(x) < c.out_vocab}
        )  # head: PAD/EOS/UNK/BOS
        self.out = nn.AdaptiveLogSoftmaxWithLoss(c.dec_hidden, c.out_vocab, cut, div_value=4.0) \
            if cut else nn.Linear(c.dec_hidden, c.out_vocab)

    def set_vocabulary(self, id_lists, size: int) -> None:
        """Output vocabulary: the ``size - 4`` most frequent input ids of ``id_lists``."""
        counts = np.bincount(np.fromiter((i for s in id_lists for i in s), dtype=np.int64),
                             minlength=len(self.out_map))
        top = np.argsort(-counts, kind="stable")[: size - 4]
        top = top[counts[top] > 0]
        self.out_map.fill_(UNK)
        self.out_map[torch.from_numpy(top)] = torch.arange(4, 4 + len(top))

    def loss(self, sent: torch.Tensor, target: Batch) -> torch.Tensor:
        T = min(int(target.lengths.max()), self.max_target)
        lengths = target.lengths.clamp(max=T)
        y = torch.full((len(lengths), T + 1), PAD, dtype=torch.long)     # (B, T+1)
        mask = torch.arange(T)[None, :] < lengths[:, None]
        y[:, :T] = self.out_map[target.ids[:, :T]].masked_fill(~mask, PAD)
        y[torch.arange(len(lengths)), lengths] = EOS
        prev = torch.cat([torch.full((len(lengths), 1), BOS, dtype=torch.long), y[:, :-1]], dim=1)
        x = torch.cat([self.embed(prev), sent[:, None, :].expand(-1, T + 1, -1)], dim=2)
        out, _ = self.gru(x, torch.tanh(self.init(sent))[None])          # (B, T+1, D)
        if isinstance(self.out, nn.Linear):
            logits = self.out(out)                                       # (B, T+1, V_out)
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               y.reshape(-1), ignore_index=PAD)
        real = y.reshape(-1) != PAD
        return self.out(out.reshape(-1, out.shape[-1])[real], y.reshape(-1)[real]).loss


class AutoencoderNet(nn.Module):
    def __init__(self, resources, c: AutoencoderConfig):
        super().__init__()
        vocab = resources.tokenizer.vocab_size
        embed = PieceEmbedding.of(resources, c.emb)
        self.enc = nn.ModuleDict({"src": GruEncoder(embed, c.emb, c.hidden),
                                  "tgt": GruEncoder(embed, c.emb, c.hidden)})
        dim = 2 * c.hidden
        self.decoder = SharedDecoder(vocab, c, dim)
        self.mlp = PairHead(dim, c.mlp_hidden, with_inputs=True)

    def embed(self, side: str, batch: Batch) -> torch.Tensor:
        """``(B, 2H)`` max-pooled encoder states of ``side``."""
        return self.enc[side].max_pool(batch)


class Autoencoder(PairClassifierBaseline):
    name = "ae_mlp"
    space = "ae"
    score = "ae_mlp"
    Config = AutoencoderConfig
    Net = AutoencoderNet
    head_attr = "mlp"

    @classmethod
    def fit(cls, net, resources, c, data):
        tok = resources.tokenizer
        src, tgt = tok.ids(data.src, "src"), tok.ids(data.tgt, "tgt")
        english = tgt + tok.ids(data.mono_tgt, "tgt")
        net.decoder.set_vocabulary(english, c.out_vocab)
        rng = np.random.default_rng(c.seed)
        params = [
            p for n, p in net.named_parameters() if p.requires_grad and not n.startswith("mlp.")
        ]
        opt = torch.optim.Adam(params, lr=c.lr)
        budget = Budget(c.epochs, c.max_seconds, c.max_steps)
        net.train()
        for idx in budget.batches(len(src), c.batch, rng):
            ae = rng.integers(0, len(english), size=len(idx))
            target = pad_batch([tgt[i] for i in idx])
            en = pad_batch([english[i] for i in ae])
            loss = net.decoder.loss(net.embed("src", pad_batch([src[i] for i in idx])), target) + \
                net.decoder.loss(net.embed("tgt", en), en)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
            budget.record(loss.item() / 2)
        net.eval()
        stats = budget.describe()
        model = cls(net, resources, c)
        stats["mlp"] = model.fit_mlp(data, rng)
        stats["autoencoder_seconds"] = stats["seconds"]
        stats["seconds"] = round(stats["seconds"] + stats["mlp"]["seconds"], 1)
        return stats

    def fit_mlp(self, data, rng: np.random.Generator) -> dict:
        """Train the similarity MLP on frozen embeddings (positives and hardest negatives)."""
        c, net = self.config, self.net
        u, v = self.encode(data.src, "src"), self.encode(data.tgt, "tgt")
        neg = hardest_negatives(u, v, c.mlp_negatives, data.tgt)              # (n, m)
        s = np.concatenate([np.arange(len(u)), np.repeat(np.arange(len(u)), neg.shape[1])])
        t = np.concatenate([np.arange(len(u)), neg.reshape(-1)])
        y = np.concatenate([np.ones(len(u)), np.zeros(neg.size)]).astype(np.float32)
        U, V, Y = torch.from_numpy(u), torch.from_numpy(v), torch.from_numpy(y)
        opt = torch.optim.Adam(net.mlp.parameters(), lr=1e-3)
        budget = Budget(c.mlp_epochs, c.max_seconds)
        net.mlp.train()
        for idx in budget.batches(len(s), c.mlp_batch, rng):
            loss = nn.functional.binary_cross_entropy_with_logits(
                net.mlp(U[s[idx]], V[t[idx]]), Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.mlp.eval()
        return dict(budget.describe(), negatives_per_pair=int(neg.shape[1]), final_loss=loss.item())

    def encoder_fn(self, side):
        return lambda batch: nn.functional.normalize(self.net.embed(side, batch), dim=1)

