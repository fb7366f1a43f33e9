"""The ``trie-mine-prepare`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from triemine.cli.arguments import run_command
from triemine.prepare import prepare
from triemine.prepare.cliopts import options_of, prepare_parser


def prepare_main(argv: Optional[Sequence[str]] = None) -> int:
    """Clean and filter a raw corpus line by line for mining: a dropped line becomes an empty
    line (its TSV id kept), so line numbers and ids stay the input's."""
    return run_command(_prepare, _prepare_parser(), argv)


def _prepare_parser() -> argparse.ArgumentParser:
    """trie-mine-prepare's arguments (:mod:`triemine.prepare.cliopts`, beside the options)."""
    return prepare_parser("trie-mine-prepare", prepare_main.__doc__)


def _prepare(_parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-prepare's work on its parsed arguments."""
    result = prepare(args.input, args.output, args.lang, **options_of(args))
    print(f"{result['summary']}; report {result['report']}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
