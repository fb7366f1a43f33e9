"""The MT model's own translations of a corpus (for translation retrieval), resumable.

When the model directory was imported from a CTranslate2 model that is still where the import
found it (``triemine-model.json``'s ``origin``), CTranslate2 translates (int8, as shipped: several
times faster than the fairseq decoder on a CPU); otherwise the project's own generator does
(unconstrained Algorithm-1 beam search).  Translations are appended to ``path`` one line per
source, flushed per batch, so an interrupted job continues where it stopped.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import List, Optional, Sequence

logger = logging.getLogger(__name__)


def ct2_origin(model) -> Optional[Path]:
    origin = (getattr(model, "meta", None) or {}).get("origin")
    if origin and (Path(origin) / "model.bin").is_file():
        return Path(origin)
    return None


def cached_translations(model, texts: Sequence[str], cache_dir: Path, beam: int = 4,
                        progress: bool = False, device: str = "cpu") -> List[str]:
    """:func:`translate_corpus` into ``cache_dir``, keyed by the model's weights, the backend, the
    beam and the texts, so every job and benchmark on the same corpus translates it once.  A lock
    file serialises concurrent jobs on the same key (the second finds the work done)."""
    import fcntl

    from triemine.mining.features import corpus_key

    backend = "ctranslate2" if ct2_origin(model) is not None else "fairseq"
    key = corpus_key(model, texts, f"translations|{backend}|beam={beam}")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return translate_corpus(model, texts, cache_dir / f"{key}.txt", beam=beam,
                                progress=progress, device=device, backend=backend)


def translate_corpus(model, texts: Sequence[str], path: Path, beam: int = 4, batch_size: int = 256,
                     progress: bool = False, device: str = "cpu", backend: str = "auto") -> List[str]:
    """One translation per text (``""`` for empty texts), cached in ``path``."""
    from tqdm import tqdm

    done: List[str] = []
    if path.is_file():
        done = path.read_text(encoding="utf-8").split("\n")[:-1]  # complete lines only
        done = done[:len(texts)]
    origin = ct2_origin(model) if backend in ("auto", "ctranslate2") else None
    if backend == "ctranslate2" and origin is None:
        raise ValueError("no CTranslate2 origin for this model directory")
    translate = _ct2_translator(model, origin, beam, device) if origin else \
        _fairseq_translator(model, beam, device)
    with open(path, "a" if done else "w", encoding="utf-8") as f, \
            tqdm(total=len(texts), initial=len(done), desc="translate", unit="sent",
                 disable=not progress) as bar:
        if not done:
            f.truncate(0)
        else:  # drop a partial last line left by an interruption
            f.seek(0)
            f.truncate(len("".join(x + "\n" for x in done).encode("utf-8")))
        for start in range(len(done), len(texts), batch_size):
            batch = list(texts[start:start + batch_size])
            out = translate(batch)
            f.write("".join(o.replace("\n", " ") + "\n" for o in out))
            f.flush()
            done.extend(out)
            bar.update(len(batch))
    return done


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


def _fairseq_translator(model, beam: int, device: str):
    import torch
    from fairseq.data import data_utils

    from triemine.decoding.generator import TrieSequenceGenerator

    gen = TrieSequenceGenerator(model.models, model.tgt_dict, search=None, beam_size=beam,
                                max_len_a=1.2, max_len_b=10)
    pad = model.src_dict.pad()

    def translate(batch, sub: int = 32):
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
