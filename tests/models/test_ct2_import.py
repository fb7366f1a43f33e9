"""Tests of the CTranslate2 -> fairseq import (triemine.models: ct2_reader, ct2_mapping, vocab,
writer, convert, marian).

Small CTranslate2 transformers are built here with CTranslate2's own spec API (random weights,
int8 or float32), converted, and the fairseq model must reproduce CTranslate2 (float32 compute):
forced-decoding log-probabilities per token, greedy and beam outputs. A slice of the shared
OPUS-MT model is checked the same way. Bad inputs must raise InputError naming the problem.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

import torch  # noqa: E402
from ctranslate2.specs import common_spec, transformer_spec  # noqa: E402

from triemine.errors import InputError  # noqa: E402
from triemine.models.model_dir import load_model_dir  # noqa: E402
from triemine.models.convert import import_ct2_model  # noqa: E402
from triemine.models.ct2_reader import read_ct2_model  # noqa: E402
from triemine.models.fidelity import CT2Side, FairseqSide, compare, tokenize_sources  # noqa: E402
from triemine.io.paths import BUCC_ZH_EN, OPUS_MT_ZH_EN_CT2, shared_path  # noqa: E402

torch.set_num_threads(1)
D, HEADS, FFN, POS = 32, 4, 64, 128


def make_ct2_model(out: Path, *, pre_norm=False, activation=common_spec.Activation.SWISH,
                   zero_start=True, positions=True, shared=True, quantization="int8",
                   layers=(2, 2), n_pieces=40, eos_ramp_from=None, seed=0, heads=HEADS):
    """Write a random CTranslate2 TransformerSpec model; returns (source vocab, target vocab).

    ``eos_ramp_from``: add a large component along the </s> embedding to the decoder position
    rows from that position on (pre-norm models then end their outputs there), so that beam
    search finishes instead of repeating a token until the length limit.
    """
    rng = np.random.default_rng(seed)
    spec = transformer_spec.TransformerSpec.from_config(layers, heads, pre_norm=pre_norm,
                                                        activation=activation)

    def linear(s, o, i):
        s.weight = (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)
        s.bias = (0.1 * rng.standard_normal(o)).astype(np.float32)

    def norm(s):
        s.gamma = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
        s.beta = (0.1 * rng.standard_normal(D)).astype(np.float32)

    tgt_vocab = ["</s>", "<unk>"] + ([] if zero_start else ["<s>"]) + \
        [f"\u2581t{i}" for i in range(n_pieces)]
    src_vocab = tgt_vocab if shared else ["<unk>", "</s>"] + [f"s{i}" for i in range(n_pieces + 7)]
    emb_t = (0.3 * rng.standard_normal((len(tgt_vocab), D))).astype(np.float32)
    emb_s = emb_t if shared else (0.3 * rng.standard_normal((len(src_vocab), D))).astype(np.float32)
    spec.encoder.embeddings[0].weight = emb_s
    spec.decoder.embeddings.weight = emb_t
    pos = (0.3 * rng.standard_normal((POS, D))).astype(np.float32)
    dpos = pos.copy()
    if eos_ramp_from is not None:
        dpos[eos_ramp_from:] += 30 * emb_t[0] / np.linalg.norm(emb_t[0])
    if positions:
        spec.encoder.position_encodings.encodings = pos
        spec.decoder.position_encodings.encodings = dpos
    for side in (spec.encoder, spec.decoder):
        if pre_norm:
            norm(side.layer_norm)
        for layer in side.layer:
            linear(layer.self_attention.linear[0], 3 * D, D)
            linear(layer.self_attention.linear[1], D, D)
            norm(layer.self_attention.layer_norm)
            if hasattr(layer, "attention"):
                linear(layer.attention.linear[0], D, D)
                linear(layer.attention.linear[1], 2 * D, D)
                linear(layer.attention.linear[2], D, D)
                norm(layer.attention.layer_norm)
            linear(layer.ffn.linear_0, FFN, D)
            linear(layer.ffn.linear_1, D, FFN)
            norm(layer.ffn.layer_norm)
    spec.decoder.projection.weight = emb_t if shared else \
        (0.3 * rng.standard_normal((len(tgt_vocab), D))).astype(np.float32)
    bias = (0.5 * rng.standard_normal(len(tgt_vocab))).astype(np.float32)
    spec.decoder.projection.bias = bias
    spec.decoder.start_from_zero_embedding = zero_start
    spec.register_source_vocabulary(src_vocab)
    spec.register_target_vocabulary(tgt_vocab)
    spec.config.add_source_eos = True
    spec.config.decoder_start_token = "</s>" if zero_start else "<s>"
    spec.validate()
    spec.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    return src_vocab, tgt_vocab


def random_sentences(vocab, n, rng, lo=1, hi=12):
    real = [t for t in vocab if t not in ("</s>", "<unk>", "<s>")]
    return [[real[i] for i in rng.integers(0, len(real), rng.integers(lo, hi))] for _ in range(n)]


VARIANTS = {
    # the shared OPUS-MT layout: post-norm, swish, zero start, stored positions, tied, int8
    "marian_post_norm_int8": dict(),
    # pre-norm with final norms, relu, <s> start token, generated sinusoids, untied, float32
    "pre_norm_float32_untied": dict(pre_norm=True, activation=common_spec.Activation.RELU,
                                    zero_start=False, positions=False, shared=False,
                                    quantization="float32"),
    "pre_norm_gelu_int8_ramp": dict(pre_norm=True, activation=common_spec.Activation.GELU,
                                    eos_ramp_from=6),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("ct2")
    out = {}
    for name, kw in VARIANTS.items():
        ct2_dir = root / name
        src_vocab, tgt_vocab = make_ct2_model(ct2_dir, **kw)
        fs_dir = import_ct2_model(ct2_dir, root / (name + "-fairseq"), "xx", "yy",
                                  recover_target=False)
        out[name] = (ct2_dir, fs_dir, src_vocab, tgt_vocab)
    return out


@pytest.mark.integration
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_forced_scores_match_ctranslate2(converted, variant):
    ct2_dir, fs_dir, src_vocab, tgt_vocab = converted[variant]
    rng = np.random.default_rng(7)
    sources = random_sentences(src_vocab, 12, rng)
    targets = random_sentences(tgt_vocab, 12, rng, 1, 15)
    fs, ct = FairseqSide(fs_dir), CT2Side(ct2_dir, "float32")
    a, b = fs.score(sources, targets), ct.score(sources, targets)
    for x, y, t in zip(a, b, targets):
        assert len(x) == len(y) == len(t) + 1  # + </s>
        np.testing.assert_allclose(x, y, atol=1e-3)


@pytest.mark.integration
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_greedy_prefix_matches_ctranslate2(converted, variant):
    """Greedy search capped at 20 tokens: identical tokens (random models rarely stop)."""
    ct2_dir, fs_dir, src_vocab, _ = converted[variant]
    sources = random_sentences(src_vocab, 10, np.random.default_rng(3))
    fs, ct = FairseqSide(fs_dir), CT2Side(ct2_dir, "float32")
    ours = fs.translate(sources, beam_size=1, max_len_b=20)
    theirs = ct.translate(sources, beam_size=1, max_len=20)
    assert ours == theirs
    assert len({tuple(o) for o in ours}) > 1  # outputs depend on the source


@pytest.mark.integration
def test_beam_and_report_match_on_terminating_model(converted):
    ct2_dir, fs_dir, src_vocab, _ = converted["pre_norm_gelu_int8_ramp"]
    sources = random_sentences(src_vocab, 12, np.random.default_rng(5))
    report = compare(FairseqSide(fs_dir), CT2Side(ct2_dir, "float32"), sources, beam_size=4,
                     progress=False)
    assert report.greedy_exact == 1.0 and report.beam_exact == 1.0, report.mismatches
    assert report.score_max_abs_diff_per_token < 1e-3
    beams = CT2Side(ct2_dir, "float32").translate(sources, beam_size=4)
    assert all(0 < len(b) < 20 for b in beams)  # they really finished with </s>


@pytest.mark.integration
def test_output_directory_layout(converted):
    ct2_dir, fs_dir, _, tgt_vocab = converted["marian_post_norm_int8"]
    names = {p.name for p in fs_dir.iterdir()}
    assert {"checkpoint.pt", "dict.xx.txt", "dict.yy.txt", "triemine-model.json"} <= names
    meta = json.loads((fs_dir / "triemine-model.json").read_text())
    assert meta["format"] == 1 and meta["arch"] == "marian_transformer"
    assert meta["spec"] == "TransformerSpec" and meta["revision"] == 7
    assert (meta["source_lang"], meta["target_lang"]) == ("xx", "yy")
    assert meta["target_spm"] is None
    assert not (fs_dir / "source.spm").exists()  # the CTranslate2 directory had none
    with pytest.raises(InputError, match="missing model file"):
        load_model_dir(fs_dir)  # mining needs the source segmenter: refused up front
    loaded = load_model_dir(fs_dir, require_source_spm=False)
    with pytest.raises(InputError, match="no source.spm"):
        loaded.source_spm
    model, task = loaded.model, loaded.task
    d = task.target_dictionary
    assert [d[i] for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    # the rest keeps the CTranslate2 order
    assert [d[i] for i in range(4, len(d))] == tgt_vocab[2:]
    assert len(d) == len(tgt_vocab) + 2
    # tied model: projection shares the embedding; fairseq-only rows can never be produced
    dec = model.decoder
    assert dec.output_projection.weight.data_ptr() == dec.embed_tokens.weight.data_ptr()
    assert dec.output_projection.bias[d.bos()] < -1e8 and dec.output_projection.bias[d.pad()] < -1e8
    raw = read_ct2_model(ct2_dir)
    w = raw.get("decoder/embeddings/weight")
    np.testing.assert_allclose(dec.embed_tokens.weight[d.index("\u2581t5")].detach().numpy(),
                               w[tgt_vocab.index("\u2581t5")], rtol=0, atol=0)


@pytest.mark.integration
def test_reader_dequantizes_like_ctranslate2(tmp_path):
    make_ct2_model(tmp_path / "m", quantization="int8")
    m = read_ct2_model(tmp_path / "m")
    raw = m.raw("encoder/layer_0/ffn/linear_0/weight")
    scale = m.raw("encoder/layer_0/ffn/linear_0/weight_scale")
    assert raw.dtype == np.int8 and scale.shape == (raw.shape[0],)
    np.testing.assert_allclose(m.get("encoder/layer_0/ffn/linear_0/weight"),
                               raw.astype(np.float32) / scale[:, None])
    # aliases: the tied projection resolves to the decoder embeddings, with their scale
    assert m.resolve("decoder/projection/weight") == m.resolve("decoder/embeddings/weight")


@pytest.mark.integration
def test_registration_is_idempotent():
    import importlib

    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    import triemine.models.marian as marian
    cls = MODEL_REGISTRY["marian_transformer"]
    importlib.reload(marian)
    import triemine.plugin.triemine_fairseq  # noqa: F401
    assert MODEL_REGISTRY["marian_transformer"] is cls
    assert "marian_transformer" in ARCH_MODEL_REGISTRY


# ---------------------------------------------------------------------------------- bad input


def _rewrite_header(src: Path, dst: Path, *, spec=None, revision=None, version=None):
    data = (src / "model.bin").read_bytes()
    ver = struct.unpack("<I", data[:4])[0]
    n = struct.unpack("<H", data[4:6])[0]
    name = data[6:6 + n - 1].decode()
    rev_at = 6 + n
    rev = struct.unpack("<I", data[rev_at:rev_at + 4])[0]
    rest = data[rev_at + 4:]
    name = spec if spec is not None else name
    head = struct.pack("<I", version if version is not None else ver)
    head += struct.pack("<H", len(name) + 1) + name.encode() + b"\0"
    head += struct.pack("<I", revision if revision is not None else rev)
    shutil.copytree(src, dst)
    (dst / "model.bin").write_bytes(head + rest)
    return dst


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad") / "ok"
    make_ct2_model(d, layers=(1, 1), n_pieces=8)
    return d


def _write_model_bin(path: Path, spec: str, revision: int, variables: dict, aliases: dict):
    """Serialise like CTranslate2's ModelSpec._serialize (binary version 6)."""
    type_ids = {np.dtype(n): i for i, n in enumerate(
        ("float32", "int8", "int16", "int32", "float16"))}

    def string(f, text):
        raw = text.encode()
        f.write(struct.pack("<H", len(raw) + 1) + raw + b"\0")

    with open(path, "wb") as f:
        f.write(struct.pack("<I", 6))
        string(f, spec)
        f.write(struct.pack("<I", revision))
        f.write(struct.pack("<I", len(variables)))
        for name, value in sorted(variables.items()):
            value = np.array(value, order="C")  # (ascontiguousarray would make scalars 1-d)
            string(f, name)
            f.write(struct.pack("<B", value.ndim))
            for dim in value.shape:
                f.write(struct.pack("<I", dim))
            f.write(struct.pack("<B", type_ids[value.dtype]))
            f.write(struct.pack("<I", value.nbytes))
            f.write(value.tobytes())
        f.write(struct.pack("<I", len(aliases)))
        for alias, target in sorted(aliases.items()):
            string(f, alias)
            string(f, target)


@pytest.mark.integration
@pytest.mark.parametrize("revision,spec_name", [(4, "TransformerSpec"), (2, "TransformerBig")])
def test_older_spec_revisions_convert_like_ctranslate2_reads_them(tmp_path, revision, spec_name):
    """Revisions < 5 kept num_heads/pre_norm/activation/... global; revisions < 3 had no
    num_heads at all (TransformerBig: 16). CTranslate2 itself must read the rewritten file the
    same way, and so must the converter."""
    from triemine.models.ct2_reader import read_model_bin
    heads = 16 if revision < 3 else HEADS
    new_dir = tmp_path / "new"
    src_vocab, tgt_vocab = make_ct2_model(new_dir, layers=(1, 1), heads=heads, seed=3)
    _, _, _, variables, aliases = read_model_bin(new_dir / "model.bin")
    variables = dict(variables)
    for flag in ("num_heads", "pre_norm", "activation", "embeddings_merge", "alignment_layer",
                 "alignment_heads"):
        values = [variables.pop(f"{scope}/{flag}") for scope in ("encoder", "decoder")
                  if f"{scope}/{flag}" in variables]
        if flag == "num_heads":
            if revision < 3:
                continue  # implied by the spec name
            values = [np.asarray(heads, dtype=np.int8)]
        variables[flag] = values[0]
    old_dir = tmp_path / "old"
    shutil.copytree(new_dir, old_dir)
    _write_model_bin(old_dir / "model.bin", spec_name, revision, variables, aliases)
    assert read_ct2_model(old_dir).revision == revision
    out_new = import_ct2_model(new_dir, tmp_path / "fs-new", "xx", "yy", recover_target=False)
    out_old = import_ct2_model(old_dir, tmp_path / "fs-old", "xx", "yy", recover_target=False)
    a = json.loads((out_new / "triemine-model.json").read_text())["model_args"]
    b = json.loads((out_old / "triemine-model.json").read_text())["model_args"]
    assert a == b and b["encoder_attention_heads"] == heads
    rng = np.random.default_rng(11)
    sources = random_sentences(src_vocab, 6, rng)
    targets = random_sentences(tgt_vocab, 6, rng, 1, 10)
    ours = FairseqSide(out_old).score(sources, targets)
    theirs = CT2Side(old_dir, "float32").score(sources, targets)
    for x, y in zip(ours, theirs):
        np.testing.assert_allclose(x, y, atol=1e-3)


@pytest.mark.integration
def test_revision_one_is_an_input_error(small_model, tmp_path):
    bad = _rewrite_header(small_model, tmp_path / "rev1", revision=1)
    with pytest.raises(InputError, match="revision 1 .* not supported"):
        import_ct2_model(bad, tmp_path / "out", recover_target=False)


@pytest.mark.integration
def test_unknown_revision_is_an_input_error(small_model, tmp_path):
    bad = _rewrite_header(small_model, tmp_path / "rev", revision=99)
    with pytest.raises(InputError, match="unknown TransformerSpec revision 99"):
        import_ct2_model(bad, tmp_path / "out", recover_target=False)


@pytest.mark.integration
def test_not_a_transformer_is_an_input_error(small_model, tmp_path):
    bad = _rewrite_header(small_model, tmp_path / "whisper", spec="WhisperSpec")
    with pytest.raises(InputError, match="'WhisperSpec' is not an encoder-decoder transformer"):
        import_ct2_model(bad, tmp_path / "out", recover_target=False)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "model.bin").write_bytes(b"PK\x03\x04 this is a zip file, not a model")
    (junk / "shared_vocabulary.json").write_text("[]")
    with pytest.raises(InputError, match="unknown CTranslate2 binary version"):
        import_ct2_model(junk, tmp_path / "out", recover_target=False)


@pytest.mark.integration
def test_truncated_model_bin_is_an_input_error(small_model, tmp_path):
    bad = tmp_path / "trunc"
    shutil.copytree(small_model, bad)
    data = (bad / "model.bin").read_bytes()
    (bad / "model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated model file"):
        read_ct2_model(bad)


@pytest.mark.integration
def test_missing_files_are_input_errors(small_model, tmp_path):
    with pytest.raises(InputError, match="directory not found"):
        import_ct2_model(tmp_path / "nowhere", tmp_path / "out")
    no_bin = tmp_path / "nobin"
    shutil.copytree(small_model, no_bin)
    (no_bin / "model.bin").unlink()
    with pytest.raises(InputError, match="missing CTranslate2 model file model.bin"):
        import_ct2_model(no_bin, tmp_path / "out")
    no_vocab = tmp_path / "novocab"
    shutil.copytree(small_model, no_vocab)
    (no_vocab / "shared_vocabulary.json").unlink()
    with pytest.raises(InputError, match="missing vocabulary"):
        import_ct2_model(no_vocab, tmp_path / "out")
    with pytest.raises(InputError, match="target sentencepiece model not found"):
        import_ct2_model(small_model, tmp_path / "out", target_spm=tmp_path / "none.spm")


@pytest.mark.integration
def test_vocabulary_too_large_for_uint16_trie_keys(tmp_path):
    d = tmp_path / "big"
    make_ct2_model(d, layers=(1, 1), n_pieces=65534, quantization="float32")
    with pytest.raises(InputError, match="more than the 65535 that uint16 trie keys allow"):
        import_ct2_model(d, tmp_path / "out", recover_target=False)


@pytest.mark.integration
def test_vocabulary_size_mismatch_is_an_input_error(small_model, tmp_path):
    bad = tmp_path / "mismatch"
    shutil.copytree(small_model, bad)
    vocab = json.loads((bad / "shared_vocabulary.json").read_text())
    (bad / "shared_vocabulary.json").write_text(json.dumps(vocab + ["extra"]))
    with pytest.raises(InputError, match="embeddings have .* rows but the .* vocabulary has"):
        import_ct2_model(bad, tmp_path / "out", recover_target=False)


@pytest.mark.cluster
def test_cli_reports_errors_without_traceback(small_model, tmp_path):
    bad = _rewrite_header(small_model, tmp_path / "rev", revision=42)
    proc = subprocess.run([sys.executable, "-c", "from triemine.cli import import_main; "
                           "raise SystemExit(import_main())", str(bad), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "trie-mine-import: error:" in proc.stderr
    assert "revision 42" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.integration
def test_cli_converts(small_model, tmp_path):
    from triemine.cli import import_main
    out = tmp_path / "cli-out"
    assert import_main([str(small_model), "-o", str(out), "-s", "ab", "-t", "cd",
                        "--no-recover-target"]) == 0
    assert (out / "checkpoint.pt").is_file() and (out / "dict.ab.txt").is_file()
    assert (out / "dict.cd.txt").is_file()


# ------------------------------------------------------------------------- the shared model


@pytest.fixture(scope="module")
def shared_import(tmp_path_factory):  # the tests using it are marked shared_model
    ct2_dir = shared_path(*OPUS_MT_ZH_EN_CT2)
    out = tmp_path_factory.mktemp("opus") / "opus-mt-zh-en"
    # source.spm stands in for a user's target model: the vocabulary is shared by both sides
    import_ct2_model(ct2_dir, out, "zh", "en", target_spm=ct2_dir / "source.spm",
                     recover_target=False)
    return ct2_dir, out


@pytest.mark.integration
@pytest.mark.shared_model
def test_shared_opus_mt_slice_matches_ctranslate2(shared_import):
    ct2_dir, out = shared_import
    texts = []
    with open(shared_path(*BUCC_ZH_EN, "zh-en.sample.zh"), encoding="utf-8") as f:
        for line in f:
            texts.append(line.rstrip("\n").split("\t", 1)[1])
            if len(texts) == 6:
                break
    sources = tokenize_sources(out / "source.spm", texts)
    report = compare(FairseqSide(out), CT2Side(ct2_dir, "float32"), sources, beam_size=4,
                     batch_size=6, progress=False)
    assert report.greedy_exact == 1.0 and report.beam_exact == 1.0, report.mismatches
    assert report.score_max_abs_diff_per_token < 0.01
    meta = json.loads((out / "triemine-model.json").read_text())
    assert meta["model_args"]["activation"] == "swish" and meta["model_args"]["pre_norm"] == 0
    assert meta["model_args"]["start_from_zero_embedding"] == 1
    assert (out / "source.spm").read_bytes() == (ct2_dir / "source.spm").read_bytes()
    assert meta["target_spm"] == "given" and (out / "target.spm").is_file()
    assert meta["target_spm_pieces_in_vocab"] > 0.9
    # the decoding side's loader accepts the directory as written (shared convention)
    from triemine.models.model_dir import load_model_dir
    md = load_model_dir(out)
    assert md.tgt_dict.eos() == 2 and len(md.tgt_dict) == 65002
    assert md.target_spm_path == out / "target.spm"


@pytest.mark.integration
def test_foreign_or_broken_target_spm_is_rejected(small_model, tmp_path):
    ct2_dir = shared_path(*OPUS_MT_ZH_EN_CT2)
    with pytest.raises(InputError, match="does not belong to this model"):
        import_ct2_model(small_model, tmp_path / "o1", target_spm=ct2_dir / "source.spm")
    junk = tmp_path / "junk.spm"
    junk.write_bytes(b"not a protobuf at all")
    with pytest.raises(InputError, match="not a sentencepiece model"):
        import_ct2_model(small_model, tmp_path / "o2", target_spm=junk)
