"""The ``trie-mine-eval`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import os
from typing import Optional, Sequence

from triemine.cli import arguments
from triemine.cli.arguments import run_command
from triemine.evaluation.pipeline import SHIPPED_CUT, evaluate_files, write_outcome
from triemine.io import check_distinct, check_uncompressed, output_locks


def eval_main(argv: Optional[Sequence[str]] = None) -> int:
    """Precision, recall and F1 of mined pairs against a BUCC gold file, with a signature line."""
    return run_command(_eval, _eval_parser(), argv)


def _eval_parser() -> argparse.ArgumentParser:
    """trie-mine-eval's arguments."""
    parser = argparse.ArgumentParser(
        prog="trie-mine-eval", description=eval_main.__doc__,
        epilog="The selection rule chooses candidates (by --rank-by), then the filter is "
               "applied. Defaults: a thresholds file's own rule, ranking and filter; else, for "
               "a TSV of the mining job, one-to-one by 'combined' filtered by 'combined'; else "
               "the paper's best row per source by ce_word, no filter. Without --thresholds the "
               "thresholds are tuned for best strict F1 on --gold (optimistic; add --folds K "
               "for held-out estimates).")
    parser.add_argument("mined", nargs="+", help="mining TSV (l1->l2); a second TSV is the "
                        "l2->l1 direction, whose pairs are united with the first's")
    parser.add_argument("--gold", required=True, help="BUCC gold file <l1>-<l2>.<split>.gold")
    arguments.add_bucc_args(parser)
    parser.add_argument("--filter", default=None,
                        help=arguments.filter_help() + " (default: see below)")
    parser.add_argument("--rank-by", default=None,
                        help="score choosing the candidates (default: see below)")
    parser.add_argument("--rule", default=None, choices=["best-per-source", "one-to-one"],
                        help="selection rule before the filter (default: see below)")
    parser.add_argument("--thresholds", metavar="JSON",
                        help="apply these fixed thresholds instead of tuning; 'shipped': the cut "
                        "the TSV's configuration ships (e.g. the judge's prob >= 0.5)")
    parser.add_argument("--save-thresholds", metavar="JSON", help="store the thresholds used")
    parser.add_argument("--folds", type=int, default=0,
                        help="k-fold estimate: tune on k-1 folds of the l1 sentences, score "
                        "the rest")
    parser.add_argument("--seed", type=int, default=1234, help="fold assignment seed")
    parser.add_argument("--json", metavar="FILE", help="also write all numbers as JSON")
    parser.add_argument("--plot", metavar="DIR", help="write PNG plots (P/R/F1 against the "
                        "threshold, score histograms of gold and non-gold candidates) into DIR")
    parser.add_argument("--report", metavar="HTML", help="write one self-contained HTML page: "
                        "the plots, the signature and the pairs just above and below the threshold")
    return parser


def _eval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-eval's work on its parsed arguments."""
    if len(args.mined) > 2:
        parser.error("at most two mining TSVs (one per direction)")
    check_distinct([("--save-thresholds", args.save_thresholds), ("--json", args.json),
                    ("--report", args.report)] + arguments.plot_files(args.plot),
                   [x for i, m in enumerate(args.mined) for x in arguments.with_meta(
                       f"MINED {i + 1}", m)] + [("--thresholds", None if args.thresholds ==
                                                 SHIPPED_CUT else args.thresholds)]
                   + arguments.bucc_inputs(args.gold, args.src_corpus, args.tgt_corpus))
    check_uncompressed([("--save-thresholds", args.save_thresholds)])
    outputs = [p for p in (args.save_thresholds, args.json, args.report) if p]
    for p in outputs:  # its folders are made for it (as the report's writer does)
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
    with output_locks(outputs):  # one job per output
        out, dirs, bucc = evaluate_files(
            args.mined, args.gold, args.src_corpus, args.tgt_corpus, filt=args.filter,
            rank_by=args.rank_by, rule=args.rule, thresholds=args.thresholds, folds=args.folds,
            seed=args.seed)
        write_outcome(out, dirs, bucc, args.mined, thresholds=args.thresholds,
                      save=args.save_thresholds, json_path=args.json, plot=args.plot,
                      html=args.report)
