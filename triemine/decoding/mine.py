"""Mining driver: translate every source sentence with trie-constrained beam search.

Python API::

    from triemine.decoding import load_model_dir, mine
    model = load_model_dir("DIR")
    trie = get_trie(model, "target.txt")            # built once, cached
    for m in mine(model, ["source sentence", ...], trie, mode="pre", beam=20):
        print(m.src_index, m.tgt_line_ids, m.score, m.ce_word, m.ce_token, m.text)

:func:`mine_to_tsv` is what ``trie-mine`` runs: it streams the mining TSV (header, then one row per
(match, target line id), sources in input order, flushed per batch) and keeps a sidecar
``OUT.progress`` so that ``resume=True`` continues an interrupted run without losing or duplicating
rows.

Scores (natural log): ``score`` is the total log-probability of the target tokens given the source,
EOS included; ``ce_token = -score / n_tokens`` (target tokens incl. EOS); ``ce_word = -score /
(words + 1)`` where ``words`` is the number of whitespace-separated words of the detokenised
target and the 1 stands for EOS.

Over-long sources (more tokens than the model's ``max_source_positions`` or ``max_length``, EOS
included) are skipped like empty ones, with a warning naming their line numbers; target lines over
the decoder's positions cannot be written by the search, and rows of those over ``max_length`` are
dropped (:mod:`triemine.decoding.lengths`); both counts are ``skipped_long`` in the run summary and
the ``.meta.json``.  Empty source lines produce no rows but count as done.
"""
from __future__ import annotations

import hashlib
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from triemine.decoding.fingerprint import model_fingerprint
from triemine.decoding.lengths import LengthLimits, too_long
from triemine.errors import InputError
from triemine.paths import file_sha256

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class Match:
    """One finished hypothesis of one source: a target sentence found in the trie."""

    src_index: int                 # 0-based position in the sources
    rank: int                      # 0 = best (by score / n_tokens)
    tgt_line_ids: Tuple[int, ...]  # 0-based target line indices (several for duplicated lines)
    tokens: Tuple[int, ...]        # target dictionary ids, EOS included
    score: float                   # total log-prob (natural log), EOS included
    n_tokens: int                  # target tokens incl. EOS
    ce_token: float                # -score / n_tokens
    ce_word: float                 # -score / (words of detokenised target + 1)
    text: str                      # detokenised target
    prior: Optional[float] = None  # log P(target | empty source), when the search has node priors


def word_count(text: str) -> int:
    return len(text.split())


def encode_sources(model, texts: Sequence[str], path=None, max_length: Optional[int] = None
                   ) -> Tuple[List[Optional[torch.Tensor]], List[int]]:
    """Encode non-empty texts; ``None`` for empty ones and for those too long for the encoder or
    ``max_length`` (:mod:`triemine.decoding.lengths`: skipped, with a warning naming their
    lines).  Returns the encodings and the 1-based line numbers skipped as too long."""
    limit = LengthLimits.of(model, max_length).source
    out: List[Optional[torch.Tensor]] = []
    skipped: List[int] = []
    for i, text in enumerate(texts):
        ids = model.encode_source(text) if text.strip() else None
        if ids is not None and len(ids) > limit:
            ids = None
            skipped.append(i + 1)
        out.append(ids)
    if skipped:
        shown = ", ".join(map(str, skipped[:20])) + (" ..." if len(skipped) > 20 else "")
        where = f"{path}: " if path else ""
        warnings.warn(f"{where}skipped {len(skipped)} source sentence(s) longer than {limit} "
                      f"tokens (lines {shown})", stacklevel=2)
    return out, skipped


def long_targets(model, texts: Sequence[str], max_length: Optional[int] = None) -> np.ndarray:
    """Target lines too long for the decoder or ``max_length``: the search cannot write those
    over the decoder's positions (its steps are capped there); rows of the others over
    ``max_length`` are dropped (:func:`format_rows`)."""
    return too_long(model, texts, "target", LengthLimits.of(model, max_length))


def plan_batches(lengths: Sequence[int], batch_size: int = 16,
                 max_tokens: Optional[int] = None) -> List[Tuple[int, int]]:
    """Consecutive ``[start, end)`` ranges in input order; deterministic (resume relies on it).

    A range holds at most ``batch_size`` non-empty sources and, with ``max_tokens``, at most that
    many padded source tokens (``count * longest``); zero lengths (empty lines) are free.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    plan, start, count, longest = [], 0, 0, 0
    for i, n in enumerate(lengths):
        if n:
            new_longest = max(longest, n)
            if count and (count + 1 > batch_size or
                          (max_tokens is not None and (count + 1) * new_longest > max_tokens)):
                plan.append((start, i))
                start, count, new_longest = i, 0, n
            count += 1
            longest = new_longest
    if start < len(lengths):
        plan.append((start, len(lengths)))
    return plan


# A default batch aims at this many decoder rows per step (sources x beam): measured on the
# OPUS-MT zh-en model, 2 threads, beam 5 (README, "Mining speed"), length-sorted batches of 32 or
# 64 sources decode 1.16-1.26x faster than 16 (32 and 64 within run-to-run noise of each other);
# at beam 90 it gives 3, near the 4 the decoding benchmark uses.
ROWS_PER_STEP = 320
MAX_BATCH = 64
# Sources are decoded in batches of similar length within blocks of this many batches.
SORT_WINDOW = 8


def resolve_batch_size(batch_size: Optional[int], beam: int) -> int:
    """``batch_size``, or by default ``ROWS_PER_STEP // beam`` sources (1 to ``MAX_BATCH``)."""
    if batch_size is None:
        return max(1, min(MAX_BATCH, ROWS_PER_STEP // max(1, int(beam))))
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    return int(batch_size)


def plan_blocks(lengths: Sequence[int], batch_size: int, max_tokens: Optional[int] = None,
                sort_window: int = SORT_WINDOW) -> List[Tuple[int, int]]:
    """Consecutive ``[start, end)`` blocks, the units of output, progress and resume: up to
    ``sort_window * batch_size`` non-empty sources each (:func:`block_batches` cuts a block into
    decoder batches, more than ``sort_window`` of them when ``max_tokens`` binds).  With
    ``sort_window`` 1 a block is one batch of :func:`plan_batches`.  Greedy and local: planned
    again from any block start it gives the same blocks."""
    if sort_window < 1:
        raise ValueError("sort_window must be >= 1")
    if sort_window == 1:
        return plan_batches(lengths, batch_size, max_tokens)
    return plan_batches(lengths, batch_size * sort_window)


def block_batches(lengths: Sequence[int], start: int, end: int, batch_size: int,
                  max_tokens: Optional[int] = None) -> List[List[int]]:
    """Decoder batches of block ``[start, end)``: its non-empty sources sorted by length (stable),
    cut greedily at ``batch_size`` sources and ``max_tokens`` padded tokens (similar lengths waste
    less padding and finish together).  Deterministic: the output does not depend on it beyond
    float rounding, and resume works per block."""
    order = sorted((i for i in range(start, end) if lengths[i]), key=lambda i: lengths[i])
    batches: List[List[int]] = []
    for i in order:
        n = lengths[i]
        cur = batches[-1] if batches else None
        if cur and len(cur) < batch_size and (max_tokens is None or (len(cur) + 1) * n <= max_tokens):
            cur.append(i)
        else:
            batches.append([i])
    return batches


def build_generator(model, trie, mode: str = "pre", beam: int = 90, debug: bool = False,
                    node_prior=None, prior_weight: float = 0.0):
    from triemine.decoding.generator import TrieSequenceGenerator
    from triemine.decoding.search import TrieConstrainedBeamSearch
    from triemine.decoding.task import check_trie_dict

    if mode not in ("pre", "post"):
        raise ValueError(f"mode must be 'pre' or 'post', got {mode!r}")
    check_trie_dict(trie, model.tgt_dict, getattr(trie, "path", None))
    search = TrieConstrainedBeamSearch(model.tgt_dict, trie, mode, debug=debug,
                                       node_prior=node_prior, prior_weight=prior_weight)
    return TrieSequenceGenerator(model.models, model.tgt_dict, search=search, beam_size=beam)


def _to_matches(model, src_index: int, hyps, nbest: Optional[int]) -> List[Match]:
    out = []
    for rank, h in enumerate(hyps[: nbest] if nbest else hyps):
        toks = tuple(int(t) for t in h["tokens"].tolist())
        text = model.decode_target(toks)
        score = float(h["total_score"])
        n_tok = int(h["n_tokens"])
        out.append(Match(src_index=src_index, rank=rank,
                         tgt_line_ids=tuple(int(x) for x in h["line_ids"]), tokens=toks,
                         score=score, n_tokens=n_tok, ce_token=-score / n_tok,
                         ce_word=-score / (word_count(text) + 1), text=text,
                         prior=h.get("prior")))
    return out


def mine_batches(model, sources: Sequence[str], trie, mode: str = "pre", beam: int = 90,
                 nbest: Optional[int] = None, batch_size: Optional[int] = None,
                 max_tokens: Optional[int] = None, device: str = "cpu", debug: bool = False,
                 start: int = 0, progress: bool = False, source_path=None, encoded=None,
                 node_prior=None, prior_weight: float = 0.0, sort_window: int = SORT_WINDOW
                 ) -> Iterator[Tuple[int, int, List[List[Match]]]]:
    """Yield ``(start, end, matches)`` per block (:func:`plan_blocks`); ``matches[i]`` belongs to
    source ``start + i``.  Within a block, sources are decoded in length-sorted batches
    (:func:`block_batches`); ``batch_size`` None: :func:`resolve_batch_size`.

    ``start`` must be a block boundary of the same plan (as recorded by :func:`mine_to_tsv`).
    """
    from fairseq.data import data_utils
    from tqdm import tqdm

    batch_size = resolve_batch_size(batch_size, beam)
    gen = build_generator(model, trie, mode, beam, debug, node_prior, prior_weight)
    if device != "cpu":
        gen.to(device)
    if encoded is None:
        encoded, _ = encode_sources(model, sources, source_path)
    lengths = [0 if e is None else len(e) for e in encoded]
    plan = plan_blocks(lengths, batch_size, max_tokens, sort_window)
    if start and start not in {s for s, _ in plan} and start != len(sources):
        raise ValueError(f"start={start} is not a block boundary of this plan")
    pad = model.src_dict.pad()
    with tqdm(total=len(sources), initial=start, unit="sent", desc=f"mine ({mode})",
              disable=not progress, dynamic_ncols=True) as bar:
        for s, e in plan:
            if e <= start:
                continue
            results: List[List[Match]] = [[] for _ in range(e - s)]
            for idx in block_batches(lengths, s, e, batch_size,
                                     max_tokens if sort_window > 1 else None):
                toks = [encoded[i] for i in idx]
                sample = {"net_input": {
                    "src_tokens": data_utils.collate_tokens(toks, pad, left_pad=True).to(device),
                    "src_lengths": torch.tensor([len(t) for t in toks], device=device)}}
                hyps = gen.generate(gen.model.models, sample)
                for i, h in zip(idx, hyps):
                    results[i - s] = _to_matches(model, i, h, nbest)
                bar.update(len(idx))
            bar.update(e - s - sum(1 for i in range(s, e) if lengths[i]))  # empty lines
            yield s, e, results


def mine(model, sources: Sequence[str], trie, mode: str = "pre", beam: int = 90,
         nbest: Optional[int] = None, batch_size: Optional[int] = None,
         max_tokens: Optional[int] = None, device: str = "cpu", debug: bool = False,
         progress: bool = False, sort_window: int = SORT_WINDOW) -> Iterator[Match]:
    """Matches of every source in input order (best first within a source)."""
    for _, _, results in mine_batches(model, sources, trie, mode, beam, nbest, batch_size,
                                      max_tokens, device, debug, progress=progress,
                                      sort_window=sort_window):
        for ms in results:
            yield from ms


# -- trie cache --------------------------------------------------------------------------------

def trie_cache_key(model, target_path, nbest: int = 1) -> str:
    from triemine.trie.build import dictionary_fingerprint
    from triemine.trie import FORMAT_VERSION

    if model.target_spm_path is None:
        raise InputError("the model directory has no target.spm: pass --target-spm", model.path)
    h = hashlib.sha256()
    for part in (file_sha256(target_path), dictionary_fingerprint(model.tgt_dict),
                 file_sha256(model.target_spm_path), str(nbest), str(FORMAT_VERSION)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def get_trie(model, target_path, nbest: int = 1, cache_dir=None, progress: bool = False):
    """The trie of ``target_path`` for ``model``, built once and reused from the cache.

    Cache key: target file content, target dictionary fingerprint, target sentencepiece model
    and ``nbest`` (number of segmentations per line); location
    ``triemine.paths.cache_root()/tries/<key>.trie`` unless ``cache_dir`` is given.
    """
    from triemine.paths import cache_root
    from triemine.trie import Trie, build_trie_from_corpus

    if not Path(target_path).is_file():
        raise InputError("target file not found", target_path)
    cache = Path(cache_dir) if cache_dir is not None else cache_root() / "tries"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{trie_cache_key(model, target_path, nbest)}.trie"
    if path.is_file():
        logger.info("reusing cached trie %s", path)
        return Trie.load(path)
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


# -- TSV writer with resume ----------------------------------------------------------------------

PRIOR_COLUMNS = ("prior", "pmi")


def format_rows(matches: Iterable[Match], src_ids: Sequence[str], src_texts: Sequence[str],
                tgt_ids: Sequence[str], tgt_texts: Sequence[str], with_prior: bool = False,
                skip_tgt: Optional[np.ndarray] = None) -> str:
    """Mining-TSV rows (:mod:`triemine.tsv`), one per (match, target line id); with
    ``with_prior`` also ``prior`` (log P(target | empty source)) and ``pmi`` (per token);
    ``skip_tgt``: a mask of target lines too long to keep (:func:`long_targets`)."""
    from triemine.tsv import clean_cell, format_number as num

    rows = []
    for m in matches:
        extra = ""
        if with_prior:
            extra = f"\t{num(m.prior)}\t{num((m.score - m.prior) / m.n_tokens)}"
        for line in m.tgt_line_ids:
            if skip_tgt is not None and skip_tgt[line]:
                continue
            rows.append(f"{src_ids[m.src_index]}\t{tgt_ids[line]}\t{num(m.score)}\t{num(m.ce_word)}"
                        f"\t{num(m.ce_token)}\t{clean_cell(src_texts[m.src_index])}"
                        f"\t{clean_cell(tgt_texts[line])}{extra}\n")
    return "".join(rows)


def read_mining_corpora(source_path, target_path):
    """``(source, target)`` corpora of a trie search; an empty one is an InputError."""
    from triemine.corpus import read_corpus

    src = read_corpus(source_path)
    if not src.non_empty:
        raise InputError("empty source file (no non-empty lines)", source_path)
    tgt = read_corpus(target_path)
    if not tgt.non_empty:
        raise InputError("empty target file (no non-empty lines)", target_path)
    return src, tgt


def check_trie_fits(trie, n_target_lines: int, target_path) -> None:
    """Refuse a trie whose line ids go beyond the target file (built from another file)."""
    if getattr(trie, "n_lines", None) is not None and len(trie) and \
            int(np.max(trie.term_ids)) >= n_target_lines:
        raise InputError(f"trie refers to target line {int(np.max(trie.term_ids)) + 1} but the "
                         f"target file has {n_target_lines} lines: trie built from another file",
                         target_path)


def search_settings(model, source_path, target_path, n_sources: int, mode: str, beam: int,
                    nbest: Optional[int], batch_size: Optional[int], max_tokens: Optional[int],
                    prior_weight: float, with_prior: bool, sort_window: int = SORT_WINDOW,
                    max_length: Optional[int] = None) -> dict:
    """What a trie search's output depends on: written to its sidecars and checked on resume,
    by :func:`mine_to_tsv` and its sharded form alike (their outputs must be byte-identical).
    The batch size is recorded resolved (:func:`resolve_batch_size`)."""
    return {"model": model_fingerprint(model),
            "source": os.path.abspath(source_path), "target": os.path.abspath(target_path),
            "mode": mode, "beam": beam, "nbest": nbest,
            "batch_size": resolve_batch_size(batch_size, beam), "sort_window": sort_window,
            "max_tokens": max_tokens, "n_sources": n_sources, "prior_weight": prior_weight,
            "with_prior": with_prior, **({"max_length": max_length} if max_length else {})}


@dataclass
class MineSummary:
    sources: int
    decoded: int
    rows: int
    sources_with_matches: int
    skipped_long: dict  # {"source": n, "target": m}: lines too long for the model, skipped
    resumed_from: int
    trie_path: Optional[str]


def mine_to_tsv(model, source_path, target_path, out_path, mode: str = "pre", beam: int = 90,
                nbest: Optional[int] = None, batch_size: Optional[int] = None,
                max_tokens: Optional[int] = None, device: str = "cpu", trie=None,
                trie_nbest: int = 1, resume: bool = False, debug: bool = False,
                progress: bool = False, stop_after_batches: Optional[int] = None,
                prior_weight: float = 0.0, with_prior: bool = False,
                sort_window: int = SORT_WINDOW, max_length: Optional[int] = None) -> MineSummary:
    """Mine ``source_path`` against ``target_path`` and write the mining TSV to ``out_path``.

    ``with_prior`` (implied by ``prior_weight`` > 0) computes the trie's node priors once
    (:mod:`triemine.scoring.prior`, cached beside the trie) and adds the columns ``prior`` and
    ``pmi``; ``prior_weight`` is the lambda of prior-corrected pre-expansion.  Output and
    progress are written per block (:func:`plan_blocks`; ``stop_after_batches`` counts blocks).
    """
    from triemine.tsv import header_line, prepare_resume, write_meta, write_progress

    if sort_window < 1:  # before the output is touched
        raise ValueError("sort_window must be >= 1")
    resolve_batch_size(batch_size, beam)
    src, tgt = read_mining_corpora(source_path, target_path)
    if trie is None:
        trie = get_trie(model, target_path, trie_nbest, progress=progress)
    check_trie_fits(trie, len(tgt), target_path)
    with_prior = bool(with_prior or prior_weight)
    node_prior = None
    if with_prior:
        from triemine.scoring.prior import get_node_priors
        node_prior = get_node_priors(model, trie, progress=progress)
    out_path = Path(out_path)
    header = header_line(PRIOR_COLUMNS if with_prior else ())
    settings = search_settings(model, source_path, target_path, len(src), mode, beam, nbest,
                               batch_size, max_tokens, prior_weight, with_prior, sort_window,
                               max_length)
    encoded, skipped = encode_sources(model, src.texts, source_path, max_length)
    skip_tgt = long_targets(model, tgt.texts, max_length)
    skipped_long = {"source": len(skipped), "target": int(skip_tgt.sum())}
    write_meta(out_path, dict(_meta(model, settings, trie_nbest), skipped_long=skipped_long))
    start = 0
    if resume and out_path.exists():
        start = prepare_resume(out_path, settings, header)
        f = open(out_path, "r+b")
        f.seek(0, os.SEEK_END)
    else:
        f = open(out_path, "wb")
        f.write((header + "\n").encode("utf-8"))
    with f:
        f.flush()
        write_progress(out_path, settings, start, f.tell())
        rows = decoded = with_matches = batches = 0
        gen = mine_batches(model, src.texts, trie, mode, beam, nbest, batch_size, max_tokens,
                           device, debug, start=start, progress=progress, encoded=encoded,
                           node_prior=node_prior, prior_weight=prior_weight,
                           sort_window=sort_window)
        for s, e, results in gen:
            flat = [m for ms in results for m in ms]
            text = format_rows(flat, src.ids, src.texts, tgt.ids, tgt.texts, with_prior,
                               skip_tgt)
            f.write(text.encode("utf-8"))
            f.flush()
            write_progress(out_path, settings, e, f.tell())
            rows += text.count("\n")
            decoded += e - s
            with_matches += sum(1 for ms in results if ms)
            batches += 1
            if stop_after_batches is not None and batches >= stop_after_batches:
                break
    return MineSummary(sources=len(src), decoded=decoded, rows=rows,
                       sources_with_matches=with_matches, skipped_long=skipped_long,
                       resumed_from=start,
                       trie_path=getattr(trie, "path", None))


def _meta(model, settings: dict, trie_nbest: int) -> dict:
    """What produced the TSV, for evaluation signatures (``OUT.tsv.meta.json``)."""
    model_path = getattr(model, "path", None)
    spm = getattr(model, "target_spm_path", None)
    return {"model": Path(model_path).name if model_path is not None else None,
            "model_path": os.path.abspath(model_path) if model_path is not None else None,
            "source": settings["source"], "target": settings["target"], "mode": settings["mode"],
            "beam": settings["beam"], "nbest": settings["nbest"], "trie_nbest": trie_nbest,
            "prior_weight": settings["prior_weight"],
            "target_spm": os.path.abspath(spm) if spm is not None else None}
