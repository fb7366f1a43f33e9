"""The bf16 tiles of the exact scorer on the CPU (:mod:`triemine.scoring.tiled`): the gold
log-probability within a stated bound of float64's, the gold and the largest other logit float32's,
the scorer's bf16 path through them and the keys that name it."""
import numpy as np
import pytest
import torch

from triemine.scoring import forced
from triemine.scoring.forced import ForcedScorer
from triemine.scoring.tiled import TiledProjection, exact_logits

from helpers import OTHER, PAIRS

BF16_ERR = 2.0 ** -7  # a bf16-operand product's error, relative to sum |x_c w_c| (see _bound)


def _problem(seed: int, n: int = 40, vocab: int = 1000, dim: int = 64, scale: float = 1.0):
    """Random rows, weights (``vocab`` not a multiple of the tiles), a bias with one
    excluded token (-1e9, as OPUS-MT's pad) and gold tokens in every tile."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g) * scale
    w = torch.randn(vocab, dim, generator=g) / dim ** 0.5
    b = torch.randn(vocab, generator=g)
    b[1] = -1e9
    gold = torch.randperm(vocab - 3, generator=g)[:n] + 2  # distinct, never the excluded one
    gold[0], gold[1] = vocab - 1, 0
    return x, w, b, gold


def _reference(x, w, b, gold):
    """float64 ``log softmax(x W^T + b)[gold]`` and the softmax (``n x vocab``)."""
    logits = x.double() @ w.double().t() + b.double()
    lp = logits.log_softmax(1)
    return lp.gather(1, gold[:, None]).squeeze(1), lp.exp()


def _bound(x, w, gold, p):
    """The largest error bf16 operands may cause: the log-sum-exp moves by at most
    sum_i p_i d_i exp(d_i) when logit i moves by at most d_i, here ``BF16_ERR * sum_c |x_c
    w_ic|`` for every token but the gold one (float32: none of it)."""
    d = BF16_ERR * (x.double().abs() @ w.double().abs().t())
    d.scatter_(1, gold[:, None], 0.0)
    return (p * d * d.exp()).sum(1)


@pytest.mark.parametrize("seed,scale", [(0, 1.0), (1, 4.0), (2, 12.0), (3, 0.2)])
def test_tiled_log_probabilities_stay_within_the_bf16_bound_of_float64(seed, scale):
    x, w, b, gold = _problem(seed, scale=scale)
    ref, p = _reference(x, w, b, gold)
    got = TiledProjection(w, b, tile=128).gold_logprobs(x, gold)
    assert got.dtype == torch.float32 and got.shape == gold.shape
    err = (got.double() - ref).abs()
    bound = _bound(x, w, gold, p) + 1e-5
    assert (err <= bound).all(), float((err - bound).max())
    assert err.max() > 1e-6  # it did compute in bf16


def test_the_tiles_change_only_the_order_of_float32_sums():
    x, w, b, gold = _problem(4, scale=3.0)
    a = TiledProjection(w, b, tile=1000).gold_logprobs(x, gold)  # one tile
    for tile in (7, 128, 512):
        np.testing.assert_allclose(TiledProjection(w, b, tile=tile).gold_logprobs(x, gold), a,
                                   rtol=0, atol=2e-5)
    alone = torch.cat([TiledProjection(w, b, tile=128).gold_logprobs(x[i:i + 1], gold[i:i + 1])
                       for i in range(3)])
    np.testing.assert_allclose(alone, a[:3], rtol=0, atol=2e-5)  # rows are independent


def test_the_gold_logit_is_the_float32_products():
    x, w, b, gold = _problem(5, scale=5.0)
    want = (x @ w.t() + b).gather(1, gold[:, None]).squeeze(1)
    np.testing.assert_allclose(exact_logits(x, w, b, gold), want, rtol=1e-6, atol=1e-5)
    # a near-certain gold token with a logit of 37.3 (between two bf16 values): log p = -1e-5
    # or so, where one bf16 rounding of the logit alone would cost 0.05 nats
    w2 = w.clone()
    w2[gold] = x / x.norm(dim=1, keepdim=True) * 37.3 / x.norm(dim=1, keepdim=True)
    ref, _ = _reference(x, w2, b, gold)
    got = TiledProjection(w2, b, tile=128).gold_logprobs(x, gold)
    np.testing.assert_allclose(got.double(), ref, rtol=0, atol=1e-4)


def test_the_largest_other_logit_is_the_float32_products():
    """A row whose likeliest token is not its gold one, with a logit of 37.3 (between two bf16
    values): its term of the sum is the float32 one, so the result keeps float32's precision,
    not bf16's 0.05; the gold logit, far from certain here, enters the result as it is."""
    x, w, b, gold = _problem(6, n=24)
    w2, b2 = w.clone(), b.clone()
    other = (gold + 333) % w.size(0)
    w2[other] = x / x.norm(dim=1, keepdim=True) * 37.3 / x.norm(dim=1, keepdim=True)
    b2[other] = 0.0
    ref, p = _reference(x, w2, b2, gold)
    assert (p.gather(1, other[:, None]) > 0.99).all()
    got = TiledProjection(w2, b2, tile=128).gold_logprobs(x, gold)
    np.testing.assert_allclose(got.double(), ref, rtol=0, atol=1e-3)


def test_the_bf16_scorer_runs_the_tiles_with_weights_converted_once(tiny_model, monkeypatch):
    made = []
    real = forced.TiledProjection.__init__
    monkeypatch.setattr(forced.TiledProjection, "__init__",
                        lambda self, *a, **k: (made.append(1), real(self, *a, **k))[1])
    srcs = [tiny_model.encode_source(s) for s, _ in PAIRS[:8]]
    tgts = [tiny_model.encode_target(t) for _, t in PAIRS[:8]] + \
        [tiny_model.encode_target(t) for t in OTHER[:8]]
    si = np.concatenate([np.arange(8), np.arange(8)])
    ti = np.arange(16)
    scorer = ForcedScorer(tiny_model, precision="bf16", max_tokens=16, chunk=4)  # many chunks
    bf16 = scorer.score_pairs(srcs, tgts, si, ti)
    again = scorer.score_pairs(srcs, tgts, si, ti)
    assert made == [1] and (bf16 == again).all()
    fp32 = ForcedScorer(tiny_model, max_tokens=16, chunk=4).score_pairs(srcs, tgts, si, ti)
    ntok = np.array([len(tgts[t]) for t in ti])
    # the tiny model's per-token |bf16 - fp32| (the decoder under autocast included)
    assert 0 < (np.abs(bf16 - fp32) / ntok).max() < 0.02


def test_bf16_on_the_cpu_has_its_own_key_and_fp32_keeps_its_own():
    assert forced.arithmetic() == forced.arithmetic("cpu", "fp32") == str(forced.ARITHMETIC)
    assert forced.arithmetic("cpu", "bf16") != forced.arithmetic("cpu")
    assert forced.arithmetic("cuda:0", "bf16") == forced.arithmetic("cuda:0")
