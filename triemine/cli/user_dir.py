"""The ``trie-mine-user-dir`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence

from triemine.cli.arguments import run_command
from triemine.plugin import user_dir


def user_dir_main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the fairseq ``--user-dir`` that registers trie-mine's task and architectures."""
    return run_command(_user_dir, _user_dir_parser(), argv)


def _user_dir_parser() -> argparse.ArgumentParser:
    """trie-mine-user-dir's arguments: none."""
    return argparse.ArgumentParser(prog="trie-mine-user-dir", description=user_dir_main.__doc__)


def _user_dir(_parser: argparse.ArgumentParser, _args: argparse.Namespace) -> None:
    """trie-mine-user-dir's work on its parsed arguments."""
    print(user_dir())
