"""The options of ``trie-mine-prepare`` (:func:`triemine.cli.prepare_main`): its parser and the
:func:`~triemine.prepare.prepare` keywords of a parsed namespace."""
from __future__ import annotations

import argparse
from typing import Any, Dict

from triemine.prepare.filters import FILTERS


def prepare_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The parser of ``trie-mine-prepare`` (one option per field of
    :class:`~triemine.prepare.run.PrepareOptions`, plus input, output, report and ``--json``)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description,
        epilog="Filters, in order: " + "; ".join(f"{f.name}: {f.drops}" for f in FILTERS.values())
               + ". See docs/prepare.md.")
    parser.add_argument("input", help="raw corpus: one sentence per line or id<TAB>sentence; "
                        "plain, .gz, .xz or .zst")
    parser.add_argument("-o", "--output", required=True,
                        help="prepared corpus (compressed when it ends in .gz, .xz or .zst)")
    parser.add_argument("--lang", required=True, help="expected language (ISO 639-1: zh, en, de)")
    parser.add_argument("--report", help="JSON report (default: OUTPUT.report.json)")
    parser.add_argument("--skip", default="", help="filters not to run, comma-separated")
    parser.add_argument("--script", default="", help="expected scripts, comma-separated "
                        "(default: the language's, e.g. Han for zh, Latin for en)")
    parser.add_argument("--min-script-share", type=float, default=0.5,
                        help="least share of a line's letters in the expected scripts (0.5)")
    parser.add_argument("--min-chars", type=int, default=1, help="least characters (1)")
    parser.add_argument("--max-chars", type=int, default=2000, help="most characters (2000)")
    parser.add_argument("--min-words", type=int, default=0, help="least words (0)")
    parser.add_argument("--max-words", type=int, default=None, help="most words (none)")
    parser.add_argument("--boilerplate", type=int, default=None, metavar="N",
                        help="drop lines whose normalised text occurs more than N times (off)")
    parser.add_argument("--format", choices=("auto", "plain", "tsv"), default="auto",
                        help="input format (auto: TSV when most lines are id<TAB>text)")
    parser.add_argument("--max-other-lang", type=float, default=0.5,
                        help="refuse the input when more than this share of the lines whose "
                        "language is told are in another language (0.5)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")

    return parser


def options_of(args: argparse.Namespace) -> Dict[str, Any]:
    """The :func:`~triemine.prepare.prepare` keywords (other than input, output and language) of
    parsed ``args``; the report goes to ``OUTPUT.report.json`` unless ``--report`` names it."""
    return dict(report=args.report or args.output + ".report.json",
                skip=tuple(s for s in args.skip.split(",") if s),
                scripts=tuple(s for s in args.script.split(",") if s),
                min_script_share=args.min_script_share, min_chars=args.min_chars,
                max_chars=args.max_chars, min_words=args.min_words, max_words=args.max_words,
                boilerplate=args.boilerplate, format=args.format,
                max_other_lang=args.max_other_lang)
