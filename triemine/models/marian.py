"""A fairseq model with Marian / CTranslate2 transformer semantics: ``marian_transformer``.

fairseq's stock transformer differs from a Marian (OPUS-MT) transformer in ways that change every
output: its sinusoidal table has another layout and starts positions at ``padding_idx + 1``, its
output projection has no bias, ``get_activation_fn("swish")`` returns the ``SiLU`` class instead of
a function, and its first decoder input is the embedding of ``</s>`` where Marian feeds a zero
vector. This module implements the computation of CTranslate2's ``TransformerEncoder`` /
``TransformerDecoder`` (``src/layers/transformer.cc``) instead:

* input = embedding * scale (``sqrt(d)`` when ``scale_embeddings``) + position_table[position],
  positions counted from 0 at the first real token (source padding, left or right, is skipped);
* decoder position 0 is a zero vector instead of a token embedding when
  ``start_from_zero_embedding`` (the token fed there, fairseq's ``</s>``, is ignored);
* post-norm layers ``x = LN(x + sublayer(x))`` or pre-norm ``x = x + sublayer(LN(x))`` with a final
  layer norm; attention scales queries by ``1/sqrt(head_dim)``;
* FFN ``W2 act(W1 x + b1) + b2`` with act in relu / swish (x * sigmoid(x)) / gelu / gelu_tanh;
* output logits ``h W^T + b`` with the (possibly tied) projection and its bias.

Registration is idempotent: importing this module again (directly and via fairseq's
``--user-dir``) registers the model and the architecture once.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import triemine.models.fairseq_import  # noqa: F401  (before fairseq: logging)
from fairseq.models import (ARCH_MODEL_REGISTRY, MODEL_REGISTRY, FairseqEncoder,
                            FairseqEncoderDecoderModel, FairseqIncrementalDecoder,
                            register_model, register_model_architecture)

MODEL_NAME = "marian_transformer"
ACTIVATIONS = ("relu", "swish", "gelu", "gelu_tanh", "gelu_sigmoid", "tanh", "sigmoid")


def activation_fn(name: str):
    if name == "relu":
        return F.relu
    if name == "swish":
        return F.silu
    if name == "gelu":
        return F.gelu
    if name == "gelu_tanh":
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu_sigmoid":
        return lambda x: x * torch.sigmoid(1.702 * x)
    if name == "tanh":
        return torch.tanh
    if name == "sigmoid":
        return torch.sigmoid
    raise ValueError(f"unsupported activation {name!r} (known: {', '.join(ACTIVATIONS)})")


class MultiHeadAttention(nn.Module):
    """Attention with separate q/k/v/out projections (CTranslate2 fuses them; here split)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"embedding dim {dim} is not divisible by {heads} heads")
        self.heads = heads
        self.head_dim = dim // heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.weights_out: Optional[List[Tensor]] = None  # see attend

    def split(self, x: Tensor) -> Tensor:  # B x T x C -> B x H x T x D
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor]) -> Tensor:
        """q: B x T x C (projected, unsplit); k, v: B x H x S x D; mask: additive, broadcastable.

        While ``self.weights_out`` is a list, the head-averaged attention weights (``B x T x S``,
        float32, computed apart: SDPA returns none) are appended to it; the output is the same."""
        q = self.split(q)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if self.weights_out is not None:
            logits = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.size(-1))
            if mask is not None:
                logits = logits + mask.float()
            self.weights_out.append(torch.softmax(logits, -1).mean(1))
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class FeedForward(nn.Module):
    def __init__(self, dim: int, ffn_dim: int, activation: str):
        super().__init__()
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.act = activation_fn(activation)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, args):
        super().__init__()
        d = args.encoder_embed_dim
        self.pre_norm = args.pre_norm
        self.self_attn = MultiHeadAttention(d, args.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=args.layer_norm_eps)
        self.ffn = FeedForward(d, args.encoder_ffn_embed_dim, args.activation)
        self.ffn_layer_norm = nn.LayerNorm(d, eps=args.layer_norm_eps)

    def forward(self, x: Tensor, mask: Optional[Tensor]) -> Tensor:
        a = self.self_attn
        h = self.self_attn_layer_norm(x) if self.pre_norm else x
        h = a.attend(a.q_proj(h), a.split(a.k_proj(h)), a.split(a.v_proj(h)), mask)
        x = x + h
        if not self.pre_norm:
            x = self.self_attn_layer_norm(x)
        h = self.ffn(self.ffn_layer_norm(x) if self.pre_norm else x)
        x = x + h
        return x if self.pre_norm else self.ffn_layer_norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, args):
        super().__init__()
        d = args.decoder_embed_dim
        self.pre_norm = args.pre_norm
        self.self_attn = MultiHeadAttention(d, args.decoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=args.layer_norm_eps)
        self.encoder_attn = MultiHeadAttention(d, args.decoder_attention_heads)
        self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=args.layer_norm_eps)
        self.ffn = FeedForward(d, args.decoder_ffn_embed_dim, args.activation)
        self.ffn_layer_norm = nn.LayerNorm(d, eps=args.layer_norm_eps)

    def forward(self, x: Tensor, self_mask: Optional[Tensor], memory_mask: Optional[Tensor],
                cache: Optional[Dict[str, Tensor]], memory: Optional[Tensor], idx: int) -> Tensor:
        sa, ca = self.self_attn, self.encoder_attn
        # self-attention, keys/values appended to the cache when decoding incrementally
        h = self.self_attn_layer_norm(x) if self.pre_norm else x
        k, v = sa.split(sa.k_proj(h)), sa.split(sa.v_proj(h))
        if cache is not None:
            kk, vk = f"self_k{idx}", f"self_v{idx}"
            if kk in cache:
                k = torch.cat([cache[kk], k], dim=2)
                v = torch.cat([cache[vk], v], dim=2)
            cache[kk], cache[vk] = k, v
        h = sa.attend(sa.q_proj(h), k, v, self_mask)
        x = x + h
        if not self.pre_norm:
            x = self.self_attn_layer_norm(x)
        # encoder attention; memory projections computed once per sentence
        h = self.encoder_attn_layer_norm(x) if self.pre_norm else x
        mk, mv = f"mem_k{idx}", f"mem_v{idx}"
        if cache is not None and mk in cache:
            k, v = cache[mk], cache[mv]
        else:
            k, v = ca.split(ca.k_proj(memory)), ca.split(ca.v_proj(memory))
            if cache is not None:
                cache[mk], cache[mv] = k, v
        h = ca.attend(ca.q_proj(h), k, v, memory_mask)
        x = x + h
        if not self.pre_norm:
            x = self.encoder_attn_layer_norm(x)
        h = self.ffn(self.ffn_layer_norm(x) if self.pre_norm else x)
        x = x + h
        return x if self.pre_norm else self.ffn_layer_norm(x)


def _padding_mask_to_additive(padding_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """B x S bool (True = pad) -> B x 1 x 1 x S additive mask."""
    mask = torch.zeros(padding_mask.shape, dtype=dtype, device=padding_mask.device)
    mask = mask.masked_fill(padding_mask, float("-inf"))
    return mask[:, None, None, :]


class MarianEncoder(FairseqEncoder):
    def __init__(self, args, dictionary, embed_tokens: nn.Embedding):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.embed_tokens = embed_tokens
        self.embed_scale = float(args.encoder_embed_scale)
        self.register_buffer("embed_positions",
                             torch.zeros(args.position_table_size, args.encoder_embed_dim))
        self.layernorm_embedding = (nn.LayerNorm(args.encoder_embed_dim, eps=args.layer_norm_eps)
                                    if args.layernorm_embedding else None)
        self.layers = nn.ModuleList(EncoderLayer(args) for _ in range(args.encoder_layers))
        self.layer_norm = (nn.LayerNorm(args.encoder_embed_dim, eps=args.layer_norm_eps)
                           if args.pre_norm and not args.no_final_norm else None)
        self.max_source_positions = args.position_table_size

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None,
                return_all_hiddens: bool = False, **unused):
        pad = src_tokens.eq(self.padding_idx)
        # positions count real tokens from 0, whatever side the padding is on
        positions = (torch.cumsum((~pad).long(), dim=1) - 1).clamp(min=0)
        if positions.size(1) > self.max_source_positions:
            raise ValueError(f"source of length {positions.size(1)} exceeds the position table "
                             f"({self.max_source_positions})")
        x = self.embed_tokens(src_tokens) * self.embed_scale + self.embed_positions[positions]
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = x.masked_fill(pad.unsqueeze(-1), 0.0)
        mask = _padding_mask_to_additive(pad, x.dtype) if pad.any() else None
        for layer in self.layers:
            x = layer(x, mask)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x.transpose(0, 1)],  # T x B x C, fairseq convention
            "encoder_padding_mask": [pad],
            "encoder_embedding": [],
            "encoder_states": [],
            "src_tokens": [],
            "src_lengths": [] if src_lengths is None else [src_lengths],
        }

    @torch.jit.export
    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order: Tensor):
        out = {}
        for key, values in encoder_out.items():
            dim = 1 if key == "encoder_out" else 0
            out[key] = [v.index_select(dim, new_order) for v in values]
        return out

    def max_positions(self):
        return self.max_source_positions


class MarianDecoder(FairseqIncrementalDecoder):
    def __init__(self, args, dictionary, embed_tokens: nn.Embedding):
        super().__init__(dictionary)
        d = args.decoder_embed_dim
        self.padding_idx = dictionary.pad()
        self.embed_tokens = embed_tokens
        self.embed_scale = float(args.decoder_embed_scale)
        self.start_from_zero_embedding = bool(args.start_from_zero_embedding)
        self.decoder_start_token_id = int(args.decoder_start_token_id)
        self.register_buffer("embed_positions", torch.zeros(args.position_table_size, d))
        self.layernorm_embedding = (nn.LayerNorm(d, eps=args.layer_norm_eps)
                                    if args.layernorm_embedding else None)
        self.layers = nn.ModuleList(DecoderLayer(args) for _ in range(args.decoder_layers))
        self.layer_norm = (nn.LayerNorm(d, eps=args.layer_norm_eps)
                           if args.pre_norm and not args.no_final_norm else None)
        self.output_projection = nn.Linear(d, len(dictionary), bias=True)
        if args.share_decoder_input_output_embed:
            self.output_projection.weight = self.embed_tokens.weight
        self.max_target_positions = args.position_table_size

    def _cache(self, incremental_state) -> Optional[Dict[str, Tensor]]:
        if incremental_state is None:
            return None
        cache = self.get_incremental_state(incremental_state, "marian")
        if cache is None:
            cache = {}
            self.set_incremental_state(incremental_state, "marian", cache)
        return cache

    def forward(self, prev_output_tokens: Tensor, encoder_out=None, incremental_state=None,
                features_only: bool = False, **unused):
        x, extra = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        if not features_only:
            x = self.output_layer(x)
        return x, extra

    def extract_features(self, prev_output_tokens: Tensor, encoder_out=None,
                         incremental_state=None, **unused):
        cache = self._cache(incremental_state)
        start = 0
        if cache is not None:
            if "self_k0" in cache:
                start = cache["self_k0"].size(2)
            prev_output_tokens = prev_output_tokens[:, start:]
        b, t = prev_output_tokens.shape
        if start + t > self.max_target_positions:
            raise ValueError(f"target position {start + t} exceeds the position table "
                             f"({self.max_target_positions})")
        if start == 0 and not self.start_from_zero_embedding and self.decoder_start_token_id >= 0:
            prev_output_tokens = prev_output_tokens.clone()
            prev_output_tokens[:, 0] = self.decoder_start_token_id
        x = self.embed_tokens(prev_output_tokens) * self.embed_scale
        if self.start_from_zero_embedding and start == 0:
            x = torch.cat([torch.zeros_like(x[:, :1]), x[:, 1:]], dim=1)
        x = x + self.embed_positions[start:start + t]
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        self_mask = None
        if t > 1:
            self_mask = torch.triu(torch.full((t, start + t), float("-inf"), dtype=x.dtype,
                                              device=x.device), diagonal=start + 1)
        memory = memory_mask = None
        if encoder_out is not None:
            memory = encoder_out["encoder_out"][0].transpose(0, 1)
            pad = encoder_out["encoder_padding_mask"]
            if len(pad) > 0 and pad[0].any():
                memory_mask = _padding_mask_to_additive(pad[0], x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, self_mask, memory_mask, cache, memory, i)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return x, {"attn": [None], "inner_states": [x]}

    def output_layer(self, features: Tensor) -> Tensor:
        return self.output_projection(features)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        cache = self.get_incremental_state(incremental_state, "marian")
        if cache is None:
            return
        for key in list(cache.keys()):
            cache[key] = cache[key].index_select(0, new_order)
        self.set_incremental_state(incremental_state, "marian", cache)

    def max_positions(self):
        return self.max_target_positions


def _build_model_cls():
    if MODEL_NAME in MODEL_REGISTRY:
        return MODEL_REGISTRY[MODEL_NAME]

    @register_model(MODEL_NAME)
    class MarianTransformerModel(FairseqEncoderDecoderModel):
        """Encoder-decoder transformer with Marian semantics (see the module docstring)."""

        @staticmethod
        def add_args(parser):
            parser.add_argument("--encoder-embed-dim", type=int)
            parser.add_argument("--encoder-ffn-embed-dim", type=int)
            parser.add_argument("--encoder-layers", type=int)
            parser.add_argument("--encoder-attention-heads", type=int)
            parser.add_argument("--decoder-embed-dim", type=int)
            parser.add_argument("--decoder-ffn-embed-dim", type=int)
            parser.add_argument("--decoder-layers", type=int)
            parser.add_argument("--decoder-attention-heads", type=int)
            parser.add_argument("--activation", choices=ACTIVATIONS)
            parser.add_argument("--pre-norm", type=int, choices=(0, 1))
            parser.add_argument("--no-final-norm", type=int, choices=(0, 1))
            parser.add_argument("--layernorm-embedding", type=int, choices=(0, 1))
            parser.add_argument("--layer-norm-eps", type=float)
            parser.add_argument("--encoder-embed-scale", type=float)
            parser.add_argument("--decoder-embed-scale", type=float)
            parser.add_argument("--start-from-zero-embedding", type=int, choices=(0, 1))
            parser.add_argument("--share-all-embeddings", type=int, choices=(0, 1))
            parser.add_argument("--share-decoder-input-output-embed", type=int, choices=(0, 1))
            parser.add_argument("--position-table-size", type=int)
            parser.add_argument("--decoder-start-token-id", type=int,
                                help="id fed at decoder position 0 instead of </s> (-1: keep)")

        @classmethod
        def build_model(cls, args, task):
            marian_base(args)
            src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
            dec_emb = nn.Embedding(len(tgt_dict), args.decoder_embed_dim, tgt_dict.pad())
            if args.share_all_embeddings:
                if len(src_dict) != len(tgt_dict):
                    raise ValueError("share_all_embeddings needs identical source and target "
                                     "dictionaries")
                enc_emb = dec_emb
            else:
                enc_emb = nn.Embedding(len(src_dict), args.encoder_embed_dim, src_dict.pad())
            encoder = MarianEncoder(args, src_dict, enc_emb)
            decoder = MarianDecoder(args, tgt_dict, dec_emb)
            return cls(encoder, decoder)

        def max_positions(self):
            return (self.encoder.max_positions(), self.decoder.max_positions())

    return MarianTransformerModel


def marian_base(args):
    """Defaults: OPUS-MT transformer-base (post-norm, swish, 6+6 layers, 512/2048, 8 heads)."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", None) or 512
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", None) or 2048
    args.encoder_layers = getattr(args, "encoder_layers", None) or 6
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", None) or 8
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", None) or args.encoder_embed_dim
    args.decoder_ffn_embed_dim = (getattr(args, "decoder_ffn_embed_dim", None)
                                  or args.encoder_ffn_embed_dim)
    args.decoder_layers = getattr(args, "decoder_layers", None) or 6
    args.decoder_attention_heads = (getattr(args, "decoder_attention_heads", None)
                                    or args.encoder_attention_heads)
    args.activation = getattr(args, "activation", None) or "swish"
    for flag, default in (("pre_norm", 0), ("no_final_norm", 0), ("layernorm_embedding", 0),
                          ("start_from_zero_embedding", 1), ("share_all_embeddings", 1),
                          ("share_decoder_input_output_embed", 1)):
        value = getattr(args, flag, None)
        setattr(args, flag, default if value is None else int(value))
    if getattr(args, "layer_norm_eps", None) is None:
        args.layer_norm_eps = 1e-5
    if getattr(args, "encoder_embed_scale", None) is None:
        args.encoder_embed_scale = math.sqrt(args.encoder_embed_dim)
    if getattr(args, "decoder_embed_scale", None) is None:
        args.decoder_embed_scale = math.sqrt(args.decoder_embed_dim)
    args.position_table_size = getattr(args, "position_table_size", None) or 2048
    if getattr(args, "decoder_start_token_id", None) is None:
        args.decoder_start_token_id = -1


MarianTransformerModel = _build_model_cls()
if MODEL_NAME not in ARCH_MODEL_REGISTRY:
    register_model_architecture(MODEL_NAME, MODEL_NAME)(marian_base)

__all__ = ["MarianTransformerModel", "MarianEncoder", "MarianDecoder", "MODEL_NAME",
           "activation_fn"]
