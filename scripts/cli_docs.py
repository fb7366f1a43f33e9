"""Render docs/cli.md, the reference of every console script, from the commands' own parsers.

Usage::

    python scripts/cli_docs.py --write    # write docs/cli.md
    python scripts/cli_docs.py --check    # exit 1 with a diff when docs/cli.md is stale

The commands are the ``console_scripts`` of ``setup.cfg`` (``NAME = triemine.cli:FUNC_main``),
in that order; each one's parser is ``_FUNC_parser()`` of the module :mod:`triemine.cli` maps
``FUNC_main`` to. The help is formatted 100 columns wide (``COLUMNS``), so the page does not
depend on the terminal; argparse's wording follows the Python version (the page is written
and checked with the project's Python, 3.11).
"""
from __future__ import annotations

import argparse
import configparser
import difflib
import importlib
import os
import sys
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "cli.md"
WIDTH = "100"
HEADER = """# Command-line reference

Every console script's `--help`, generated from its parser by `python scripts/cli_docs.py
--write` (checked by `--check` in the tests): do not edit by hand. How to use them together:
[quickstart.md](quickstart.md), [usage.md](usage.md).
"""


def commands(setup_cfg: Path = REPO / "setup.cfg") -> List[Tuple[str, str]]:
    """``(script name, "module:function")`` of every console script of ``setup.cfg``."""
    cfg = configparser.ConfigParser()
    cfg.read(setup_cfg, encoding="utf-8")
    out = []
    for line in cfg["options.entry_points"]["console_scripts"].strip().splitlines():
        name, _, target = line.partition("=")
        out.append((name.strip(), target.strip()))
    return out


def parser_of(target: str) -> argparse.ArgumentParser:
    """The parser of the console script ``module:FUNC_main``: ``_FUNC_parser()`` of the module
    the function is defined in."""
    module_name, _, func = target.partition(":")
    main = getattr(importlib.import_module(module_name), func)
    module = importlib.import_module(main.__module__)
    return getattr(module, f"_{func[:-len('_main')]}_parser")()


def render() -> str:
    """The page: the header, then one section per console script with its ``--help``."""
    os.environ["COLUMNS"] = WIDTH
    parts = [HEADER]
    for name, target in commands():
        text = parser_of(target).format_help().rstrip()
        parts.append(f"## {name}\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write docs/cli.md")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff when it is stale")
    ap.add_argument("--page", type=Path, default=PAGE, help="the page (default docs/cli.md)")
    args = ap.parse_args(argv)
    page = render()
    if args.write:
        args.page.write_text(page, encoding="utf-8")
        print(f"wrote {args.page}")
        return 0
    old = args.page.read_text(encoding="utf-8") if args.page.is_file() else ""
    if old == page:
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), page.splitlines(True),
                                               str(args.page), "generated"))
    print(f"{args.page} is stale: run python scripts/cli_docs.py --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
