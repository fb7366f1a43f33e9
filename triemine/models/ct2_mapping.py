"""Map a CTranslate2 transformer (``model.bin`` read by :mod:`triemine.models.ct2_reader`) onto
fairseq's ``marian_transformer`` (:mod:`triemine.models.marian`).

The variable names and their meaning come from CTranslate2's spec classes
(``python/ctranslate2/specs/transformer_spec.py``, ``attention_spec.py``, ``common_spec.py``) and
its runtime (``src/layers/transformer.cc``, ``src/layers/common.cc``). Anything in ``model.bin``
that this mapping does not understand is an error rather than silently ignored: every variable
read is remembered, and any left over at the end is refused.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Set, Tuple

import numpy as np
import torch

from triemine.errors import InputError
from triemine.models.ct2_reader import CT2Model
from triemine.models.vocab import NEG_LOGIT, VocabMap, build_vocab_map

# Spec names CTranslate2's runtime loads as a TransformerModel, and the revisions it reads
# (src/models/transformer.cc: revision 1 used OpenNMT-tf variable names, which we do not map).
SUPPORTED_SPECS = {"TransformerSpec": (2, 3, 4, 5, 6, 7), "TransformerBase": (2, 3, 4, 5, 6, 7),
                   "TransformerBig": (2, 3, 4, 5, 6, 7)}
# Before revision 3 the number of heads came from the spec name.
_LEGACY_HEADS = {"TransformerBase": 8, "TransformerBig": 16, "TransformerSpec": 8}
# Before revision 5 these flags were global; CTranslate2 aliases them into both scopes.
_LEGACY_GLOBAL_FLAGS = {
    "encoder": ("num_heads", "pre_norm", "activation", "embeddings_merge"),
    "decoder": ("num_heads", "pre_norm", "activation", "alignment_layer", "alignment_heads"),
}
ACTIVATION_NAMES = {0: "relu", 1: "gelu_tanh", 2: "swish", 3: "gelu", 4: "gelu_sigmoid",
                    5: "tanh", 6: "sigmoid"}
# Scalar flags the converter reads, or that do not change the computation it implements.
_FLAG_VARIABLES = {
    "activation", "pre_norm", "num_heads", "scale_embeddings", "start_from_zero_embedding",
    "embeddings_merge", "alibi", "alibi_use_positive_positions", "scale_alibi",
    "alignment_layer", "alignment_heads", "multi_query_attention",
    # revision <= 4 globals: relative positions and the embedding norm are recognised by their
    # variables (as the current runtime does), so the flags themselves carry nothing more
    "with_relative_position", "layernorm_embedding",
}


def ct2_sinusoidal_table(num_positions: int, depth: int) -> np.ndarray:
    """CTranslate2's ``SinusoidalPositionEncoder`` table (used when no encodings are stored):
    position ``i`` holds ``[sin((i+1) w), cos((i+1) w)]`` with ``w_j = exp(-j ln(1e4)/(d/2-1))``."""
    half = depth // 2
    inc = math.log(10000.0) / (half - 1)
    timescales = np.exp(-inc * np.arange(half, dtype=np.float32))
    scaled = (np.arange(num_positions, dtype=np.float32)[:, None] + 1) * timescales[None, :]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1).astype(np.float32)


class _Mapper:
    """Pulls variables out of a CT2Model, remembering which ones were consumed."""

    def __init__(self, model: CT2Model):
        self.m = model
        self.used: Set[str] = set()
        self.bin = model.path / "model.bin"

    def has(self, name):
        return self.m.has(name)

    def get(self, name) -> np.ndarray:
        self.used.add(name)
        self.used.add(name + "_scale")
        self.used.add(self.m.resolve(name))
        self.used.add(self.m.resolve(name) + "_scale")
        return self.m.get(name)

    def opt(self, name) -> Optional[np.ndarray]:
        return self.get(name) if self.m.has(name) else None

    def flag(self, name, default):
        self.used.add(name)
        return self.m.scalar(name, default)

    def unsupported(self, what: str):
        raise InputError(f"unsupported CTranslate2 model feature: {what}", self.bin)

    def linear(self, scope, out_dim=None):
        w = self.get(scope + "/weight")
        b = self.opt(scope + "/bias")
        if b is None:
            b = np.zeros(w.shape[0], dtype=np.float32)
        if self.m.has(scope + "/weight_zero"):
            self.unsupported(f"{scope}/weight_zero (AWQ quantisation)")
        return w, b

    def layer_norm(self, scope):
        if not self.m.has(scope + "/beta"):
            self.unsupported(f"{scope} is an RMS norm (no beta)")
        return self.get(scope + "/gamma"), self.get(scope + "/beta")


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(x, dtype=np.float32, order="C"))  # a writable copy


def _embed_scale(mp: _Mapper, scope: str, dim: int) -> float:
    """As CTranslate2's ``build_embeddings_scale``."""
    name = scope + "/scale_embeddings"
    if not mp.has(name):
        name = scope + "/embeddings/multiply_by_sqrt_depth"
    if not mp.has(name):
        return math.sqrt(dim)
    mp.used.add(name)
    raw = mp.m.raw(name)
    if raw.dtype == np.int8:
        return math.sqrt(dim) if int(raw.reshape(-1)[0]) else 1.0
    return float(raw.reshape(-1)[0])


def _attention(mp: _Mapper, scope: str, sd: Dict[str, torch.Tensor], prefix: str, fused_qkv: bool,
               dim: int, heads: int):
    if mp.has(scope + "/relative_position_keys") or mp.has(scope + "/relative_attention_bias"):
        mp.unsupported(f"{scope}: relative position attention")
    for feature in ("rotary_dim", "num_heads_kv", "q_norm", "k_norm", "v_norm", "head_dim",
                    "sliding_window", "memory_kv", "merged_encoder_attention"):
        if mp.has(f"{scope}/{feature}"):
            mp.unsupported(f"{scope}/{feature}")
    if fused_qkv:
        w, b = mp.linear(scope + "/linear_0")
        if w.shape[0] != 3 * dim:
            mp.unsupported(f"{scope}/linear_0 of shape {w.shape} (expected fused q,k,v)")
        qw, kw, vw = np.split(w, 3)
        qb, kb, vb = np.split(b, 3)
        ow, ob = mp.linear(scope + "/linear_1")
    else:
        qw, qb = mp.linear(scope + "/linear_0")
        w, b = mp.linear(scope + "/linear_1")
        if w.shape[0] != 2 * dim:
            mp.unsupported(f"{scope}/linear_1 of shape {w.shape} (expected fused k,v)")
        kw, vw = np.split(w, 2)
        kb, vb = np.split(b, 2)
        ow, ob = mp.linear(scope + "/linear_2")
    if mp.has(scope + "/queries_scale"):
        # CTranslate2 scales queries by queries_scale instead of 1/sqrt(head_dim); fold the ratio
        # into the query projection so that the standard scaled attention computes the same.
        qs = float(mp.get(scope + "/queries_scale").reshape(-1)[0])
        ratio = qs * math.sqrt(dim // heads)
        qw, qb = qw * ratio, qb * ratio
    for name, (w_, b_) in (("q_proj", (qw, qb)), ("k_proj", (kw, kb)), ("v_proj", (vw, vb)),
                           ("out_proj", (ow, ob))):
        sd[f"{prefix}.{name}.weight"] = _t(w_)
        sd[f"{prefix}.{name}.bias"] = _t(b_)
    ln = mp.layer_norm(scope + "/layer_norm")
    return ln


def _ffn(mp: _Mapper, scope: str, sd, prefix: str):
    if mp.has(scope + "/linear_0_noact"):
        mp.unsupported(f"{scope}: gated FFN (GLU)")
    w1, b1 = mp.linear(scope + "/linear_0")
    w2, b2 = mp.linear(scope + "/linear_1")
    sd[f"{prefix}.ffn.fc1.weight"], sd[f"{prefix}.ffn.fc1.bias"] = _t(w1), _t(b1)
    sd[f"{prefix}.ffn.fc2.weight"], sd[f"{prefix}.ffn.fc2.bias"] = _t(w2), _t(b2)
    g, b = mp.layer_norm(scope + "/layer_norm")
    sd[f"{prefix}.ffn_layer_norm.weight"], sd[f"{prefix}.ffn_layer_norm.bias"] = _t(g), _t(b)


def _apply_legacy_revisions(model: CT2Model) -> None:
    """What CTranslate2's ``TransformerModel::initialize`` does for older spec revisions."""
    if model.revision < 3 and not model.has("num_heads"):
        model.variables["num_heads"] = np.asarray(_LEGACY_HEADS[model.spec], dtype=np.int8)
    if model.revision < 5:
        for scope, flags in _LEGACY_GLOBAL_FLAGS.items():
            for flag in flags:
                if model.has(flag) and not model.has(f"{scope}/{flag}"):
                    model.aliases[f"{scope}/{flag}"] = flag


def _count_layers(model: CT2Model, scope: str) -> int:
    n = 0
    names = set(model.variables) | set(model.aliases)
    while any(k.startswith(f"{scope}/layer_{n}/") for k in names):
        n += 1
    return n


def _check_spec(model: CT2Model) -> None:
    """Refuse specs and revisions that CTranslate2 does not load as this transformer."""
    bin_path = model.path / "model.bin"
    if model.spec == "" or model.revision == 1:
        raise InputError("CTranslate2 spec revision 1 (binary version 1, OpenNMT-tf variable "
                         "names) is not supported; convert the model again with a current "
                         "CTranslate2", bin_path)
    if model.spec not in SUPPORTED_SPECS:
        raise InputError(f"model spec {model.spec or '(unnamed, binary version 1)'!r} is not an "
                         f"encoder-decoder transformer this converter supports (supported: "
                         f"{', '.join(SUPPORTED_SPECS)})", bin_path)
    if model.revision not in SUPPORTED_SPECS[model.spec]:
        raise InputError(f"unknown {model.spec} revision {model.revision} (supported: "
                         f"{', '.join(map(str, SUPPORTED_SPECS[model.spec]))})", bin_path)


def _refuse_unsupported_features(mp: _Mapper) -> None:
    if mp.has("encoder/embeddings_1/weight"):
        mp.unsupported("several source embeddings (source factors)")
    for feature in ("decoder/project_in/weight", "decoder/scale_outputs",
                    "decoder/final_logit_softcapping", "decoder/layer_0/input_layer_norm/gamma",
                    "encoder/layer_0/input_layer_norm/gamma"):
        if mp.has(feature):
            mp.unsupported(feature)
    for flag in ("decoder/alibi",):
        if mp.flag(flag, 0):
            mp.unsupported(flag)


def _embedding_matrices(mp: _Mapper):
    """(encoder embeddings, decoder embeddings, output weight, output bias, share_all, tied)."""
    model, bin_path = mp.m, mp.bin
    enc_emb_name = ("encoder/embeddings/weight" if mp.has("encoder/embeddings/weight")
                    else "encoder/embeddings_0/weight")
    enc_emb = mp.get(enc_emb_name)
    dec_emb = mp.get("decoder/embeddings/weight")
    dim = dec_emb.shape[1]
    if enc_emb.shape[1] != dim:
        mp.unsupported(f"encoder/decoder embedding sizes differ ({enc_emb.shape[1]} vs {dim})")
    if enc_emb.shape[0] != len(model.source_vocabulary):
        raise InputError(f"source embeddings have {enc_emb.shape[0]} rows but the source "
                         f"vocabulary has {len(model.source_vocabulary)} entries", bin_path)
    if dec_emb.shape[0] != len(model.target_vocabulary):
        raise InputError(f"target embeddings have {dec_emb.shape[0]} rows but the target "
                         f"vocabulary has {len(model.target_vocabulary)} entries", bin_path)
    share_all = (model.resolve(enc_emb_name) == model.resolve("decoder/embeddings/weight")
                 and model.source_vocabulary == model.target_vocabulary)
    proj_w, proj_b = mp.linear("decoder/projection")
    tied = model.resolve("decoder/projection/weight") == model.resolve("decoder/embeddings/weight")
    if proj_w.shape != dec_emb.shape:
        mp.unsupported(f"decoder/projection/weight of shape {proj_w.shape}")
    return enc_emb, dec_emb, proj_w, proj_b, share_all, tied


def _architecture_flags(mp: _Mapper, dim: int) -> dict:
    """Heads, pre-norm, activation, embedding scales and the decoder's start, as
    ``marian_transformer`` arguments."""
    enc_heads = int(mp.flag("encoder/num_heads", 8))
    dec_heads = int(mp.flag("decoder/num_heads", 8))
    enc_pre = bool(mp.flag("encoder/pre_norm", 1))
    dec_pre = bool(mp.flag("decoder/pre_norm", 1))
    if enc_pre != dec_pre:
        mp.unsupported("pre-norm encoder with post-norm decoder or vice versa")
    act_ids = {int(mp.flag("encoder/activation", 0)), int(mp.flag("decoder/activation", 0))}
    if len(act_ids) != 1 or next(iter(act_ids)) not in ACTIVATION_NAMES:
        mp.unsupported(f"FFN activation ids {sorted(act_ids)}")
    return dict(encoder_attention_heads=enc_heads, decoder_attention_heads=dec_heads,
                activation=ACTIVATION_NAMES[act_ids.pop()], pre_norm=int(enc_pre),
                encoder_embed_scale=_embed_scale(mp, "encoder", dim),
                decoder_embed_scale=_embed_scale(mp, "decoder", dim),
                start_from_zero_embedding=int(bool(mp.flag("decoder/start_from_zero_embedding",
                                                           0))))


def _position_tables(mp: _Mapper, dim: int) -> Tuple[np.ndarray, np.ndarray, int]:
    """Stored position encodings, or CTranslate2's generated sinusoids: (encoder, decoder,
    rows both have)."""
    tables = []
    for scope in ("encoder", "decoder"):
        name = f"{scope}/position_encodings/encodings"
        tables.append(mp.get(name) if mp.has(name) else ct2_sinusoidal_table(1024, dim))
    n_pos = min(t.shape[0] for t in tables)
    for t in tables:
        if t.shape[1] != dim:
            mp.unsupported(f"position encodings of width {t.shape[1]}")
    return tables[0], tables[1], n_pos


def _map_outer_norms(mp: _Mapper, sd: Dict[str, torch.Tensor], pre_norm: bool):
    """The embeddings' layer norms and the stacks' final ones: (layernorm_embedding,
    no_final_norm)."""
    layernorm_embedding = False
    for scope in ("encoder", "decoder"):
        if mp.has(f"{scope}/layernorm_embedding/gamma"):
            layernorm_embedding = True
            g, b = mp.layer_norm(f"{scope}/layernorm_embedding")
            sd[f"{scope}.layernorm_embedding.weight"], sd[f"{scope}.layernorm_embedding.bias"] = \
                _t(g), _t(b)
    no_final_norm = False
    for scope in ("encoder", "decoder"):
        if mp.has(f"{scope}/layer_norm/gamma"):
            if not pre_norm:
                mp.unsupported(f"{scope}/layer_norm in a post-norm model")
            g, b = mp.layer_norm(f"{scope}/layer_norm")
            sd[f"{scope}.layer_norm.weight"], sd[f"{scope}.layer_norm.bias"] = _t(g), _t(b)
        elif pre_norm:
            no_final_norm = True
    return layernorm_embedding, no_final_norm


def _map_layers(mp: _Mapper, sd: Dict[str, torch.Tensor], dim: int, enc_heads: int,
                dec_heads: int) -> dict:
    """The encoder and decoder layers; their counts and FFN sizes as model arguments."""
    model = mp.m
    n_enc = _count_layers(model, "encoder")
    n_dec = _count_layers(model, "decoder")
    if n_enc == 0 or n_dec == 0:
        raise InputError(f"no transformer layers found (encoder {n_enc}, decoder {n_dec})",
                         mp.bin)
    for i in range(n_enc):
        scope, prefix = f"encoder/layer_{i}", f"encoder.layers.{i}"
        g, b = _attention(mp, scope + "/self_attention", sd, prefix + ".self_attn", True, dim,
                          enc_heads)
        sd[f"{prefix}.self_attn_layer_norm.weight"] = _t(g)
        sd[f"{prefix}.self_attn_layer_norm.bias"] = _t(b)
        _ffn(mp, scope + "/ffn", sd, prefix)
    ffn_dim = mp.m.raw("encoder/layer_0/ffn/linear_0/weight").shape[0]
    for i in range(n_dec):
        scope, prefix = f"decoder/layer_{i}", f"decoder.layers.{i}"
        g, b = _attention(mp, scope + "/self_attention", sd, prefix + ".self_attn", True, dim,
                          dec_heads)
        sd[f"{prefix}.self_attn_layer_norm.weight"] = _t(g)
        sd[f"{prefix}.self_attn_layer_norm.bias"] = _t(b)
        if not mp.has(scope + "/attention/linear_0/weight"):
            mp.unsupported(f"{scope} without encoder attention")
        g, b = _attention(mp, scope + "/attention", sd, prefix + ".encoder_attn", False, dim,
                          dec_heads)
        sd[f"{prefix}.encoder_attn_layer_norm.weight"] = _t(g)
        sd[f"{prefix}.encoder_attn_layer_norm.bias"] = _t(b)
        _ffn(mp, scope + "/ffn", sd, prefix)
        mp.used.add(scope + "/layer_scalar")
        if mp.has(scope + "/layer_scalar"):
            mp.unsupported(scope + "/layer_scalar")
    dec_ffn_dim = mp.m.raw("decoder/layer_0/ffn/linear_0/weight").shape[0]
    return dict(encoder_ffn_embed_dim=int(ffn_dim), decoder_ffn_embed_dim=int(dec_ffn_dim),
                encoder_layers=n_enc, decoder_layers=n_dec)


def _refuse_leftovers(mp: _Mapper) -> None:
    """Refuse to drop anything that was not mapped."""
    leftover = []
    for name in list(mp.m.variables) + list(mp.m.aliases):
        base = name.split("/")[-1]
        if name in mp.used or base in _FLAG_VARIABLES or base == "weight_compensation":
            continue
        leftover.append(name)
    if leftover:
        mp.unsupported("variables this converter does not know: " + ", ".join(sorted(leftover)[:8])
                       + (" ..." if len(leftover) > 8 else ""))


def _decoder_start_id(model: CT2Model, tgt_vocab: VocabMap, zero_start: bool) -> int:
    """The fairseq id the decoder starts from; -1: fairseq's own (``</s>``) or, with
    ``zero_start``, a zero embedding."""
    if zero_start:
        return -1
    start_tok = model.config.get("decoder_start_token", "<s>")
    if start_tok is None:
        raise InputError("config.json has no decoder_start_token and the decoder does not "
                         "start from a zero embedding; cannot tell the first decoder input",
                         model.path / "config.json")
    eos = model.config.get("eos_token") or "</s>"
    if start_tok == eos:
        return -1
    if start_tok not in model.target_vocabulary:
        raise InputError(f"decoder_start_token {start_tok!r} is not in the target "
                         f"vocabulary", model.path / "config.json")
    ct2_id = model.target_vocabulary.index(start_tok)
    return int(np.nonzero(tgt_vocab.ct2_index == ct2_id)[0][0])


def convert_weights(model: CT2Model):
    """Map a CTranslate2 TransformerSpec onto ``marian_transformer``:
    (state_dict, model_args, source VocabMap, target VocabMap)."""
    _check_spec(model)
    _apply_legacy_revisions(model)
    mp = _Mapper(model)
    _refuse_unsupported_features(mp)

    src_vocab = build_vocab_map(model.source_vocabulary, model.config, model.path)
    tgt_vocab = build_vocab_map(model.target_vocabulary, model.config, model.path)
    enc_emb, dec_emb, proj_w, proj_b, share_all, tied = _embedding_matrices(mp)
    dim = dec_emb.shape[1]
    flags = _architecture_flags(mp, dim)
    enc_pos, dec_pos, n_pos = _position_tables(mp, dim)

    sd: Dict[str, torch.Tensor] = {}
    sd["encoder.embed_tokens.weight"] = _t(src_vocab.permute_rows(enc_emb))
    sd["decoder.embed_tokens.weight"] = _t(tgt_vocab.permute_rows(dec_emb))
    sd["encoder.embed_positions"] = _t(enc_pos[:n_pos])
    sd["decoder.embed_positions"] = _t(dec_pos[:n_pos])
    sd["decoder.output_projection.weight"] = _t(tgt_vocab.permute_rows(proj_w))
    sd["decoder.output_projection.bias"] = _t(tgt_vocab.permute_rows(proj_b[:, None],
                                                                      fill=NEG_LOGIT)[:, 0])
    layernorm_embedding, no_final_norm = _map_outer_norms(mp, sd, bool(flags["pre_norm"]))
    layers = _map_layers(mp, sd, dim, flags["encoder_attention_heads"],
                         flags["decoder_attention_heads"])
    _refuse_leftovers(mp)

    eps = model.config.get("layer_norm_epsilon")
    dec_start = _decoder_start_id(model, tgt_vocab, bool(flags["start_from_zero_embedding"]))
    model_args = dict(
        encoder_embed_dim=dim, decoder_embed_dim=dim,
        encoder_ffn_embed_dim=layers["encoder_ffn_embed_dim"],
        decoder_ffn_embed_dim=layers["decoder_ffn_embed_dim"],
        encoder_layers=layers["encoder_layers"], decoder_layers=layers["decoder_layers"],
        encoder_attention_heads=flags["encoder_attention_heads"],
        decoder_attention_heads=flags["decoder_attention_heads"],
        activation=flags["activation"], pre_norm=flags["pre_norm"],
        no_final_norm=int(no_final_norm), layernorm_embedding=int(layernorm_embedding),
        layer_norm_eps=float(eps) if eps is not None else 1e-5,
        encoder_embed_scale=flags["encoder_embed_scale"],
        decoder_embed_scale=flags["decoder_embed_scale"],
        start_from_zero_embedding=flags["start_from_zero_embedding"],
        decoder_start_token_id=dec_start,
        share_all_embeddings=int(share_all), share_decoder_input_output_embed=int(tied),
        position_table_size=int(n_pos),
    )
    if share_all:
        sd["encoder.embed_tokens.weight"] = sd["decoder.embed_tokens.weight"]
    if tied:
        sd["decoder.output_projection.weight"] = sd["decoder.embed_tokens.weight"]
    return sd, model_args, src_vocab, tgt_vocab
