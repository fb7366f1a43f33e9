"""The vocabulary mapping both importers share: a model's pieces in fairseq's dictionary order.

fairseq dictionaries begin with the fixed specials ``<s> <pad> </s> <unk>``; a CTranslate2 or
Hugging Face Marian vocabulary has its own order and its own spelling of the specials.
:func:`build_vocab_map` puts the model's eos / unk (and bos / pad where it has them) into
fairseq's special slots and every other piece after them in the model's order;
:class:`VocabMap` then permutes the rows of embedding and output matrices into that order.
:func:`check_target_spm` checks that a target sentencepiece model belongs to the vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import numpy as np
import sentencepiece as spm

from triemine.errors import InputError

# Fairseq's fixed special symbols, in order.
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MAX_VOCAB = 65535  # trie keys are uint16; 65535 stays free as a sentinel
NEG_LOGIT = -1e9  # bias of fairseq-only output rows (<s>, <pad>): exp() underflows to exactly 0


@dataclass
class VocabMap:
    """fairseq index -> the model's index (-1 for the fairseq-only specials)."""

    tokens: List[str]          # fairseq dictionary symbols, in fairseq order
    ct2_index: np.ndarray      # int64, len(tokens): the row of each symbol in the model's order

    def permute_rows(self, matrix: np.ndarray, fill: float = 0.0) -> np.ndarray:
        out = np.full((len(self.tokens),) + matrix.shape[1:], fill, dtype=np.float32)
        have = self.ct2_index >= 0
        out[have] = matrix[self.ct2_index[have]]
        return out


def build_vocab_map(ct2_vocab: List[str], config: dict, path: Path) -> VocabMap:
    """Reorder a model's vocabulary to fairseq's ``<s> <pad> </s> <unk>`` layout.

    The model's own eos / unk / bos / pad symbols (``config``'s ``eos_token``, ``unk_token``,
    ``bos_token``, ``pad_token``; a CTranslate2 Marian model has no bos or pad)
    take fairseq's special slots and keep fairseq's spelling; every other piece follows in the
    model's order.
    """
    seen: Dict[str, int] = {}
    for i, tok in enumerate(ct2_vocab):
        if tok == "" or any(ch.isspace() for ch in tok):
            raise InputError(f"vocabulary entry {i} {tok!r} is empty or contains whitespace, "
                             f"which fairseq dictionaries cannot hold", path)
        if tok in seen:
            raise InputError(f"duplicate vocabulary entry {tok!r} at {seen[tok]} and {i}", path)
        seen[tok] = i
    eos = config.get("eos_token") or "</s>"
    unk = config.get("unk_token") or "<unk>"
    bos = config.get("bos_token") or "<s>"
    for name, tok in (("eos_token", eos), ("unk_token", unk)):
        if tok not in seen:
            raise InputError(f"{name} {tok!r} of config.json is not in the vocabulary", path)
    pad = config.get("pad_token") or "<pad>"
    special_src = {"<s>": bos, "<pad>": pad, "</s>": eos, "<unk>": unk}
    tokens: List[str] = []
    index: List[int] = []
    used = set()
    for fs in FAIRSEQ_SPECIALS:
        src = special_src[fs]
        i = seen.get(src, -1)
        tokens.append(fs)
        index.append(i)
        if i >= 0:
            used.add(i)
    for i, tok in enumerate(ct2_vocab):
        if i in used:
            continue
        if tok in FAIRSEQ_SPECIALS:
            raise InputError(f"vocabulary entry {i} {tok!r} collides with a fairseq special "
                             f"symbol", path)
        tokens.append(tok)
        index.append(i)
    if len(tokens) > MAX_VOCAB:
        raise InputError(f"vocabulary of {len(ct2_vocab)} pieces gives {len(tokens)} fairseq ids, "
                         f"more than the {MAX_VOCAB} that uint16 trie keys allow", path)
    return VocabMap(tokens=tokens, ct2_index=np.asarray(index, dtype=np.int64))


def check_target_spm(path, target_tokens: List[str], min_coverage: float = 0.5) -> float:
    """Load ``path`` as a sentencepiece model; the fraction of its (non-control) pieces that are
    in the target dictionary must reach ``min_coverage``, else it belongs to another model."""
    try:
        sp = spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as exc:
        raise InputError(f"not a sentencepiece model: {exc}", path) from None
    vocab = set(target_tokens)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    if not pieces:
        raise InputError("sentencepiece model has no pieces", path)
    coverage = sum(p in vocab for p in pieces) / len(pieces)
    if coverage < min_coverage:
        raise InputError(f"only {coverage:.1%} of the sentencepiece model's {len(pieces)} pieces "
                         f"are in the model's target vocabulary; it does not belong to this "
                         f"model", path)
    return round(coverage, 4)
