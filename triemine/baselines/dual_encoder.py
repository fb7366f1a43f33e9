"""Dual encoder trained on translation ranking, retrained with hard negatives (Guo et al., 2018).

One deep averaging network (mean of piece embeddings and of hashed piece-bigram embeddings,
three feed-forward layers) encodes both languages; a pair's score is the dot product of the
L2-normalised outputs times ``scale`` (a scaled cosine: plain dot products of unnormalised
vectors were less stable here).  Stage 1: softmax over the in-batch targets (each source ranks
its own target against the other targets of the batch).  Stage 2: training continues (from the
stage-1 weights: with minutes of CPU a fresh model could not catch up) with the same loss plus,
for every source, ``hard_negatives`` (M) targets that the stage-1 model ranks highest among all
training targets without being the translation (or the same text).  With held-out pairs and
``check_every > 0``, stage 1 stops early: its held-out P@1 is measured every ``check_every``
updates, training ends after ``patience`` checks without a gain, and stage 1 keeps its best
weights (:class:`~triemine.baselines.base.EarlyStop`); stage 2 runs its whole budget, so every M
of the ablation gets the same updates.

Mining: cosine kNN with LASER's ratio margin (``dual_enc_margin``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from triemine.baselines.base import Budget, EarlyStop, TrainedBaseline, hardest_negatives
from triemine.baselines.knn import retrieval_precision
from triemine.baselines.nn import DanEncoder, PieceEmbedding, adam_for
from triemine.baselines.text import pad_batch


@dataclass
class DualEncoderConfig:
    emb: int = 256
    hidden: int = 512
    out: int = 256
    batch: int = 128
    lr: float = 3e-4  # 1e-3 collapsed to chance in stage 1 (loss stuck at log(batch))
    scale: float = 20.0
    epochs: int = 12
    max_seconds: float = 100.0  # per stage
    max_steps: int = 0  # per stage; 0: epochs and seconds bind
    hard_negatives: int = 3
    check_every: int = 150  # stage 1: held-out P@1 every this many updates (0: no early stop)
    patience: int = 3  # stage 1 stops after this many checks without a gain
    seed: int = 1


class DualEncoderNet(nn.Module):
    def __init__(self, resources, c: DualEncoderConfig):
        super().__init__()
        self.encoder = DanEncoder(PieceEmbedding.of(resources, c.emb), c.emb, c.hidden, c.out)

    def forward(self, batch) -> torch.Tensor:
        """``(B, D)`` L2-normalised sentence vectors."""
        return nn.functional.normalize(self.encoder(batch), dim=1)


def ranking_loss(src: torch.Tensor, tgt: torch.Tensor, hard, scale: float) -> torch.Tensor:
    """Softmax cross-entropy of each source ``(B, D)`` ranking its target (row i of ``tgt``,
    ``(B, D)``) above the batch's other targets and its own hard negatives ``(B, M, D)``."""
    logits = scale * src @ tgt.T                                           # (B, B)
    if hard is not None:
        logits = torch.cat([logits, scale * torch.einsum("bd,bmd->bm", src, hard)], dim=1)
    return nn.functional.cross_entropy(logits, torch.arange(len(src)))


class DualEncoder(TrainedBaseline):
    name = "dual_enc"
    space = "dual_enc"
    score = "dual_enc_margin"
    Config = DualEncoderConfig
    Net = DualEncoderNet

    @classmethod
    def _train_stage(cls, net, src, tgt, c, rng, hard=None, check=None) -> dict:
        """Train ``net`` on piece ids ``src``/``tgt`` (``hard``: ``(n, M)`` hard-negative target
        rows, or None) under ``c``'s budget; with ``check`` (``net -> held-out score``) and
        ``c.check_every > 0``, stop early and keep the best weights (record under
        ``"early_stop"``).  Returns the training record; ``net`` is left in eval mode."""
        opts = adam_for(net, c.lr)
        budget = Budget(c.epochs, c.max_seconds, c.max_steps)
        stopper = EarlyStop(check, c.patience) if check and c.check_every > 0 else None
        net.train()
        for idx in budget.batches(len(src), c.batch, rng):
            if len(idx) < 2:
                continue
            h = None
            if hard is not None:
                flat = hard[idx].reshape(-1)
                h = net(pad_batch([tgt[i] for i in flat])).reshape(len(idx), hard.shape[1], -1)
            loss = ranking_loss(net(pad_batch([src[i] for i in idx])),
                                net(pad_batch([tgt[i] for i in idx])), h, c.scale)
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
            budget.record(loss.item())
            if stopper and budget.steps % c.check_every == 0 and stopper.check(net, budget.steps):
                budget.stop()
        net.eval()
        stats = budget.describe()
        if stopper:
            stats["early_stop"] = stopper.finish(net, budget.steps)
        return stats

    @classmethod
    def _heldout_p1(cls, resources, c, data):
        """``net -> P@1`` of the held-out sources among the held-out targets (this system's
        score), or None without held-out pairs or with ``c.check_every == 0``."""
        if not data.held_src or c.check_every <= 0:
            return None
        gold = np.arange(len(data.held_src))
        return lambda net: retrieval_precision(cls(net, resources, c), data.held_src,
                                               data.held_tgt, gold, ks=(1,))["p@1"]

    @classmethod
    def fit(cls, net, resources, c, data):
        tok = resources.tokenizer
        src, tgt = tok.ids(data.src, "src"), tok.ids(data.tgt, "tgt")
        rng = np.random.default_rng(c.seed)
        first = cls.build_net(resources, c)
        stats = {"stage1": cls._train_stage(first, src, tgt, c, rng,
                                            check=cls._heldout_p1(resources, c, data))}
        stage1 = cls(first, resources, c)
        net.load_state_dict(first.state_dict())  # stage 2 continues from stage 1
        stats["stage2"] = cls._stage2(net, stage1, data, src, tgt, c, c.hard_negatives, rng)
        if data.held_src:
            for key, model in (("stage1", stage1), ("stage2", cls(net, resources, c))):
                stats[key]["heldout_precision"] = retrieval_precision(
                    model, data.held_src, data.held_tgt, np.arange(len(data.held_src)))
        stats["seconds"] = round(stats["stage1"]["seconds"] + stats["stage2"]["seconds"], 1)
        return stats

    @classmethod
    def _stage2(cls, net, stage1, data, src, tgt, c, m: int, rng) -> dict:
        """Train ``net`` (holding stage 1's weights) for stage 2 with ``m`` hard negatives a
        source from ``stage1``'s ranking; ``m = 0``: in-batch random negatives only."""
        hard = None
        if m > 0:
            hard = hardest_negatives(stage1.encode(data.src, "src"), stage1.encode(data.tgt, "tgt"),
                                     m, data.tgt)                                # (n, M)
        stats = cls._train_stage(net, src, tgt, c, rng, hard)
        stats["hard_negatives"] = 0 if hard is None else int(hard.shape[1])
        return stats

    @classmethod
    def train_stage1(cls, resources, data, config=None, **overrides) -> "DualEncoder":
        """Stage 1 alone (in-batch random negatives), seeded like :meth:`train`; the start of
        :meth:`negatives_ablation`."""
        config = config or cls.Config()
        if overrides:
            config = cls.Config(**dict(asdict(config), **overrides))
        tok = resources.tokenizer
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            net = cls.build_net(resources, config)
            stats = {"stage1": cls._train_stage(net, tok.ids(data.src, "src"),
                                                tok.ids(data.tgt, "tgt"),
                                                config, np.random.default_rng(config.seed),
                                                check=cls._heldout_p1(resources, config, data))}
        stats["data"] = data.describe()
        return cls(net, resources, config, stats)

    def negatives_ablation(self, data, ms=(0, 5, 10, 20), **overrides) -> dict:
        """Guo et al.'s ablation from this model taken as stage 1: for each M of ``ms``, stage 2
        trained afresh from these weights on ``data`` for the same budget (``config``'s
        ``max_steps``/``max_seconds``/``epochs``, changed by ``overrides``), ``M = 0`` with the
        in-batch random negatives only.  Returns ``{M: DualEncoder}`` (their training records in
        ``.stats``); the global random state is untouched."""
        tok = self.resources.tokenizer
        c = type(self.config)(**dict(asdict(self.config), **overrides))
        src, tgt = tok.ids(data.src, "src"), tok.ids(data.tgt, "tgt")
        out = {}
        for m in ms:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(c.seed + 1000 + int(m))
                net = self.build_net(self.resources, c)
                net.load_state_dict(self.net.state_dict())
                stats = self._stage2(net, self, data, src, tgt, c, int(m),
                                     np.random.default_rng(c.seed + 1000 + int(m)))
            out[int(m)] = type(self)(net, self.resources, c, {"stage2": stats})
        return out

    def encoder_fn(self, side):
        return self.net
