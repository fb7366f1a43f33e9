"""Command-line layer only: argument parsing, progress, error reporting.

Each console script in setup.cfg maps to one ``*_main`` function here; the work itself lives in
the subpackages so that it can be used from Python without the CLI. Errors derived from
``TrieMineError`` are printed as ``prog: error: file:line: problem`` with exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from triemine.errors import TrieMineError


def _run(prog: str, body: Callable[[argparse.Namespace], int], parser: argparse.ArgumentParser,
         argv: Optional[Sequence[str]]) -> int:
    args = parser.parse_args(argv)
    try:
        return body(args) or 0
    except TrieMineError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


# ---------------------------------------------------------------------------------------------
# trie-build  (owner: triemine.trie)
# ---------------------------------------------------------------------------------------------

def trie_build_main(argv: Optional[Sequence[str]] = None) -> int:
    raise SystemExit("trie-build: not implemented yet")


# ---------------------------------------------------------------------------------------------
# trie-mine  (owner: triemine.decoding)
# ---------------------------------------------------------------------------------------------

def mine_main(argv: Optional[Sequence[str]] = None) -> int:
    raise SystemExit("trie-mine: not implemented yet")


def user_dir_main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the fairseq ``--user-dir`` that registers trie-mine's task and architectures."""
    parser = argparse.ArgumentParser(prog="trie-mine-user-dir", description=user_dir_main.__doc__)

    def body(_args: argparse.Namespace) -> int:
        from triemine.plugin import user_dir
        print(user_dir())
        return 0

    return _run("trie-mine-user-dir", body, parser, argv)


# ---------------------------------------------------------------------------------------------
# trie-mine-import  (owner: triemine.models)
# ---------------------------------------------------------------------------------------------

def import_main(argv: Optional[Sequence[str]] = None) -> int:
    raise SystemExit("trie-mine-import: not implemented yet")


# ---------------------------------------------------------------------------------------------
# trie-mine-filter, trie-mine-eval  (owners: triemine.filtering, triemine.evaluation)
# ---------------------------------------------------------------------------------------------

def filter_main(argv: Optional[Sequence[str]] = None) -> int:
    raise SystemExit("trie-mine-filter: not implemented yet")


def eval_main(argv: Optional[Sequence[str]] = None) -> int:
    raise SystemExit("trie-mine-eval: not implemented yet")
