"""Exact sentence scores by teacher forcing: log P(y | x) and the prior log P(y | empty source).

One batched pass of the decoder scores many (source, target) pairs at once: pairs are sorted by
target length and cut into batches of at most ``max_tokens`` target tokens.  Every distinct source
of a call is encoded once (in its own length-sorted batches) and its encoder states are reused by
all of its pairs, whichever decoder batches they fall in.  The output
projection (the largest matrix of an MT model) is applied in chunks of positions into one buffer
the scorer keeps, and only the gold token's logit and the log-sum-exp are kept, so memory stays
at ``chunk x vocabulary``.

Batches are small on the CPU (``CPU_MAX_TOKENS``), and no chunk allocates a fresh ``chunk x
vocabulary`` tensor (see docs/decisions.md#exact-scorer-kept-output-buffer).  On the CPU the
output projection goes through numpy's BLAS (:func:`_cpu_product`; see
docs/decisions.md#output-projection-through-numpys-blas).
The bits of a score depend on the batch sizes (the order of the sums) but not on the number of
workers: every worker count scores the same chunks.

The **prior** of a target is its probability under the same decoder given an empty source (the
source is only EOS).  It is what the decoder's language model alone expects; the pointwise mutual
information ``log P(y|x) - log P(y|empty)`` removes it from the score (see
``pmi`` per target token in :func:`triemine.mining.features.derived`).

Scores are natural logs and include EOS, like the search's ``score`` column.
"""
from __future__ import annotations

import logging
import warnings
from typing import List, Optional, Sequence

import numpy as np
import torch

from triemine.scoring.rows import JUDGE_ROWS
from triemine.scoring.precision import check_precision
from triemine.scoring.tiled import BF16_ARITHMETIC, TiledProjection

logger = logging.getLogger(__name__)


def _collate(seqs: Sequence[torch.Tensor], pad: int, left: bool) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        if left:
            out[i, width - len(s):] = s
        else:
            out[i, :len(s)] = s
    return out


def _int8_projection(decoder, device: str):
    """The decoder's output projection as a dynamically quantised int8 linear layer."""
    import copy

    from torch.ao.nn.quantized.dynamic import Linear as QLinear
    from torch.ao.quantization import per_channel_dynamic_qconfig

    if device != "cpu":
        raise ValueError("int8-output precision runs on the CPU only")
    proj = getattr(decoder, "output_projection", None)
    if not isinstance(proj, torch.nn.Linear) or getattr(decoder,
                                                        "adaptive_softmax", None) is not None:
        raise ValueError("int8-output precision needs a decoder whose output layer is one "
                         "nn.Linear (output_projection)")
    float_proj = copy.deepcopy(proj)
    float_proj.qconfig = per_channel_dynamic_qconfig
    with warnings.catch_warnings():  # torch 2.13 flags its quantised tensors as deprecated
        warnings.simplefilter("ignore")
        return QLinear.from_float(float_proj)


def _cpu_product(feats: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor],
                 out: torch.Tensor) -> None:
    """``out = feats @ w.T + b`` on the CPU, through numpy's BLAS (OpenBLAS in numpy's wheels),
    written into ``out`` (``n x vocabulary``, float32, contiguous).

    Why numpy: docs/decisions.md#output-projection-through-numpys-blas.  A single row is
    computed as two (``out`` has room): numpy hands one row to a matrix-vector product, which
    sums in another order, so a row's bits would depend on whether it was alone in its chunk.
    Some OpenBLAS kernels (e.g. ``OPENBLAS_CORETYPE=Haswell``) make a row's bits depend on how
    many rows share the product; nothing relies on it: the shards of every worker count are
    the same chunks, so the same products."""
    x = feats.detach()
    if x.size(0) == 1:
        x = x.expand(2, -1)
    res = out[:x.size(0)].numpy()
    np.matmul(x.contiguous().numpy(), w.detach().numpy().T, out=res)
    if b is not None:
        res += b.detach().numpy()


# the version of the fp32 scores' arithmetic on the CPU: a change that moves their bits (batch
# sizes, which library computes a product) bumps it, and the keys of what keeps scores across
# runs (the mining job's work directory, the priors' cache) name it, so a resumed job or a warm
# cache never mixes old bits with new.  2: the output projection through numpy's BLAS.
ARITHMETIC = 2


def arithmetic(device: str = "cpu", precision: str = "fp32") -> str:
    """What the bits of the scores depend on besides the model and the texts, for the keys of
    what keeps them (``ARITHMETIC`` on the CPU, as before devices were told apart; off the CPU
    the device too, whose products and batches are others; bf16 on the CPU adds
    :data:`~triemine.scoring.tiled.BF16_ARITHMETIC`, fp32 and the others as they were)."""
    out = str(ARITHMETIC) if device == "cpu" else f"{ARITHMETIC} on {device}"
    return f"{out} bf16 {BF16_ARITHMETIC}" if precision == "bf16" and device == "cpu" else out


def weights_device(model) -> str:
    """The device of a loaded model directory's weights (``"cpu"``, ``"cuda:0"``, ...)."""
    return str(next(model.model.parameters()).device)

# the half-precision types a scorer computes its encoder and decoder in (``precision``)
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(precision: str, device: str):
    """The context the encoder and decoder run in: ``torch.autocast`` to the half type of
    ``precision`` (:data:`HALF`) on ``device``'s kind, nothing (fp32 as it was) otherwise."""
    import contextlib

    if precision not in HALF:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())  # torch's attention on fairseq's masks under
    warnings.filterwarnings("ignore", message="Support for mismatched key_padding_mask")  # autocast
    stack.enter_context(torch.autocast(str(device).split(":")[0], dtype=HALF[precision]))
    return stack


def _cuda_fp32_product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w.T`` of two half tensors on CUDA with float32 output: ``torch.mm(...,
    out_dtype=)`` where this torch has it, else the operands widened to float32 and multiplied
    with TF32 allowed (a bf16 or fp16 value is exact in TF32, so the products are the same
    exact products, summed in float32, at TF32's rate)."""
    try:
        return torch.mm(x, w.t(), out_dtype=torch.float32)
    except (TypeError, RuntimeError, NotImplementedError):
        from triemine.embedding.knn import matmul_precision

        with matmul_precision(tf32=True):
            return torch.mm(x.float(), w.float().t())


def half_weight(w: torch.Tensor, precision: str) -> torch.Tensor:
    """The output projection's weights as :func:`half_logits` multiplies them: rounded to the
    half type of ``precision``; on CUDA in that type, elsewhere the rounded values in float32."""
    h = w.detach().to(HALF[precision])
    return h if h.device.type == "cuda" else h.float()


def half_logits(feats: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor],
                precision: str, out: torch.Tensor) -> torch.Tensor:
    """``feats @ w.T + b`` (``n x vocabulary``, float32) from operands rounded to the half type
    of ``precision`` (``w`` from :func:`half_weight`), written into ``out`` (float32, at least
    ``n`` rows): on CUDA one product with float32 output (tensor cores: exact products, float32
    sums), elsewhere the rounded operands multiplied in float32 (what those tensor cores
    compute, up to the order of the sums).  The logits are never rounded to the half type, so
    the gold logit and the log-sum-exp keep float32 precision.  Returns ``out[:n]``."""
    x = feats.detach().to(HALF[precision])
    n = x.size(0)
    with torch.autocast(x.device.type, enabled=False):
        if x.device.type == "cuda":
            out[:n] = _cuda_fp32_product(x, w)
            if b is not None:
                out[:n] += b.float()
        else:
            _cpu_product(x.float(), w, b.float() if b is not None else None, out)
    return out[:n]


class _cross_attention:
    """A context that collects the head-averaged cross-attention weights (``B x T x S``) of every
    layer of the decoder during the forward passes inside it, as a list of tensors: from a
    ``marian_transformer`` layer's attention through its ``weights_out`` list
    (:class:`triemine.models.marian.MultiHeadAttention`), from fairseq's own attention through a
    forward hook on its second output (its decoder layers compute the weights in eval mode)."""

    def __init__(self, decoder):
        self.layers = [layer.encoder_attn for layer in getattr(decoder, "layers", ())
                       if getattr(layer, "encoder_attn", None) is not None]
        self.weights: List[torch.Tensor] = []
        self.handles = []

    def _hook(self, module, args, output):
        if isinstance(output, tuple) and len(output) > 1 and output[1] is not None:
            w = output[1].float()  # B x T x S; per head (H x B x T x S) in fairseq's
            self.weights.append(w.mean(0) if w.dim() == 4 else w)  # alignment layer

    def __enter__(self) -> List[torch.Tensor]:
        for m in self.layers:
            if hasattr(m, "weights_out"):
                m.weights_out = self.weights
            else:
                self.handles.append(m.register_forward_hook(self._hook))
        return self.weights

    def __exit__(self, *exc) -> None:
        for m in self.layers:
            if hasattr(m, "weights_out"):
                m.weights_out = None
        for h in self.handles:
            h.remove()


# a source piece receiving less cross-attention mass than this, summed over the target's
# positions and averaged over layers (and heads), counts as not covered by the target
UNCOVERED_MASS = 0.5


def uncovered_share(layers: Sequence[torch.Tensor], tgt_mask: torch.Tensor,
                    src_lens: torch.Tensor) -> torch.Tensor:
    """The share of each row's source pieces (its final EOS left out) that receive less than
    :data:`UNCOVERED_MASS` of cross-attention mass from the row's target positions.

    Args:
        layers: per decoder layer, head-averaged weights ``B x T x S`` (sources right-padded).
        tgt_mask: ``B x T`` bool, the real target positions.
        src_lens: ``B`` source lengths, EOS included.
    Returns:
        ``B`` float32 in [0, 1]; NaN for a row whose source is only its EOS (the empty source).
    Raises:
        ValueError: no layer's weights were captured (a decoder without cross-attention).
    """
    if not layers:
        raise ValueError("the decoder returned no cross-attention weights")
    attn = torch.stack([w.float() for w in layers]).mean(0)          # B x T x S
    mass = (attn * tgt_mask[:, :, None].to(attn.dtype)).sum(1)        # B x S
    pos = torch.arange(mass.size(1), device=mass.device)[None, :]
    pieces = pos < (src_lens[:, None] - 1)                            # real pieces, EOS out
    low = ((mass < UNCOVERED_MASS) & pieces).sum(1).float()
    n = pieces.sum(1).float()
    return torch.where(n > 0, low / n.clamp(min=1), torch.full_like(n, float("nan")))


def token_extremes(lp: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``2 x B`` float64: each row's EOS log-probability (its last real position) and the least
    log-probability of its other tokens (0 for a target that is only EOS).

    Args:
        lp: ``B x T`` per-token log-probabilities (0 beyond each row's end).
        lengths: ``B`` target lengths, EOS included (each >= 1).
    """
    ends = (lengths - 1).long()
    eos = lp.gather(1, ends[:, None]).squeeze(1)
    pos = torch.arange(lp.size(1))[None, :]
    body = torch.where(pos < ends[:, None], lp, torch.full_like(lp, float("inf")))
    least = body.min(1).values
    least = torch.where(ends > 0, least, torch.zeros_like(least))
    return torch.stack([eos, least]).double()


# target tokens per decoder batch and positions per output-projection chunk: on the CPU 512 /
# 256, elsewhere 16,384 / 2,048 (see docs/decisions.md#exact-scorer-batch-sizes)
CPU_MAX_TOKENS = 512
MAX_TOKENS = 16384
CPU_CHUNK = 256
CHUNK = 2048


class ForcedScorer:
    """Teacher-forced scores of token sequences under a loaded model directory.

    Args:
        model: a :class:`triemine.models.model_dir.ModelDir`.
        max_tokens: target tokens per batch (the decoder's activations scale with it); default
            ``CPU_MAX_TOKENS`` on the CPU, ``MAX_TOKENS`` elsewhere.
        device: where the inputs go; default: the device of the model's weights.
        chunk: positions per output-projection chunk (memory: one ``chunk x vocabulary`` float
            buffer, kept); default ``CPU_CHUNK`` on the CPU, ``CHUNK`` elsewhere.
        precision: ``"fp32"`` (exact), ``"bf16"`` / ``"fp16"`` (:data:`HALF`: the encoder (but
            the priors' empty source's) and decoder under ``torch.autocast`` in that type; on the
            CPU bf16's output projection in bf16 tiles, the gold and the largest other logit
            float32 (:class:`~triemine.scoring.tiled.TiledProjection`), elsewhere the output
            layer under autocast; fp16 is refused on the CPU: :func:`check_precision`) or
            ``"int8-output"``: the output projection (about 60% of the arithmetic of an OPUS-MT
            decoder) as a dynamically quantised int8 matrix with per-row weight scales (CPU
            only; an approximation, not used by any job: see
            docs/decisions.md#int8-output-projection).
    """

    PRECISIONS = ("fp32", "bf16", "fp16", "int8-output")

    def __init__(self, model, max_tokens: Optional[int] = None, chunk: Optional[int] = None,
                 device: Optional[str] = None, precision: str = "fp32"):
        self.model = model
        self.net = model.model
        self.net.eval()
        if device is None:  # where the model's weights are (a worker loads it on --device)
            device = str(next(self.net.parameters()).device)
        self.src_pad = model.src_dict.pad()
        self.tgt_pad = model.tgt_dict.pad()
        self.eos = model.tgt_dict.eos()
        on_cpu = device == "cpu"
        self.max_tokens = int(max_tokens or (CPU_MAX_TOKENS if on_cpu else MAX_TOKENS))
        self.chunk = int(chunk or (CPU_CHUNK if on_cpu else CHUNK))
        self.device = device
        self.empty_source = torch.tensor([model.src_dict.eos()], dtype=torch.long)
        if precision not in self.PRECISIONS:
            raise ValueError(f"unknown precision {precision!r} (choose from {self.PRECISIONS})")
        if precision in HALF:
            check_precision(precision, device)
        self.precision = precision
        self._half_w: Optional[torch.Tensor] = None  # half_weight of the output projection
        self._tiled: Optional[TiledProjection] = None  # bf16 on the CPU: its kept weights
        self.output_layer = self.net.decoder.output_layer
        if precision == "int8-output":
            self.output_layer = _int8_projection(self.net.decoder, device)
        self._proj: Optional[torch.nn.Linear] = None  # _plain_projection, at the first chunk
        self._proj_checked = not (precision == "fp32" or (precision == "bf16" and on_cpu))
        self._logits: Optional[torch.Tensor] = None
        self._blas = None  # threadpoolctl's controller of numpy's BLAS, found at the first call

    def _blas_threads(self):
        """A context in which numpy's BLAS (the output projection, :func:`_cpu_product`) uses
        torch's number of threads, whatever its own library read from the environment when it
        was loaded (a worker sets its threads after numpy is imported)."""
        from threadpoolctl import ThreadpoolController

        if self._blas is None:
            self._blas = ThreadpoolController()
        return self._blas.limit(limits=torch.get_num_threads(), user_api="blas")

    @torch.no_grad()
    def _plain_projection(self) -> Optional[torch.nn.Linear]:
        """The decoder's ``output_projection`` when its ``output_layer`` is that one product
        (checked on two probe rows), so the logits can go straight into the kept buffer; else
        None, and the layer itself is called (a decoder whose output layer does more)."""
        proj = getattr(self.net.decoder, "output_projection", None)
        if not isinstance(proj, torch.nn.Linear) or \
                getattr(self.net.decoder, "adaptive_softmax", None) is not None:
            return None
        probe = torch.linspace(-1, 1, 2 * proj.in_features, device=proj.weight.device)
        probe = probe.reshape(2, proj.in_features)
        same = torch.allclose(self.output_layer(probe).float(), proj(probe).float(),
                              rtol=1e-5, atol=1e-5)
        return proj if same else None

    @torch.no_grad()
    def _encode(self, sources: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        """Encoder states (``len x C``, padding removed) of every source, batched by length."""
        out: List[Optional[torch.Tensor]] = [None] * len(sources)
        lengths = np.fromiter((len(s) for s in sources), dtype=np.int64, count=len(sources))
        for batch in self._batches(lengths):
            src = [sources[i] for i in batch.tolist()]
            tokens = _collate(src, self.src_pad, left=True).to(self.device)
            enc = self.net.encoder(tokens, src_lengths=torch.tensor([len(s) for s in src],
                                                                    device=self.device))
            states = enc["encoder_out"][0].transpose(0, 1)  # B x T x C
            for r, i in enumerate(batch.tolist()):
                out[i] = states[r, tokens.size(1) - len(src[r]):]
        return out

    @torch.no_grad()
    def _token_logprobs(self, memory: Sequence[torch.Tensor], tgt: List[torch.Tensor],
                        coverage: bool = False):
        """``(logprobs, uncovered)``: the log-probability of every target token (``rows x T``,
        0 beyond each target's end) and, with ``coverage``, the rows' :func:`uncovered_share`
        (float32, ``rows``; else None).

        ``memory[r]``: the encoder states (``len x C``) of row r's source.
        """
        lens = torch.tensor([len(m) for m in memory], device=memory[0].device)
        # right-padded: the decoder sees the source only through the states and the padding mask
        enc_states = torch.nn.utils.rnn.pad_sequence(list(memory), batch_first=True)
        enc_pad = torch.arange(enc_states.size(1), device=lens.device)[None, :] >= lens[:, None]
        enc = {"encoder_out": [enc_states.transpose(0, 1)], "encoder_padding_mask": [enc_pad],
               "encoder_embedding": [], "encoder_states": [], "src_tokens": [], "src_lengths": []}
        target = _collate(tgt, self.tgt_pad, left=False).to(self.device)
        prev = torch.full_like(target, self.tgt_pad)
        prev[:, 0] = self.eos
        prev[:, 1:] = target[:, :-1]
        mask = target.ne(self.tgt_pad)
        uncovered = None
        if coverage:
            with _cross_attention(self.net.decoder) as layers:
                feats, _ = self.net.decoder.extract_features(prev, encoder_out=enc)
            uncovered = uncovered_share(layers, mask, lens).cpu()
        else:
            feats, _ = self.net.decoder.extract_features(prev, encoder_out=enc)
        flat_feats = feats[mask]
        flat_tgt = target[mask]
        out = torch.empty(flat_tgt.numel(), dtype=torch.float32, device=feats.device)
        for s in range(0, flat_tgt.numel(), self.chunk):
            out[s:s + self.chunk] = self._gold_logprobs(flat_feats[s:s + self.chunk],
                                                        flat_tgt[s:s + self.chunk])
        res = torch.zeros(target.shape, dtype=torch.float32, device=feats.device)
        res[mask] = out
        return res.cpu(), uncovered

    @torch.no_grad()
    def _gold_logprobs(self, feats: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """``log softmax(output_layer(feats))[r, gold[r]]`` for each of the ``n <= chunk`` rows.

        The logits are written into the scorer's one buffer (fp32) and normalised in place with
        the operations of :func:`torch.logsumexp` (max, subtract, exp, sum, log, add the max),
        so the values are those of ``logits.gather(...) - torch.logsumexp(logits, -1)``, bit for
        bit, without a fresh ``chunk x vocabulary`` tensor per step (bf16 on the CPU: no buffer,
        :class:`~triemine.scoring.tiled.TiledProjection`)."""
        n = feats.size(0)
        if not self._proj_checked:
            self._proj, self._proj_checked = self._plain_projection(), True
        proj = self._proj
        if proj is not None and self.precision == "bf16" and feats.device.type == "cpu":
            if self._tiled is None:  # the bf16 weights, converted once per scorer
                self._tiled = TiledProjection(proj.weight, proj.bias)
            return self._tiled.gold_logprobs(feats, gold)
        if proj is not None and (self._logits is None or self._logits.device != feats.device):
            self._logits = torch.empty(max(2, self.chunk), proj.weight.size(0),
                                       device=feats.device)
        if proj is None:
            logits = self.output_layer(feats).float()
        elif self.precision in HALF:
            if self._half_w is None:
                self._half_w = half_weight(proj.weight, self.precision)
            logits = half_logits(feats, self._half_w, proj.bias, self.precision, self._logits)
        else:
            w, b = proj.weight, proj.bias
            logits = self._logits[:n]
            if logits.device.type == "cpu" and w.dtype == feats.dtype == torch.float32:
                _cpu_product(feats, w, b, self._logits)
            elif b is None:
                torch.mm(feats, w.t(), out=logits)
            else:
                torch.addmm(b, feats, w.t(), out=logits)
        picked = logits.gather(1, gold[:, None]).squeeze(1)
        top = logits.amax(1, keepdim=True)
        top.masked_fill_(top.abs() == float("inf"), 0)
        lse = logits.sub_(top).exp_().sum(1).log_().add_(top.squeeze(1))
        return picked - lse

    def _batches(self, lengths: np.ndarray) -> List[np.ndarray]:
        order = np.argsort(lengths, kind="stable")
        batches, cur, longest = [], [], 0
        for i in order.tolist():
            n = int(lengths[i])
            if cur and (len(cur) + 1) * max(longest, n) > self.max_tokens:
                batches.append(np.asarray(cur))
                cur, longest = [], 0
            cur.append(i)
            longest = max(longest, n)
        if cur:
            batches.append(np.asarray(cur))
        return batches

    def score_pairs(self, sources: Sequence[Optional[torch.Tensor]],
                    targets: Sequence[torch.Tensor],
                    src_index: np.ndarray, tgt_index: np.ndarray, progress: bool = False,
                    per_token: bool = False, coverage: bool = False):
        """Total log P(target | source) of every pair
        ``(sources[src_index[i]], targets[tgt_index[i]])``.

        ``sources``/``targets``: encoded id tensors ending in EOS (a source of ``None`` is scored
        as the empty source).  Returns float64 totals; with ``per_token`` also a list of float32
        arrays (one log-probability per target token, EOS included); with ``coverage`` also a
        float64 ``len(JUDGE_ROWS) x pairs`` array (the last item of the tuple): each pair's
        :func:`uncovered_share` and :func:`token_extremes`.  The totals are the same with or
        without ``coverage``.
        """
        from tqdm import tqdm

        src_index = np.asarray(src_index, dtype=np.int64)
        tgt_index = np.asarray(tgt_index, dtype=np.int64)
        n = len(src_index)
        totals = np.zeros(n, dtype=np.float64)
        tokens: List[Optional[np.ndarray]] = [None] * n if per_token else []
        judged = np.full((len(JUDGE_ROWS), n), np.nan) if coverage else None
        lengths = np.fromiter((len(targets[t]) for t in tgt_index), dtype=np.int64, count=n)
        # every distinct source is encoded once per call, whatever batches its pairs fall in; the
        # empty source alone (the priors' one condition: one token) in float32 in every precision
        uniq, inv = np.unique(src_index, return_inverse=True)
        alone = all(sources[s] is None for s in uniq.tolist())
        with autocast("fp32" if alone else self.precision, self.device):
            states = self._encode([sources[s] if sources[s] is not None else self.empty_source
                                   for s in uniq.tolist()])
        with tqdm(total=n, desc="forced decoding", unit="pair", disable=not progress) as bar, \
                self._blas_threads(), autocast(self.precision, self.device):
            for batch in self._batches(lengths):
                lp, cov = self._token_logprobs([states[j] for j in inv[batch].tolist()],
                                               [targets[t] for t in tgt_index[batch]], coverage)
                totals[batch] = lp.double().sum(1).numpy()
                if coverage:
                    judged[0, batch] = cov.double().numpy()
                    judged[1:, batch] = token_extremes(
                        lp, torch.from_numpy(lengths[batch])).numpy()
                if per_token:
                    for r, i in enumerate(batch.tolist()):
                        tokens[i] = lp[r, :lengths[i]].numpy()
                bar.update(len(batch))
        out = (totals,) + ((tokens,) if per_token else ()) + ((judged,) if coverage else ())
        return out if len(out) > 1 else totals

    def prior(self, targets: Sequence[torch.Tensor], progress: bool = False,
              per_token: bool = False):
        """log P(target | empty source) of every target (see :meth:`score_pairs`)."""
        idx = np.arange(len(targets), dtype=np.int64)
        return self.score_pairs([None], targets, np.zeros(len(targets), dtype=np.int64), idx,
                                progress=progress, per_token=per_token)
