"""Write a trie-mine model directory: what both importers produce from a mapped model.

Layout (read by :func:`triemine.decoding.model_dir.load_model_dir`)::

    OUT/checkpoint.pt          fairseq checkpoint, arch ``marian_transformer``, task ``translation``
    OUT/dict.<src>.txt         fairseq dictionaries: <s> <pad> </s> <unk>, then the model's pieces
    OUT/dict.<tgt>.txt
    OUT/triemine-model.json    provenance: format, languages, vocabulary sizes, the importer's
                               fields, ``model_args``

The sentencepiece models (``source.spm``, ``target.spm``) are the importer's to copy.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict

import torch

from triemine.models.marian import MODEL_NAME, marian_base
from triemine.models.vocab import FAIRSEQ_SPECIALS, VocabMap


def write_dictionary(path: Path, vocab: VocabMap) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for tok in vocab.tokens[len(FAIRSEQ_SPECIALS):]:
            f.write(f"{tok} 1\n")


def _checkpoint_args(out_dir: Path, source_lang: str, target_lang: str, model_args: dict):
    args = argparse.Namespace(
        arch=MODEL_NAME, task="translation", data=str(out_dir), source_lang=source_lang,
        target_lang=target_lang, left_pad_source=True, left_pad_target=False,
        max_source_positions=1024, max_target_positions=1024, criterion="cross_entropy",
        optimizer=None, lr_scheduler="fixed", seed=1, _name=MODEL_NAME, **model_args)
    marian_base(args)
    return args


def write_model_dir(out_dir: Path, sd: Dict[str, torch.Tensor], model_args: dict,
                    src_vocab: VocabMap, tgt_vocab: VocabMap, source_lang: str, target_lang: str,
                    origin: Path, meta: dict) -> Path:
    """Write the trie-mine model directory (checkpoint, dictionaries, ``triemine-model.json``
    with ``meta`` added) that ``triemine.decoding.model_dir`` loads; sentencepiece models are
    the caller's."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_dictionary(out_dir / f"dict.{source_lang}.txt", src_vocab)
    write_dictionary(out_dir / f"dict.{target_lang}.txt", tgt_vocab)
    args = _checkpoint_args(out_dir, source_lang, target_lang, model_args)
    state = {"args": args, "cfg": None, "model": sd, "optimizer_history": [
        {"criterion_name": "CrossEntropyCriterion", "optimizer_name": "NAG",
         "lr_scheduler_state": {"best": None}, "num_updates": 0}],
        "extra_state": {"triemine": {"origin": str(origin.resolve())}},
        "last_optimizer_state": None}
    tmp = out_dir / "checkpoint.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(out_dir / "checkpoint.pt")
    full = {"format": 1, "source_lang": source_lang, "target_lang": target_lang,
            "origin": str(origin.resolve()), "arch": "marian_transformer",
            "source_vocab_size": len(src_vocab.tokens), "target_vocab_size": len(tgt_vocab.tokens),
            "fairseq_specials": list(FAIRSEQ_SPECIALS), **meta, "model_args": model_args}
    (out_dir / "triemine-model.json").write_text(json.dumps(full, indent=2, ensure_ascii=False)
                                                 + "\n", encoding="utf-8")
    return out_dir
