"""Load a trie-mine model directory.

Convention (written by ``trie-mine-import`` for OPUS-MT and by ``triemine.testing.tiny_model`` for
the tiny test model)::

    DIR/checkpoint.pt          fairseq checkpoint carrying its cfg
    DIR/dict.<src>.txt         fairseq source dictionary
    DIR/dict.<tgt>.txt         fairseq target dictionary
    DIR/source.spm             source sentencepiece model (optional with require_source_spm=False)
    DIR/target.spm             optional target sentencepiece model (else pass target_spm)
    DIR/triemine-model.json    {"format": 1, "source_lang": ..., "target_lang": ..., ...}
"""
from __future__ import annotations

import json
import logging
import os
import pickle
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from triemine.errors import describe, InputError
from triemine.io import input_digest
from triemine.models.checkpoint import load_ensemble

logger = logging.getLogger(__name__)

WEIGHTS_DIGEST_CHARS = 16  # hex characters of the checkpoint's sha256 kept as its digest


def weights_digest(path) -> str:
    """The first :data:`WEIGHTS_DIGEST_CHARS` hex characters of the sha256 of
    ``path/checkpoint.pt`` (``path`` a model directory), ``"no-checkpoint"`` if there is none:
    what identifies a model's weights in cache keys and resume settings. Reads the whole file
    once per version of it (:func:`~triemine.io.keys.input_digest`);
    :attr:`ModelDir.weights_digest` asks once per loaded model."""
    ckpt = Path(path) / "checkpoint.pt"
    return input_digest(ckpt)[:WEIGHTS_DIGEST_CHARS] if ckpt.is_file() else "no-checkpoint"


@dataclass
class ModelDir:
    """A loaded model directory: fairseq models, task, dictionaries and sentencepiece models."""

    path: Path
    models: List[Any]
    task: Any
    cfg: Any
    src_dict: Any
    tgt_dict: Any
    source_spm_path: Optional[Path]
    target_spm_path: Optional[Path]
    meta: dict = field(default_factory=dict)
    _sp_src: Any = None
    _sp_tgt: Any = None

    @cached_property
    def weights_digest(self) -> str:
        """:func:`weights_digest` of this directory, computed on first use."""
        return weights_digest(self.path)

    @property
    def model(self):
        return self.models[0]

    @property
    def source_spm(self):
        if self._sp_src is None:
            if self.source_spm_path is None:
                raise InputError("model directory has no source.spm", self.path)
            import sentencepiece as spm
            self._sp_src = spm.SentencePieceProcessor(model_file=str(self.source_spm_path))
        return self._sp_src

    @property
    def target_spm(self):
        if self._sp_tgt is None:
            if self.target_spm_path is None:
                raise InputError("model directory has no target.spm; pass a target sentencepiece "
                                 "model (--target-spm)", self.path)
            import sentencepiece as spm
            self._sp_tgt = spm.SentencePieceProcessor(model_file=str(self.target_spm_path))
        return self._sp_tgt

    @property
    def max_source_positions(self) -> int:
        return int(self.model.max_positions()[0]) if isinstance(self.model.max_positions(), tuple) \
            else int(self.model.max_positions())

    def encode_source(self, text: str):
        """Source text -> sentencepiece pieces -> source dictionary ids (ending in EOS)."""
        pieces = self.source_spm.encode(text, out_type=str)
        return self.src_dict.encode_line(" ".join(pieces), append_eos=True,
                                         add_if_not_exist=False).long()

    def encode_target(self, text: str):
        pieces = self.target_spm.encode(text, out_type=str)
        return self.tgt_dict.encode_line(" ".join(pieces), append_eos=True,
                                         add_if_not_exist=False).long()

    def decode_target(self, ids) -> str:
        """Target ids (EOS optional) -> detokenised text."""
        eos = self.tgt_dict.eos()
        pieces = [self.tgt_dict[int(i)] for i in ids if int(i) != eos]
        return self.target_spm.decode_pieces(pieces) if self.target_spm_path else \
            "".join(pieces).replace("\u2581", " ").strip()


def spm_problem(path) -> Optional[str]:
    """Why the file at ``path`` is not a sentencepiece model (``None``: it loads as one); what
    ``--target-spm`` is checked with before any model loads."""
    why = describe(path)
    if why:
        return why
    import sentencepiece as spm

    try:
        spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError, ValueError) as exc:
        return f"not a sentencepiece model ({str(exc).strip().splitlines()[-1][:120]})"
    return None


def check_device(device, local: bool = True) -> str:
    """``device`` checked before any model loads: ``cpu`` (``cpu:N``, torch's same device),
    ``cuda`` or ``cuda:N``; with
    ``local``, one this machine has (a device of a Ray cluster is the cluster's to check).
    An :class:`InputError` naming the device and the ones available otherwise; returns it."""
    name, colon, index = str(device).partition(":")
    if device == "cpu" or (name == "cpu" and index.isdigit() and index.isascii()):
        return device
    well_formed = (isinstance(device, str) and name == "cuda"
                   and (not colon or (index.isdigit() and index.isascii())))
    available = ["cpu"]
    if local or not well_formed:
        import torch
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count:
            available += ["cuda"] + [f"cuda:{i}" for i in range(count)]
        if well_formed and local and (not count or (colon and int(index) >= count)):
            raise InputError(f"--device {device}: this machine has no such device (available: "
                             f"{', '.join(available)})")
    if not well_formed:
        raise InputError(f"--device {device}: not a device trie-mine can use (cpu, cuda or "
                         f"cuda:N; available here: {', '.join(available)})")
    return device


_BEFORE_LOAD: List[Callable[[], None]] = []


def model_languages(model) -> Optional[Tuple[str, str]]:
    """``(source_lang, target_lang)`` of ``model`` (a loaded :class:`ModelDir`, or a model
    directory, read from its ``triemine-model.json`` without loading the checkpoint); None when
    they are not known (no such file, or it does not name both)."""
    meta = getattr(model, "meta", None)
    if meta is None and isinstance(model, (str, os.PathLike)):
        try:
            meta = json.loads((Path(model) / "triemine-model.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = None
    if not isinstance(meta, dict):
        return None
    src, tgt = meta.get("source_lang"), meta.get("target_lang")
    return (str(src), str(tgt)) if src and tgt else None


def register_before_load(hook: Callable[[], None]) -> None:
    """Have ``hook()`` called before :func:`load_model_dir` loads a checkpoint, once per load,
    in the order registered (a hook registered twice runs once). How a package makes known the
    fairseq tasks and architectures a checkpoint may name without this module importing it:
    :mod:`triemine.decoding` registers its ``trie_translation`` task this way when imported.
    A hook must be cheap when repeated and raise nothing but :class:`ImportError`."""
    if hook not in _BEFORE_LOAD:
        _BEFORE_LOAD.append(hook)


def _register_architectures() -> None:
    """The Marian architecture of imported OPUS-MT models (``marian_transformer``)."""
    from triemine.models import marian  # noqa: F401  heavy: torch, fairseq (registers on import)


register_before_load(_register_architectures)


def check_model_dir(path, target_spm=None, *, require_source_spm: bool = True) -> dict:
    """The ``triemine-model.json`` of the model directory ``path``, after the checks
    :func:`load_model_dir` makes before it loads the checkpoint (the folder, the metadata and
    its languages, the files it needs): an :class:`InputError` naming what is wrong, without
    loading anything."""
    return _checked_dir(path, target_spm, require_source_spm)[1]


def _checked_dir(path, target_spm, require_source_spm: bool):
    root = Path(path)
    if not root.is_dir():
        raise InputError("model directory does not exist" if not root.exists() else
                         "is not a directory (a model directory is expected)", root)
    meta_path = root / "triemine-model.json"
    if not meta_path.is_file():
        raise InputError("missing triemine-model.json (not a trie-mine model directory)", root)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable JSON: {exc}", meta_path) from None
    if meta.get("format") != 1:
        raise InputError(f"unsupported model directory format {meta.get('format')!r} (expected 1)",
                         meta_path)
    src, tgt = meta.get("source_lang"), meta.get("target_lang")
    if not src or not tgt:
        raise InputError("source_lang/target_lang missing", meta_path)
    required = [root / "checkpoint.pt", root / f"dict.{src}.txt", root / f"dict.{tgt}.txt"]
    if require_source_spm:
        required.append(root / "source.spm")
    for req in required:
        if not req.is_file():
            raise InputError("missing model file", req)
    tspm = Path(target_spm) if target_spm is not None else root / "target.spm"
    if target_spm is not None and not tspm.is_file():
        raise InputError("target sentencepiece model not found", tspm)
    if not tspm.is_file():
        tspm = None
    return root, meta, tspm


def load_model_dir(path, target_spm=None, device: str = "cpu", *,
                   require_source_spm: bool = True) -> ModelDir:
    """Load ``path`` (see module docstring). Missing files raise :class:`InputError`.

    ``require_source_spm=False`` loads a directory without ``source.spm`` (a CTranslate2 model
    that shipped none), for uses on token ids only (:class:`triemine.models.fidelity.FairseqSide`);
    :attr:`ModelDir.source_spm` then raises :class:`InputError`."""
    # The tasks and architectures a checkpoint may name (:func:`register_before_load`); at load
    # time, not import time: they import fairseq (seconds), which callers that only read a
    # directory's digest or metadata need not pay for.
    for hook in _BEFORE_LOAD:
        hook()

    check_device(device)
    root, meta, tspm = _checked_dir(path, target_spm, require_source_spm)
    src, tgt = meta["source_lang"], meta["target_lang"]
    overrides = {"data": str(root), "source_lang": src, "target_lang": tgt}
    try:
        with warnings.catch_warnings():  # fairseq 0.12 on Hydra 1.3: noise about its own configs
            warnings.filterwarnings("ignore", message=r"(?s).*validated against ConfigStore schema")
            warnings.filterwarnings("ignore", category=UserWarning,
                                    module=r"(hydra|fairseq|torch)\.")
            models, cfg, task = load_ensemble(str(root / "checkpoint.pt"), overrides)
    except (RuntimeError, KeyError, EOFError, OSError, ValueError, AttributeError,
            pickle.UnpicklingError) as exc:
        raise InputError(f"cannot load fairseq checkpoint: {exc}", root / "checkpoint.pt") from None
    for m in models:
        m.eval()
        if device != "cpu":
            m.to(device)
    return ModelDir(path=root, models=models, task=task, cfg=cfg, src_dict=task.source_dictionary,
                    tgt_dict=task.target_dictionary,
                    source_spm_path=root / "source.spm" if (root / "source.spm").is_file()
                    else None,
                    target_spm_path=tspm, meta=meta)
