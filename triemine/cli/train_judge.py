"""The ``trie-mine-train-judge`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import json
import math
import os
from typing import Optional, Sequence

from triemine.cli.arguments import run_command, with_meta
from triemine.evaluation.bucc import read_gold
from triemine.io import check_distinct, check_uncompressed, output_locks, read_mined
from triemine.judging.features import MINED_FEATURES
from triemine.judging.train import KINDS, SEED, SHIPPED_KIND, feature_list, gold_labels, train


def train_judge_main(argv: Optional[Sequence[str]] = None) -> int:
    """Train a judge (--config judge's prob) on your own data: a mining TSV of every candidate
    and the gold pairs among them; use it with trie-mine --judge FILE."""
    return run_command(_train_judge, _train_judge_parser(), argv)


def _train_judge_parser() -> argparse.ArgumentParser:
    """trie-mine-train-judge's arguments."""
    parser = argparse.ArgumentParser(prog="trie-mine-train-judge",
                                     description=train_judge_main.__doc__)
    parser.add_argument("mined", help="mining TSV of trie-mine (every candidate: the .tsv, "
                        "not the bitext)")
    parser.add_argument("--gold", required=True, help="the true pairs among its rows: "
                        "src-id<TAB>tgt-id lines (BUCC gold format)")
    parser.add_argument("-o", "--output", required=True, help="the judge file (JSON)")
    parser.add_argument("--features", default=",".join(MINED_FEATURES),
                        help="comma-separated columns the judge reads (default %(default)s)")
    parser.add_argument("--kind", choices=KINDS, default=SHIPPED_KIND,
                        help="blend (the shipped judge's kind: the mean log-odds of the two "
                        "others), trees (gradient-boosted, seeded) or logistic (default "
                        "%(default)s)")
    parser.add_argument("--c", type=float, default=1.0,
                        help="the logistic regression's inverse L2 strength (default 1)")
    parser.add_argument("--seed", type=int, default=SEED,
                        help="the trees' random state (default %(default)s)")
    return parser


def _train_judge(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-train-judge's work on its parsed arguments: every setting and the outputs
    checked before the TSV is read."""
    if not (math.isfinite(args.c) and args.c > 0):
        parser.error(f"--c must be a finite number > 0, got {args.c:g}")
    try:
        features = feature_list(args.features)
    except ValueError as exc:
        parser.error(f"--features: {exc}")
    check_distinct([("-o", args.output)], with_meta("MINED", args.mined) +
                   [("--gold", args.gold)])
    check_uncompressed([("-o", args.output)])
    mined, gold = read_mined(args.mined), read_gold(args.gold)
    labels = gold_labels(mined, gold, args.mined, args.gold)
    where = (f"{len(labels)} candidates of {os.path.basename(args.mined)} labelled by "
             f"{os.path.basename(args.gold)}; trie-mine-train-judge")
    try:
        judge = train(mined, labels, features, where, args.c, args.kind, args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    with output_locks([args.output]):
        judge.save(args.output)
    print(json.dumps({"output": args.output, "kind": judge.kind, "candidates": len(labels),
                      "positives": int(labels.sum()), "fingerprint": judge.fingerprint()}))
