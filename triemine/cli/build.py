"""The ``trie-build`` command: its parser, and the call of its work (which lives in
the subpackage that owns it)."""
from __future__ import annotations

import argparse
import json
from typing import Optional, Sequence

from triemine.cli.arguments import run_command
from triemine.io import check_distinct, check_uncompressed
from triemine.trie.build import build_trie_from_corpus


def trie_build_main(argv: Optional[Sequence[str]] = None) -> int:
    """Build the compact trie of a target corpus (plain text or BUCC TSV id<TAB>sentence)."""
    return run_command(_trie_build, _trie_build_parser(), argv)


def _trie_build_parser() -> argparse.ArgumentParser:
    """trie-build's arguments."""
    parser = argparse.ArgumentParser(prog="trie-build", description=trie_build_main.__doc__)
    parser.add_argument("corpus",
                        help="target-side corpus: one sentence per line, or id<TAB>sentence")
    parser.add_argument("-o", "--output", required=True, help="trie file to write")
    parser.add_argument("--spm", required=True, help="sentencepiece model of the target side")
    parser.add_argument("--dict", required=True, dest="dict_path",
                        help="fairseq dictionary (dict.txt) of the model's target side")
    parser.add_argument("--nbest", type=int, default=1,
                        help="insert up to K distinct sentencepiece segmentations per line "
                        "(default 1)")
    parser.add_argument("--format", choices=("auto", "plain", "tsv"), default="auto",
                        help="corpus format (auto: TSV when every non-empty line is id<TAB>text)")
    parser.add_argument("--unk", choices=("error", "map"), default="error",
                        help="a piece missing from the dictionary: error (default) or map to <unk>")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def _trie_build(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-build's work on its parsed arguments."""
    if args.nbest < 1:
        parser.error("--nbest must be >= 1")
    check_distinct([("-o", args.output)], [("corpus", args.corpus), ("--spm", args.spm),
                                            ("--dict", args.dict_path)])
    check_uncompressed([("-o", args.output)])
    trie, stats = build_trie_from_corpus(args.corpus, args.spm, args.dict_path, nbest=args.nbest,
                                         format=args.format, unk=args.unk,
                                         progress=not args.quiet)
    trie.save(args.output)
    if args.json:
        print(json.dumps(dict(stats.as_dict(), output=args.output)))
    else:
        print(stats.report())
        print(f"written {args.output}")
