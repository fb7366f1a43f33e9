"""The model's own outputs: what it writes for estimation sentences, and counts taken from them.

Outputs come from CTranslate2 with ``compute_type="float32"``: the same computation as the
imported fairseq model (which is what mines), and the same on every CPU (int8 outputs depend on
the CPU's instruction set). They are cached on disk per model and beam size.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from triemine.models.segmentation.pieces import BOS, EOS, HAN, SPACE, UNK, find_source_spm
from triemine.io import cache_root

logger = logging.getLogger(__name__)

COMPUTE_TYPE = "float32"


def _model_fingerprint(ct2_dir: Path) -> str:
    h = hashlib.sha1()
    for name in sorted(os.listdir(ct2_dir)):
        p = Path(ct2_dir) / name
        if p.is_file():
            st = p.stat()
            h.update(f"{name}:{st.st_size}".encode())
            with open(p, "rb") as f:
                h.update(f.read(1 << 16))
    return h.hexdigest()[:16]


def _load_output_cache(path: Path) -> dict[str, list[str]]:
    if not path.is_file():
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}  # a damaged cache is recomputed
    return data if isinstance(data, dict) else {}


def model_outputs(ct2_dir: Path, sentences: Sequence[str], *, beam_size: int = 1,
                  batch_size: int = 32, threads: int = 1, cache: bool = True,
                  progress: bool = True, source_spm: Path | None = None,
                  compute_type: str = COMPUTE_TYPE) -> list[list[str]]:
    """Target piece sequences the CTranslate2 model writes for ``sentences`` (cached on disk
    under ``cache_root()/segmenter``)."""
    import sentencepiece as spm

    ct2_dir = Path(ct2_dir)
    source_spm = Path(source_spm) if source_spm is not None else find_source_spm(ct2_dir)
    key = hashlib.sha1(json.dumps([_model_fingerprint(ct2_dir), str(source_spm.name), beam_size,
                                   "greedy-256", compute_type]).encode()).hexdigest()[:20]
    # One cache file per model, beam size and compute type: {source sentence: target pieces}.
    cache_file = cache_root() / "segmenter" / f"outputs-{key}.json"
    known = _load_output_cache(cache_file) if cache else {}
    missing = sorted({s for s in sentences if s not in known}, key=len)
    if missing:
        import ctranslate2
        from tqdm import tqdm

        logger.info("decoding %d sentences with %s (%s, beam %d)", len(missing), ct2_dir,
                    compute_type, beam_size)
        sp = spm.SentencePieceProcessor(model_file=str(source_spm))
        translator = ctranslate2.Translator(str(ct2_dir), device="cpu", compute_type=compute_type,
                                            intra_threads=threads)
        new: dict[str, list[str]] = {}
        # Sorted by length so batches waste little padding.
        with tqdm(total=len(missing), desc=f"ct2 beam={beam_size}", unit="sent",
                  disable=not progress) as bar:
            for start in range(0, len(missing), batch_size):
                batch = missing[start:start + batch_size]
                res = translator.translate_batch([sp.encode(s, out_type=str) for s in batch],
                                                 beam_size=beam_size, max_batch_size=batch_size,
                                                 max_decoding_length=256)
                for s, r in zip(batch, res):
                    new[s] = list(r.hypotheses[0])
                bar.update(len(batch))
        known.update(new)
        if cache:
            merged = _load_output_cache(cache_file)  # another process may have added some
            merged.update(new)
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(merged, f, ensure_ascii=False)
            os.replace(tmp, cache_file)
    return [known[s] for s in sentences]


def dominated_class(piece: str):
    """Class of a piece whose counts the source side may dominate: digits (by length and a
    leading ``▁``) and punctuation; None for other pieces."""
    body = piece[1:] if piece.startswith(SPACE) else piece
    head = piece.startswith(SPACE)
    if not body:
        return None
    if body.isdigit():
        return ("digits", head, min(len(body), 4))
    if not any(c.isalnum() for c in body) and not HAN.search(body):
        return ("punct", head, min(len(body), 2))
    return None


def apply_output_counts(log_counts: dict[str, float], source_scores: dict[str, float],
                        outputs: Sequence[Sequence[str]], vocab: set,
                        min_output_count: int = 100, min_class_count: int = 5) -> int:
    """Update the prior's ``log_counts`` in place from the model's outputs; returns how many
    pieces got an output-based estimate.

    Pieces the model writes are target pieces. Frequent ones (``min_output_count`` or more)
    take their output frequency, put on the prior's scale by the median offset over target-only
    pieces. For the classes the source side dominates (:func:`dominated_class`) the target share
    of each kept shared piece is its source probability times the class's output/source mass
    ratio. Pieces the prior dropped but the model writes come back with their count estimate.
    """
    counts: dict[str, int] = {}
    for out in outputs:
        for p in out:
            if p in vocab and p not in (UNK, BOS, EOS):
                counts[p] = counts.get(p, 0) + 1
    if not counts:
        return 0
    n_est = 0
    n_tok = sum(counts.values())
    diffs = [log_counts[p] - math.log(c / n_tok) for p, c in counts.items()
             if c >= min_output_count and p not in source_scores and p in log_counts]
    offset = float(np.median(diffs)) if diffs else 0.0
    class_src: dict[tuple, float] = {}
    class_out: dict[tuple, int] = {}
    for p, sc in source_scores.items():
        k = dominated_class(p)
        if k is not None and p in log_counts:
            class_src[k] = class_src.get(k, 0.0) + math.exp(sc)
    for p, c in counts.items():
        k = dominated_class(p)
        if k is not None and p in source_scores:
            class_out[k] = class_out.get(k, 0) + c
    for p, sc in source_scores.items():
        k = dominated_class(p)
        if k is not None and p in log_counts and class_out.get(k, 0) >= min_class_count:
            log_counts[p] = sc + math.log(class_out[k] / n_tok / class_src[k]) + offset
            n_est += 1
    for p, c in counts.items():
        if p not in log_counts or (p in source_scores and c >= min_output_count):
            # a piece the rank prior dropped although the model writes it, or a frequent one
            log_counts[p] = math.log(c / n_tok) + offset
            n_est += 1
    return n_est
