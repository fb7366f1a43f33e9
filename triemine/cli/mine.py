"""The ``trie-mine`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from triemine.cli import arguments
from triemine.cli.arguments import quiet_libraries, run_command
from triemine.config import settings
from triemine.config.configurations import DEFAULT
from triemine.errors import InputError
from triemine.filtering import formats
from triemine.io import record_bitext
from triemine.judging.quality import describe
from triemine.mining.options import MineOptions, flag_help_values


def _mine_parser() -> argparse.ArgumentParser:
    """trie-mine's arguments: the files it reads and writes, then one flag per setting of the
    tree (:class:`triemine.mining.options.MineOptions`: built from the fields' declarations)."""
    parser = argparse.ArgumentParser(
        prog="trie-mine", description=mine_main.__doc__.split("\n\n")[0],
        epilog="--config paper (or --candidates trie alone) is the paper's trie search: every "
               "match, selected best per source by ce_word. The other configurations are the "
               "mining job (docs/mining.md): candidates scored exactly, one 'combined' score, "
               "selected one-to-one; --bitext keeps the pairs above the shipped threshold.")
    parser.add_argument("--model", required=True, help="trie-mine model directory")
    parser.add_argument("--source", required=True, help="source corpus (plain text or id<TAB>text)")
    parser.add_argument("--target", required=True, help="target corpus (plain text or id<TAB>text)")
    parser.add_argument("-o", "--output", required=True, help="mining TSV to write")
    scale = parser.add_argument_group(
        "scale-out (docs/scale.md)",
        "the trie search and the exact scoring run in deterministic shards recorded in a "
        "manifest (OUT.shards/ or OUT.work/); the output is byte-identical to one process with "
        "the same threads per process (OMP_NUM_THREADS, default 1)")
    settings.add_flags(parser, MineOptions, {"scale": scale}, flag_help_values())
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run of the same command")
    keep = parser.add_argument_group(
        "bitext", "the pairs kept by the configuration's selection (one-to-one by 'combined'; "
        "paper: best per source by ce_word) and threshold: by default the one tuned on the BUCC "
        "sample and shipped with the configuration")
    keep.add_argument("--bitext", metavar="OUT", help="write the kept pairs as src<TAB>tgt")
    keep.add_argument("--bitext-format", choices=list(formats.FORMATS), default=None,
                      help="the --bitext file: " + formats.help_text())
    keep.add_argument("--threshold", type=arguments.score_threshold, action="append", default=[],
                      metavar="NAME=VALUE", help="override the shipped threshold, e.g. "
                      "combined=5.0 (repeatable)")
    keep.add_argument("--thresholds", metavar="JSON",
                      help="thresholds file from trie-mine-eval --save-thresholds")
    keep.add_argument("--min-prob", type=arguments.finite, metavar="P", help="keep the pairs whose "
                      "calibrated probability (the configuration's) is >= P, e.g. 0.5")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def mine_main(argv: Optional[Sequence[str]] = None) -> int:
    """Mine parallel sentences from two monolingual corpora with an MT model and write every
    candidate pair with its scores as a mining TSV (and, with --bitext, the pairs kept)."""
    return run_command(_mine, _mine_parser(), argv)


def _mine(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine's work on its parsed arguments."""
    given = settings.given(args, MineOptions)
    try:
        opts = MineOptions.of(given.pop("config", DEFAULT), **given).check()
    except InputError as exc:
        parser.error(str(exc))  # with the file it names, if any
    if (args.threshold or args.thresholds or args.min_prob is not None) and not args.bitext:
        parser.error("--threshold/--thresholds/--min-prob choose the pairs of --bitext: "
                     "give --bitext")
    args.bitext_format = arguments.bitext_format(parser, args)
    if args.min_prob is not None:
        if args.threshold or args.thresholds:
            parser.error("give --min-prob or --threshold/--thresholds, not both")
        args.threshold.append(arguments.min_prob_cut(parser, opts.config,
                                                     opts.scores.combination, args.min_prob))
    quiet_libraries()
    from triemine.api import run  # heavy (torch, fairseq): after the logging set-up

    with arguments.bitext_lock(args.bitext):  # one job per bitext, as per -o
        result = run(opts, args.model, args.source, args.target, args.output,
                     resume=args.resume, progress=not args.quiet, select=bool(args.bitext),
                     given=dict(args.threshold), thresholds=args.thresholds,
                     bitext=args.bitext, bitext_format=args.bitext_format)
        if args.bitext:
            n = result.write_bitext(args.bitext, args.bitext_format)
            record_bitext(args.output, args.bitext, args.bitext_format, n,
                          formats.languages(result.candidates.meta))
            print(f"{args.bitext}: {n} pairs kept of {len(result.candidates)} candidates "
                  f"({result.selection.text()})", file=sys.stderr)
            print(describe(result.summary["expected"]), file=sys.stderr)
    print(json.dumps(result.summary), file=sys.stderr)
