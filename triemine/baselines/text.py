"""Text side of the baselines: tokenizers, padded batches, the pretrained piece embeddings and
the training pairs.

* :class:`PieceTokenizer`: the shared OPUS-MT model's *source* sentencepiece model and source
  dictionary, used for both languages (the model's 65,000 pieces are one zh/en vocabulary);
* :class:`WordTokenizer`: whitespace words hashed into a fixed number of ids -- no model needed,
  for the tiny synthetic training runs of the tests;
* :func:`pretrained_embeddings`: ``encoder.embed_tokens.weight`` of the imported OPUS-MT
  checkpoint (65,000 x 512), read once from the checkpoint file;
* :func:`training_pairs`: ``devsets/zh-en/train.{zh,en}`` (the only data the baselines learn
  from) split into training and held-out pairs with a seed, and monolingual English from
  ``parallel/de-en/train.en`` for autoencoding.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch

from triemine.errors import InputError
from triemine.io import DEVSET_ZH_EN, PARALLEL_DE_EN, shared_path

MAX_PIECES = 64  # longer sentences are cut (BUCC sentences are rarely longer)
PAD = 0


@dataclass
class Batch:
    """Padded ids ``(B, T)`` (right padding with :data:`PAD`) and ``lengths (B,)`` (>= 1)."""

    ids: torch.Tensor
    lengths: torch.Tensor

    @property
    def mask(self) -> torch.Tensor:
        """``(B, T)`` bool, True on real pieces."""
        return torch.arange(self.ids.shape[1])[None, :] < self.lengths[:, None]


def pad_batch(seqs: Sequence[Sequence[int]]) -> Batch:
    """Right-pad id lists into a :class:`Batch` (an empty sequence becomes one PAD piece)."""
    lengths = torch.tensor([max(len(s), 1) for s in seqs], dtype=torch.long)
    ids = torch.full((len(seqs), int(lengths.max()) if len(seqs) else 1), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, :len(s)] = torch.as_tensor(s, dtype=torch.long)
    return Batch(ids, lengths)


class Tokenizer:
    """``ids(texts, side) -> list of id lists`` (at most :data:`MAX_PIECES`, no EOS) of the
    ``side`` ("src" or "tgt") language; ``vocab_size``."""

    vocab_size = 0

    def ids(self, texts: Sequence[str], side: str = "src") -> List[List[int]]:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"kind": type(self).__name__, "vocab_size": self.vocab_size}


class PieceTokenizer(Tokenizer):
    """The OPUS-MT sentencepiece models and (shared) dictionary of a trie-mine model directory:
    ``source.spm`` for the source side; ``target.spm`` for the target side when the directory
    has one, else ``source.spm`` for both (it cuts English into about twice as many pieces)."""

    def __init__(self, model_dir: Path):
        import sentencepiece as spm
        from fairseq.data import Dictionary

        root = Path(model_dir)
        meta_path = root / "triemine-model.json"
        if not meta_path.is_file():
            raise InputError("not a trie-mine model directory (no triemine-model.json)", root)
        src = json.loads(meta_path.read_text(encoding="utf-8")).get("source_lang")
        for need in (root / "source.spm", root / f"dict.{src}.txt"):
            if not need.is_file():
                raise InputError("missing model file", need)
        tgt_spm = root / "target.spm"
        self.spm = {"src": spm.SentencePieceProcessor(model_file=str(root / "source.spm"))}
        self.spm["tgt"] = spm.SentencePieceProcessor(model_file=str(tgt_spm)) \
            if tgt_spm.is_file() else self.spm["src"]
        self.target_spm = tgt_spm.is_file()
        self.dict = Dictionary.load(str(root / f"dict.{src}.txt"))
        self.vocab_size = len(self.dict)
        self.unk = self.dict.unk()
        self.model_dir = str(root)

    def ids(self, texts, side="src"):
        pieces = self.spm[side].encode(list(texts), out_type=str)
        index = self.dict.indices
        return [[index.get(p, self.unk) for p in ps[:MAX_PIECES]] for ps in pieces]

    def describe(self) -> dict:
        return dict(super().describe(), target_spm=self.target_spm)


class WordTokenizer(Tokenizer):
    """Lower-cased whitespace words hashed (md5) into ``vocab_size`` ids (1.. ; 0 is PAD)."""

    def __init__(self, vocab_size: int = 4096):
        self.vocab_size = int(vocab_size)

    def ids(self, texts, side="src"):
        def wid(w: str) -> int:
            return 1 + int.from_bytes(hashlib.md5(w.encode("utf-8")).digest()[:4], "little") \
                % (self.vocab_size - 1)
        return [[wid(w) for w in t.lower().split()[:MAX_PIECES]] for t in texts]


def pretrained_embeddings(model_dir: Path) -> torch.Tensor:
    """``(V, 512)`` float32: the OPUS-MT encoder's token embeddings (shared zh/en vocabulary),
    divided by their overall standard deviation (the model scales them by sqrt(512) itself)."""
    path = Path(model_dir) / "checkpoint.pt"
    if not path.is_file():
        raise InputError("no imported model checkpoint (make model)", path)
    state = torch.load(str(path), map_location="cpu", mmap=True, weights_only=False)
    weights = state.get("model", state)
    key = next((k for k in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
                if k in weights), None)
    if key is None:
        raise InputError("checkpoint has no encoder.embed_tokens.weight", path)
    w = weights[key].float().clone()
    return w / w.std()


@dataclass
class TrainingPairs:
    """Parallel training and held-out pairs (zh, en) and monolingual English."""

    src: List[str]
    tgt: List[str]
    held_src: List[str]
    held_tgt: List[str]
    mono_tgt: List[str]

    def describe(self) -> dict:
        return {"train_pairs": len(self.src), "heldout_pairs": len(self.held_src),
                "mono_en": len(self.mono_tgt)}


def _read_lines(path: Path) -> List[str]:
    if not path.is_file():
        raise InputError("training file not found", path)
    return path.read_text(encoding="utf-8").splitlines()


def split_pairs(src: Sequence[str], tgt: Sequence[str], heldout: int, seed: int,
                mono: Sequence[str] = ()) -> TrainingPairs:
    """Seeded split of aligned lists into training and ``heldout`` held-out pairs (pairs with an
    empty side are dropped)."""
    if len(src) != len(tgt):
        raise InputError(f"training sides differ in length: {len(src)} vs {len(tgt)} lines")
    keep = [i for i in range(len(src)) if src[i].strip() and tgt[i].strip()]
    if len(keep) < 2 * max(heldout, 1):
        raise InputError(f"too few training pairs ({len(keep)}) for {heldout} held-out pairs")
    order = np.random.default_rng(seed).permutation(np.asarray(keep))
    held, train = np.sort(order[:heldout]), np.sort(order[heldout:])
    return TrainingPairs([src[i] for i in train], [tgt[i] for i in train],
                         [src[i] for i in held], [tgt[i] for i in held],
                         [t for t in mono if t.strip()])


def training_pairs(heldout: int = 500, seed: int = 1, mono: int = 20000,
                   limit: Optional[int] = None) -> TrainingPairs:
    """``devsets/zh-en/train.{zh,en}`` (first ``limit`` lines when given), ``heldout`` pairs held
    out, and the first ``mono`` lines of ``parallel/de-en/train.en``."""
    zh = _read_lines(shared_path(*DEVSET_ZH_EN, "train.zh"))[:limit]
    en = _read_lines(shared_path(*DEVSET_ZH_EN, "train.en"))[:limit]
    mono_en = _read_lines(shared_path(*PARALLEL_DE_EN, "train.en"))[:mono] if mono else []
    return split_pairs(zh, en, heldout, seed, mono_en)
