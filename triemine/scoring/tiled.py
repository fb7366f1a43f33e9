"""The exact scorer's bf16 arithmetic on the CPU: each position's gold-token log-probability
from bf16 products over tiles of the vocabulary, the whole ``positions x vocabulary`` logits
never written (docs/decisions.md#the-output-projection-in-bf16-tiles-on-the-cpu).

For the rows ``x`` (``n x C``, float32) of a chunk and their gold tokens, with the output
projection's float32 weights ``W`` (``V x C``) and bias ``b`` (``V``, or none):

* the gold logit ``g = x . W[gold] + b[gold]``, float32 products of the float32 weights;
* every other logit from one product of bf16 operands per tile of :data:`TILE_ROWS` rows of
  ``W`` (the weights converted to bf16 once and kept), summed in float32 by the library and
  rounded to bf16, then widened to float32 and ``b`` added in float32;
* over the tiles, a running max and a running sum of exponentials (float32) of those logits,
  the gold token left out;
* the largest of them (each row's largest non-gold logit), found again in its tile after the
  pass, recomputed in float32 like the gold logit and its term of the sum replaced;
* ``log p(gold) = g - log(exp(g) + sum over the other tokens)``.

So the two terms that carry most of the probability mass of a row (its gold token and its
likeliest other token) are float32's, and a rounding error of any other logit moves the result
by at most that error times the token's probability.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch

# the version of this arithmetic (bf16 scores on the CPU), named by the keys of what keeps
# scores beside the fp32 arithmetic's (triemine.scoring.forced.arithmetic); 1 was the output
# layer under autocast, its logits rounded to bf16
BF16_ARITHMETIC = 2
# rows of the weights a tile (a tile's products, ``n x TILE_ROWS``, stay in the CPU's cache)
TILE_ROWS = 2048
LOG2E = 1.0 / math.log(2.0)


def exact_logits(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor],
                 tokens: torch.Tensor) -> torch.Tensor:
    """``n`` float32: ``x[r] . w[tokens[r]] + b[tokens[r]]``, float32 products of ``x``
    (``n x C``) and the gathered rows of ``w`` (``V x C``) summed in float32."""
    out = torch.einsum("nc,nc->n", x, w[tokens])
    return out if b is None else out + b[tokens]


def _rows_by_tile(tiles: torch.Tensor, n_tiles: int) -> List[torch.Tensor]:
    """Per tile ``k < n_tiles``, the indices of the rows ``r`` with ``tiles[r] == k``."""
    order = torch.argsort(tiles, stable=True)
    return list(torch.split(order, torch.bincount(tiles, minlength=n_tiles).tolist()))


class TiledProjection:
    """An output projection (``weight``: ``V x C``, ``bias``: ``V`` or None) as the bf16
    arithmetic of :meth:`gold_logprobs` computes it; the bf16 copy of the weights is made
    once, here, and kept (``V x C`` bf16 beside the float32 weights).

    Args:
        weight, bias: the projection's parameters (read as float32; not copied).
        tile: rows of the weights per tile (:data:`TILE_ROWS`).
    """

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor],
                 tile: int = TILE_ROWS):
        self.weight = weight.detach().float()
        self.bias = None if bias is None else bias.detach().float()
        self.packed = self.weight.to(torch.bfloat16).contiguous()
        self.tile = int(tile)
        self.starts = list(range(0, self.weight.size(0), self.tile))
        self._bufs: Optional[Tuple[torch.Tensor, torch.Tensor]] = None

    def _tile(self, k: int) -> Tuple[int, torch.Tensor, Optional[torch.Tensor]]:
        s = self.starts[k]
        e = min(s + self.tile, self.weight.size(0))
        return s, self.packed[s:e], None if self.bias is None else self.bias[s:e]

    def _buffers(self, n: int, cols: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Contiguous ``n x cols`` views of the kept bf16 and float32 tile buffers."""
        if self._bufs is None or self._bufs[0].numel() < n * cols:
            self._bufs = (torch.empty(n * self.tile, dtype=torch.bfloat16),
                          torch.empty(n * self.tile, dtype=torch.float32))
        return tuple(b[:n * cols].view(n, cols) for b in self._bufs)

    def _tile_logits(self, xb: torch.Tensor, gold: torch.Tensor, k: int) -> torch.Tensor:
        """The float32 logits (``n x rows of tile k``) of tile ``k`` for the bf16 rows ``xb``
        (``n x C``): the bf16 product widened, the bias added in float32; ``-inf`` at each
        row's ``gold`` token where it falls in the tile.  A view of the kept buffers."""
        s, w, b = self._tile(k)
        lb, lf = self._buffers(xb.size(0), w.size(0))
        torch.mm(xb, w.t(), out=lb)
        if b is None:
            lf.copy_(lb)
        else:
            torch.add(lb, b, out=lf)
        rows = torch.nonzero((gold >= s) & (gold < s + w.size(0))).flatten()
        if len(rows):
            lf[rows, gold[rows] - s] = float("-inf")
        return lf

    @torch.no_grad()
    def gold_logprobs(self, feats: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """``n`` float32: ``log softmax(feats @ W.T + b)[r, gold[r]]`` in the module's bf16
        arithmetic, for ``feats`` ``n x C`` (any float type, read as float32) and ``gold``
        ``n`` token ids.  The rows are independent; the ``n x V`` logits are never held."""
        with torch.autocast("cpu", enabled=False):
            return self._gold_logprobs(feats.detach().float(), gold.long())

    def _gold_logprobs(self, x: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        n, inf, n_tiles = x.size(0), float("inf"), len(self.starts)
        xb = x.to(torch.bfloat16)
        g = exact_logits(x, self.weight, self.bias, gold)
        m = torch.full((n,), -inf)        # running max of the other logits
        s = torch.zeros(n)                # running sum of exp(logit - m) over them
        best_tile = torch.zeros(n, dtype=torch.long)
        for k in range(n_tiles):
            lf = self._tile_logits(xb, gold, k)
            top = lf.amax(1)
            best_tile = torch.where(top > m, k, best_tile)
            new = torch.maximum(m, top)
            shift = new.masked_fill(new == -inf, 0)
            s.mul_((m - shift).exp_()).add_(lf.sub_(shift[:, None]).mul_(LOG2E).exp2_().sum(1))
            m = new
        # the largest other logit (m, a term of exp(0) = 1 in s): found again in its tile and
        # its term replaced by the float32 logit's
        found = m > -inf
        m = m.masked_fill(~found, 0)
        best_tok = torch.zeros(n, dtype=torch.long)
        for k, rows in enumerate(_rows_by_tile(best_tile, n_tiles)):
            if len(rows):
                best_tok[rows] = self._tile_logits(xb[rows], gold[rows], k).argmax(1) + \
                    self.starts[k]
        exact = exact_logits(x, self.weight, self.bias, best_tok)
        s = torch.where(found, s - 1 + (exact - m).exp(), s)
        top = torch.maximum(m, g)
        total = s * (m - top).exp() + (g - top).exp()
        return g - top - total.log()
