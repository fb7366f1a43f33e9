"""The ``trie-mine-score`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from triemine.cleaning import score
from triemine.cleaning.pairs import PAIR_FORMATS
from triemine.cli import arguments
from triemine.cli.arguments import quiet_libraries, run_command
from triemine.config import settings
from triemine.config.configurations import DEFAULT
from triemine.filtering import formats
from triemine.judging.quality import describe
from triemine.mining.settings import ScoreSettings
from triemine.scoring.precision import AUTO, PRECISIONS


def score_main(argv: Optional[Sequence[str]] = None) -> int:
    """Score a parallel corpus you already have: every pair with every feature of the mining
    job, the combined score and a calibrated probability; keep the pairs above a cut."""
    return run_command(_score, _score_parser(), argv)


def _score_parser() -> argparse.ArgumentParser:
    """trie-mine-score's arguments."""
    parser = argparse.ArgumentParser(prog="trie-mine-score", description=score_main.__doc__)
    parser.add_argument("pairs", nargs="+", metavar="PAIRS",
                        help="src<TAB>tgt or id<TAB>src<TAB>tgt TSV, TMX, JSON lines, or two "
                        "files of a Moses pair; plain or gz/xz/zst")
    parser.add_argument("--model", required=True, help="trie-mine model directory")
    parser.add_argument("-o", "--output", required=True, help="scores TSV: one row per input pair")
    parser.add_argument("--format", choices=PAIR_FORMATS, default="auto", help="PAIRS' format "
                        "(auto: by name; two files: moses)")
    parser.add_argument("--config", default=DEFAULT, help="configuration whose judge and cut "
                        f"apply (default {DEFAULT}: the learned judge, prob >= 0.5; combined: "
                        "the fixed combined score and its calibrated prob)")
    parser.add_argument("--min-prob", type=arguments.finite, help="keep pairs with prob >= this")
    parser.add_argument("--threshold", type=arguments.finite, help="keep pairs with combined >= "
                        "this (default: the configuration's shipped threshold)")
    parser.add_argument("--bitext", metavar="OUT", help="write the kept pairs (each once)")
    parser.add_argument("--bitext-format", choices=list(formats.FORMATS), default=formats.DEFAULT,
                        help="the --bitext file: " + formats.help_text())
    parser.add_argument("--langs", nargs=2, metavar=("SRC", "TGT"), help="add language-ID flags "
                        "src_lang_ok/tgt_lang_ok (CLD2) and src_rules_ok/tgt_rules_ok (every "
                        "per-line rule of trie-mine-prepare) for these language codes")
    settings.add_flags_of(parser, ScoreSettings, ("judge", "density"), {})
    parser.add_argument("--bicleaner", action="store_true", help="add the Bicleaner score")
    parser.add_argument("--bicleaner-model", help="Bicleaner model .yaml or its folder")
    parser.add_argument("--precision", choices=PRECISIONS + (AUTO,), default=None,
                        help="arithmetic of the model's encoder and decoder for the exact "
                        "scores: auto (default: bf16 where the CPU has a bf16 matrix unit, else "
                        "fp32; fp32 for --config combined), fp32, bf16; as trie-mine "
                        "--precision; fp16 is GPU only")
    parser.add_argument("--workers", type=int, default=0, help="exact scores in N processes")
    parser.add_argument("--ray", metavar="ADDRESS", help="exact scores on Ray actors")
    parser.add_argument("--resume", action="store_true", help="go on with an interrupted run")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def _score(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-score's work on its parsed arguments."""
    if args.min_prob is not None and not 0 < args.min_prob < 1:
        parser.error("--min-prob must be in (0, 1)")
    if args.min_prob is not None and args.threshold is not None:
        parser.error("give --min-prob or --threshold, not both")
    if len(args.pairs) > 2:
        parser.error("PAIRS: one file, or the two files of a Moses pair")
    quiet_libraries()
    pairs = args.pairs[0] if len(args.pairs) == 1 else tuple(args.pairs)
    res = score(pairs, model=args.model, output=args.output, format=args.format,
                workers=args.workers, ray=args.ray, resume=args.resume,
                progress=not args.quiet, bitext=args.bitext, bitext_format=args.bitext_format,
                config=args.config, min_prob=args.min_prob, threshold=args.threshold,
                langs=tuple(args.langs) if args.langs else None, bicleaner=args.bicleaner,
                bicleaner_model=args.bicleaner_model, precision=args.precision,
                judge=args.judge, density=args.density)
    print(describe(res.summary["expected"]), file=sys.stderr)
    if res.bitext.skipped:
        print(f"trie-mine-score: warning: {res.bitext.report()}", file=sys.stderr)
    print(json.dumps(res.summary, ensure_ascii=False), file=sys.stderr)
