"""Half precision (``--precision bf16``): the scores stay within a tolerance of fp32's, fp32
jobs keep their bits and keys, fp16 is refused on the CPU."""
import numpy as np
import pytest

from triemine.errors import InputError
from triemine.mining.options import MineOptions
from triemine.scoring.forced import ForcedScorer
from triemine.config.settings import key_of
from triemine.io.tsv import read_mined

from helpers import OTHER, PAIRS, combination_file, job_options

# the largest |log P(y|x) bf16 - fp32| per target token the tiny model may show (measured: about
# 0.01; bf16 keeps 8 bits of mantissa, the logits and their sums are float32)
TOKEN_TOLERANCE = 0.05


def _pairs(model):
    srcs = [model.encode_source(s) for s, _ in PAIRS[:12]]
    tgts = [model.encode_target(t) for _, t in PAIRS[:12]] + \
        [model.encode_target(t) for t in OTHER[:6]]
    si = np.concatenate([np.arange(12), np.arange(6)])
    ti = np.concatenate([np.arange(12), 12 + np.arange(6)])
    return srcs, tgts, si, ti


def test_bf16_scores_and_priors_stay_within_the_tolerance_of_fp32(tiny_model):
    srcs, tgts, si, ti = _pairs(tiny_model)
    ntok = np.array([len(tgts[t]) for t in ti])
    fp32 = ForcedScorer(tiny_model).score_pairs(srcs, tgts, si, ti)
    bf16 = ForcedScorer(tiny_model, precision="bf16").score_pairs(srcs, tgts, si, ti)
    diff = np.abs(bf16 - fp32) / ntok
    assert bf16.dtype == np.float64 and np.isfinite(bf16).all()
    assert diff.max() < TOKEN_TOLERANCE
    assert diff.max() > 0  # the half path did run in another arithmetic
    p32 = ForcedScorer(tiny_model).prior(tgts)
    p16 = ForcedScorer(tiny_model, precision="bf16").prior(tgts)
    lens = np.array([len(t) for t in tgts])
    assert (np.abs(p16 - p32) / lens).max() < TOKEN_TOLERANCE
    # the same gold pairs win in both arithmetics: each source's best target among all
    grid_s = np.repeat(np.arange(12), len(tgts))
    grid_t = np.tile(np.arange(len(tgts)), 12)
    a = ForcedScorer(tiny_model).score_pairs(srcs, tgts, grid_s, grid_t).reshape(12, -1)
    b = ForcedScorer(tiny_model, precision="bf16").score_pairs(srcs, tgts, grid_s,
                                                               grid_t).reshape(12, -1)
    assert (a.argmax(1) == b.argmax(1)).all()


def test_combined_computes_in_fp32_with_the_bits_of_before(tiny_model, corpora, tmp_path):
    from triemine.mining.run import mine_pipeline

    src, tgt, _, _ = corpora
    comb = combination_file(tmp_path)
    default = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                          combination=comb)
    assert default.precision == "fp32" and key_of(default)["precision"] == "fp32"
    named = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                        combination=comb, precision="fp32")
    mine_pipeline(tiny_model, src, tgt, tmp_path / "a.tsv", default)
    mine_pipeline(tiny_model, src, tgt, tmp_path / "b.tsv", named)
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()

    half = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                       combination=comb, precision="bf16")
    assert key_of(half)["precision"] == "bf16"
    with pytest.raises(InputError, match="cannot resume"):  # fp32's work is not bf16's
        mine_pipeline(tiny_model, src, tgt, tmp_path / "a.tsv", half, resume=True)
    mine_pipeline(tiny_model, src, tgt, tmp_path / "c.tsv", half)
    a, c = read_mined(tmp_path / "a.tsv"), read_mined(tmp_path / "c.tsv")
    assert c.meta["pipeline"]["precision"] == "bf16"
    assert list(a.src_ids) == list(c.src_ids) and list(a.tgt_ids) == list(c.tgt_ids)
    ntok = -a.col("score") / a.col("ce_token")  # the TSV's columns: ce_token = -score / tokens
    for col in ("score", "prior"):
        d = np.abs(a.col(col) - c.col(col)) / ntok
        assert 0 < d.max() < TOKEN_TOLERANCE, col


def test_fp16_is_refused_on_the_cpu_and_unknown_precisions_everywhere():
    with pytest.raises(InputError, match="fp16 runs on a GPU only"):
        MineOptions.of("combined", precision="fp16").check()
    with pytest.raises(InputError, match="not one of fp32, bf16, fp16"):
        MineOptions.of("combined", precision="fp8").check()
    assert MineOptions.of("combined", precision="bf16").check().precision == "bf16"
    with pytest.raises(InputError, match="the trie search computes in fp32"):
        MineOptions.of("paper", candidates=("trie",), precision="bf16").check()


def test_half_knn_rescores_its_candidates_in_float32_and_finds_the_exact_neighbours():
    from triemine.embedding.knn import device_knn

    rng = np.random.default_rng(0)
    d = rng.standard_normal((3000, 64)).astype(np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    q = d[rng.choice(len(d), 50, replace=False)] + 0.3 * rng.standard_normal((50, 64)).astype(
        np.float32)
    exact_s, exact_i = device_knn(q, d, 4, "cpu:0", row_block=700)
    half_s, half_i = device_knn(q, d, 4, "cpu:0", row_block=700, precision="bf16")
    assert (half_i == exact_i).all()
    # float32 values of the same rows (an inner product's order of sums aside), not bf16's
    np.testing.assert_allclose(half_s, exact_s, rtol=0, atol=2e-6)
    want = np.einsum("qd,qkd->qk", q, d[half_i])
    np.testing.assert_allclose(half_s, want, rtol=0, atol=2e-6)
    with pytest.raises(ValueError, match="unknown precision"):
        device_knn(q, d, 4, "cpu:0", precision="int4")


def test_bf16_encodes_the_priors_empty_source_in_float32_and_the_rest_in_bf16(tiny_model,
                                                                           monkeypatch):
    import torch

    seen = []
    real = tiny_model.model.encoder.forward
    monkeypatch.setattr(tiny_model.model.encoder, "forward", lambda *a, **k: (
        seen.append(torch.is_autocast_enabled("cpu")), real(*a, **k))[1])
    srcs, tgts, si, ti = _pairs(tiny_model)
    scorer = ForcedScorer(tiny_model, precision="bf16")
    scorer.prior(tgts)
    assert seen and not any(seen)
    seen.clear()
    scorer.score_pairs(srcs, tgts, si, ti)
    assert seen and all(seen)


def test_auto_precision_is_bf16_on_a_cpu_with_a_bf16_matrix_unit_and_fp32_elsewhere(tmp_path):
    from triemine.mining.options import MineOptions
    from triemine.scoring.precision import auto_precision, cpu_flags

    assert auto_precision("cpu", {"avx512f", "amx_bf16", "amx_tile"}) == "bf16"   # Intel AMX
    assert auto_precision("cpu", {"avx512f", "avx512_bf16"}) == "bf16"           # AMD EPYC
    assert auto_precision("cpu", {"avx2", "avx512f"}) == "fp32"
    assert auto_precision("cuda", {"avx512_bf16"}) == "fp32"
    assert auto_precision("cpu", {"avx512_bf16"}, trie_search=True) == "fp32"
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx512_bf16 sse\n\nprocessor\t: 1\n")
    assert cpu_flags(str(info)) == {"fpu", "avx512_bf16", "sse"}
    assert cpu_flags(str(tmp_path / "none")) == frozenset()
    # resolved when the settings are made: the job's key and record name the arithmetic run
    here = auto_precision("cpu")
    assert MineOptions.of("judge", precision="auto").check().precision == here
    assert MineOptions.of("paper", precision="auto").check().precision == "fp32"
    from triemine.cleaning import ScoreOptions, check_options
    assert check_options(ScoreOptions(precision="auto")).precision == here
    # auto is the default; combined, whose cut was tuned on fp32 scores, keeps fp32
    assert MineOptions.of("judge").precision == here == MineOptions().precision
    assert MineOptions.of("combined").precision == "fp32"
    assert MineOptions.of("combined", precision="auto").precision == here
    assert check_options(ScoreOptions()).precision == here
    assert check_options(ScoreOptions(config="combined")).precision == "fp32"
