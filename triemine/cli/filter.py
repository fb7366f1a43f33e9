"""The ``trie-mine-filter`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence

from triemine.cli import arguments
from triemine.cli.arguments import run_command
from triemine.errors import InputError
from triemine.filtering import formats
from triemine.filtering.apply import filter_tsvs, thresholds_of
from triemine.filtering.selection import min_prob_threshold
from triemine.io import check_distinct, check_uncompressed, output_locks, read_mined
import triemine.baselines as baselines  # registers the baselines' score names


def filter_main(argv: Optional[Sequence[str]] = None) -> int:
    """Score mined pairs with Bicleaner and/or keep those passing thresholds."""
    return run_command(_filter, _filter_parser(), argv)


def _filter_parser() -> argparse.ArgumentParser:
    """trie-mine-filter's arguments."""
    parser = argparse.ArgumentParser(
        prog="trie-mine-filter", description=filter_main.__doc__,
        epilog="Thresholds: --thresholds (trie-mine-eval --save-thresholds), --ce-max, "
               "--bicleaner-min, --threshold NAME=VALUE (without --filter: the union of those "
               "given); none: the TSV configuration's shipped default (said on stderr), or every "
               "row when only adding --bicleaner/--classifier columns. --rule: the thresholds' "
               "rule, or the job's own for its filter, else every row.")
    parser.add_argument("mined", help="mining TSV written by trie-mine (l1->l2)")
    parser.add_argument("--second", metavar="TSV",
                        help="mining TSV of the other direction (l2->l1); with --bitext the union "
                             "of both directions' selections is written")
    parser.add_argument("-o", "--output", help="write the kept rows of MINED (with a bicleaner "
                        "column when scored) to this TSV")
    parser.add_argument("--bitext", help="write kept pairs as 'l1 text<TAB>l2 text' (union of "
                        "directions with --second)")
    parser.add_argument("--bitext-format", choices=list(formats.FORMATS), default=None,
                        help="the --bitext file: " + formats.help_text())
    parser.add_argument("--filter", default=None, help=arguments.filter_help())
    parser.add_argument("--rule", default=None, choices=["none", "best-per-source", "one-to-one"],
                        help="selection before filtering (default: see below)")
    parser.add_argument(
        "--rank-by",
        default=None,
        help="score ranking the rows for --rule (default: the filter's first score)",
    )
    parser.add_argument("--thresholds", metavar="JSON", help="thresholds file from trie-mine-eval")
    parser.add_argument("--ce-max", type=arguments.finite, help="keep ce_word <= this")
    parser.add_argument("--bicleaner-min", type=arguments.finite, help="keep bicleaner >= this")
    parser.add_argument("--threshold", type=arguments.score_threshold, action="append", default=[],
                        metavar="NAME=VALUE", help="threshold of any registered score (repeatable)")
    parser.add_argument("--min-prob", type=arguments.finite, metavar="P", help="keep rows whose "
                        "calibrated probability (the TSV configuration's) is >= P")
    parser.add_argument("--bicleaner", action="store_true",
                        help="score rows with the local Bicleaner model (adds column 'bicleaner')")
    parser.add_argument("--bicleaner-model", help="Bicleaner model .yaml or its dir (default: "
                        "<cache>/bicleaner/zh-en/zh-en.yaml, built by scripts/bicleaner_train.py)")
    parser.add_argument("--batch-size", type=int, default=5000, help="pairs per Bicleaner batch")
    parser.add_argument("--classifier", action="append", default=[], metavar="NAME",
                        help="score rows with a built-in baseline miner (repeatable): birnn, "
                             "ae_mlp, dual_enc, opus_enc (docs/baselines.md); trained on first use")
    parser.add_argument("--model", default=None, help="MT model directory the baselines use "
                        "(tokeniser, embeddings; default <cache>/models/opus-mt-zh-en)")
    return parser


def _filter(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-filter's work on its parsed arguments."""
    if not args.output and not args.bitext:
        parser.error("give -o/--output and/or --bitext")
    for name in args.classifier:
        if name not in baselines.SYSTEMS:
            parser.error(
                f"unknown classifier {name!r} (choose from {', '.join(baselines.SYSTEMS)})"
            )
    if args.second and args.output:
        parser.error("--second combines two directions; use --bitext for the union")
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    if args.min_prob is not None and (args.threshold or args.thresholds or args.ce_max is not None
                                      or args.bicleaner_min is not None):
        parser.error("give --min-prob or thresholds (--threshold, --thresholds, --ce-max, "
                     "--bicleaner-min), not both")
    args.bitext_format = arguments.bitext_format(parser, args)
    first = read_mined(args.mined)  # its sidecar names the model, whose languages it has
    langs = formats.languages(first.meta) if args.bitext else None
    bitexts = formats.outputs("--bitext", args.bitext_format, args.bitext, langs) \
        if args.bitext else []
    check_distinct([("-o", args.output, True)] + bitexts,
                   arguments.with_meta("MINED", args.mined) + arguments.with_meta(
                       "--second", args.second) + [("--thresholds", args.thresholds),
                                                   ("--bicleaner-model", args.bicleaner_model)])
    check_uncompressed([("-o", args.output)])
    if args.bitext:
        formats.check_output(args.bitext_format, args.bitext, langs)
    if args.min_prob is not None:
        if not 0 < args.min_prob < 1:
            parser.error("--min-prob must be in (0, 1)")
        args.threshold.append(min_prob_threshold(first.meta, args.min_prob, args.mined))
    saved, given = thresholds_of(args.thresholds, args.ce_max, args.bicleaner_min,
                                 args.threshold)
    if (args.bicleaner or args.classifier) and saved is None and not given:
        args.filter = args.filter or "none"  # only adding score columns: every row kept
    with output_locks([args.output, args.bitext]):  # one job per output
        _filter_locked(parser, args, first, saved, given, langs)


def _filter_locked(parser, args, first, saved, given, langs) -> None:
    """trie-mine-filter's work once its outputs are locked."""
    from triemine.baselines.systems import with_scores  # heavy: torch and the baselines' models

    paths = [args.mined] + ([args.second] if args.second else [])
    mineds = [with_scores(first if k == 0 else read_mined(path), reverse=k == 1,
                          bicleaner=args.bicleaner, bicleaner_model=args.bicleaner_model,
                          batch_size=args.batch_size, classifiers=args.classifier,
                          model_dir=args.model) for k, path in enumerate(paths)]
    try:
        filter_tsvs(mineds, paths, saved=saved, given=given, filt=args.filter,
                    given_as="given" if args.min_prob is None else
                    f"--min-prob {args.min_prob:g}",
                    rule=args.rule, rank_by=args.rank_by, output=args.output,
                    bitext=args.bitext, bitext_format=args.bitext_format, langs=langs)
    except InputError as exc:  # the thresholds given do not fit: a usage error
        if exc.path is not None:
            raise
        parser.error(exc.problem)
