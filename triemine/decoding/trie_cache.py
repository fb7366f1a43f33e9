"""The tries of target corpora, built once per (corpus, dictionary, segmenter) and cached.

``triemine.io.paths.cache_root()/tries/<key>.trie``; with target shards, one trie per line range of
the target corpus, its lines written as a file of their own under ``target-shards/`` and its trie
cached like any other.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import List, Tuple

import numpy as np

from triemine.io import atomic_write, cache_root, discard, input_digest, read_bytes
from triemine.errors import DamagedFile, InputError, TrieFormatError
from triemine.trie import FORMAT_VERSION, Trie
from triemine.trie.build import build_trie_from_corpus, dictionary_fingerprint

logger = logging.getLogger(__name__)


def trie_cache_key(model, target_path, nbest: int = 1) -> str:
    if model.target_spm_path is None:
        raise InputError("the model directory has no target.spm: pass --target-spm", model.path)
    h = hashlib.sha256()
    for part in (input_digest(target_path), dictionary_fingerprint(model.tgt_dict),
                 input_digest(model.target_spm_path), str(nbest), str(FORMAT_VERSION)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def get_trie(model, target_path, nbest: int = 1, cache_dir=None, progress: bool = False):
    """The trie of ``target_path`` for ``model``, built once and reused from the cache.

    Cache key: target file content, target dictionary fingerprint, target sentencepiece model
    and ``nbest`` (number of segmentations per line); location
    ``triemine.io.paths.cache_root()/tries/<key>.trie`` unless ``cache_dir`` is given.
    """
    if not Path(target_path).is_file():
        raise InputError("target file not found", target_path)
    cache = Path(cache_dir) if cache_dir is not None else cache_root() / "tries"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{trie_cache_key(model, target_path, nbest)}.trie"
    if path.is_file():
        try:
            trie = Trie.load(path)
            logger.info("reusing cached trie %s", path)
            return trie
        except TrieFormatError as exc:  # a cache: rebuilt, the damaged file named
            discard(DamagedFile(path, exc.problem, "trie cache"))
    trie, stats = build_trie_from_corpus(target_path, model.target_spm, model.tgt_dict,
                                         nbest=nbest, unk="map", progress=progress)
    if len(trie) == 0:
        raise InputError("target file has no non-empty lines", target_path)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    trie.save(tmp)
    os.replace(tmp, path)
    logger.info("built trie %s (%s)", path, trie.stats())
    # the cached file, memory-mapped: the same object whether built now or reused, and one
    # that knows its path (files stored beside the trie, e.g. node priors, need it)
    return Trie.load(path, verify=False)


def check_trie_fits(trie, n_target_lines: int, target_path) -> None:
    """Refuse a trie whose line ids go beyond the target file (built from another file)."""
    if getattr(trie, "n_lines", None) is not None and len(trie) and \
            int(np.max(trie.term_ids)) >= n_target_lines:
        raise InputError(f"trie refers to target line {int(np.max(trie.term_ids)) + 1} but the "
                         f"target file has {n_target_lines} lines: trie built from another file",
                         target_path)


# -- target shards -------------------------------------------------------------------------------

# the fewest non-empty target lines a target shard is given (:func:`shard_count`)
MIN_TARGET_SHARD_LINES = 16

def target_ranges(n_lines: int, k: int) -> List[Tuple[int, int]]:
    """``k`` contiguous line ranges of (nearly) equal size covering ``[0, n_lines)``."""
    if k < 1:
        raise ValueError("target shards must be >= 1")
    bounds = [round(i * n_lines / k) for i in range(k + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(k) if bounds[i + 1] > bounds[i]]


def shard_count(k: int, n_text_lines: int) -> int:
    """The target shards searched for ``--target-shards k`` on a corpus of ``n_text_lines``
    non-empty lines: ``k``, but no more than ranges of :data:`MIN_TARGET_SHARD_LINES` lines
    (at least 1).  Every range costs a whole search of every source (a trie of ten lines is
    searched in about the time of the whole corpus's), so ranges of a few lines multiply the
    cost and save no memory: ``--target-shards 240`` on 240 lines would search 240 times."""
    return max(1, min(k, n_text_lines // MIN_TARGET_SHARD_LINES))


def target_shard_tries(model, target_path, k: int, trie_nbest: int = 1,
                       progress: bool = False) -> List[Tuple[object, int]]:
    """``[(trie, first line), ...]``: one trie per line range of the target corpus (its lines
    written as a file of their own under ``$TRIEMINE_CACHE/target-shards/`` and its trie cached
    like any other); ``k`` ranges, or fewer with a warning where the corpus is too small for
    them (:func:`shard_count`)."""
    raw = read_bytes(target_path, "target corpus")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    n_text = sum(1 for x in lines if x.strip())
    if shard_count(k, n_text) < k:
        logger.warning("--target-shards %d: the target corpus has %d non-empty lines; searching "
                       "%d range(s) of at least %d lines instead (each range costs a whole "
                       "search of every source)", k, n_text, shard_count(k, n_text),
                       MIN_TARGET_SHARD_LINES)
        k = shard_count(k, n_text)
    ranges = target_ranges(len(lines), k)
    where = cache_root() / "target-shards"
    where.mkdir(parents=True, exist_ok=True)
    digest = input_digest(target_path)[:24]
    out = []
    for i, (a, b) in enumerate(ranges):
        part = where / f"{digest}.{i + 1}-of-{len(ranges)}.txt"
        text = b"".join(line + b"\n" for line in lines[a:b])
        if part.is_file() and input_digest(part) != hashlib.sha256(text).hexdigest():
            discard(DamagedFile(part, "not the lines of its range", "target shard cache"))
        if not part.is_file():
            atomic_write(part, text, "target shard")
        if not any(x.strip() for x in lines[a:b]):
            continue  # an empty range holds no sentence to find
        out.append((get_trie(model, part, trie_nbest, progress=progress), a))
    return out
