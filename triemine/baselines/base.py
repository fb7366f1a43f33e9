"""What every baseline is: an encoder of both sides, an optional pair head, and how it mines.

A :class:`Baseline` turns sentences into vectors (``encode(texts, side) -> (n, D)``); their
cosine kNN with LASER's ratio margin is the first stage (:mod:`triemine.baselines.knn`).  A
baseline with a pair classifier (``head``) rescores the first stage's candidates with it.

:class:`TrainedBaseline` adds what the trained ones share: the tokenizer and pretrained piece
embeddings (:class:`Resources`), batched encoding, a seeded training run under a time budget,
saving and loading.
"""
from __future__ import annotations

import copy
import pickle
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence

import numpy as np
import torch

from triemine.baselines.text import (Batch, PieceTokenizer, Tokenizer, WordTokenizer, pad_batch,
                                     pretrained_embeddings)
from triemine.embedding.knn import knn
from triemine.errors import InputError

SIDES = ("src", "tgt")


class Baseline:
    """A sentence-pair scorer usable as a miner (see module docstring).

    Class attributes: ``name`` (system), ``space`` (prefix of the ``<space>_cos`` and
    ``<space>_margin`` columns), ``score`` (the column that ranks and filters its pairs),
    ``neighbours`` (k of the margin), ``per_source``/``per_target`` (first-stage candidates),
    ``centre`` (subtract each side's mean vector first).
    """

    name = ""
    space = ""
    score = ""
    neighbours = 4
    per_source = 1
    per_target = 1
    centre = True  # centre each side's vectors on their mean before the cosine (first stage)

    def __init__(self):
        self.stats: dict = {}

    def encode(self, texts: Sequence[str], side: str) -> np.ndarray:
        """``(n, D)`` float32 sentence vectors (not normalised) of ``side`` ("src" or "tgt")."""
        raise NotImplementedError

    def head(self, src: np.ndarray, tgt: np.ndarray) -> Optional[np.ndarray]:
        """Pair scores ``(n,)`` of aligned rows ``src (n, D)``, ``tgt (n, D)``; None: no head."""
        return None

    @property
    def has_head(self) -> bool:
        return self.score not in (f"{self.space}_cos", f"{self.space}_margin")


@dataclass
class Resources:
    """The tokenizer and (optionally) the frozen pretrained piece embeddings ``(V, 512)``."""

    tokenizer: Tokenizer
    pretrained: Optional[torch.Tensor] = None

    @classmethod
    def from_model_dir(cls, model_dir) -> "Resources":
        tok = PieceTokenizer(Path(model_dir))
        emb = pretrained_embeddings(Path(model_dir))
        if emb.shape[0] != tok.vocab_size:
            raise InputError(f"embedding rows ({emb.shape[0]}) differ from the dictionary "
                             f"({tok.vocab_size})", model_dir)
        return cls(tok, emb)

    @classmethod
    def tiny(cls, vocab_size: int = 2048) -> "Resources":
        """Hashed whitespace words and trainable embeddings: no model needed (tests)."""
        return cls(WordTokenizer(vocab_size), None)

    def describe(self) -> dict:
        return dict(self.tokenizer.describe(), pretrained=self.pretrained is not None)


def encode_batched(tokenizer: Tokenizer, texts: Sequence[str], side: str,
                   fn: Callable[[Batch], torch.Tensor], batch_size: int = 256) -> np.ndarray:
    """``fn`` over length-sorted batches of ``texts`` (``side``'s language); rows back in input
    order, ``(n, D)``."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}")
    ids = tokenizer.ids(texts, side)
    order = np.argsort([len(s) for s in ids], kind="stable")
    parts: List[np.ndarray] = []
    with torch.no_grad():
        for s in range(0, len(order), batch_size):
            parts.append(fn(pad_batch([ids[i] for i in order[s:s + batch_size]])).float().numpy())
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
    out[order] = np.concatenate(parts)
    return out


def head_probabilities(head: torch.nn.Module, src: np.ndarray, tgt: np.ndarray,
                       chunk: int = 65536) -> np.ndarray:
    """``sigmoid(head(src, tgt))`` of aligned rows ``(n, D)``, in chunks: ``(n,)`` float64."""
    out = np.empty(len(src), dtype=np.float64)
    with torch.no_grad():
        for s in range(0, len(src), chunk):
            logit = head(torch.from_numpy(np.ascontiguousarray(src[s:s + chunk])),
                         torch.from_numpy(np.ascontiguousarray(tgt[s:s + chunk])))
            out[s:s + chunk] = torch.sigmoid(logit).numpy()
    return out


def hardest_negatives(src: np.ndarray, tgt: np.ndarray, m: int,
                      tgt_texts: Optional[Sequence[str]] = None) -> np.ndarray:
    """``(n, m')``, m' = min(m, n - 1): for each row i, the targets most similar to ``src[i]``
    other than its own target (row i of ``tgt``) and, with ``tgt_texts``, other than any target of
    the same text (rows L2-normalised; a row that finds fewer takes the next row's target)."""
    n = len(src)
    m = min(int(m), n - 1)
    codes = np.unique(np.asarray(tgt_texts, dtype=object), return_inverse=True)[1] \
        if tgt_texts is not None else np.arange(n)
    _, idx = knn(src, tgt, min(n, m + 8))
    wrong = codes[idx] != codes[:, None]
    # each row keeps its first m wrong neighbours, in similarity order
    order = np.argsort(~wrong, axis=1, kind="stable")[:, :m]
    picked = np.take_along_axis(idx, order, axis=1)
    ok = np.take_along_axis(wrong, order, axis=1)
    return np.where(ok, picked, (np.arange(n)[:, None] + 1) % n)


def minibatches(n: int, size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Shuffled index batches covering ``range(n)`` once (the last one may be smaller)."""
    perm = rng.permutation(n)
    for s in range(0, n, size):
        yield perm[s:s + size]


class Budget:
    """Stops training after ``epochs`` epochs, ``max_steps`` updates (0: no step limit) or
    ``max_seconds`` of wall time, whichever comes first; :meth:`record` keeps each step's loss
    for the loss curve of :meth:`describe`."""

    def __init__(self, epochs: int, max_seconds: float, max_steps: int = 0):
        self.epochs, self.max_seconds = int(epochs), float(max_seconds)
        self.max_steps = int(max_steps)
        self.t0 = time.perf_counter()
        self.steps = 0
        self.epochs_done = 0.0
        self.losses: List[float] = []
        self.stopped = False

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def over(self) -> bool:
        return (self.stopped or self.seconds >= self.max_seconds
                or 0 < self.max_steps <= self.steps)

    def stop(self) -> None:
        """End training before the next update (an early stop)."""
        self.stopped = True

    def record(self, loss: float) -> None:
        """The training loss of the step just taken."""
        self.losses.append(float(loss))

    def batches(self, n: int, size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
        """Index batches, epoch after epoch, until the budget is spent."""
        for epoch in range(self.epochs):
            batches = list(minibatches(n, size, rng))
            for j, b in enumerate(batches):
                if self.over():
                    self.epochs_done = epoch + j / len(batches)
                    return
                self.steps += 1
                yield b
            self.epochs_done = epoch + 1

    def loss_curve(self, points: int = 10) -> List[float]:
        """Mean recorded loss over each of ``points`` equal runs of consecutive steps, in order
        (fewer points when fewer steps were recorded)."""
        if not self.losses:
            return []
        parts = np.array_split(np.asarray(self.losses, dtype=np.float64),
                               min(points, len(self.losses)))
        return [round(float(p.mean()), 4) for p in parts if len(p)]

    def describe(self) -> dict:
        secs = self.seconds
        return {"seconds": round(secs, 1), "steps": self.steps,
                "epochs": round(self.epochs_done, 2), "max_seconds": self.max_seconds,
                "max_steps": self.max_steps, "steps_per_s": round(self.steps / max(secs, 1e-9), 2),
                "threads": torch.get_num_threads(),
                "final_loss": float(np.mean(self.losses[-20:])) if self.losses else None,
                "loss_curve": self.loss_curve()}


class EarlyStop:
    """Keeps the weights with the best held-out score and says when to stop.

    ``score(net) -> float`` (higher is better; it may put ``net`` in eval mode: :meth:`check`
    puts it back in training mode).  :meth:`check` after an update scores the net, copies its
    weights when the score beats every earlier one, and returns True once ``patience`` checks
    in a row brought no gain; :meth:`finish` scores the final weights (unless just checked),
    loads the best ones into the net and returns the record.
    """

    def __init__(self, score: Callable[[torch.nn.Module], float], patience: int):
        if int(patience) < 1:
            raise ValueError("patience must be at least 1")
        self.score, self.patience = score, int(patience)
        self.best, self.best_step, self.state = float("-inf"), 0, None
        self.checks: List[List[float]] = []  # [update, score] of every check, in order
        self.since_best = 0

    def check(self, net: torch.nn.Module, step: int) -> bool:
        value = float(self.score(net))
        net.train()
        self.checks.append([int(step), round(value, 4)])
        if value > self.best:
            self.best, self.best_step, self.since_best = value, int(step), 0
            self.state = copy.deepcopy(net.state_dict())
        else:
            self.since_best += 1
        return self.since_best >= self.patience

    def finish(self, net: torch.nn.Module, step: int) -> dict:
        """Load the best weights into ``net`` (left in eval mode); ``{"best_step", "best",
        "patience", "stopped", "checks"}``."""
        if not self.checks or self.checks[-1][0] != int(step):
            self.check(net, step)
        net.load_state_dict(self.state)
        net.eval()
        return {"best_step": self.best_step, "best": round(self.best, 4),
                "patience": self.patience, "stopped": self.since_best >= self.patience,
                "checks": self.checks}


def config_from(cls, data: dict):
    """A config dataclass from a dict, ignoring unknown keys (older caches)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: (tuple(v) if isinstance(v, list) else v)
                  for k, v in data.items() if k in names})


class TrainedBaseline(Baseline):
    """A baseline with a torch network ``net`` trained here (see module docstring).

    Subclasses define ``Config`` (a dataclass with ``seed``), ``Net`` (built as
    ``Net(resources, config)``), ``fit(net, resources, config, data) -> stats`` and
    ``encoder_fn(side)``.
    """

    Config = None
    Net = None  # the network class: ``Net(resources, config)``

    def __init__(self, net: torch.nn.Module, resources: Resources, config,
                 stats: Optional[dict] = None):
        super().__init__()
        self.net, self.resources, self.config = net.eval(), resources, config
        self.stats = dict(stats or {})

    @classmethod
    def build_net(cls, resources: Resources, config) -> torch.nn.Module:
        return cls.Net(resources, config)

    # -- to implement -----------------------------------------------------------------------

    @classmethod
    def fit(cls, net, resources: Resources, config, data) -> dict:
        raise NotImplementedError

    def encoder_fn(self, side: str) -> Callable[[Batch], torch.Tensor]:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    @classmethod
    def train(cls, resources: Resources, data, config=None, **overrides) -> "TrainedBaseline":
        """Train from ``data`` (:class:`~triemine.baselines.text.TrainingPairs`), seeded by
        ``config.seed`` without touching the global random state."""
        config = config or cls.Config()
        if overrides:
            config = cls.Config(**dict(asdict(config), **overrides))
        if len(data.src) < 2:
            raise InputError(
                f"{cls.name}: at least 2 training pairs are needed, got {len(data.src)}"
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            net = cls.build_net(resources, config)
            stats = cls.fit(net, resources, config, data)
        stats["data"] = data.describe()
        return cls(net, resources, config, stats)

    def encode(self, texts, side):
        self.net.eval()
        return encode_batched(self.resources.tokenizer, list(texts), side, self.encoder_fn(side))

    def save(self, path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"system": self.name, "config": asdict(self.config), "stats": self.stats,
                    "resources": self.resources.describe(), "state": self.net.state_dict()}, tmp)
        tmp.replace(path)

    @classmethod
    def load(cls, path, resources: Resources) -> "TrainedBaseline":
        path = Path(path)
        try:
            data = torch.load(str(path), map_location="cpu", weights_only=False)
        except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
            raise InputError(f"cannot read baseline model: {exc}", path) from None
        if not isinstance(data, dict) or data.get("system") != cls.name:
            raise InputError(f"not a {cls.name} baseline model", path)
        if data.get("resources") != resources.describe():
            raise InputError(f"trained with other tokenizer/embeddings ({data.get('resources')}, "
                             f"now {resources.describe()}): train it again", path)
        config = config_from(cls.Config, data["config"])
        net = cls.build_net(resources, config)
        try:
            net.load_state_dict(data["state"])
        except RuntimeError as exc:
            raise InputError(f"model does not fit these resources: {exc}", path) from None
        return cls(net, resources, config, data.get("stats"))


class PairClassifierBaseline(TrainedBaseline):
    """A trained baseline whose pair classifier (the network's ``head_attr`` module, called on
    ``(u (B, D), v (B, D))``, giving logits) rescores the first stage's candidates: each source's
    and each target's 10 nearest by cosine."""

    neighbours = 10
    per_source = 10
    per_target = 10
    head_attr = "head"

    def head(self, src, tgt):
        return head_probabilities(getattr(self.net, self.head_attr), src, tgt)
