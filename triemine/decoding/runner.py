"""The trie search over sources: count their tokens, then encode and decode them block by block.

::

    from triemine.decoding import SearchSettings, get_trie, load_model_dir, mine
    model = load_model_dir("DIR")
    trie = get_trie(model, "target.txt")            # built once, cached
    for m in mine(model, ["source sentence", ...], trie, SearchSettings(mode="pre", beam=20)):
        print(m.src_index, m.tgt_line_ids, m.score, m.ce_word, m.ce_token, m.text)

Over-long sources (more tokens than the model's ``max_source_positions`` or ``max_length``, EOS
included) are skipped like empty ones, with a warning naming their line numbers; target lines over
the decoder's positions cannot be written by the search, and rows of those over ``max_length`` are
dropped (:mod:`triemine.decoding.lengths`).  Writing a file, resume and shards:
:mod:`triemine.decoding.driver`.
"""
from __future__ import annotations

import warnings
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from triemine.decoding.batching import block_batches, plan_blocks
from triemine.decoding.lengths import SHOWN, LengthLimits, model_token_lengths, too_long
from triemine.decoding.matches import Match, to_matches
from triemine.decoding.settings import SearchSettings
from triemine.trie.build import check_trie_dict


def source_lengths(model, texts: Sequence[str], path=None, max_length: Optional[int] = None
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """Tokens the encoder is given for every source, EOS included
    (:func:`~triemine.decoding.lengths.model_token_lengths`: the mining job's rule, batched and
    cached per corpus file), ``0`` for an empty line and for one too long for the encoder or
    ``max_length`` (skipped, with a warning naming their first lines).  Only the lengths are
    kept (int32, 4 bytes a line; each batch is encoded again when it is decoded).  Returns the
    lengths and the 1-based line numbers skipped as too long."""
    limit = LengthLimits.of(model, max_length).source
    raw = model_token_lengths(model, texts, "source")
    over = raw > limit
    skipped = np.flatnonzero(over) + 1
    out = np.where(over, 0, raw).astype(np.int32, copy=False)
    if len(skipped):
        shown = ", ".join(str(int(i)) for i in skipped[:SHOWN]) + \
            (", ..." if len(skipped) > SHOWN else "")
        where = f"{path}: " if path else ""
        warnings.warn(f"{where}skipped {len(skipped)} source sentence(s) longer than {limit} "
                      f"tokens (lines {shown})", stacklevel=2)
    return out, skipped


def long_targets(model, texts: Sequence[str], max_length: Optional[int] = None) -> np.ndarray:
    """Target lines too long for the decoder or ``max_length``: the search cannot write those
    over the decoder's positions (its steps are capped there); rows of the others over
    ``max_length`` are dropped (:func:`~triemine.decoding.matches.match_rows`)."""
    return too_long(model, texts, "target", LengthLimits.of(model, max_length))


def build_generator(model, trie, search: SearchSettings = SearchSettings(), *,
                    debug: bool = False, node_prior=None):
    """The Algorithm-1 generator constrained by ``trie`` (mode, beam and prior weight of
    ``search``)."""
    from triemine.decoding import generator, search as searches  # heavy: torch, fairseq

    check_trie_dict(trie, model.tgt_dict, getattr(trie, "path", None))
    constrain = searches.TrieConstrainedBeamSearch(model.tgt_dict, trie, search.mode,
                                                   debug=debug, node_prior=node_prior,
                                                   prior_weight=search.prior_weight)
    return generator.TrieSequenceGenerator(model.models, model.tgt_dict, search=constrain,
                                           beam_size=search.beam)


def mine_batches(model, sources: Sequence[str], trie,
                 search: SearchSettings = SearchSettings(), *, device: str = "cpu",
                 debug: bool = False, start: int = 0, progress: bool = False, source_path=None,
                 lengths=None, node_prior=None) -> Iterator[Tuple[int, int, List[List[Match]]]]:
    """Yield ``(start, end, matches)`` per block (:func:`~triemine.decoding.batching.plan_blocks`);
    ``matches[i]`` belongs to source ``start + i``.  Within a block, sources are decoded in
    length-sorted batches (:func:`~triemine.decoding.batching.block_batches`).

    ``start`` must be a block boundary of the same plan (as recorded by
    :func:`triemine.decoding.driver.mine_to_tsv`).  ``lengths``: the sources' lengths already
    counted (:func:`source_lengths`); ``node_prior``: the trie's node priors
    (:func:`triemine.scoring.prior.get_node_priors`), needed with ``search.prior_weight``.
    """
    import torch
    from fairseq.data import data_utils
    from tqdm import tqdm

    batch_size = search.sources_per_batch
    gen = build_generator(model, trie, search, debug=debug, node_prior=node_prior)
    if device != "cpu":
        gen.to(device)
    if lengths is None:
        lengths, _ = source_lengths(model, sources, source_path, search.max_length)
    lengths = np.asarray(lengths)
    plan = plan_blocks(lengths, batch_size, search.max_tokens, search.sort_window,
                       search.sources_per_block)
    if start and start not in {s for s, _ in plan} and start != len(sources):
        raise ValueError(f"start={start} is not a block boundary of this plan")
    pad = model.src_dict.pad()
    max_tokens = search.max_tokens if search.sort_window > 1 else None
    with tqdm(total=len(sources), initial=start, unit="sent", desc=f"mine ({search.mode})",
              disable=not progress, dynamic_ncols=True) as bar:
        for s, e in plan:
            if e <= start:
                continue
            results: List[List[Match]] = [[] for _ in range(e - s)]
            block = lengths[s:e].tolist()  # Python ints: one block's, not the corpus's
            for rel in block_batches(block, 0, e - s, batch_size, max_tokens):
                idx = [s + i for i in rel]
                toks = [model.encode_source(sources[i]) for i in idx]
                sample = {"net_input": {
                    "src_tokens": data_utils.collate_tokens(toks, pad, left_pad=True).to(device),
                    "src_lengths": torch.tensor([len(t) for t in toks], device=device)}}
                hyps = gen.generate(gen.model.models, sample)
                for i, h in zip(idx, hyps):
                    results[i - s] = to_matches(model, i, h, search.nbest)
                bar.update(len(idx))
            bar.update(e - s - sum(1 for n in block if n))  # empty lines
            yield s, e, results


def mine(model, sources: Sequence[str], trie, search: SearchSettings = SearchSettings(), *,
         device: str = "cpu", debug: bool = False, progress: bool = False) -> Iterator[Match]:
    """Matches of every source in input order (best first within a source)."""
    for _, _, results in mine_batches(model, sources, trie, search, device=device, debug=debug,
                                      progress=progress):
        for ms in results:
            yield from ms
