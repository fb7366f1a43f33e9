"""Import a CTranslate2 transformer or a Hugging Face Marian model as a fairseq model directory.

Output directory layout (shared with the decoding code)::

    OUT/checkpoint.pt          fairseq checkpoint, arch ``marian_transformer``, task ``translation``
    OUT/dict.<src>.txt         fairseq dictionaries: <s> <pad> </s> <unk>, then the model's pieces
    OUT/dict.<tgt>.txt
    OUT/source.spm             copied from the CTranslate2 directory when present
    OUT/target.spm             given (--target-spm, the model's own) or recovered by
                               triemine.models.segmentation
    OUT/triemine-model.json    provenance: spec, revision, languages, vocabulary mapping

The variable names and their meaning come from CTranslate2's spec classes
(``python/ctranslate2/specs/transformer_spec.py``, ``attention_spec.py``, ``common_spec.py``) and
its runtime (``src/layers/transformer.cc``, ``src/layers/common.cc``). Anything in ``model.bin``
that this converter does not understand is an error rather than silently ignored.
:func:`import_model` detects the input's format; Hugging Face ``MarianMTModel`` directories are
mapped by :mod:`triemine.models.hf_marian` and written the same way.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

import numpy as np
import torch

from triemine.errors import InputError
from triemine.models.ct2_reader import CT2Model, read_ct2_model

logger = logging.getLogger(__name__)

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
# Fairseq's fixed special symbols, in order.
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MAX_VOCAB = 65535  # trie keys are uint16; 65535 stays free as a sentinel
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
NEG_LOGIT = -1e9  # bias of fairseq-only output rows (<s>, <pad>): exp() underflows to exactly 0


@dataclass
class VocabMap:
    """fairseq index -> CTranslate2 index (-1 for the fairseq-only specials)."""

    tokens: List[str]          # fairseq dictionary symbols, in fairseq order
    ct2_index: np.ndarray      # int64, len(tokens)

    def permute_rows(self, matrix: np.ndarray, fill: float = 0.0) -> np.ndarray:
        out = np.full((len(self.tokens),) + matrix.shape[1:], fill, dtype=np.float32)
        have = self.ct2_index >= 0
        out[have] = matrix[self.ct2_index[have]]
        return out


def build_vocab_map(ct2_vocab: List[str], config: dict, path: Path) -> VocabMap:
    """Reorder a CTranslate2 vocabulary to fairseq's ``<s> <pad> </s> <unk>`` layout.

    The model's own eos / unk / bos / pad symbols (``config``'s ``eos_token``, ``unk_token``,
    ``bos_token``, ``pad_token``; a CTranslate2 Marian model has no bos or pad)
    take fairseq's special slots and keep fairseq's spelling; every other piece follows in the
    model's order.
    """
    seen: Dict[str, int] = {}
    for i, tok in enumerate(ct2_vocab):
        if tok == "" or any(ch.isspace() for ch in tok):
            raise InputError(f"vocabulary entry {i} {tok!r} is empty or contains whitespace, "
                             f"which fairseq dictionaries cannot hold", path)
        if tok in seen:
            raise InputError(f"duplicate vocabulary entry {tok!r} at {seen[tok]} and {i}", path)
        seen[tok] = i
    eos = config.get("eos_token") or "</s>"
    unk = config.get("unk_token") or "<unk>"
    bos = config.get("bos_token") or "<s>"
    for name, tok in (("eos_token", eos), ("unk_token", unk)):
        if tok not in seen:
            raise InputError(f"{name} {tok!r} of config.json is not in the vocabulary", path)
    pad = config.get("pad_token") or "<pad>"
    special_src = {"<s>": bos, "<pad>": pad, "</s>": eos, "<unk>": unk}
    tokens: List[str] = []
    index: List[int] = []
    used = set()
    for fs in FAIRSEQ_SPECIALS:
        src = special_src[fs]
        i = seen.get(src, -1)
        tokens.append(fs)
        index.append(i)
        if i >= 0:
            used.add(i)
    for i, tok in enumerate(ct2_vocab):
        if i in used:
            continue
        if tok in FAIRSEQ_SPECIALS:
            raise InputError(f"vocabulary entry {i} {tok!r} collides with a fairseq special "
                             f"symbol", path)
        tokens.append(tok)
        index.append(i)
    if len(tokens) > MAX_VOCAB:
        raise InputError(f"vocabulary of {len(ct2_vocab)} pieces gives {len(tokens)} fairseq ids, "
                         f"more than the {MAX_VOCAB} that uint16 trie keys allow", path)
    return VocabMap(tokens=tokens, ct2_index=np.asarray(index, dtype=np.int64))


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


def convert_weights(model: CT2Model):
    """Map a CTranslate2 TransformerSpec onto ``marian_transformer``: (state_dict, args, vocabs)."""
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
    _apply_legacy_revisions(model)
    mp = _Mapper(model)
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

    src_vocab = build_vocab_map(model.source_vocabulary, model.config, model.path)
    tgt_vocab = build_vocab_map(model.target_vocabulary, model.config, model.path)

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

    sd: Dict[str, torch.Tensor] = {}
    enc_heads = int(mp.flag("encoder/num_heads", 8))
    dec_heads = int(mp.flag("decoder/num_heads", 8))
    enc_pre = bool(mp.flag("encoder/pre_norm", 1))
    dec_pre = bool(mp.flag("decoder/pre_norm", 1))
    if enc_pre != dec_pre:
        mp.unsupported("pre-norm encoder with post-norm decoder or vice versa")
    act_ids = {int(mp.flag("encoder/activation", 0)), int(mp.flag("decoder/activation", 0))}
    if len(act_ids) != 1 or next(iter(act_ids)) not in ACTIVATION_NAMES:
        mp.unsupported(f"FFN activation ids {sorted(act_ids)}")
    activation = ACTIVATION_NAMES[act_ids.pop()]
    enc_scale = _embed_scale(mp, "encoder", dim)
    dec_scale = _embed_scale(mp, "decoder", dim)
    zero_start = bool(mp.flag("decoder/start_from_zero_embedding", 0))

    # position tables: stored explicitly, or CTranslate2's generated sinusoids
    tables = []
    for scope in ("encoder", "decoder"):
        name = f"{scope}/position_encodings/encodings"
        tables.append(mp.get(name) if mp.has(name) else ct2_sinusoidal_table(1024, dim))
    n_pos = min(t.shape[0] for t in tables)
    for t in tables:
        if t.shape[1] != dim:
            mp.unsupported(f"position encodings of width {t.shape[1]}")

    enc_rows = src_vocab.permute_rows(enc_emb)
    dec_rows = tgt_vocab.permute_rows(dec_emb)
    sd["encoder.embed_tokens.weight"] = _t(enc_rows)
    sd["decoder.embed_tokens.weight"] = _t(dec_rows)
    sd["encoder.embed_positions"] = _t(tables[0][:n_pos])
    sd["decoder.embed_positions"] = _t(tables[1][:n_pos])
    sd["decoder.output_projection.weight"] = _t(tgt_vocab.permute_rows(proj_w))
    sd["decoder.output_projection.bias"] = _t(tgt_vocab.permute_rows(proj_b[:, None],
                                                                      fill=NEG_LOGIT)[:, 0])
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
            if not enc_pre:
                mp.unsupported(f"{scope}/layer_norm in a post-norm model")
            g, b = mp.layer_norm(f"{scope}/layer_norm")
            sd[f"{scope}.layer_norm.weight"], sd[f"{scope}.layer_norm.bias"] = _t(g), _t(b)
        elif enc_pre:
            no_final_norm = True

    n_enc = _count_layers(model, "encoder")
    n_dec = _count_layers(model, "decoder")
    if n_enc == 0 or n_dec == 0:
        raise InputError(f"no transformer layers found (encoder {n_enc}, decoder {n_dec})",
                         bin_path)
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

    # refuse to drop anything we did not map
    leftover = []
    for name in list(model.variables) + list(model.aliases):
        base = name.split("/")[-1]
        if name in mp.used or base in _FLAG_VARIABLES or base == "weight_compensation":
            continue
        leftover.append(name)
    if leftover:
        mp.unsupported("variables this converter does not know: " + ", ".join(sorted(leftover)[:8])
                       + (" ..." if len(leftover) > 8 else ""))

    eps = model.config.get("layer_norm_epsilon")
    dec_start = -1
    if not zero_start:
        start_tok = model.config.get("decoder_start_token", "<s>")
        if start_tok is None:
            raise InputError("config.json has no decoder_start_token and the decoder does not "
                             "start from a zero embedding; cannot tell the first decoder input",
                             model.path / "config.json")
        eos = model.config.get("eos_token") or "</s>"
        if start_tok != eos:
            if start_tok not in model.target_vocabulary:
                raise InputError(f"decoder_start_token {start_tok!r} is not in the target "
                                 f"vocabulary", model.path / "config.json")
            ct2_id = model.target_vocabulary.index(start_tok)
            dec_start = int(np.nonzero(tgt_vocab.ct2_index == ct2_id)[0][0])

    model_args = dict(
        encoder_embed_dim=dim, decoder_embed_dim=dim,
        encoder_ffn_embed_dim=int(ffn_dim), decoder_ffn_embed_dim=int(dec_ffn_dim),
        encoder_layers=n_enc, decoder_layers=n_dec,
        encoder_attention_heads=enc_heads, decoder_attention_heads=dec_heads,
        activation=activation, pre_norm=int(enc_pre), no_final_norm=int(no_final_norm),
        layernorm_embedding=int(layernorm_embedding),
        layer_norm_eps=float(eps) if eps is not None else 1e-5,
        encoder_embed_scale=enc_scale, decoder_embed_scale=dec_scale,
        start_from_zero_embedding=int(zero_start), decoder_start_token_id=dec_start,
        share_all_embeddings=int(share_all), share_decoder_input_output_embed=int(tied),
        position_table_size=int(n_pos),
    )
    if share_all:
        sd["encoder.embed_tokens.weight"] = sd["decoder.embed_tokens.weight"]
    if tied:
        sd["decoder.output_projection.weight"] = sd["decoder.embed_tokens.weight"]
    return sd, model_args, src_vocab, tgt_vocab


def write_dictionary(path: Path, vocab: VocabMap) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for tok in vocab.tokens[len(FAIRSEQ_SPECIALS):]:
            f.write(f"{tok} 1\n")


def _checkpoint_args(out_dir: Path, source_lang: str, target_lang: str, model_args: dict):
    from triemine.models.marian import MODEL_NAME, marian_base
    args = argparse.Namespace(
        arch=MODEL_NAME, task="translation", data=str(out_dir), source_lang=source_lang,
        target_lang=target_lang, left_pad_source=True, left_pad_target=False,
        max_source_positions=1024, max_target_positions=1024, criterion="cross_entropy",
        optimizer=None, lr_scheduler="fixed", seed=1, _name=MODEL_NAME, **model_args)
    marian_base(args)
    return args


def write_model_dir(out_dir: Path, sd: Dict[str, torch.Tensor], model_args: dict,
                    src_vocab: VocabMap, tgt_vocab: VocabMap, source_lang: str, target_lang: str,
                    origin: Path, meta: dict) -> Path:
    """Write the trie-mine model directory (checkpoint, dictionaries, ``triemine-model.json``
    with ``meta`` added) that ``triemine.decoding.model_dir`` loads; sentencepiece models are
    the caller's."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_dictionary(out_dir / f"dict.{source_lang}.txt", src_vocab)
    write_dictionary(out_dir / f"dict.{target_lang}.txt", tgt_vocab)
    args = _checkpoint_args(out_dir, source_lang, target_lang, model_args)
    state = {"args": args, "cfg": None, "model": sd, "optimizer_history": [
        {"criterion_name": "CrossEntropyCriterion", "optimizer_name": "NAG",
         "lr_scheduler_state": {"best": None}, "num_updates": 0}],
        "extra_state": {"triemine": {"origin": str(origin.resolve())}},
        "last_optimizer_state": None}
    tmp = out_dir / "checkpoint.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(out_dir / "checkpoint.pt")
    full = {"format": 1, "source_lang": source_lang, "target_lang": target_lang,
            "origin": str(origin.resolve()), "arch": "marian_transformer",
            "source_vocab_size": len(src_vocab.tokens), "target_vocab_size": len(tgt_vocab.tokens),
            "fairseq_specials": list(FAIRSEQ_SPECIALS), **meta, "model_args": model_args}
    (out_dir / "triemine-model.json").write_text(json.dumps(full, indent=2, ensure_ascii=False)
                                                 + "\n", encoding="utf-8")
    return out_dir


def _check_langs(source_lang: str, target_lang: str, target_spm) -> None:
    if source_lang == target_lang:
        raise InputError(f"source and target language are both {source_lang!r}")
    if target_spm is not None and not Path(target_spm).is_file():
        raise InputError("target sentencepiece model not found", target_spm)


def detect_model_format(model_dir) -> str:
    """``"hf-marian"`` (Hugging Face ``MarianMTModel`` directory) or ``"ctranslate2"``."""
    from triemine.models.hf_marian import is_hf_marian_dir

    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise InputError("model directory not found", model_dir)
    if is_hf_marian_dir(model_dir):
        return "hf-marian"
    if (model_dir / "model.bin").is_file():
        return "ctranslate2"
    if (model_dir / "config.json").is_file():
        raise InputError("neither a CTranslate2 model (no model.bin) nor a Hugging Face "
                         "MarianMTModel directory (config.json with model_type 'marian' and "
                         "model.safetensors or pytorch_model.bin)", model_dir)
    raise InputError("missing CTranslate2 model file model.bin (and not a Hugging Face "
                     "MarianMTModel directory either)", model_dir)


def import_model(model_dir, out_dir, source_lang: str = "zh", target_lang: str = "en",
                 target_spm=None, recover_target: bool = True,
                 estimation_sources: Optional[Sequence[str]] = None) -> Path:
    """Import a CTranslate2 or a Hugging Face Marian directory (detected) into ``out_dir``."""
    if detect_model_format(model_dir) == "hf-marian":
        return import_hf_marian_model(model_dir, out_dir, source_lang, target_lang,
                                      target_spm=target_spm)
    return import_ct2_model(model_dir, out_dir, source_lang, target_lang, target_spm=target_spm,
                            recover_target=recover_target, estimation_sources=estimation_sources)


def import_hf_marian_model(hf_dir, out_dir, source_lang: str = "zh", target_lang: str = "en",
                           target_spm=None) -> Path:
    """Convert a Hugging Face ``MarianMTModel`` directory into a trie-mine model directory.

    Both sentencepiece models ship with such a directory, so nothing is recovered;
    ``target_spm`` overrides its ``target.spm``."""
    import triemine.models.marian  # noqa: F401  (registers the architecture)
    from triemine.models.hf_marian import convert_hf_marian

    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    _check_langs(source_lang, target_lang, target_spm)
    sd, model_args, src_vocab, tgt_vocab, cfg = convert_hf_marian(hf_dir)
    tspm = Path(target_spm) if target_spm is not None else hf_dir / "target.spm"
    coverage = check_target_spm(tspm, tgt_vocab.tokens)
    write_model_dir(out_dir, sd, model_args, src_vocab, tgt_vocab, source_lang, target_lang,
                    hf_dir, {"input_format": "hf-marian", "target_spm": "given",
                             "target_spm_pieces_in_vocab": coverage,
                             "shared_vocabulary": src_vocab.tokens == tgt_vocab.tokens,
                             "hf_config": cfg})
    shutil.copyfile(hf_dir / "source.spm", out_dir / "source.spm")
    shutil.copyfile(tspm, out_dir / "target.spm")
    return out_dir


def import_ct2_model(ct2_dir, out_dir, source_lang: str = "zh", target_lang: str = "en",
                     target_spm=None, recover_target: bool = True,
                     estimation_sources: Optional[Sequence[str]] = None) -> Path:
    """Convert ``ct2_dir`` into a fairseq model directory ``out_dir``; returns ``out_dir``.

    ``target_spm`` (a sentencepiece model file) is copied to ``OUT/target.spm``; without it, a
    ``target.spm`` in ``ct2_dir`` is copied, else (``recover_target``) one is recovered by
    :func:`triemine.models.segmentation.recover_target_spm` from ``estimation_sources``
    (source-language sentences; required except for the shared zh-en model) -- slow: it
    translates them.
    """
    import triemine.models.marian  # noqa: F401  (registers the architecture)

    ct2_dir = Path(ct2_dir)
    out_dir = Path(out_dir)
    _check_langs(source_lang, target_lang, target_spm)
    model = read_ct2_model(ct2_dir)
    sd, model_args, src_vocab, tgt_vocab = convert_weights(model)
    if target_spm is None and (ct2_dir / "target.spm").is_file():
        target_spm = ct2_dir / "target.spm"
    spm_coverage = None
    if target_spm is not None:
        spm_coverage = check_target_spm(target_spm, tgt_vocab.tokens)
    src_spm = ct2_dir / "source.spm"
    if target_spm is None and recover_target and src_spm.is_file() and estimation_sources is None:
        from triemine.models.segmentation.recover import is_default_model
        if not is_default_model(ct2_dir):  # fail before writing anything
            raise InputError("has no target sentencepiece model (target.spm), and recovering "
                             "one needs estimation text: source-language sentences the model "
                             "translates (a few thousand lines; --estimation-text FILE); or "
                             "pass the model's own target model (--target-spm PATH), or "
                             "--no-recover-target", ct2_dir)
    (out_dir / "target.spm").unlink(missing_ok=True)
    write_model_dir(out_dir, sd, model_args, src_vocab, tgt_vocab, source_lang, target_lang,
                    ct2_dir, {"input_format": "ctranslate2", "spec": model.spec,
                              "revision": model.revision, "binary_version": model.binary_version,
                              "target_spm": None, "shared_vocabulary": model.shared_vocabulary,
                              "target_spm_pieces_in_vocab": spm_coverage,
                              "ct2_config": model.config})
    if src_spm.is_file():
        shutil.copyfile(src_spm, out_dir / "source.spm")
    target_status = None
    if target_spm is not None:
        shutil.copyfile(target_spm, out_dir / "target.spm")
        target_status = "given"
    elif recover_target and src_spm.is_file():
        from triemine.models.segmentation import recover_target_spm
        recover_target_spm(ct2_dir, out_dir / "target.spm", model=model,
                           estimation_sources=estimation_sources)
        target_status = "recovered"
    elif recover_target:
        logger.warning("%s has neither a target nor a source sentencepiece model; no "
                       "target.spm written (pass --target-spm PATH)", ct2_dir)
    meta_path = out_dir / "triemine-model.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["target_spm"] = target_status
    meta_path.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out_dir


def check_target_spm(path, target_tokens: List[str], min_coverage: float = 0.5) -> float:
    """Load ``path`` as a sentencepiece model; the fraction of its (non-control) pieces that are
    in the target dictionary must reach ``min_coverage``, else it belongs to another model."""
    import sentencepiece as spm

    try:
        sp = spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as exc:
        raise InputError(f"not a sentencepiece model: {exc}", path) from None
    vocab = set(target_tokens)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    if not pieces:
        raise InputError("sentencepiece model has no pieces", path)
    coverage = sum(p in vocab for p in pieces) / len(pieces)
    if coverage < min_coverage:
        raise InputError(f"only {coverage:.1%} of the sentencepiece model's {len(pieces)} pieces "
                         f"are in the model's target vocabulary; it does not belong to this "
                         f"model", path)
    return round(coverage, 4)


def load_fairseq_model(model_dir, device: str = "cpu"):
    """Load an imported model directory: (model in eval mode, task)."""
    import triemine.models.marian  # noqa: F401
    from triemine.models.checkpoint import load_ensemble

    model_dir = Path(model_dir)
    ckpt = model_dir / "checkpoint.pt"
    if not ckpt.is_file():
        raise InputError("missing checkpoint.pt; run trie-mine-import first", model_dir)
    models, _cfg, task = load_ensemble(str(ckpt), {"data": str(model_dir)})
    model = models[0].to(device).eval()
    return model, task
