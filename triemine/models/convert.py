"""Import a CTranslate2 transformer or a Hugging Face Marian model as a trie-mine model directory.

:func:`import_model` detects the input's format (:func:`detect_model_format`) and runs one of the
two importers, which read and map the weights (CTranslate2: :mod:`triemine.models.ct2_reader` and
:mod:`triemine.models.ct2_mapping`; Hugging Face ``MarianMTModel``:
:mod:`triemine.models.hf_marian`), write the directory (:mod:`triemine.models.writer`) and copy
the sentencepiece models::

    OUT/checkpoint.pt          fairseq checkpoint, arch ``marian_transformer``, task ``translation``
    OUT/dict.<src>.txt         fairseq dictionaries: <s> <pad> </s> <unk>, then the model's pieces
    OUT/dict.<tgt>.txt         (the order: :mod:`triemine.models.vocab`)
    OUT/source.spm             copied from the input directory when present
    OUT/target.spm             given (--target-spm, the model's own) or recovered by
                               triemine.models.segmentation
    OUT/triemine-model.json    provenance: spec, revision, languages, vocabulary mapping

:func:`triemine.models.model_dir.load_model_dir` loads the result.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Optional, Sequence

from triemine.errors import InputError
from triemine.models.ct2_mapping import convert_weights
from triemine.models.ct2_reader import read_ct2_model
from triemine.models.hf_marian import convert_hf_marian, is_hf_marian_dir
from triemine.models.segmentation import recover_target_spm
from triemine.models.segmentation.recover import is_default_model
from triemine.models.vocab import check_target_spm
from triemine.models.writer import staged_model_dir, write_model_dir

logger = logging.getLogger(__name__)


def _check_langs(source_lang: str, target_lang: str, target_spm) -> None:
    if source_lang == target_lang:
        raise InputError(f"source and target language are both {source_lang!r}")
    if target_spm is not None and not Path(target_spm).is_file():
        raise InputError("target sentencepiece model not found", target_spm)


def detect_model_format(model_dir) -> str:
    """``"hf-marian"`` (Hugging Face ``MarianMTModel`` directory) or ``"ctranslate2"``."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise InputError("model directory not found", model_dir)
    if is_hf_marian_dir(model_dir):
        return "hf-marian"
    if (model_dir / "model.bin").is_file():
        return "ctranslate2"
    if (model_dir / "config.json").is_file():
        raise InputError("neither a CTranslate2 model (no model.bin) nor a Hugging Face "
                         "MarianMTModel directory (config.json with model_type 'marian' and "
                         "model.safetensors or pytorch_model.bin)", model_dir)
    raise InputError("missing CTranslate2 model file model.bin (and not a Hugging Face "
                     "MarianMTModel directory either)", model_dir)


def import_model(model_dir, out_dir, source_lang: str = "zh", target_lang: str = "en",
                 target_spm=None, recover_target: bool = True,
                 estimation_sources: Optional[Sequence[str]] = None) -> Path:
    """Import a CTranslate2 or a Hugging Face Marian directory (detected) into ``out_dir``."""
    if detect_model_format(model_dir) == "hf-marian":
        return import_hf_marian_model(model_dir, out_dir, source_lang, target_lang,
                                      target_spm=target_spm)
    return import_ct2_model(model_dir, out_dir, source_lang, target_lang, target_spm=target_spm,
                            recover_target=recover_target, estimation_sources=estimation_sources)


def import_hf_marian_model(hf_dir, out_dir, source_lang: str = "zh", target_lang: str = "en",
                           target_spm=None) -> Path:
    """Convert a Hugging Face ``MarianMTModel`` directory into a trie-mine model directory.

    Both sentencepiece models ship with such a directory, so nothing is recovered;
    ``target_spm`` overrides its ``target.spm``."""
    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    _check_langs(source_lang, target_lang, target_spm)
    sd, model_args, src_vocab, tgt_vocab, cfg = convert_hf_marian(hf_dir)
    tspm = Path(target_spm) if target_spm is not None else hf_dir / "target.spm"
    coverage = check_target_spm(tspm, tgt_vocab.tokens)
    with staged_model_dir(out_dir) as stage:
        write_model_dir(stage, sd, model_args, src_vocab, tgt_vocab, source_lang, target_lang,
                        hf_dir, {"input_format": "hf-marian", "target_spm": "given",
                                 "target_spm_pieces_in_vocab": coverage,
                                 "shared_vocabulary": src_vocab.tokens == tgt_vocab.tokens,
                                 "hf_config": cfg}, final_dir=out_dir)
        shutil.copyfile(hf_dir / "source.spm", stage / "source.spm")
        shutil.copyfile(tspm, stage / "target.spm")
    return out_dir


def import_ct2_model(ct2_dir, out_dir, source_lang: str = "zh", target_lang: str = "en",
                     target_spm=None, recover_target: bool = True,
                     estimation_sources: Optional[Sequence[str]] = None) -> Path:
    """Convert ``ct2_dir`` into a fairseq model directory ``out_dir``; returns ``out_dir``.

    ``target_spm`` (a sentencepiece model file) is copied to ``OUT/target.spm``; without it, a
    ``target.spm`` in ``ct2_dir`` is copied, else (``recover_target``) one is recovered by
    :func:`triemine.models.segmentation.recover_target_spm` from ``estimation_sources``
    (source-language sentences; required except for the shared zh-en model) -- slow: it
    translates them.
    """
    ct2_dir = Path(ct2_dir)
    out_dir = Path(out_dir)
    _check_langs(source_lang, target_lang, target_spm)
    model = read_ct2_model(ct2_dir)
    sd, model_args, src_vocab, tgt_vocab = convert_weights(model)
    if target_spm is None and (ct2_dir / "target.spm").is_file():
        target_spm = ct2_dir / "target.spm"
    spm_coverage = None
    if target_spm is not None:
        spm_coverage = check_target_spm(target_spm, tgt_vocab.tokens)
    src_spm = ct2_dir / "source.spm"
    if target_spm is None and recover_target and src_spm.is_file() and estimation_sources is None:
        if not is_default_model(ct2_dir):  # fail before writing anything
            raise InputError("has no target sentencepiece model (target.spm), and recovering "
                             "one needs estimation text: source-language sentences the model "
                             "translates (a few thousand lines; --estimation-text FILE); or "
                             "pass the model's own target model (--target-spm PATH), or "
                             "--no-recover-target", ct2_dir)
    with staged_model_dir(out_dir) as stage:
        write_model_dir(stage, sd, model_args, src_vocab, tgt_vocab, source_lang, target_lang,
                        ct2_dir, {"input_format": "ctranslate2", "spec": model.spec,
                                  "revision": model.revision,
                                  "binary_version": model.binary_version,
                                  "target_spm": None, "shared_vocabulary": model.shared_vocabulary,
                                  "target_spm_pieces_in_vocab": spm_coverage,
                                  "ct2_config": model.config}, final_dir=out_dir)
        if src_spm.is_file():
            shutil.copyfile(src_spm, stage / "source.spm")
        target_status = None
        if target_spm is not None:
            shutil.copyfile(target_spm, stage / "target.spm")
            target_status = "given"
        elif recover_target and src_spm.is_file():
            recover_target_spm(ct2_dir, stage / "target.spm", model=model,
                               estimation_sources=estimation_sources)
            target_status = "recovered"
        elif recover_target:
            logger.warning("%s has neither a target nor a source sentencepiece model; no "
                           "target.spm written (pass --target-spm PATH)", ct2_dir)
        meta_path = stage / "triemine-model.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta["target_spm"] = target_status
        meta_path.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    return out_dir

