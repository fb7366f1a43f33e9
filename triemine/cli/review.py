"""The ``trie-mine-review`` command: its parser, and the call of its work (which lives in
:mod:`triemine.evaluation.review_page` and :mod:`triemine.evaluation.review_answers`)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from triemine.cli.arguments import run_command
from triemine.evaluation.review import BELOW, N, SEED
from triemine.evaluation.review_answers import label_run, report_lines
from triemine.evaluation.review_page import review_sheet
from triemine.io import check_distinct


def review_main(argv: Optional[Sequence[str]] = None) -> int:
    """How good is this bitext? Write a page to read a sample of a run's kept pairs in the
    browser (-o sheet.html: stratified by prob, plus some just below the cut); then count the
    answers it exports (--labels answers.tsv): the kept pairs' precision with its interval."""
    return run_command(_review, _review_parser(), argv)


def _review_parser() -> argparse.ArgumentParser:
    """trie-mine-review's arguments."""
    parser = argparse.ArgumentParser(prog="trie-mine-review", description=review_main.__doc__)
    parser.add_argument("run", metavar="RUN.tsv", help="mining TSV of trie-mine (with a prob "
                        "column; its kept pairs are those its selection keeps) or scores TSV of "
                        "trie-mine-score (kept where kept is 1)")
    parser.add_argument("-o", "--output", metavar="SHEET.html", help="write the reading sheet: "
                        "one self-contained page (keys y n p s, arrows, e to export)")
    parser.add_argument("--labels", metavar="ANSWERS.tsv", help="count the answers the sheet "
                        "exported: precision weighted back to the kept pairs, its 95%% "
                        "interval, the expected precision, the pairs below the cut")
    parser.add_argument("--gold-out", metavar="FILE", help="with --labels: write the pairs "
                        "answered y as src_id<TAB>tgt_id lines (trie-mine-train-judge --gold)")
    parser.add_argument("--n", type=int, help=f"kept pairs to draw (default {N})")
    parser.add_argument("--below", type=int, help="pairs just below the cut to add (default "
                        f"{BELOW})")
    parser.add_argument("--seed", type=int, help=f"seed of the draw and its order (default "
                        f"{SEED}); --labels draws again with the answers' own n, below, seed")
    return parser


def _review(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-review's work on its parsed arguments: human lines on stderr, one JSON object
    on stdout."""
    if (args.output is None) == (args.labels is None):
        parser.error("give -o SHEET.html (write a sheet) or --labels ANSWERS.tsv (count one)")
    if args.gold_out and not args.labels:
        parser.error("--gold-out needs --labels")
    if (args.n is not None and args.n < 1) or (args.below is not None and args.below < 0):
        parser.error("--n must be at least 1 and --below at least 0")
    check_distinct([("-o", args.output), ("--gold-out", args.gold_out)],
                   [("run", args.run), ("--labels", args.labels)])
    if args.output:
        res = review_sheet(args.run, args.output, args.n, args.seed, args.below)
        kept = sum(s["drawn"] for s in res["strata"])
        print(f"trie-mine-review: wrote {args.output}: {res['pairs']} pairs to read ({kept} of "
              f"{res['kept']} kept, in {len(res['strata'])} strata; {res['pairs'] - kept} below "
              f"the cut); fingerprint {res['fingerprint']}", file=sys.stderr)
        print(json.dumps(res))
        return
    given = {k: getattr(args, k) for k in ("n", "seed", "below") if getattr(args, k) is not None}
    summary = label_run(args.run, args.labels, args.gold_out, given)
    for line in report_lines(summary):
        print(f"trie-mine-review: {line}", file=sys.stderr)
    print(json.dumps(summary, ensure_ascii=False))
