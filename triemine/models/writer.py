"""Write a trie-mine model directory: what both importers produce from a mapped model.

Layout (read by :func:`triemine.models.model_dir.load_model_dir`)::

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
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Optional

import torch

from triemine.errors import InputError, OutputError
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


@contextmanager
def staged_model_dir(out_dir: Path):
    """A fresh directory beside ``out_dir`` (``with staged_model_dir(OUT) as stage``) that
    replaces ``out_dir`` whole when the body ends: an interrupted import leaves no directory
    that looks finished, and a finished one never mixes files of two imports.

    Raises :class:`InputError` before any work when ``out_dir`` is a file, or a non-empty
    directory that is not a model directory (no ``triemine-model.json``): it is never deleted.
    A body that raises leaves ``out_dir`` as it was and removes the stage."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("is not a directory: the imported model is a directory", out_dir)
    if out_dir.is_dir() and any(out_dir.iterdir()) and \
            not (out_dir / "triemine-model.json").is_file():
        raise InputError("exists and is not a trie-mine model directory (no triemine-model.json): "
                         "refusing to replace it; choose another -o or empty it", out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.importing-", dir=out_dir.parent))
    except OSError as exc:
        raise OutputError(out_dir, exc, "model directory") from None
    old = stage.with_name(stage.name + ".old")
    try:
        yield stage
        if out_dir.is_dir() and any(out_dir.iterdir()):
            os.replace(out_dir, old)
        os.replace(stage, out_dir)
    except OSError as exc:
        raise OutputError(out_dir, exc, "model directory") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def write_model_dir(out_dir: Path, sd: Dict[str, torch.Tensor], model_args: dict,
                    src_vocab: VocabMap, tgt_vocab: VocabMap, source_lang: str, target_lang: str,
                    origin: Path, meta: dict, final_dir: Optional[Path] = None) -> Path:
    """Write the trie-mine model directory (checkpoint, dictionaries, ``triemine-model.json``
    with ``meta`` added) that ``triemine.models.model_dir`` loads; sentencepiece models are
    the caller's. ``final_dir`` (default ``out_dir``) is the directory the checkpoint names as
    its data directory: where a staged directory (:func:`staged_model_dir`) will end up, so that
    the checkpoint's bytes, and the weights digest of cache keys, do not depend on the stage."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_dictionary(out_dir / f"dict.{source_lang}.txt", src_vocab)
    write_dictionary(out_dir / f"dict.{target_lang}.txt", tgt_vocab)
    args = _checkpoint_args(Path(final_dir or out_dir), source_lang, target_lang, model_args)
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
