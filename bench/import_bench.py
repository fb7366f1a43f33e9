"""Benchmark / verification of the OPUS-MT (CTranslate2) -> fairseq import.

Measures, on the shared zh->en OPUS-MT model:

* fidelity: the first N BUCC zh sample sentences (quick 6, full 200) decoded greedily and with
  beam 4 by the converted fairseq model and by CTranslate2 (compute_type float32 = same weights,
  and int8 = what the packaged model runs with, activations quantised too); token-for-token
  exact-match rates and forced-decoding |delta log-prob| per token of CTranslate2's beam output;
* Hugging Face Marian import: a small randomly initialised ``MarianMTModel`` (its own
  sentencepiece models trained on the shared de-en text; ``triemine.testing.tiny_hf_marian``) is
  imported and compared with ``transformers`` (float32) on de-en sentences (quick 12, full 100):
  ``hf_marian_exact_match_rate`` (greedy and beam-4 outputs identical, mean of the two) and
  ``hf_marian_score_max_abs_diff_per_token`` (forced decoding of transformers' beam output);
* conversion time and the fairseq decoding time.

Target segmentation has its own script, ``scripts/segmenter_eval.py``.

The last line of stdout is one JSON object. Usage::

    python bench/import_bench.py --quick
    python bench/import_bench.py            # full
"""
from __future__ import annotations

import os
import sys
import tempfile

import benchlib  # noqa: E402  (bench/ is on sys.path when run as a script)
from benchlib import machine  # noqa: E402
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _bucc_zh(n: int):
    from triemine.io.paths import BUCC_ZH_EN, shared_path
    texts = []
    with open(shared_path(*BUCC_ZH_EN, "zh-en.sample.zh"), encoding="utf-8") as f:
        for line in f:
            texts.append(line.rstrip("\n").split("\t", 1)[-1])
            if len(texts) >= n:
                break
    return texts


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="small slice, < 1 minute")
    ap.add_argument("--sentences", type=int, help="fidelity sentences (default 6 / 200)")
    ap.add_argument("--model-dir", help="imported model directory (default: the cache, "
                    "converted now if missing; quick mode then converts into a temporary "
                    "folder without recovering a target segmenter)")
    args = ap.parse_args(argv)
    run = benchlib.start("import_bench", args)

    import torch
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    from triemine.models.convert import import_ct2_model
    from triemine.models.fidelity import CT2Side, FairseqSide, compare_many, tokenize_sources
    from triemine.io.paths import OPUS_MT_ZH_EN_CT2, cache_root, shared_path

    n_fid = args.sentences or (6 if args.quick else 200)
    ct2_dir = shared_path(*OPUS_MT_ZH_EN_CT2)
    tmp = tempfile.TemporaryDirectory(prefix="import-bench-")
    result = {"bench": "import", "mode": "quick" if args.quick else "full",
              "machine": machine(),
              "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(),
              "model": str(ct2_dir)}

    # 1. conversion (timed)
    model_dir = (
        Path(args.model_dir) if args.model_dir else cache_root() / "models" / "opus-mt-zh-en"
    )
    if args.quick and not args.model_dir and not (model_dir / "checkpoint.pt").is_file():
        model_dir = Path(tmp.name) / "opus-mt-zh-en"
        with benchlib.timer() as t:
            import_ct2_model(ct2_dir, model_dir, "zh", "en", recover_target=False)
        result["convert_seconds"] = round(t.s, 2)
        cached = cache_root() / "models" / "opus-mt-zh-en" / "target.spm"
        if cached.is_file():
            (model_dir / "target.spm").write_bytes(cached.read_bytes())
    elif not (model_dir / "checkpoint.pt").is_file():
        with benchlib.timer() as t:
            import_ct2_model(ct2_dir, model_dir, "zh", "en")
        result["convert_seconds"] = round(t.s, 2)
    else:
        result["convert_seconds"] = None  # reused an existing import
    result["model_dir"] = str(model_dir)

    # 2. fidelity
    texts = _bucc_zh(n_fid)
    sources = tokenize_sources(model_dir / "source.spm", texts)
    fs = FairseqSide(model_dir)
    sides = {"float32": CT2Side(ct2_dir, "float32"), "int8": CT2Side(ct2_dir, "int8")}
    with benchlib.timer() as t:
        reports = compare_many(fs, sides, sources, beam_size=4, progress=True)
    result["fidelity_seconds"] = round(t.s, 2)
    result["sentences"] = n_fid
    f32, i8 = reports["float32"], reports["int8"]
    result["exact_match_rate"] = f32.exact_match_rate
    result["greedy_exact_float32"] = f32.greedy_exact
    result["beam4_exact_float32"] = f32.beam_exact
    result["score_max_abs_diff_per_token_float32"] = f32.score_max_abs_diff_per_token
    result["score_mean_abs_diff_per_token_float32"] = f32.score_mean_abs_diff_per_token
    result["score_within_0_01_float32"] = f32.score_within_0_01
    result["exact_match_rate_int8"] = i8.exact_match_rate
    result["greedy_exact_int8"] = i8.greedy_exact
    result["beam4_exact_int8"] = i8.beam_exact
    result["score_mean_abs_diff_per_token_int8"] = i8.score_mean_abs_diff_per_token
    result["score_within_0_01_int8"] = i8.score_within_0_01
    result["mismatch_examples_float32"] = f32.mismatches[:2]

    result["fairseq_seconds_per_sentence_greedy_plus_beam4"] = round(
        f32.fairseq_decode_seconds / n_fid, 3)
    # reference: how often CTranslate2 int8 agrees with CTranslate2 float32 (int8 quantises
    # activations, so this bounds what any float model can reach against int8)
    agree = 0
    for beam in (1, 4):
        a = sides["float32"].translate(sources, beam)
        b = sides["int8"].translate(sources, beam)
        agree += sum(x == y for x, y in zip(a, b))
    result["ct2_int8_vs_ct2_float32_exact"] = agree / (2 * n_fid)

    # 3. Hugging Face Marian import vs transformers
    from triemine.models.convert import import_model
    from triemine.models.fidelity import HFSide
    from triemine.testing.tiny_hf_marian import build_tiny_hf_marian
    from triemine.io.paths import PARALLEL_DE_EN

    def de_en(lang, start, n):
        with open(shared_path(*PARALLEL_DE_EN, f"train.{lang}"), encoding="utf-8") as f:
            lines = [ln.strip() for _, ln in zip(range(start + n), f)]
        return [ln for ln in lines[start:] if ln]

    with benchlib.timer() as t:
        hf_dir = build_tiny_hf_marian(Path(tmp.name) / "hf-marian", de_en("de", 0, 3000),
                                      de_en("en", 0, 3000))
        hf_out = import_model(hf_dir, Path(tmp.name) / "hf-marian-fairseq", "de", "en")
    result["hf_marian_build_and_import_seconds"] = round(t.s, 2)
    n_hf = 12 if args.quick else 100
    hf_sources = tokenize_sources(hf_dir / "source.spm", de_en("de", 5000, n_hf))
    hf_rep = compare_many(FairseqSide(hf_out), {"transformers": HFSide(hf_dir)}, hf_sources,
                          beam_size=4, progress=True, max_len=40)["transformers"]
    result["hf_marian_sentences"] = len(hf_sources)
    result.update({f"hf_marian_{k}": getattr(hf_rep, k) for k in (
        "exact_match_rate", "greedy_exact", "score_max_abs_diff_per_token",
        "score_mean_abs_diff_per_token")})
    result["hf_marian_beam4_exact"] = hf_rep.beam_exact
    result["hf_marian_mismatch_examples"] = hf_rep.mismatches[:2]
    tmp.cleanup()
    return run.finish(result)


if __name__ == "__main__":
    sys.exit(main())
