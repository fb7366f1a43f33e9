"""Importing Hugging Face Marian (OPUS-MT) directories, and CTranslate2 models of any pair.

A small randomly initialised ``MarianMTModel`` with its own sentencepiece models (trained here on
the shared de-en text in seconds) is imported; ``transformers`` (float32) and the imported fairseq
model must write identical greedy and beam outputs and agree on forced-decoding scores within
1e-4 per token. The same model converted to CTranslate2 without its ``target.spm`` is a same-script
pair whose true target model is known: recovery must need estimation text and must beat greedy
longest match against the true segmentation.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

from triemine.errors import InputError  # noqa: E402
from triemine.models.convert import detect_model_format, import_model  # noqa: E402
from triemine.models.fidelity import FairseqSide, HFSide, compare, tokenize_sources  # noqa: E402
from triemine.models.hf_marian import import_transformers  # noqa: E402
from triemine.testing.tiny_hf_marian import build_tiny_hf_marian  # noqa: E402
from triemine.io.paths import PARALLEL_DE_EN, shared_path  # noqa: E402

torch.set_num_threads(1)
CAP = 40  # output length cap of the comparisons


def _lines(lang: str, start: int, n: int) -> list[str]:
    with open(shared_path(*PARALLEL_DE_EN, f"train.{lang}"), encoding="utf-8") as f:
        lines = [ln.strip() for _, ln in zip(range(start + n), f)]
    return [ln for ln in lines[start:] if ln]


VARIANTS = {
    # the OPUS-MT layout: swish, scaled embeddings, one shared embedding = output matrix
    "opus_mt_layout": dict(),
    # separate encoder/decoder embeddings, separate lm_head, exact gelu, unscaled, .bin weights
    "untied_gelu_bin": dict(share_embeddings=False, tie=False, activation="gelu",
                            scale_embedding=False, safetensors=False, emb_std=0.15, eos_bias=2.5),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    de, en = _lines("de", 0, 3000), _lines("en", 0, 3000)
    out = {}
    for name, kw in VARIANTS.items():
        hf_dir = build_tiny_hf_marian(root / name, de, en, **kw)
        fs_dir = import_model(hf_dir, root / f"{name}-fairseq", "de", "en")
        out[name] = (hf_dir, fs_dir)
    return out


@pytest.fixture(scope="module")
def sources(models):
    hf_dir = models["opus_mt_layout"][0]
    return tokenize_sources(hf_dir / "source.spm", _lines("de", 5000, 24))


@pytest.mark.integration
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_forced_scores_agree_within_1e_4_per_token(models, sources, variant):
    hf_dir, fs_dir = models[variant]
    hf, fs = HFSide(hf_dir), FairseqSide(fs_dir)
    targets = hf.translate(sources, beam_size=4, max_len=CAP)
    targets += [s[::-1] for s in tokenize_sources(hf_dir / "target.spm", _lines("en", 5000, 8))]
    srcs = sources + sources[:8]
    for a, b, t in zip(fs.score(srcs, targets), hf.score(srcs, targets), targets):
        assert len(a) == len(b) == len(t) + 1  # + </s>
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)


@pytest.mark.integration
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_greedy_and_beam_outputs_are_identical(models, sources, variant):
    hf_dir, fs_dir = models[variant]
    report = compare(FairseqSide(fs_dir), HFSide(hf_dir), sources, beam_size=4,
                     compute_type="transformers", progress=False, max_len=CAP)
    assert report.greedy_exact == 1.0 and report.beam_exact == 1.0, report.mismatches
    assert report.score_max_abs_diff_per_token < 1e-4
    beams = HFSide(hf_dir).translate(sources, beam_size=4, max_len=CAP)
    assert all(len(b) > 0 for b in beams)
    assert sum(len(b) < CAP for b in beams) >= len(beams) // 2  # most really ended with </s>
    assert len({tuple(b) for b in beams}) > 3  # and they depend on the source


@pytest.mark.integration
def test_format_detection(models, tmp_path):
    hf_dir, fs_dir = models["opus_mt_layout"]
    assert detect_model_format(hf_dir) == "hf-marian"
    ct2 = tmp_path / "ct2"
    ct2.mkdir()
    (ct2 / "model.bin").write_bytes(b"\x06\x00\x00\x00")
    assert detect_model_format(ct2) == "ctranslate2"
    other = tmp_path / "bert"
    shutil.copytree(hf_dir, other)
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(dict(cfg, model_type="bert")))
    with pytest.raises(InputError, match="neither a CTranslate2 model .* nor a Hugging Face"):
        detect_model_format(other)
    with pytest.raises(InputError, match="not found"):
        detect_model_format(tmp_path / "nowhere")


@pytest.mark.integration
def test_output_directory_follows_the_convention(models):
    hf_dir, fs_dir = models["opus_mt_layout"]
    from triemine.models.model_dir import load_model_dir
    md = load_model_dir(fs_dir)
    meta = md.meta
    assert meta["input_format"] == "hf-marian" and meta["target_spm"] == "given"
    assert (meta["source_lang"], meta["target_lang"]) == ("de", "en")
    assert (fs_dir / "target.spm").read_bytes() == (hf_dir / "target.spm").read_bytes()
    assert (fs_dir / "source.spm").read_bytes() == (hf_dir / "source.spm").read_bytes()
    vocab = json.loads((hf_dir / "vocab.json").read_text())
    d = md.tgt_dict
    assert [d[i] for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert len(d) == len(vocab) + 1  # fairseq's <s> is the only row Marian does not have
    args = meta["model_args"]
    # Marian's decoder starts from the pad token, which sits in fairseq's <pad> slot
    assert args["decoder_start_token_id"] == d.pad() and args["start_from_zero_embedding"] == 0
    assert args["encoder_embed_scale"] == pytest.approx(32 ** 0.5)
    dec = md.model.decoder
    from safetensors.torch import load_file
    state = load_file(str(hf_dir / "model.safetensors"))
    bias = state["final_logits_bias"].reshape(-1)
    emb = state["model.shared.weight"]
    for piece in ("</s>", "<unk>", "<pad>", "▁die"):
        i, j = vocab[piece], d.index(piece if piece != "<pad>" else "<pad>")
        if piece == "</s>":
            j = d.eos()
        torch.testing.assert_close(dec.embed_tokens.weight[j], emb[i], rtol=0, atol=0)
        assert float(dec.output_projection.bias[j]) == float(bias[i])
    assert float(dec.output_projection.bias[d.bos()]) < -1e8  # never produced, not normalised
    assert dec.output_projection.weight.data_ptr() == dec.embed_tokens.weight.data_ptr()
    assert md.encode_source("Ein Hund läuft.")[-1] == md.src_dict.eos()


@pytest.mark.integration
def test_cli_imports_a_hugging_face_directory(models, tmp_path, capsys):
    from triemine.cli import import_main
    hf_dir, _ = models["opus_mt_layout"]
    out = tmp_path / "cli"
    assert import_main([str(hf_dir), "-o", str(out), "-s", "de", "-t", "en"]) == 0
    assert json.loads((out / "triemine-model.json").read_text())["input_format"] == "hf-marian"
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        import_main([str(hf_dir), "-o", str(tmp_path / "x"), "--estimation-text",
                     str(hf_dir / "vocab.json")])
    assert exc.value.code == 2 and "CTranslate2 models only" in capsys.readouterr().err


def _broken(hf_dir: Path, tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    shutil.copytree(hf_dir, d)
    return d


@pytest.mark.integration
def test_bad_hugging_face_directories_are_input_errors(models, tmp_path, capsys):
    hf_dir, _ = models["opus_mt_layout"]
    d = _broken(hf_dir, tmp_path, "novocab")
    (d / "vocab.json").unlink()
    with pytest.raises(InputError, match="missing vocab.json"):
        import_model(d, tmp_path / "o")
    d = _broken(hf_dir, tmp_path, "ids")
    vocab = json.loads((d / "vocab.json").read_text())
    vocab["▁die"] = 10 ** 6
    (d / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(InputError, match="ids must be 0"):
        import_model(d, tmp_path / "o")
    d = _broken(hf_dir, tmp_path, "act")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, activation_function="mish")))
    with pytest.raises(InputError, match="unsupported activation_function 'mish'"):
        import_model(d, tmp_path / "o")
    d = _broken(hf_dir, tmp_path, "extra")
    from safetensors.torch import load_file, save_file
    state = load_file(str(d / "model.safetensors"))
    state["model.encoder.layernorm_embedding.weight"] = torch.ones(32)
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(InputError, match="does not know .*layernorm_embedding"):
        import_model(d, tmp_path / "o")
    d = _broken(hf_dir, tmp_path, "junk")
    (d / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(InputError, match="cannot read the weights"):
        import_model(d, tmp_path / "o")
    d = _broken(hf_dir, tmp_path, "small")
    state.pop("model.encoder.layernorm_embedding.weight")
    state["model.shared.weight"] = state["model.shared.weight"][:-3]
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(InputError, match="embeddings have shape"):
        import_model(d, tmp_path / "o")
    from triemine.cli import import_main
    capsys.readouterr()
    assert import_main([str(d), "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "trie-mine-import: error:" in err and "embeddings have shape" in err


# --------------------------------------------------- CTranslate2 import of a same-script pair


@pytest.fixture(scope="module")
def ct2_same_script(models, tmp_path_factory):
    """The OPUS-MT-layout model converted to CTranslate2 (float32) with its source.spm only."""
    import_transformers()
    import ctranslate2
    hf_dir, _ = models["opus_mt_layout"]
    out = tmp_path_factory.mktemp("ct2") / "de-en"
    ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(out),
                                                                      quantization="float32")
    shutil.copyfile(hf_dir / "source.spm", out / "source.spm")
    return out


@pytest.mark.cluster
def test_recovery_needs_estimation_text_for_other_models(ct2_same_script, tmp_path):
    with pytest.raises(InputError, match="--estimation-text"):
        import_model(ct2_same_script, tmp_path / "o", "de", "en")
    assert not (tmp_path / "o").exists()  # refused before writing anything
    from triemine.models.segmentation import recover_target_spm
    with pytest.raises(InputError, match="needs estimation text"):
        recover_target_spm(ct2_same_script, tmp_path / "t.spm")
    # as a user runs it: exit status 2 and the request, no traceback
    proc = subprocess.run([sys.executable, "-c", "from triemine.cli import import_main; "
                           "raise SystemExit(import_main())", str(ct2_same_script), "-o",
                           str(tmp_path / "x"), "-s", "de", "-t", "en"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--estimation-text FILE" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.integration
def test_a_shipped_target_spm_is_used_without_recovery(models, ct2_same_script, tmp_path):
    hf_dir, _ = models["opus_mt_layout"]
    ct2 = tmp_path / "with-target"
    shutil.copytree(ct2_same_script, ct2)
    shutil.copyfile(hf_dir / "target.spm", ct2 / "target.spm")
    out = import_model(ct2, tmp_path / "o", "de", "en")  # no estimation text needed
    meta = json.loads((out / "triemine-model.json").read_text())
    assert meta["target_spm"] == "given" and meta["input_format"] == "ctranslate2"
    assert (out / "target.spm").read_bytes() == (hf_dir / "target.spm").read_bytes()
    assert not (out / "target.spm.json").exists()  # no recovery report: nothing was recovered


@pytest.mark.integration
def test_recovery_on_a_same_script_pair(models, ct2_same_script, tmp_path):
    """The true target model is known here. Recovery must find which pieces are target pieces
    and reproduce more of the true pieces than greedy longest match; at the sentence level it
    does not beat longest match on this pair (docs/segmenter.md: a random model's outputs carry
    no target-side counts, and ranks alone cannot split the counts of pieces both sides use)."""
    import sentencepiece as spm

    from triemine.cli import import_main
    from triemine.models.segmentation import load_model_proto
    hf_dir, _ = models["opus_mt_layout"]
    est = tmp_path / "est.de"
    est.write_text("\n".join(_lines("de", 3000, 300)) + "\n", encoding="utf-8")
    out = tmp_path / "rec"
    assert import_main([str(ct2_same_script), "-o", str(out), "-s", "de", "-t", "en",
                        "--estimation-text", str(est)]) == 0
    meta = json.loads((out / "triemine-model.json").read_text())
    report = json.loads((out / "target.spm.json").read_text())
    assert meta["target_spm"] == "recovered" and report["estimation_sentences"] == 300
    true_pieces = {p.piece for p in load_model_proto(hf_dir / "target.spm").pieces
                   if p.type == p.NORMAL}
    ours_pieces = {p.piece for p in load_model_proto(out / "target.spm").pieces
                   if p.type == p.NORMAL}
    assert len(true_pieces & ours_pieces) >= 0.95 * len(true_pieces)  # measured 298 of 300
    assert len(ours_pieces - true_pieces) <= 0.2 * len(true_pieces)   # measured 37
    true = spm.SentencePieceProcessor(model_file=str(hf_dir / "target.spm"))
    rec = spm.SentencePieceProcessor(model_file=str(out / "target.spm"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from segmenter_eval import LongestMatch, compare_segmentations
    held_out = _lines("en", 6000, 300)
    gold = true.encode(held_out, out_type=str)
    lm = LongestMatch(json.loads((hf_dir / "vocab.json").read_text()))
    ours = compare_segmentations(gold, rec.encode(held_out, out_type=str))
    base = compare_segmentations(gold, [lm.encode(t) for t in held_out])
    # measured: pieces 0.927 vs 0.912; sentences 0.30 vs 0.41
    assert ours[1] > base[1]


@pytest.mark.integration
def test_an_import_is_all_or_nothing(models, tmp_path, monkeypatch):
    """The model directory appears whole or not at all; re-importing replaces it whole with the
    same checkpoint bytes; a directory that is not a model directory is never replaced."""
    import triemine.models.convert as convert

    hf_dir, fs_dir = models["opus_mt_layout"]
    out = tmp_path / "m"

    def broken_copy(src, dst, *a, **k):  # the import dies after the checkpoint was written
        raise KeyboardInterrupt

    monkeypatch.setattr(convert.shutil, "copyfile", broken_copy)
    with pytest.raises(KeyboardInterrupt):
        import_model(hf_dir, out, "de", "en")
    monkeypatch.undo()
    assert not out.exists() and os.listdir(tmp_path) == []  # no half directory, no stage left

    import_model(hf_dir, out, "de", "en")
    first = (out / "checkpoint.pt").read_bytes()
    (out / "stale.txt").write_text("from an older import")
    import_model(hf_dir, out, "de", "en")
    assert sorted(os.listdir(out)) == sorted(os.listdir(fs_dir))
    assert (out / "checkpoint.pt").read_bytes() == first  # the stage's name is not in the bytes
    assert sorted(os.listdir(tmp_path)) == ["m"]

    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="not a trie-mine model directory"):
        import_model(hf_dir, mine, "de", "en")
    assert os.listdir(mine) == ["keep.txt"]
