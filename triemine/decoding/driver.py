"""The trie search of a source corpus into a mining TSV.

:func:`mine_to_tsv` is what ``trie-mine`` runs: it streams the mining TSV (header, then one row per
(match, target line id), sources in input order, flushed per block) and keeps a sidecar
``OUT.progress`` so that ``resume=True`` continues an interrupted run without losing or duplicating
rows.  Over-long lines are skipped (:mod:`triemine.decoding.runner`); both counts are
``skipped_long`` in the run summary and the ``.meta.json``.  Empty source lines produce no rows
but count as done.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from triemine.corpus import read_corpus
from triemine.decoding.batching import SORT_WINDOW, resolve_batch_size
from triemine.decoding.fingerprint import model_fingerprint
from triemine.decoding.matches import PRIOR_COLUMNS, format_rows
from triemine.decoding.runner import encode_sources, long_targets, mine_batches
from triemine.decoding.trie_cache import check_trie_fits, get_trie
from triemine.errors import InputError


def read_mining_corpora(source_path, target_path):
    """``(source, target)`` corpora of a trie search; an empty one is an InputError."""
    src = read_corpus(source_path)
    if not src.non_empty:
        raise InputError("empty source file (no non-empty lines)", source_path)
    tgt = read_corpus(target_path)
    if not tgt.non_empty:
        raise InputError("empty target file (no non-empty lines)", target_path)
    return src, tgt


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
