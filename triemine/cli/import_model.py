"""The ``trie-mine-import`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Optional, Sequence

from triemine.cli.arguments import run_command
from triemine.io import (BUCC_ZH_EN, cache_root, check_distinct, OPUS_MT_ZH_EN_CT2, sentences,
                         shared_path)


def import_main(argv: Optional[Sequence[str]] = None) -> int:
    """Convert a CTranslate2 transformer or a Hugging Face MarianMTModel directory (OPUS-MT)
    into a trie-mine / fairseq model directory; the format is detected."""
    return run_command(_import, _import_parser(), argv)


def _import_parser() -> argparse.ArgumentParser:
    """trie-mine-import's arguments."""
    parser = argparse.ArgumentParser(
        prog="trie-mine-import", description=import_main.__doc__,
        epilog="Writes OUT/checkpoint.pt, OUT/dict.SRC.txt, OUT/dict.TGT.txt, OUT/source.spm, "
               "OUT/target.spm (the model's own, or recovered for a CTranslate2 model that has "
               "none) and OUT/triemine-model.json. Default OUT for the shared OPUS-MT model: "
               "$TRIEMINE_CACHE/models/opus-mt-zh-en.")
    parser.add_argument("model_dir", metavar="MODEL_DIR", nargs="?",
                        help="CTranslate2 model directory or Hugging Face MarianMTModel directory "
                             "(default: the shared OPUS-MT zh-en CTranslate2 model)")
    parser.add_argument("-o", "--output", metavar="OUT", help="output model directory")
    parser.add_argument("-s", "--source-lang", default="zh")
    parser.add_argument("-t", "--target-lang", default="en")
    parser.add_argument("--target-spm", metavar="PATH",
                        help="the model's real target sentencepiece model, copied to OUT")
    parser.add_argument("--estimation-text", metavar="FILE",
                        help="source-language sentences (plain text or id<TAB>text) whose "
                             "translations drive the recovery of a missing target sentencepiece "
                             "model (CTranslate2 only; required unless the model ships one or is "
                             "the shared zh-en model)")
    parser.add_argument("--estimation-lines", type=int, default=2500, metavar="N",
                        help="use the first N non-empty lines of --estimation-text (2500)")
    parser.add_argument("--no-recover-target", action="store_true",
                        help="without a target sentencepiece model, do not recover one")
    parser.add_argument("--check", type=int, default=0, metavar="N",
                        help="afterwards compare N BUCC zh sample sentences with CTranslate2")
    return parser


def _import(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-import's work on its parsed arguments."""
    from triemine.models.convert import detect_model_format, import_model  # heavy: fairseq

    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("triemine").setLevel(logging.INFO)  # our progress notes, not fairseq's
    if args.estimation_lines < 1:
        parser.error("--estimation-lines must be >= 1")
    model_dir = Path(args.model_dir) if args.model_dir else shared_path(*OPUS_MT_ZH_EN_CT2)
    out = Path(args.output) if args.output else cache_root() / "models" / "opus-mt-zh-en"
    check_distinct([("-o", out, "folder")],  # replaced whole (a staged directory)
                   [("MODEL_DIR", model_dir), ("--target-spm", args.target_spm),
                    ("--estimation-text", args.estimation_text)])
    fmt = detect_model_format(model_dir)
    if fmt != "ctranslate2" and (args.estimation_text or args.check):
        parser.error("--estimation-text and --check apply to CTranslate2 models only")
    estimation = (sentences(args.estimation_text, args.estimation_lines,
                            "sentences in the estimation text")
                  if args.estimation_text else None)
    import_model(model_dir, out, args.source_lang, args.target_lang,
                 target_spm=args.target_spm, recover_target=not args.no_recover_target,
                 estimation_sources=estimation)
    print(f"wrote {out} (from a {fmt} model)", file=sys.stderr)
    if args.check > 0:
        from triemine.models.fidelity import check_fidelity  # heavy: torch, ctranslate2
        texts = sentences(shared_path(*BUCC_ZH_EN, "zh-en.sample.zh"), args.check)
        reports = check_fidelity(model_dir, out, texts)
        print(json.dumps({k: v.as_dict() for k, v in reports.items()}, ensure_ascii=False))
