"""Trie-constrained beam search on the tiny synthetic model (real Cython trie, real fairseq)."""

import numpy as np
import pytest
import torch
from fairseq.search import BeamSearch
from fairseq.sequence_generator import SequenceGenerator

from triemine.decoding.generator import TrieSequenceGenerator
from triemine.decoding.search import TrieConstrainedBeamSearch, TrieConsistencyError
from triemine.testing.tiny_model import synthetic_pairs
from triemine.trie import Trie

from helpers import OTHER, PAIRS, forced_scores, make_trie, run, sample_of

def run_stock(model, sources, trie, mode, beam, max_len_b=None):
    """fairseq's stock generator; with a trie, ``max_len_b`` defaults to the trie depth (one
    more step than needed: the search must apply the trie's own length limit)."""
    search = (BeamSearch(model.tgt_dict) if mode is None
              else TrieConstrainedBeamSearch(model.tgt_dict, trie, mode, debug=True))
    if max_len_b is None:
        max_len_b = trie.depth if trie is not None else 50
    gen = SequenceGenerator(model.models, model.tgt_dict, beam_size=beam,
                            max_len_b=max_len_b, search_strategy=search)
    return gen.generate(model.models, sample_of(model, sources)), search


@pytest.fixture(scope="module")
def dup_setup(tiny_model):
    """Targets: the translations of the first 20 sources, distractors, and duplicated lines."""
    texts = [t for _, t in PAIRS[:20]] + OTHER[:30]
    texts[25] = texts[3]   # duplicate of a reachable target
    texts[40] = texts[3]
    texts[41] = texts[33]  # duplicate among distractors
    return texts, make_trie(tiny_model, texts)


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("stock", [False, True])
def test_every_output_is_a_trie_line_with_all_its_ids(tiny_model, dup_setup, mode, stock):
    texts, trie = dup_setup
    sources = [s for s, _ in PAIRS]
    beam = 12  # wider than most trie nodes' child lists: dead slots must be harmless
    if stock:
        out, _ = run_stock(tiny_model, sources, trie, mode, beam)
    else:
        out, _, _ = run(tiny_model, sources, trie, mode, beam, debug=True)
    by_text = {}
    for i, t in enumerate(texts):
        by_text.setdefault(t, []).append(i)
    n_hyps = 0
    for hyps in out:
        assert len(hyps) <= beam
        for h in hyps:
            toks = h["tokens"].tolist()
            assert toks[-1] == tiny_model.tgt_dict.eos()
            text = tiny_model.decode_target(toks)
            assert text in by_text, text
            assert trie.contains(toks)
            if not stock:
                assert sorted(h["line_ids"].tolist()) == by_text[text]
                assert h["n_tokens"] == len(toks)
                assert h["total_score"] == pytest.approx(float(h["positional_scores"].sum()),
                                                         abs=1e-4)
            n_hyps += 1
    assert n_hyps >= (len(sources) if mode == "pre" else 15)
    if not stock:
        # the duplicated reachable line (index 3) is matched with all three ids
        found = [h["line_ids"].tolist() for hyps in out for h in hyps]
        assert [3, 25, 40] in [sorted(x) for x in found]


def test_pre_expansion_matches_every_source(tiny_model, dup_setup):
    _, trie = dup_setup
    sources = [s for s, _ in PAIRS]  # 20 of the 40 have no translation in the trie
    for beam in (1, 4):
        out, _, _ = run(tiny_model, sources, trie, "pre", beam)
        assert all(len(h) >= 1 for h in out)


def test_pre_expansion_finds_the_translation_when_present(tiny_model, dup_setup):
    texts, trie = dup_setup
    out, _, _ = run(tiny_model, [s for s, _ in PAIRS[:20]], trie, "pre", 5)
    correct = sum(tiny_model.decode_target(h[0]["tokens"]) == PAIRS[i][1]
                  for i, h in enumerate(out))
    assert correct >= 15


@pytest.mark.parametrize("beam", [1, 3, 6])
def test_constrained_equals_unconstrained_when_trie_holds_its_output(tiny_model, beam):
    """Per source: a trie of exactly the unconstrained n-best gives the same best and score.

    (Extra trie sequences may legitimately change the result under Algorithm 1: a bad match
    reached early occupies one of the B slots; see docs/decoding.md.)"""
    for src, _ in PAIRS[:4] + PAIRS[20:26]:
        free, _, _ = run(tiny_model, [src], None, None, beam)
        trie = make_trie(tiny_model, [], [h["tokens"].tolist() for h in free[0]])
        for mode in ("pre", "post"):
            con, _, _ = run(tiny_model, [src], trie, mode, beam)
            assert con[0][0]["tokens"].tolist() == free[0][0]["tokens"].tolist()
            assert con[0][0]["total_score"] == pytest.approx(free[0][0]["total_score"], abs=1e-4)
        # the same property inside fairseq's stock generator
        free_s, _ = run_stock(tiny_model, [src], None, None, beam)
        trie_s = make_trie(tiny_model, [], [h["tokens"].tolist() for h in free_s[0]])
        for mode in ("pre", "post"):
            con_s, _ = run_stock(tiny_model, [src], trie_s, mode, beam)
            assert con_s[0][0]["tokens"].tolist() == free_s[0][0]["tokens"].tolist()
            assert float(con_s[0][0]["score"]) == pytest.approx(float(free_s[0][0]["score"]),
                                                                abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_output_ended_by_the_length_rule_is_found(tiny_model, beam):
    """Regression (a fresh AVX-512 machine, beam 1): an unconstrained search that ends its output
    by its max-length rule (EOS forced after 3 tokens here) writes EOS where the model itself
    would continue. A trie holding exactly that output must still give it back, in both modes and
    both generators: the search applies the trie's length limit (EOS only at step depth - 1)
    instead of leaving post-expansion's top-k, which lacks EOS there, to drop the only path."""
    src = next(s for s, t in PAIRS if len(t.split()) >= 6)
    natural, _ = run_stock(tiny_model, [src], None, None, beam)
    assert len(natural[0][0]["tokens"]) > 4  # the model itself does not stop after 3 tokens
    cut, _ = run_stock(tiny_model, [src], None, None, beam, max_len_b=3)
    seqs = [h["tokens"].tolist() for h in cut[0]]
    assert all(len(q) == 4 and q[-1] == tiny_model.tgt_dict.eos() for q in seqs)
    trie = make_trie(tiny_model, [], seqs)
    assert trie.depth == 4
    for mode in ("pre", "post"):
        con_s, _ = run_stock(tiny_model, [src], trie, mode, beam)  # max_len_b = depth
        assert con_s[0], f"stock generator, {mode}: no hypothesis"
        assert con_s[0][0]["tokens"].tolist() == cut[0][0]["tokens"].tolist()
        con, _, _ = run(tiny_model, [src], trie, mode, beam)
        assert con[0][0]["tokens"].tolist() == cut[0][0]["tokens"].tolist()
        assert con[0][0]["total_score"] == pytest.approx(
            float(cut[0][0]["positional_scores"].sum()), abs=1e-4
        )


def test_post_expansion_returns_nothing_for_absent_translations_and_stops_early(tiny_model):
    # targets: unrelated sentences only
    trie = make_trie(tiny_model, OTHER)
    sources = [s for s, _ in PAIRS]
    out, gen, _ = run(tiny_model, sources, trie, "post", 5)
    empty = [i for i, h in enumerate(out) if not h]
    assert len(empty) >= 30
    for i, hyps in enumerate(out):
        for h in hyps:
            assert tiny_model.decode_target(h["tokens"]) in OTHER
    # early stop: far fewer decoding steps than the trie depth allows
    assert gen.stats["early_stopped"] >= len(empty)
    out1, gen1, _ = run(tiny_model, [sources[empty[0]]], trie, "post", 5)
    assert out1 == [[]]
    assert gen1.stats["steps"] < trie.depth // 2


def _level_widths(trie):
    widths, level = [], np.array([0], dtype=np.int64)
    while level.size:
        widths.append(level.size)
        _, _, level = trie.children_many(level)
    return widths


def test_wide_pre_expansion_equals_brute_force_forced_decoding(tiny_model):
    texts = [t for _, t in PAIRS[:6]] + OTHER[:18]
    trie = make_trie(tiny_model, texts)
    widest = max(_level_widths(trie))
    # Algorithm 1's matches occupy beam slots: the beam also covers every sequence
    beam = max(widest, len(set(texts)))
    for src, _ in PAIRS[:3] + PAIRS[30:33]:
        totals, lengths = forced_scores(tiny_model, src, texts)
        norm = totals / lengths
        best = int(torch.argmax(norm))
        out, _, _ = run(tiny_model, [src], trie, "pre", beam)
        hyps = out[0]
        assert len(hyps) == len(set(texts))  # exhaustive
        assert tiny_model.decode_target(hyps[0]["tokens"]) == texts[best]
        assert hyps[0]["total_score"] == pytest.approx(float(totals[best]), abs=1e-3)


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_debug_check_passes_on_realistic_batches_and_catches_corruption(tiny_model, dup_setup,
                                                                        mode):
    _, trie = dup_setup
    sources = [s for s, _ in PAIRS[:16]]
    _, _, search = run(tiny_model, sources, trie, mode, 8, debug=True)
    assert search.debug_checks > 100

    bad = TrieConstrainedBeamSearch(tiny_model.tgt_dict, trie, mode, debug=True)
    real_advance, real_topk = bad.advance, bad.sparse_topk

    def off_by_one(nodes):  # cached nodes one off from the truth
        return torch.where(nodes > 0, nodes + 1, nodes)

    bad.advance = lambda nodes, toks: off_by_one(real_advance(nodes, toks))
    bad.sparse_topk = lambda *a: real_topk(*a)[:3] + (off_by_one(real_topk(*a)[3]),)
    gen = TrieSequenceGenerator(tiny_model.models, tiny_model.tgt_dict, search=bad, beam_size=4)
    with pytest.raises(TrieConsistencyError):
        gen.generate(tiny_model.models, sample_of(tiny_model, sources))


def test_results_are_deterministic(tiny_model, dup_setup):
    _, trie = dup_setup
    sources = [s for s, _ in PAIRS]
    a, _, _ = run(tiny_model, sources, trie, "pre", 6)
    b, _, _ = run(tiny_model, sources, trie, "pre", 6)
    key = lambda out: [[(h["tokens"].tolist(), h["total_score"]) for h in hs] for hs in out]
    assert key(a) == key(b)


def test_search_rejects_trie_of_another_eos(tiny_model):
    trie = Trie.build([[5, 6, 7]], eos=7)
    with pytest.raises(ValueError, match="EOS"):
        TrieConstrainedBeamSearch(tiny_model.tgt_dict, trie, "pre")
    with pytest.raises(ValueError, match="mode"):
        TrieConstrainedBeamSearch(tiny_model.tgt_dict, make_trie(tiny_model, OTHER[:2]), "side")


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_stock_generator_max_len_shorter_than_trie_never_asserts(tiny_model, dup_setup, mode):
    """fairseq forces EOS at max_len; our Search must neither trip fairseq's `step < max_len`
    assertion nor output a non-trie sentence when no trie sentence is that short."""
    texts, _ = dup_setup
    sources = [s for s, _ in PAIRS[:8]]
    encoded = [tuple(tiny_model.encode_target(t).tolist()) for t in texts]
    short = {e for e in encoded if len(e) <= 4}  # what max_len_b=3 (+ EOS) can still reach
    assert short and len(short) < len(set(encoded))

    def generate(trie):
        search = TrieConstrainedBeamSearch(tiny_model.tgt_dict, trie, mode, debug=True)
        gen = SequenceGenerator(tiny_model.models, tiny_model.tgt_dict, beam_size=6, max_len_b=3,
                                search_strategy=search)
        out = gen.generate(tiny_model.models, sample_of(tiny_model, sources))
        assert len(out) == len(sources)
        return [tuple(h["tokens"].tolist()) for hyps in out for h in hyps]

    # no trie line fits in max_len: nothing may come out (fairseq would force a non-trie EOS)
    long_only = Trie.build([list(e) for e in encoded if e not in short],
                           eos=tiny_model.tgt_dict.eos())
    assert generate(long_only) == []
    # with the short lines in the trie, whatever comes out is one of them
    assert set(generate(make_trie(tiny_model, texts))) <= short


@pytest.mark.parametrize("mode, beam", [("pre", 5), ("post", 4)])
def test_batched_search_scores_are_the_forced_decoding_scores(tiny_model, mode, beam):
    """150 sources in one batch: rows leave, shrink and regroup between steps, and every match's
    total must still be log P(y|x) of its own source (decoder state reordered correctly)."""
    pairs = synthetic_pairs(150, seed=7)
    texts = [t for _, t in pairs[:75]] + [t for _, t in synthetic_pairs(150, seed=8)]
    trie = make_trie(tiny_model, texts)
    sources = [s for s, _ in pairs]
    out, _, _ = run(tiny_model, sources, trie, mode, beam)
    n = 0
    for src, hyps in zip(sources, out):
        if hyps:
            totals, _ = forced_scores(tiny_model, src,
                                      [tiny_model.decode_target(h["tokens"]) for h in hyps])
            assert [h["total_score"] for h in hyps] == pytest.approx(totals.tolist(), abs=1e-3)
            n += len(hyps)
    assert n >= (len(sources) * beam if mode == "pre" else 60)
