"""Exact scores by teacher forcing, node priors, and the prior-corrected search (tiny model)."""
import numpy as np
import pytest
import torch

from triemine.mining.options import MineOptions
from triemine.config.settings import with_values
from triemine.scoring.rows import JUDGE_ROWS
from triemine.scoring.forced import ForcedScorer
from triemine.scoring.prior import compute_node_priors, get_node_priors, prior_path
from triemine.trie import Trie

from helpers import OTHER, PAIRS, forced_scores, make_trie, run


@pytest.fixture(scope="module")
def small(tiny_model):
    texts = [t for _, t in PAIRS[:12]] + OTHER[:12]
    return texts, make_trie(tiny_model, texts)


def test_forced_scores_equal_a_plain_forward_pass(tiny_model):
    src = PAIRS[3][0]
    targets = [t for _, t in PAIRS[:7]]
    ref, _ = forced_scores(tiny_model, src, targets)
    enc = [tiny_model.encode_target(t) for t in targets]
    got, per_tok = ForcedScorer(tiny_model, max_tokens=16).score_pairs(  # several batches
        [tiny_model.encode_source(src)], enc, np.zeros(7, dtype=np.int64), np.arange(7),
        per_token=True)
    assert got == pytest.approx(ref.double().numpy(), abs=1e-4)
    assert [len(p) for p in per_tok] == [len(e) for e in enc]
    assert [float(p.sum()) for p in per_tok] == pytest.approx(got.tolist(), abs=1e-4)


def test_pairs_sharing_a_source_are_scored_as_alone(tiny_model):
    """Encoder states are computed once per distinct source and reused: order and grouping of
    the pairs must not change a score."""
    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:4]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:4]]
    si = np.array([0, 1, 0, 2, 3, 1, 2, 0])
    ti = np.array([0, 1, 2, 3, 0, 3, 2, 1])
    sc = ForcedScorer(tiny_model)
    together = sc.score_pairs(srcs, tgts, si, ti)
    alone = [sc.score_pairs([srcs[a]], [tgts[b]], np.array([0]), np.array([0]))[0]
             for a, b in zip(si, ti)]
    assert together == pytest.approx(alone, abs=1e-4)



def test_sources_split_across_decoder_batches_are_encoded_once(tiny_model, monkeypatch):
    """With tiny decoder batches a source's pairs fall in different batches; its encoder states
    are still computed once per call, and the scores equal the one-batch scores."""
    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:3]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:6]]
    si = np.array([0, 0, 0, 1, 1, 2, 2, 2, 0])
    ti = np.array([0, 1, 2, 3, 4, 5, 0, 1, 5])
    encoded = []
    real = tiny_model.model.encoder.forward
    monkeypatch.setattr(tiny_model.model.encoder, "forward",
                        lambda tokens, **kw: (encoded.append(tokens.size(0)),
                                              real(tokens, **kw))[1])
    small = ForcedScorer(tiny_model, max_tokens=12).score_pairs(srcs, tgts, si, ti)
    assert sum(encoded) == 3
    big = ForcedScorer(tiny_model, max_tokens=100000).score_pairs(srcs, tgts, si, ti)
    assert small == pytest.approx(big, abs=1e-4)


def test_output_chunks_are_normalised_in_place_as_a_fresh_log_softmax(tiny_model):
    """The output projection is normalised in place in the scorer's kept buffer: the bits of the
    plain ``gather - logsumexp`` over fresh logits of the same rows (numpy's product on the
    CPU, a row alone computed as two), equal to the decoder's own log-softmax up to the last
    bits; any number of chunks (the last one partial) gives the same scores up to the last bits.
    Whether a row's bits also stay when fewer rows share its product is the BLAS kernel's
    business (OpenBLAS's SkylakeX kernel: yes; its Haswell kernel, which OPENBLAS_CORETYPE picks
    on some machines: no, a few 1e-6 in a logit), so across row counts the test allows 1e-5."""
    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:5]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:5]]
    si, ti = np.repeat(np.arange(5), 5), np.tile(np.arange(5), 5)
    one = ForcedScorer(tiny_model, chunk=100000)
    totals, per_tok = one.score_pairs(srcs, tgts, si, ti, per_token=True)
    for chunk in (1, 3, 7):
        got, got_tok = ForcedScorer(tiny_model, chunk=chunk).score_pairs(srcs, tgts, si, ti,
                                                                         per_token=True)
        assert got == pytest.approx(totals, abs=1e-4)
        assert all(a == pytest.approx(b, abs=1e-5) for a, b in zip(got_tok, per_tok))
    feats = torch.randn(9, tiny_model.model.decoder.output_projection.in_features)
    gold = torch.randint(0, len(tiny_model.tgt_dict), (9,))
    sc = ForcedScorer(tiny_model, chunk=16)
    proj = tiny_model.model.decoder.output_projection

    def plain(rows):  # fresh logits of these rows alone, as numpy multiplies them
        x = np.ascontiguousarray(feats[rows].numpy())
        two = np.repeat(x, 2, 0) if len(x) == 1 else x
        logits = torch.from_numpy((two @ proj.weight.numpy().T)[:len(x)])
        if proj.bias is not None:
            logits += proj.bias
        return logits.gather(1, gold[rows][:, None]).squeeze(1) - torch.logsumexp(logits, -1)

    with torch.no_grad():
        everything = list(range(9))
        got = sc._gold_logprobs(feats, gold)
        again = sc._gold_logprobs(feats[:4], gold[:4])  # the buffer reused, fewer rows
        alone = [sc._gold_logprobs(feats[r:r + 1], gold[r:r + 1]) for r in range(9)]  # one row
        own = torch.log_softmax(tiny_model.model.decoder.output_layer(feats), -1)[range(9), gold]
        assert torch.equal(got, plain(everything)) and torch.equal(again, plain([0, 1, 2, 3]))
        assert all(torch.equal(alone[r], plain([r])) for r in range(9))
    assert torch.cat(alone).tolist() == pytest.approx(got.tolist(), abs=1e-5)
    assert again.tolist() == pytest.approx(got[:4].tolist(), abs=1e-5)
    assert got.tolist() == pytest.approx(own.tolist(), abs=1e-5)


def test_an_output_layer_that_does_more_than_its_projection_is_called(tiny_model, monkeypatch):
    """The kept buffer takes the projection's product only where the decoder's output layer is
    that product: a layer that adds to it is called as it is, and its scores follow it."""
    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:3]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:3]]
    si, ti = np.arange(3), np.arange(3)
    plain = ForcedScorer(tiny_model)
    plain.score_pairs(srcs, tgts, si, ti)
    assert plain._proj is tiny_model.model.decoder.output_projection
    dec = tiny_model.model.decoder
    monkeypatch.setattr(dec, "output_layer", lambda x: dec.output_projection(x) * 0.0)
    flat = ForcedScorer(tiny_model)  # every token equally likely: log(1 / vocabulary) each
    got = flat.score_pairs(srcs, tgts, si, ti)
    assert flat._proj is None
    want = [-len(t) * np.log(len(tiny_model.tgt_dict)) for t in tgts]
    assert got == pytest.approx(want, abs=1e-4)


def test_scorer_inputs_go_where_the_model_is(tiny_model):
    """Without a device the scorer uses the device of the model's weights (a worker loads the
    model on --device; the exact scores never said where), with the large batches off the CPU;
    the meta device stands in for a GPU, which this machine lacks."""
    import copy

    from triemine.scoring.forced import CHUNK, CPU_CHUNK, CPU_MAX_TOKENS, MAX_TOKENS

    on_cpu = ForcedScorer(tiny_model)
    assert (on_cpu.device, on_cpu.max_tokens, on_cpu.chunk) == ("cpu", CPU_MAX_TOKENS, CPU_CHUNK)
    elsewhere = copy.copy(tiny_model)
    elsewhere.models = [copy.deepcopy(tiny_model.model).to("meta")]
    sc = ForcedScorer(elsewhere)
    assert (sc.device, sc.max_tokens, sc.chunk) == ("meta", MAX_TOKENS, CHUNK)
    assert MAX_TOKENS > CPU_MAX_TOKENS and CHUNK > CPU_CHUNK
    small = ForcedScorer(elsewhere, device="cpu", max_tokens=64, chunk=32)
    assert (small.max_tokens, small.chunk) == (64, 32)


def test_int8_output_precision_approximates_fp32(tiny_model):
    """The int8 output projection is an approximation: close to fp32 (a loose bound that holds on
    any CPU), never used unless asked, and an unknown precision is refused."""
    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:8]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:8]]
    si, ti = np.repeat(np.arange(8), 8), np.tile(np.arange(8), 8)
    exact = ForcedScorer(tiny_model).score_pairs(srcs, tgts, si, ti)
    approx = ForcedScorer(tiny_model, precision="int8-output").score_pairs(srcs, tgts, si, ti)
    ntok = np.array([len(tgts[t]) for t in ti])
    diff = np.abs(exact - approx) / ntok
    assert diff.mean() < 0.1 and not np.array_equal(exact, approx)
    with pytest.raises(ValueError, match="unknown precision"):
        ForcedScorer(tiny_model, precision="fp8")

def test_node_prior_is_the_prefix_prior(tiny_model, small):
    texts, trie = small
    prior = compute_node_priors(tiny_model, trie)
    assert prior.shape == (trie.n_nodes,) and prior[0] == 0.0
    assert np.all(prior[1:] < 0)
    sc = ForcedScorer(tiny_model)
    paths, lengths = trie.terminal_paths()
    keys = np.asarray(trie.keys, dtype=np.int64)
    for i in range(0, len(lengths), 5):
        seq = torch.from_numpy(keys[paths[i, :lengths[i]]])
        _, per_tok = sc.prior([seq], per_token=True)
        assert prior[paths[i, :lengths[i]]] == pytest.approx(np.cumsum(per_tok[0]), abs=1e-4)


def test_node_priors_are_cached_beside_the_trie(tiny_model, small, tmp_path):
    _, trie = small
    trie.save(tmp_path / "t.trie")
    loaded = Trie.load(tmp_path / "t.trie")
    first = np.array(get_node_priors(tiny_model, loaded))  # a copy: the file is rewritten below
    path = prior_path(loaded.path, tiny_model)
    assert path.is_file()
    again = get_node_priors(tiny_model, loaded)
    assert np.array_equal(np.asarray(first), np.asarray(again))
    np.save(path, np.zeros(3, dtype=np.float32))  # a file that does not fit the trie
    assert np.array_equal(np.asarray(get_node_priors(tiny_model, loaded)), np.asarray(first))


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_prior_corrected_search_scores_stay_exact(tiny_model, small, weight):
    texts, trie = small
    prior = compute_node_priors(tiny_model, trie)
    sources = [s for s, _ in PAIRS[:6]]
    out, _, _ = run(tiny_model, sources, trie, "pre", 4, node_prior=prior, prior_weight=weight)
    sc = ForcedScorer(tiny_model)
    for src, hyps in zip(sources, out):
        assert hyps
        toks = [h["tokens"] for h in hyps]
        exact = sc.score_pairs([tiny_model.encode_source(src)], toks,
                               np.zeros(len(toks), dtype=np.int64),
                               np.arange(len(toks)))
        assert [h["total_score"] for h in hyps] == pytest.approx(exact.tolist(), abs=1e-4)
        assert [h["prior"] for h in hyps] == pytest.approx(sc.prior(toks).tolist(), abs=1e-4)


def test_prior_weight_changes_the_greedy_path_as_the_reference_does(tiny_model, small):
    """Beam 1 with the correction is greedy on log P(y|x) - lambda * prior: at every node the
    child with the best corrected prefix score, checked against forced decoding of every
    prefix."""
    texts, trie = small
    prior = compute_node_priors(tiny_model, trie)
    sc = ForcedScorer(tiny_model)
    eos = tiny_model.tgt_dict.eos()
    for src, _ in PAIRS[12:16]:
        x = tiny_model.encode_source(src)
        for weight in (0.0, 1.0):
            node, path = 0, []
            while True:
                keys, kids = trie.children(node)
                cands = [torch.tensor(path + [int(k)]) for k in keys]
                lp = sc.score_pairs([x], cands, np.zeros(len(cands), dtype=np.int64),
                                    np.arange(len(cands)))
                best = int(np.argmax(lp - weight * prior[kids]))
                path.append(int(keys[best]))
                node = int(kids[best])
                if path[-1] == eos:
                    break
            out, _, _ = run(tiny_model, [src], trie, "pre", 1, node_prior=prior,
                            prior_weight=weight)
            assert out[0][0]["tokens"].tolist() == path


def test_prior_correction_is_refused_where_it_has_no_meaning(tiny_model, small):
    from triemine.decoding.search import TrieConstrainedBeamSearch

    _, trie = small
    with pytest.raises(ValueError, match="needs node_prior"):
        TrieConstrainedBeamSearch(tiny_model.tgt_dict, trie, "pre", prior_weight=0.5)
    with pytest.raises(ValueError, match="pre-expansion only"):
        TrieConstrainedBeamSearch(tiny_model.tgt_dict, trie, "post", prior_weight=0.5,
                                  node_prior=np.zeros(trie.n_nodes, dtype=np.float32))
    with pytest.raises(ValueError, match="nodes"):
        TrieConstrainedBeamSearch(tiny_model.tgt_dict, trie, "pre",
                                  node_prior=np.zeros(3, dtype=np.float32))


def test_the_output_projection_uses_torchs_threads_in_numpys_blas(tiny_model):
    """numpy's BLAS computes the output projection with torch's number of threads, whatever it
    read from the environment when it was loaded, and gets its setting back afterwards."""
    from threadpoolctl import threadpool_info

    def blas_threads():
        return {m["num_threads"] for m in threadpool_info() if m["user_api"] == "blas"}

    sc = ForcedScorer(tiny_model)
    before, torch_threads = blas_threads(), torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            with sc._blas_threads():
                assert blas_threads() == {n}
    finally:
        torch.set_num_threads(torch_threads)
    assert blas_threads() == before


def test_a_new_arithmetic_is_never_mixed_with_cached_or_resumed_bits(tiny_model, tmp_path,
                                                                     monkeypatch):
    """The priors' cache, the trie's node priors and the mining job's resume key name the scores'
    arithmetic (ARITHMETIC) and, with kNN candidates, faiss's: a warm cache of another arithmetic
    is not read, and a job's key changes with it."""
    from triemine.mining import run
    from triemine.mining.features import target_priors
    from triemine.scoring import forced

    texts = ["a b", "c d", "e f"]
    calls = []

    def scores(need):
        calls.append(need.tolist())
        return -np.arange(1.0, len(need) + 1)
    first = target_priors(tiny_model, texts, np.array([0, 2]), cache_dir=tmp_path, scores=scores)
    again = target_priors(tiny_model, texts, np.array([0, 2]), cache_dir=tmp_path, scores=scores)
    assert calls == [[0, 2]] and first.tolist() == again.tolist() == [-1.0, -2.0]
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("x\n", encoding="utf-8")
    tgt.write_text("y\n", encoding="utf-8")
    cfg = MineOptions.of("combined")
    key = run._settings_digest(tiny_model, src, tgt, cfg)
    assert key["arithmetic"]["scores"] == forced.ARITHMETIC and "faiss" in key["arithmetic"]["knn"]
    node_priors = prior_path(tmp_path / "t.trie", tiny_model)
    monkeypatch.setattr(forced, "ARITHMETIC", forced.ARITHMETIC + 1)
    assert prior_path(tmp_path / "t.trie", tiny_model) != node_priors  # the trie's node priors
    target_priors(tiny_model, texts, np.array([0, 2]), cache_dir=tmp_path, scores=scores)
    assert calls == [[0, 2], [0, 2]]  # computed again, not read from the older arithmetic's
    assert run._settings_digest(tiny_model, src, tgt, cfg) != key
    # another device's products are other bits: its caches and keys are its own
    from triemine.mining.features import prior_table

    assert forced.arithmetic("cpu") == str(forced.ARITHMETIC)
    assert forced.arithmetic("cuda") != forced.arithmetic("cuda:1") != forced.arithmetic("cpu")
    prior_table(tiny_model, texts, np.array([0, 2]), cache_dir=tmp_path, scores=scores,
                device="cuda")
    assert calls[-1] == [0, 2] and len(calls) == 3  # not the CPU's cached values
    on_gpu = run._settings_digest(tiny_model, src, tgt, with_values(cfg, {"device": "cuda"}))
    assert on_gpu["config"]["device"] == "cuda" and key["config"]["device"] == "cpu"
    assert "faiss" in on_gpu["arithmetic"]["knn"] and "torch" in on_gpu["arithmetic"]["knn"]
    import copy

    elsewhere = copy.copy(tiny_model)
    elsewhere.models = [copy.deepcopy(tiny_model.model).to("meta")]
    assert prior_path(tmp_path / "t.trie", elsewhere).name.endswith(".meta.npy")
    assert prior_path(tmp_path / "t.trie", tiny_model).name.endswith(f".a{forced.ARITHMETIC}.npy")


def test_priors_are_computed_a_range_of_lines_at_a_time_into_a_mapped_cache(tiny_model, tmp_path,
                                                                            monkeypatch):
    """The priors table is the cache file, memory-mapped: the needed lines are found and scored
    one range of PRIOR_RANGE lines at a time, whatever the range the values are the same, a
    later call computes only what is new, and a call cut short leaves the cache as it was."""
    from types import SimpleNamespace

    from triemine.mining import features

    texts = [f"w{i} x" for i in range(7)]
    calls = []

    def scores(need):
        calls.append(need.tolist())
        return -(need + 1.0)
    whole = features.prior_table(tiny_model, texts, np.array([0, 3, 4, 6]), scores=scores)
    assert calls == [[0, 3, 4, 6]] and isinstance(whole, np.ndarray)
    monkeypatch.setattr(features, "PRIOR_RANGE", 2)
    calls.clear()
    table = features.prior_table(tiny_model, texts, np.array([6, 0, 3, 4, 3]),
                                 cache_dir=tmp_path / "c", scores=scores)
    assert calls == [[0], [3], [4], [6]]  # ranges [0, 2), [2, 4), [4, 6), [6, 7)
    assert isinstance(table, np.memmap) and not table.flags.writeable
    np.testing.assert_array_equal(table, whole)  # NaN where not asked for
    (cache,) = (tmp_path / "c").iterdir()
    np.testing.assert_array_equal(np.load(cache), whole)
    mask = np.zeros(7, dtype=bool)
    mask[[0, 1, 3]] = True
    again = features.prior_table(tiny_model, texts, mask, cache_dir=tmp_path / "c", scores=scores)
    assert calls[4:] == [[1]] and again[1] == -2.0 and again[6] == -7.0
    assert features.prior_table(tiny_model, texts, mask, cache_dir=tmp_path / "c",
                                scores=scores)[1] == -2.0 and len(calls) == 5  # all cached

    def cut(need):
        if need[0] >= 4:
            raise KeyboardInterrupt
        return scores(need)
    before = cache.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        features.prior_table(tiny_model, texts, np.arange(7), cache_dir=tmp_path / "c",
                             scores=cut)
    assert cache.read_bytes() == before and [p.name for p in (tmp_path / "c").iterdir()] == \
        [cache.name]  # no partial table left behind
    # with a work directory each range's new values wait in a file there until the cache is
    # written, then go; a range computed before a cut is computed again (its shards reused)
    seen = []

    def spilled(need):
        seen.append(sorted(p.name for p in (tmp_path / "w" / "priors.new").glob("*.lines.npy"))
                    if (tmp_path / "w" / "priors.new").exists() else [])
        return scores(need)
    got = features.prior_table(tiny_model, texts, np.arange(7), cache_dir=tmp_path / "c",
                               scores=spilled, work=tmp_path / "w")
    assert seen == [[], ["2.lines.npy"]]  # lines 2 and 5 were new
    assert got.tolist() == (-(np.arange(7) + 1.0)).tolist()
    assert not (tmp_path / "w" / "priors.new").exists()
    assert np.load(cache).tolist() == got.tolist()
    # nothing asked: no table written
    assert np.isnan(features.prior_table(tiny_model, texts, np.zeros(7, dtype=bool),
                                         cache_dir=tmp_path / "e", scores=scores)).all()
    assert not list((tmp_path / "e").iterdir())
    with pytest.raises(ValueError, match="mask"):
        features.prior_table(tiny_model, texts, np.ones(6, dtype=bool), scores=scores)
    # a trie's lines have their node's prior; only the others are scored, and only those cached
    trie = SimpleNamespace(term_nodes=np.array([4, 9], dtype=np.uint32),
                           term_offsets=np.array([0, 1, 3], dtype=np.uint64),
                           term_ids=np.array([2, 5, 1], dtype=np.uint32))
    node_prior = np.zeros(10, dtype=np.float32)
    node_prior[[4, 9]] = [-0.5, -0.25]
    calls.clear()
    got = features.prior_table(tiny_model, texts, np.array([1, 2, 6]), trie=trie,
                               node_prior=node_prior, cache_dir=tmp_path / "t", scores=scores)
    assert calls == [[6]]
    assert got[2] == -0.5 and got[1] == got[5] == -0.25 and got[6] == -7.0
    np.testing.assert_array_equal(np.load(next((tmp_path / "t").iterdir())),
                                  [np.nan] * 6 + [-7.0])


def _uncovered_reference(layers, tgt_mask, src_lens, cut=0.5):
    out = []
    for b in range(len(src_lens)):
        pieces = int(src_lens[b]) - 1
        if pieces <= 0:
            out.append(float("nan"))
            continue
        mass = [sum(float(np.mean([w[b, t, s] for w in layers]))
                    for t in range(tgt_mask.shape[1]) if tgt_mask[b, t]) for s in range(pieces)]
        out.append(sum(m < cut for m in mass) / pieces)
    return out


def test_uncovered_share_counts_the_source_pieces_under_half_a_unit_of_attention():
    from triemine.scoring.forced import uncovered_share

    g = torch.Generator().manual_seed(5)
    lens = torch.tensor([5, 3, 1, 6])          # EOS included; row 2 is the empty source
    tgt_mask = torch.rand(4, 7, generator=g) > 0.3
    layers = []
    for _ in range(3):
        w = torch.rand(4, 7, 6,
                       generator=g) * (torch.arange(6)[None, None, :] < lens[:, None, None])
        layers.append(w / w.sum(-1, keepdim=True))
    got = uncovered_share(layers, tgt_mask, lens)
    want = _uncovered_reference([w.numpy() for w in layers], tgt_mask.numpy(), lens.numpy())
    assert np.isnan(got[2]) and np.isnan(want[2])
    assert got[[0, 1, 3]].tolist() == pytest.approx([want[i] for i in (0, 1, 3)])
    with pytest.raises(ValueError):
        uncovered_share([], tgt_mask, lens)


def test_coverage_leaves_the_scores_alone_and_reads_the_attention_of_every_layer(tiny_model):
    from triemine.scoring import forced

    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:5]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:5]]
    si, ti = np.array([0, 1, 2, 3, 4, 0]), np.array([0, 1, 2, 3, 4, 4])
    sc = ForcedScorer(tiny_model, max_tokens=24)  # several batches
    plain = sc.score_pairs(srcs, tgts, si, ti)
    totals, judged = sc.score_pairs(srcs, tgts, si, ti, coverage=True)
    assert np.array_equal(plain, totals) and judged.shape == (len(JUDGE_ROWS), len(si))
    uncovered = judged[JUDGE_ROWS.index("uncovered")]
    assert np.all((uncovered >= 0) & (uncovered <= 1))
    _, tokens, again = sc.score_pairs(srcs, tgts, si, ti, per_token=True, coverage=True)
    assert np.array_equal(again, judged) and len(tokens) == len(si)
    # the token extremes are those of the per-token log-probabilities: EOS's and the least other
    for row, lp in zip(again.T, tokens):
        assert row[JUDGE_ROWS.index("eos_lp")] == pytest.approx(float(lp[-1]))
        assert row[JUDGE_ROWS.index("tok_min_lp")] == pytest.approx(
            float(lp[:-1].min()) if len(lp) > 1 else 0.0)
    # the captured weights: one B x T x S tensor a decoder layer, rows summing to 1 over the
    # source, nothing on its padding; the hooks are gone afterwards
    with forced._cross_attention(tiny_model.model.decoder) as layers:  # one batch
        ForcedScorer(tiny_model).score_pairs(srcs[:2], tgts[:2], np.array([0, 1]),
                                             np.array([0, 1]))
    assert len(layers) == len(tiny_model.model.decoder.layers)
    for w in layers:
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:2]), atol=1e-5)
        # the batch's rows are its pairs sorted by target length
        rows = np.argsort([len(t) for t in tgts[:2]], kind="stable").tolist()
        for r, pair in enumerate(rows):
            assert float(w[r, :, len(srcs[pair]):].abs().sum()) == 0.0
    assert all(not layer.encoder_attn._forward_hooks for layer in tiny_model.model.decoder.layers)
    _, empty = sc.score_pairs([None], tgts[:2], np.zeros(2, dtype=np.int64), np.arange(2),
                              coverage=True)
    assert np.isnan(empty[JUDGE_ROWS.index("uncovered")]).all()
    assert np.isfinite(empty[1:]).all()


def test_token_extremes_against_a_loop():
    from triemine.scoring.forced import token_extremes

    rng = np.random.default_rng(5)
    lengths = np.array([1, 2, 5, 3, 5])
    lp = np.zeros((len(lengths), 5), dtype=np.float32)
    for r, n in enumerate(lengths):
        lp[r, :n] = -rng.exponential(2.0, n)
    got = token_extremes(torch.from_numpy(lp), torch.from_numpy(lengths)).numpy()
    assert got.shape == (2, len(lengths)) and got.dtype == np.float64
    for r, n in enumerate(lengths):
        assert got[0, r] == lp[r, n - 1]
        assert got[1, r] == (lp[r, :n - 1].min() if n > 1 else 0.0)


def test_marian_attention_hands_out_its_weights_without_changing_its_output():
    from triemine.models.marian import MultiHeadAttention

    torch.manual_seed(3)
    att = MultiHeadAttention(8, 2).eval()
    q, mem = torch.randn(3, 4, 8), torch.randn(3, 5, 8)
    k, v = att.split(att.k_proj(mem)), att.split(att.v_proj(mem))
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    mask = torch.zeros(3, 1, 1, 5).masked_fill(pad[:, None, None, :], float("-inf"))
    plain = att.attend(att.q_proj(q), k, v, mask)
    att.weights_out = got = []
    with_weights = att.attend(att.q_proj(q), k, v, mask)
    att.weights_out = None
    assert torch.equal(plain, with_weights) and len(got) == 1
    qh = att.split(att.q_proj(q))
    ref = torch.softmax(qh @ k.transpose(-1, -2) / 2.0 + mask, -1).mean(1)  # head_dim 4
    assert got[0].shape == (3, 4, 5) and torch.allclose(got[0], ref, atol=1e-6)
    assert float(got[0][1, :, 3:].abs().sum()) == 0.0
