"""The one rule for lines too long for the model: they are skipped, on either side, in every job.

A source line is *too long* when its tokens plus EOS (its sentencepiece pieces as the model's
dictionary splits them: :func:`token_lengths`) exceed what the encoder can read (its position
table, ``max_source_positions``) or the user's ``max_length``; a target line when its tokens plus
EOS exceed what the decoder can write (``max_target_positions``) or ``max_length``.

Why skipped rather than truncated: a truncated sentence is not the sentence of the corpus, so any
score of a pair with it (log P(y|x), its cross-entropies, PMI) would describe another pair, and the
pair a miner would emit would not be a translation pair.  Lines of thousands of pieces are in
practice boilerplate or paragraphs glued together (web corpora have them), not sentences.  A
skipped line behaves as an empty one: it is in no candidate pair and no row, and it is counted
(``skipped_long`` in the run summary and the TSV's ``.meta.json``) with its line numbers in a
warning; nothing else is lost.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np

from triemine.errors import InputError, OutputError
from triemine.io import cache_root, cached_npy, input_digest, write_npy

logger = logging.getLogger(__name__)

# line numbers named in the warning (the count is always complete)
SHOWN = 10


@dataclass(frozen=True)
class LengthLimits:
    """Largest source and target lengths, in model tokens with EOS, that a job keeps."""

    source: int
    target: int

    @classmethod
    def of(cls, model, max_length: Optional[int] = None) -> "LengthLimits":
        """The model's own limits, lowered to ``max_length`` when given."""
        if max_length is not None and max_length < 2:
            raise InputError(f"--max-length must be >= 2 (one piece and EOS), got {max_length}")
        src, tgt = model_limits(model)
        if max_length is not None:
            src, tgt = min(src, max_length), min(tgt, max_length)
        return cls(src, tgt)


def model_limits(model) -> tuple:
    """``(source, target)``: the encoder's and the decoder's position limits of a loaded model
    directory (:class:`~triemine.models.model_dir.ModelDir`)."""
    net = model.model
    return int(net.encoder.max_positions()), int(net.decoder.max_positions())


# lines tokenised per batched call: the pieces of one chunk are held at a time, never a whole
# corpus's (see docs/decisions.md#token-lengths-in-chunks-and-cached)
LENGTH_CHUNK = 65536
# what token_lengths counts, in the cache's key and the trie search's resume key (another rule,
# other cached lengths, other batches)
LENGTH_RULE = "dictionary tokens of the sentencepiece pieces (split on whitespace) + EOS, 0 blank"


def token_lengths(spm, texts: Sequence[str], chunk: int = LENGTH_CHUNK) -> np.ndarray:
    """Tokens the model's encoder is given for every text, EOS included (0 for an empty line):
    its sentencepiece pieces as the dictionary splits them (``encode_line`` splits the joined
    pieces on whitespace again, and a piece may hold a whitespace character that sentencepiece
    keeps, such as U+001F or U+0085: ``a\x1fb`` is 3 pieces but 2 tokens with OPUS-MT's model).
    Tokenised ``chunk`` lines at a time in batched calls: the memory of one chunk, whatever the
    corpus's size (``texts`` may be a view of a corpus file,
    :func:`triemine.io.corpus.open_corpus`); int32, 4 bytes a line."""
    out = np.zeros(len(texts), dtype=np.int32)
    for a in range(0, len(texts), chunk):
        block = texts[a:a + chunk]
        idx = [i for i, t in enumerate(block) if t.strip()]
        if idx:
            # one thread: sentencepiece's batched call takes every core by default (a worker
            # counting its shard's sources beside the others)
            pieces = spm.encode([block[i] for i in idx], out_type=str, num_threads=1)
            out[a + np.asarray(idx, dtype=np.int64)] = [len(" ".join(p).split()) + 1
                                                        for p in pieces]
    return out


def corpus_token_lengths(spm, spm_path, texts: Sequence[str]) -> np.ndarray:
    """:func:`token_lengths`, kept in ``$TRIEMINE_CACHE/lengths/`` (int32, one a line) when
    ``texts`` is a corpus file's view (:meth:`triemine.io.corpus._Lines.file_key`) and ``spm_path``
    the sentencepiece model's file: every later call on that corpus with that model reads them,
    memory-mapped read-only (the driver's heap does not hold 4 bytes a line: 400 MB at 10^8).
    A mining job asks for the target corpus's lengths at its start and again in its trie
    search's driver and in every worker with ``--max-length``, so each reads them rather than
    tokenising again (see docs/decisions.md#token-lengths-in-chunks-and-cached)."""
    file_key = getattr(texts, "file_key", None)
    key = file_key() if file_key is not None else None
    if key is None or spm_path is None or not os.path.isfile(spm_path):
        return token_lengths(spm, texts)
    key = dict(key, spm=input_digest(spm_path), rule=LENGTH_RULE)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    path = cache_root() / "lengths" / f"{digest}.npy"
    cached = cached_npy(path, "token lengths cache", np.int32, (len(texts),))
    if cached is not None:
        return cached
    out = token_lengths(spm, texts)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_npy(path, out, "token lengths cache")
    except (OSError, OutputError) as exc:  # only a cache: the job goes on without it
        logger.warning("token lengths not cached: %s", exc)
    return out


def model_token_lengths(model, texts: Sequence[str], side: str) -> np.ndarray:
    """:func:`corpus_token_lengths` of ``texts`` by the sentencepiece model of ``model``'s
    ``side`` ("source" or "target"): the counts every length rule of the package compares
    with its limits (the trie search's batches and skipped sources, the mining job's skipped
    lines)."""
    if side not in ("source", "target"):
        raise ValueError(f"side must be source or target, got {side!r}")
    spm = model.source_spm if side == "source" else model.target_spm
    return corpus_token_lengths(spm, getattr(model, f"{side}_spm_path", None), texts)


def too_long(model, texts: Sequence[str], side: str, limits: LengthLimits) -> np.ndarray:
    """Boolean mask of the lines of ``texts`` (``side`` "source" or "target") over the limit."""
    lengths = model_token_lengths(model, texts, side)
    return lengths > (limits.source if side == "source" else limits.target)


def report(mask: np.ndarray, path, side: str, limit: int) -> int:
    """Warn about the skipped lines of one corpus (count and the first line numbers); the count."""
    lines = np.flatnonzero(mask)  # the first SHOWN as numbers: not a Python int a skipped line
    if len(lines):
        shown = ", ".join(str(int(i) + 1) for i in lines[:SHOWN]) + \
            (", ..." if len(lines) > SHOWN else "")
        logger.warning("%s: skipped %d %s line(s) longer than %d tokens (lines %s)", path,
                       len(lines), side, limit, shown)
    return len(lines)


def skipped_summary(src_mask: np.ndarray, tgt_mask: np.ndarray) -> Dict[str, int]:
    """What a summary and a ``.meta.json`` record: ``{"source": n, "target": m}``."""
    return {"source": int(np.count_nonzero(src_mask)), "target": int(np.count_nonzero(tgt_mask))}
