"""Argument helpers of the command-line tools (:mod:`triemine.cli`): argparse types, shared
options, and what a tool reads and writes for :func:`triemine.io.outfile.check_distinct` (no
output of a tool is one of its inputs)."""
from __future__ import annotations

import argparse
import os
from typing import Callable, Optional, Sequence, Tuple
import logging
import sys
import warnings

from triemine.filtering import selection
from triemine.errors import InputError, TrieMineError
from triemine.evaluation.bucc import bucc_files
from triemine.evaluation.report import CURVE_PNG, HISTOGRAM_PNG
from triemine.filtering.formats import DEFAULT
from triemine.filtering.registry import ALIASES, SCORES
from triemine.io import META_SUFFIX, output_locks
from triemine.config.settings import finite
import triemine.baselines as baselines  # registers the baselines' score names  # noqa: F401


def add_bucc_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--src-corpus", help="l1 corpus (default: the BUCC file beside the gold, "
                        "e.g. zh-en.sample.zh)")
    parser.add_argument("--tgt-corpus", help="l2 corpus (default: e.g. zh-en.sample.en)")


def score_threshold(text: str):
    """argparse type for ``--threshold NAME=VALUE``."""
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, finite(value)


def filter_help() -> str:
    names = ", ".join(sorted(SCORES) + sorted(ALIASES))
    return (f"'none', a score ({names}), or two joined by '+' (a union, e.g. ce+bicleaner); "
            "a score keeps rows on its good side of the threshold")


def with_meta(label: str, tsv: Optional[str]):
    """A mining TSV given as input, and its ``.meta.json`` sidecar (read with it)."""
    return [] if tsv is None else [(label, tsv), (f"{label}'s sidecar", tsv + META_SUFFIX)]


def bucc_inputs(gold: str, src_corpus: Optional[str], tgt_corpus: Optional[str]
                ) -> Sequence[Tuple[str, Optional[str]]]:
    """What ``trie-mine-eval`` reads of a BUCC set: the gold file and both corpora (by
    default the BUCC files beside the gold)."""
    try:
        _l1, _l2, _split, src_default, tgt_default = bucc_files(gold)
    except InputError:
        src_default = tgt_default = None
    return [("--gold", gold), ("--src-corpus", src_corpus or src_default),
            ("--tgt-corpus", tgt_corpus or tgt_default)]


def plot_files(folder: Optional[str]):
    """The files ``--plot DIR`` writes, as outputs."""
    if folder is None:
        return []
    return [("--plot", os.path.join(folder, name)) for name in (CURVE_PNG, HISTOGRAM_PNG)]


def bitext_format(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """``--bitext-format``'s value (default :data:`triemine.filtering.formats.DEFAULT`); a
    format given without ``--bitext`` is refused (it would be ignored)."""
    if args.bitext_format is not None and not args.bitext:
        parser.error("--bitext-format chooses the format of --bitext: give --bitext")
    return args.bitext_format or DEFAULT


def bitext_lock(bitext: Optional[str]):
    """The lock of ``--bitext`` (:func:`triemine.io.outfile.output_locks`) while a job runs and
    writes it: a second job writing the same bitext is refused; no lock without one."""
    return output_locks([bitext or None])


def min_prob_cut(parser: argparse.ArgumentParser, config: str, combination: str, prob: float):
    """trie-mine's ``--min-prob``: ``(score, value)``, ``prob`` itself for a configuration with
    a judge, else ``combined``'s threshold of the configuration's ``mined`` calibration (a
    combination file has none: a parser error)."""
    if not 0 < prob < 1:
        parser.error("--min-prob must be in (0, 1)")
    try:
        return selection.min_prob_cut(config, combination, prob)
    except InputError as exc:
        parser.error(exc.problem)


Body = Callable[[argparse.ArgumentParser, argparse.Namespace], None]


def run_command(body: Body, parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> int:
    """``body(parser, args)`` on ``argv`` parsed: exit 0, or 2 with its error as ``prog: error:
    ...``, or 130 when interrupted."""
    prog = parser.prog
    args = parser.parse_args(argv)
    try:
        body(parser, args)
    except (TrieMineError, OSError) as exc:  # OSError: a full disk, a permission, a missing file
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0


def quiet_libraries() -> None:
    """Our warnings and errors by logger name; torch's, hydra's and fairseq's warnings not shown."""
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(torch|hydra|fairseq)\.")
    warnings.filterwarnings("ignore", category=FutureWarning)
