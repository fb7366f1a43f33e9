"""A small randomly initialised Hugging Face ``MarianMTModel`` directory, written in seconds.

Used by the tests (``tests/models/test_hf_import.py``), the import benchmark and
``scripts/make_hf_marian_test_model.py`` (the example of docs/usage.md). It needs
``transformers`` (a test dependency; importing an HF directory does not).

The directory is laid out like an OPUS-MT download: ``config.json``, ``model.safetensors`` (or
``pytorch_model.bin``), ``source.spm`` and ``target.spm`` (unigram sentencepiece models trained
here on the given text), ``vocab.json`` (``</s>`` 0, ``<unk>`` 1, then the pieces of both
models ordered by their frequency in the segmented text, as ``marian-vocab`` orders them, and
``<pad>`` last), ``tokenizer_config.json`` and ``generation_config.json``. The weights are random
with a spread that keeps decoding decisions far from ties, and the output bias of ``</s>`` is
raised so that greedy and beam search end after a few tokens.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Sequence

from triemine.models.hf_marian import import_transformers


def _train_spm(lines: Sequence[str], prefix: Path, vocab_size: int) -> Path:
    import sentencepiece as spm

    text = prefix.with_suffix(".train.txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix),
                                   vocab_size=vocab_size, model_type="unigram",
                                   character_coverage=1.0, num_threads=1, minloglevel=2)
    text.unlink()
    model = prefix.with_suffix(".model")
    prefix.with_suffix(".vocab").unlink()
    return model


def _marian_vocab(sps, texts) -> list[str]:
    """``</s> <unk>``, then every piece of the models, the most frequent in the segmented texts
    first."""
    counts: Counter = Counter()
    for sp, lines in zip(sps, texts):
        for pieces in sp.encode(list(lines), out_type=str):
            counts.update(pieces)
    pieces = {sp.id_to_piece(i) for sp in sps for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))}
    ordered = sorted(pieces, key=lambda p: (-counts[p], p))
    return ["</s>", "<unk>"] + ordered


def build_tiny_hf_marian(out_dir, source_lines: Sequence[str], target_lines: Sequence[str], *,
                         vocab_size: int = 300, d_model: int = 32, layers: int = 2, heads: int = 4,
                         ffn: int = 64, activation: str = "swish", scale_embedding: bool = True,
                         share_embeddings: bool = True, tie: bool = True,
                         safetensors: bool = True, eos_bias: float = 2.0, emb_std: float = 0.1,
                         max_positions: int = 256,
                         seed: int = 0) -> Path:
    """Write the model directory ``out_dir``; returns it. ``share_embeddings=False`` gives
    separate encoder/decoder embeddings; ``tie=False`` a separate ``lm_head``."""
    import sentencepiece as spm
    import torch

    transformers = import_transformers()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sps = []
    for name, lines in (("source", source_lines), ("target", target_lines)):
        model = _train_spm(lines, out / f"{name}-tmp", vocab_size)
        model.rename(out / f"{name}.spm")
        sps.append(spm.SentencePieceProcessor(model_file=str(out / f"{name}.spm")))
    vocab = _marian_vocab(sps, (source_lines, target_lines)) + ["<pad>"]
    pad = len(vocab) - 1
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)},
                                               ensure_ascii=False, indent=0), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "MarianTokenizer", "unk_token": "<unk>", "eos_token": "</s>",
        "pad_token": "<pad>", "model_max_length": max_positions, "separate_vocabs": False}))
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=d_model,
        encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=heads,
        decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        activation_function=activation, max_position_embeddings=max_positions,
        pad_token_id=pad, eos_token_id=0, forced_eos_token_id=0, decoder_start_token_id=pad,
        scale_embedding=scale_embedding, share_encoder_decoder_embeddings=share_embeddings,
        tie_word_embeddings=tie, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if name.endswith("layer_norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name or name.endswith("shared.weight") or "lm_head" in name:
                p.copy_(emb_std * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
        bias = 0.5 * torch.randn(model.final_logits_bias.shape, generator=gen)
        bias[0, 0] += eos_bias
        model.final_logits_bias.copy_(bias)
    model.save_pretrained(str(out), safe_serialization=safetensors)
    gen_cfg = out / "generation_config.json"
    cfg = json.loads(gen_cfg.read_text()) if gen_cfg.is_file() else {}
    cfg.update({"bad_words_ids": [[pad]], "num_beams": 4, "max_length": max_positions,
                "decoder_start_token_id": pad, "pad_token_id": pad, "eos_token_id": 0})
    gen_cfg.write_text(json.dumps(cfg, indent=1))
    return out
