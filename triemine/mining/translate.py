"""The MT model's own translations of a corpus (for translation retrieval): the backend and
its batches.

When the model directory was imported from a CTranslate2 model that is still where the import
found it (``triemine-model.json``'s ``origin``), CTranslate2 translates (int8, as shipped: several
times faster than the fairseq decoder on a CPU); otherwise the project's own generator does
(unconstrained Algorithm-1 beam search).  The texts go to the backend in batches of
:data:`TRANSLATE_BATCH` from the first line on, so a shard of whole batches gets the very
translations of one call over the corpus; the job translates in such shards on its pool, cached
per corpus (:func:`triemine.mining.translate_shards.cached_translations`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional, Sequence

TRANSLATE_BATCH = 256  # texts a backend call (each sorted by length into sub-batches, below)
# the fairseq decoder's sub-batch (sources decoded together) on the CPU, and on any other device
# the whole batch (see docs/decisions.md#device-batch-sizes); other sub-batches give other
# padding and last bits, so the translation cache's key names the device
SUB_BATCH = 32
DEVICE_SUB_BATCH = TRANSLATE_BATCH


def sub_batch(device: str) -> int:
    """The fairseq decoder's default sub-batch on ``device`` (the translations' last bits depend
    on it: the translation cache's key names it off the CPU)."""
    return SUB_BATCH if device == "cpu" else DEVICE_SUB_BATCH


def ct2_origin(model) -> Optional[Path]:
    origin = (getattr(model, "meta", None) or {}).get("origin")
    if origin and (Path(origin) / "model.bin").is_file():
        return Path(origin)
    return None


def translation_backend(model) -> str:
    """``ctranslate2`` when the model's CTranslate2 origin is at hand, else ``fairseq``."""
    return "ctranslate2" if ct2_origin(model) is not None else "fairseq"


def make_translator(model, beam: int = 4, device: str = "cpu", backend: str = "auto",
                    sub: Optional[int] = None) -> Callable[[List[str]], List[str]]:
    """A function from a batch of texts to their translations (``""`` for empty texts) by
    ``backend`` (``auto``: :func:`translation_backend`); ``sub``: the fairseq decoder's
    sub-batch (default ``SUB_BATCH`` on the CPU, ``DEVICE_SUB_BATCH`` elsewhere)."""
    if backend == "auto":
        backend = translation_backend(model)
    if backend == "ctranslate2":
        origin = ct2_origin(model)
        if origin is None:
            raise ValueError("no CTranslate2 origin for this model directory")
        return _ct2_translator(model, origin, beam, device)
    if backend != "fairseq":
        raise ValueError(f"unknown translation backend {backend!r}")
    return _fairseq_translator(model, beam, device, sub or sub_batch(device))


def translate_lines(translate: Callable[[List[str]], List[str]], texts: Sequence[str],
                    batch: int = TRANSLATE_BATCH) -> List[str]:
    """``translate`` over ``texts`` in batches of ``batch`` from the first, each translation
    one line (a newline the model wrote becomes a space)."""
    out: List[str] = []
    for start in range(0, len(texts), batch):
        out.extend(o.replace("\n", " ") for o in translate(list(texts[start:start + batch])))
    return out


def _ct2_translator(model, origin: Path, beam: int, device: str):
    import ctranslate2

    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    tr = ctranslate2.Translator(str(origin), device=device, compute_type="int8",
                                intra_threads=threads)
    sp = model.source_spm

    def translate(batch):
        keep = [i for i, t in enumerate(batch) if t.strip()]
        out = [""] * len(batch)
        if keep:
            # CTranslate2 sorts the examples by length into sub-batches of 32 (less padding)
            res = tr.translate_batch([sp.encode(batch[i], out_type=str) for i in keep],
                                     beam_size=beam, max_batch_size=32)
            for i, r in zip(keep, res):
                out[i] = "".join(r.hypotheses[0]).replace("\u2581", " ").strip()
        return out
    return translate


def _fairseq_translator(model, beam: int, device: str, sub: int):
    import torch
    from fairseq.data import data_utils

    from triemine.decoding.generator import TrieSequenceGenerator

    gen = TrieSequenceGenerator(model.models, model.tgt_dict, search=None, beam_size=beam,
                                max_len_a=1.2, max_len_b=10)
    pad = model.src_dict.pad()

    def translate(batch):
        keep = [i for i, t in enumerate(batch) if t.strip()]
        out = [""] * len(batch)
        toks = {i: model.encode_source(batch[i])[: model.max_source_positions] for i in keep}
        keep.sort(key=lambda i: len(toks[i]))  # sub-batches of similar length: less padding
        for start in range(0, len(keep), sub):
            part = keep[start:start + sub]
            sample = {"net_input": {
                "src_tokens": data_utils.collate_tokens([toks[i] for i in part], pad,
                                                        left_pad=True).to(device),
                "src_lengths": torch.tensor([len(toks[i]) for i in part], device=device)}}
            hyps = gen.generate(gen.model.models, sample)
            for i, h in zip(part, hyps):
                out[i] = model.decode_target(h[0]["tokens"]) if h else ""
        return out
    return translate
