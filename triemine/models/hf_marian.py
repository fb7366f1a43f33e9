"""Read a Hugging Face ``MarianMTModel`` directory and map it onto ``marian_transformer``.

A Hugging Face Marian (OPUS-MT) directory holds ``config.json``, the weights
(``model.safetensors`` or ``pytorch_model.bin``), ``source.spm``, ``target.spm`` and
``vocab.json`` (``{piece: id}``; ``target_vocab.json`` too when ``tokenizer_config.json`` says
``separate_vocabs``). Reading it needs torch and safetensors only, not ``transformers``.

The conventions of ``transformers``' ``modeling_marian.py`` that the mapping reproduces:

* post-norm layers (``x = LN(x + sublayer(x))``; ``transformers`` ignores the legacy
  ``normalize_before`` / ``normalize_embedding`` / ``add_final_layer_norm`` fields of old
  configs, and so does this mapping), LayerNorm epsilon 1e-5, queries scaled by
  ``1/sqrt(head_dim)``;
* token embeddings times ``sqrt(d_model)`` when ``scale_embedding``, else 1;
* sinusoidal positions ``[sin(p / 10000^(2i/d)), cos(p / 10000^(2i/d))]`` (halves concatenated)
  at positions 0, 1, ... from the first token, in a table of ``max_position_embeddings`` rows
  (the stored table when the checkpoint has one);
* output logits ``h E_out^T + final_logits_bias``; the output matrix is the decoder embedding
  when ``tie_word_embeddings`` (the default), else ``lm_head.weight``; encoder and decoder share
  ``model.shared.weight`` when ``share_encoder_decoder_embeddings``;
* ids: ``eos_token_id`` ends a sentence, the ``<unk>`` of ``vocab.json`` is unknown, the pad
  token (``pad_token_id``) is a real vocabulary row with a real output logit (generation never
  writes it; fairseq masks ``<pad>`` the same way) and the decoder starts from
  ``decoder_start_token_id``, which is the pad token in Marian.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

from triemine.errors import InputError
from triemine.models.vocab import NEG_LOGIT, build_vocab_map

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
REQUIRED_FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish", "gelu": "gelu",
               "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "tanh": "tanh",
               "sigmoid": "sigmoid"}


def import_transformers():
    """``transformers``, importable although a ``torchaudio`` built for another torch is
    installed (fairseq depends on torchaudio; transformers imports it when present and fails with
    it, while nothing here needs audio). For :mod:`triemine.models.fidelity` and the tests: reading
    a
    directory never imports ``transformers``."""
    if "torchaudio" not in sys.modules:
        try:
            import torchaudio  # noqa: F401
        except Exception:  # noqa: BLE001  (OSError / ImportError from a mismatched build)
            sys.modules["torchaudio"] = None  # type: ignore[assignment]
    import transformers
    return transformers


def is_hf_marian_dir(path) -> bool:
    """A directory with ``config.json`` (``model_type`` marian) and Marian's weights and files."""
    path = Path(path)
    config = path / "config.json"
    if not config.is_file() or not any((path / w).is_file() for w in WEIGHT_FILES):
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "marian"
    except (ValueError, UnicodeDecodeError, AttributeError):
        return False


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path, exc.lineno) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path) from None


def _vocab_list(path: Path) -> List[str]:
    """``vocab.json`` ({piece: id}, ids 0..n-1) as a list in id order."""
    data = _read_json(path)
    if not isinstance(data, dict) or not data:
        raise InputError("vocabulary must be a JSON object {piece: id}", path)
    out: List[Optional[str]] = [None] * len(data)
    for piece, i in data.items():
        if not isinstance(i, int) or not 0 <= i < len(data) or out[i] is not None:
            raise InputError(f"piece {piece!r} has id {i!r}; ids must be 0..{len(data) - 1}, "
                             f"each once", path)
        out[i] = piece
    return out  # type: ignore[return-value]


def read_weights(model_dir: Path) -> Dict[str, torch.Tensor]:
    """The checkpoint's tensors as float32 (``model.safetensors`` first)."""
    for name in WEIGHT_FILES:
        path = model_dir / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file
                state = load_file(str(path))
            else:
                state = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:  # safetensors' and torch's own errors for damaged files
            raise InputError(f"cannot read the weights: {exc}", path) from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                                  for v in state.values()):
            raise InputError("weights file is not a state dict of tensors", path)
        return {k: v.float() for k, v in state.items()}
    raise InputError(f"missing weights: expected {' or '.join(WEIGHT_FILES)}", model_dir)


def hf_sinusoidal_table(num_positions: int, dim: int) -> np.ndarray:
    """``MarianSinusoidalPositionalEmbedding.create_weight``: position ``p`` holds
    ``sin(p / 10000^(2i/d))`` in its first half and the cosines in its second half."""
    pos = np.arange(num_positions, dtype=np.float64)[:, None]
    j = np.arange(dim)
    angle = pos / np.power(10000, 2 * (j // 2) / dim)[None, :]
    half = dim // 2 + dim % 2
    out = np.empty((num_positions, dim), dtype=np.float32)
    out[:, :half] = np.sin(angle[:, 0::2])
    out[:, half:] = np.cos(angle[:, 1::2])
    return out


class _Weights:
    """The state dict, with the names it was asked for remembered (nothing may be left over)."""

    def __init__(self, state: Dict[str, torch.Tensor], path: Path):
        self.state = state
        self.used: set = set()
        self.path = path
        prefixes = {k.split(".", 1)[0] for k in state}
        self.prefix = "model." if "model" in prefixes else ""

    def has(self, name: str) -> bool:
        return self._key(name) in self.state

    def _key(self, name: str) -> str:
        return name if name in ("lm_head.weight", "final_logits_bias") else self.prefix + name

    def get(self, name: str) -> torch.Tensor:
        key = self._key(name)
        if key not in self.state:
            raise InputError(f"the checkpoint has no {key!r}", self.path)
        self.used.add(key)
        return self.state[key]

    def first(self, *names: str) -> torch.Tensor:
        for name in names:
            if self.has(name):
                return self.get(name)
        raise InputError(f"the checkpoint has none of {', '.join(map(repr, names))}", self.path)

    def leftover(self) -> List[str]:
        return sorted(k for k in self.state if k not in self.used)


def _read_config(model_dir: Path):
    """(config.json, tokenizer_config.json or {}, source pieces, target pieces, separate)."""
    for name in REQUIRED_FILES:
        if not (model_dir / name).is_file():
            raise InputError(f"missing {name} (a Hugging Face MarianMTModel directory has "
                             f"{', '.join(REQUIRED_FILES)} and {' or '.join(WEIGHT_FILES)})",
                             model_dir)
    cfg_path = model_dir / "config.json"
    cfg = _read_json(cfg_path)
    if cfg.get("model_type") != "marian":
        raise InputError(f"model_type is {cfg.get('model_type')!r}, not 'marian'", cfg_path)
    tok_cfg = {}
    if (model_dir / "tokenizer_config.json").is_file():
        tok_cfg = _read_json(model_dir / "tokenizer_config.json")
    src_list = _vocab_list(model_dir / "vocab.json")
    separate = bool(tok_cfg.get("separate_vocabs"))
    tgt_list = _vocab_list(model_dir / "target_vocab.json") if separate else src_list
    return cfg, tok_cfg, src_list, tgt_list, separate


def _vocab_maps(model_dir: Path, cfg: dict, tok_cfg: dict, src_list: List[str],
                tgt_list: List[str], separate: bool):
    """The specials named by the config's ids, then both vocabularies in fairseq's order:
    (source VocabMap, target VocabMap, the decoder's start piece)."""
    cfg_path = model_dir / "config.json"

    def token(ids: List[str], key: str, default: Optional[int]) -> str:
        i = cfg.get(key, default)
        if isinstance(i, list):
            i = i[0]
        if not isinstance(i, int) or not 0 <= i < len(ids):
            raise InputError(f"{key} {i!r} is not an id of the vocabulary ({len(ids)} pieces)",
                             cfg_path)
        return ids[i]

    unk = tok_cfg.get("unk_token", "<unk>")
    if isinstance(unk, dict):
        unk = unk.get("content", "<unk>")
    specials = {"eos_token": token(tgt_list, "eos_token_id", 0), "unk_token": unk,
                "bos_token": None, "pad_token": token(tgt_list, "pad_token_id", None)}
    if token(src_list, "pad_token_id", None) != specials["pad_token"] or \
            token(src_list, "eos_token_id", 0) != specials["eos_token"]:
        raise InputError("pad/eos ids name different pieces in the source and target "
                         "vocabularies", cfg_path)
    start = token(tgt_list, "decoder_start_token_id", cfg.get("pad_token_id"))
    src_vocab = build_vocab_map(src_list, specials, model_dir / "vocab.json")
    tgt_vocab = build_vocab_map(tgt_list, specials,
                                model_dir / ("target_vocab.json" if separate else "vocab.json"))
    return src_vocab, tgt_vocab, start


def _output_matrices(w: _Weights, model_dir: Path, share: bool, tie: bool, dim: int,
                     src_list: List[str], tgt_list: List[str]):
    """(encoder embeddings, decoder embeddings, output weight, output bias), shapes checked."""
    if share:
        enc_emb = dec_emb = w.first("shared.weight", "encoder.embed_tokens.weight")
        for name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            if w.has(name):
                w.get(name)  # the same tensor, tied (stored by older transformers)
    else:
        enc_emb = w.first("encoder.embed_tokens.weight", "shared.weight")
        dec_emb = w.get("decoder.embed_tokens.weight")
        if w.has("shared.weight"):
            w.get("shared.weight")
    if tie:
        out_w = dec_emb
        if w.has("lm_head.weight"):
            w.get("lm_head.weight")  # transformers ties it to the embedding on load
    else:
        out_w = w.get("lm_head.weight")
    if w.has("final_logits_bias"):
        bias = w.get("final_logits_bias").reshape(-1)
    else:  # transformers initialises a missing bias to zeros
        bias = torch.zeros(out_w.shape[0])
    for name, t, vocab in (("source embeddings", enc_emb, src_list),
                           ("target embeddings", dec_emb, tgt_list),
                           ("output projection", out_w, tgt_list)):
        if tuple(t.shape) != (len(vocab), dim):
            raise InputError(f"{name} have shape {tuple(t.shape)} but the vocabulary has "
                             f"{len(vocab)} pieces of dimension {dim}", model_dir)
    if bias.numel() != len(tgt_list):
        raise InputError(f"final_logits_bias has {bias.numel()} entries for a vocabulary of "
                         f"{len(tgt_list)}", model_dir)
    return enc_emb, dec_emb, out_w, bias


def _copy_layers(w: _Weights, sd: Dict[str, torch.Tensor], layers: Dict[str, int],
                 model_dir: Path) -> None:
    """The encoder and decoder layers, renamed (``fc1`` -> ``ffn.fc1``, ``final_layer_norm`` ->
    ``ffn_layer_norm``)."""
    def copy(src: str, dst: str):
        for kind in ("weight", "bias"):
            sd[f"{dst}.{kind}"] = w.get(f"{src}.{kind}").clone()

    for side in ("encoder", "decoder"):
        for i in range(layers[side]):
            s, d = f"{side}.layers.{i}", f"{side}.layers.{i}"
            attns = ("self_attn", "encoder_attn") if side == "decoder" else ("self_attn",)
            for att in attns:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    copy(f"{s}.{att}.{proj}", f"{d}.{att}.{proj}")
                copy(f"{s}.{att}_layer_norm", f"{d}.{att}_layer_norm")
            copy(f"{s}.fc1", f"{d}.ffn.fc1")
            copy(f"{s}.fc2", f"{d}.ffn.fc2")
            copy(f"{s}.final_layer_norm", f"{d}.ffn_layer_norm")
        if w.has(f"{side}.layers.{layers[side]}.fc1.weight"):
            raise InputError(f"the checkpoint has more {side} layers than config.json's "
                             f"{side}_layers ({layers[side]})", model_dir)


def convert_hf_marian(model_dir):
    """Map a Hugging Face Marian directory onto ``marian_transformer``:
    (state_dict, model_args, source VocabMap, target VocabMap, config)."""
    model_dir = Path(model_dir)
    cfg, tok_cfg, src_list, tgt_list, separate = _read_config(model_dir)
    src_vocab, tgt_vocab, start = _vocab_maps(model_dir, cfg, tok_cfg, src_list, tgt_list,
                                              separate)

    act = cfg.get("activation_function", "gelu")
    if act not in ACTIVATIONS:
        raise InputError(f"unsupported activation_function {act!r} (supported: "
                         f"{', '.join(sorted(ACTIVATIONS))})", model_dir / "config.json")
    dim = int(cfg.get("d_model", 1024))
    share = bool(cfg.get("share_encoder_decoder_embeddings", True))
    tie = bool(cfg.get("tie_word_embeddings", True))
    n_pos = int(cfg.get("max_position_embeddings", 1024))
    heads = {s: int(cfg.get(f"{s}_attention_heads", 16)) for s in ("encoder", "decoder")}
    layers = {s: int(cfg.get(f"{s}_layers", 12)) for s in ("encoder", "decoder")}
    ffn = {s: int(cfg.get(f"{s}_ffn_dim", 4096)) for s in ("encoder", "decoder")}

    w = _Weights(read_weights(model_dir), model_dir)
    enc_emb, dec_emb, out_w, bias = _output_matrices(w, model_dir, share, tie, dim, src_list,
                                                     tgt_list)

    def rows(vm, t: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        return torch.from_numpy(vm.permute_rows(t.numpy(), fill=fill))

    sd: Dict[str, torch.Tensor] = {}
    sd["encoder.embed_tokens.weight"] = rows(src_vocab, enc_emb)
    sd["decoder.embed_tokens.weight"] = rows(tgt_vocab, dec_emb)
    sd["decoder.output_projection.weight"] = rows(tgt_vocab, out_w)
    sd["decoder.output_projection.bias"] = rows(tgt_vocab, bias[:, None], NEG_LOGIT)[:, 0]
    for side in ("encoder", "decoder"):
        name = f"{side}.embed_positions.weight"
        table = w.get(name) if w.has(name) else torch.from_numpy(hf_sinusoidal_table(n_pos, dim))
        if tuple(table.shape) != (n_pos, dim):
            raise InputError(f"{name} has shape {tuple(table.shape)}, expected "
                             f"{(n_pos, dim)}", model_dir)
        sd[f"{side}.embed_positions"] = table.clone()
    _copy_layers(w, sd, layers, model_dir)
    leftover = w.leftover()
    if leftover:
        raise InputError("weights this importer does not know (refusing to drop them): "
                         + ", ".join(leftover[:8]) + (" ..." if len(leftover) > 8 else ""),
                         model_dir)

    start_id = int(np.nonzero(tgt_vocab.ct2_index == tgt_list.index(start))[0][0])
    eos_id = 2  # fairseq's </s>, where the model's eos_token_id piece is put
    scale = math.sqrt(dim) if cfg.get("scale_embedding", False) else 1.0
    model_args = dict(
        encoder_embed_dim=dim, decoder_embed_dim=dim,
        encoder_ffn_embed_dim=ffn["encoder"], decoder_ffn_embed_dim=ffn["decoder"],
        encoder_layers=layers["encoder"], decoder_layers=layers["decoder"],
        encoder_attention_heads=heads["encoder"], decoder_attention_heads=heads["decoder"],
        activation=ACTIVATIONS[act], pre_norm=0, no_final_norm=0, layernorm_embedding=0,
        layer_norm_eps=1e-5, encoder_embed_scale=scale, decoder_embed_scale=scale,
        start_from_zero_embedding=0,
        decoder_start_token_id=-1 if start_id == eos_id else start_id,
        share_all_embeddings=int(share and not separate),
        share_decoder_input_output_embed=int(tie), position_table_size=n_pos,
    )
    if model_args["share_all_embeddings"]:
        sd["encoder.embed_tokens.weight"] = sd["decoder.embed_tokens.weight"]
    if tie:
        sd["decoder.output_projection.weight"] = sd["decoder.embed_tokens.weight"]
    return sd, model_args, src_vocab, tgt_vocab, cfg
