"""Command-line layer only: argument parsing, progress, error reporting.

Each console script in setup.cfg maps to one ``*_main`` function here: ``_NAME_parser()`` builds
its flags, ``_NAME(parser, args)`` checks them and calls the work, which lives in the
subpackages so that it can be used from Python without the CLI. Errors derived from
``TrieMineError`` are printed as ``prog: error: file:line: problem`` with exit status 2.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Callable, Optional, Sequence

import triemine.baselines as baselines  # registers the baselines' score names
from triemine import cliargs, settings
from triemine.compression import check_uncompressed
from triemine.cleaning import score
from triemine.cleaning.pairs import PAIR_FORMATS
from triemine.corpus import sentences
from triemine.errors import InputError, TrieMineError
from triemine.evaluation.pipeline import evaluate_files, write_outcome
from triemine.filtering import formats
from triemine.filtering.apply import filter_tsvs, thresholds_of
from triemine.filtering.selection import min_prob_threshold
from triemine.mining.options import MineOptions, flag_help_values
from triemine.outfile import check_distinct
from triemine.paths import BUCC_ZH_EN, OPUS_MT_ZH_EN_CT2, cache_root, shared_path
from triemine.plugin import user_dir
from triemine.prepare import prepare
from triemine.prepare.cliopts import options_of, prepare_parser
from triemine.trie.build import build_trie_from_corpus
from triemine.tsv import read_mined, record_bitext


Body = Callable[[argparse.ArgumentParser, argparse.Namespace], None]


def _run(body: Body, parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> int:
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


def _quiet_libraries() -> None:
    """Our warnings and errors by logger name; torch's, hydra's and fairseq's warnings not shown."""
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(torch|hydra|fairseq)\.")
    warnings.filterwarnings("ignore", category=FutureWarning)


# trie-build  (owner: triemine.trie)

def trie_build_main(argv: Optional[Sequence[str]] = None) -> int:
    """Build the compact trie of a target corpus (plain text or BUCC TSV id<TAB>sentence)."""
    return _run(_trie_build, _trie_build_parser(), argv)


def _trie_build_parser() -> argparse.ArgumentParser:
    """trie-build's arguments."""
    parser = argparse.ArgumentParser(prog="trie-build", description=trie_build_main.__doc__)
    parser.add_argument("corpus", help="target-side corpus: one sentence per line, or id<TAB>sentence")
    parser.add_argument("-o", "--output", required=True, help="trie file to write")
    parser.add_argument("--spm", required=True, help="sentencepiece model of the target side")
    parser.add_argument("--dict", required=True, dest="dict_path",
                        help="fairseq dictionary (dict.txt) of the model's target side")
    parser.add_argument("--nbest", type=int, default=1,
                        help="insert up to K distinct sentencepiece segmentations per line (default 1)")
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


# trie-mine  (owner: triemine.decoding)

def _mine_parser() -> argparse.ArgumentParser:
    """trie-mine's arguments: the files it reads and writes, then one flag per setting of the
    tree (:class:`triemine.mining.options.MineOptions`: built from the fields' declarations)."""
    parser = argparse.ArgumentParser(
        prog="trie-mine", description=mine_main.__doc__.split("\n\n")[0],
        epilog="--config paper (or --candidates trie alone) is the paper's trie search: every "
               "match, selected best per source by ce_word. The other configurations are the "
               "mining job (docs/mining.md): candidates scored exactly, one 'combined' score, "
               "selected one-to-one; --bitext keeps the pairs above the shipped threshold.")
    parser.add_argument("--model", required=True, help="trie-mine model directory")
    parser.add_argument("--source", required=True, help="source corpus (plain text or id<TAB>text)")
    parser.add_argument("--target", required=True, help="target corpus (plain text or id<TAB>text)")
    parser.add_argument("-o", "--output", required=True, help="mining TSV to write")
    scale = parser.add_argument_group(
        "scale-out (docs/scale.md)",
        "the trie search and the exact scoring run in deterministic shards recorded in a "
        "manifest (OUT.shards/ or OUT.work/); the output is byte-identical to one process with "
        "the same threads per process (OMP_NUM_THREADS, default 1)")
    settings.add_flags(parser, MineOptions, {"scale": scale}, flag_help_values())
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run of the same command")
    keep = parser.add_argument_group(
        "bitext", "the pairs kept by the configuration's selection (one-to-one by 'combined'; "
        "paper: best per source by ce_word) and threshold: by default the one tuned on the BUCC "
        "sample and shipped with the configuration")
    keep.add_argument("--bitext", metavar="OUT", help="write the kept pairs as src<TAB>tgt")
    keep.add_argument("--bitext-format", choices=list(formats.FORMATS), default=None,
                      help="the --bitext file: " + formats.help_text())
    keep.add_argument("--threshold", type=cliargs.score_threshold, action="append", default=[],
                      metavar="NAME=VALUE", help="override the shipped threshold, e.g. "
                      "combined=5.0 (repeatable)")
    keep.add_argument("--thresholds", metavar="JSON",
                      help="thresholds file from trie-mine-eval --save-thresholds")
    keep.add_argument("--min-prob", type=cliargs.finite, metavar="P", help="keep the pairs whose "
                      "calibrated probability (the configuration's) is >= P, e.g. 0.5")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def mine_main(argv: Optional[Sequence[str]] = None) -> int:
    """Mine parallel sentences from two monolingual corpora with an MT model and write every
    candidate pair with its scores as a mining TSV (and, with --bitext, the pairs kept)."""
    return _run(_mine, _mine_parser(), argv)


def _mine(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine's work on its parsed arguments."""
    given = settings.given(args, MineOptions)
    try:
        opts = MineOptions.of(given.pop("config", "combined"), **given).check()
    except InputError as exc:
        parser.error(exc.problem)
    if (args.threshold or args.thresholds or args.min_prob is not None) and not args.bitext:
        parser.error("--threshold/--thresholds/--min-prob choose the pairs of --bitext: "
                     "give --bitext")
    args.bitext_format = cliargs.bitext_format(parser, args)
    if args.min_prob is not None:
        args.threshold.append(cliargs.min_prob_cut(parser, opts.scores.combination, args.min_prob))
    _quiet_libraries()
    from triemine.api import run  # heavy (torch, fairseq): after the logging set-up

    with cliargs.bitext_lock(args.bitext):  # one job per bitext, as per -o
        result = run(opts, args.model, args.source, args.target, args.output,
                     resume=args.resume, progress=not args.quiet, select=bool(args.bitext),
                     given=dict(args.threshold), thresholds=args.thresholds,
                     bitext=args.bitext, bitext_format=args.bitext_format)
        if args.bitext:
            n = result.write_bitext(args.bitext, args.bitext_format)
            record_bitext(args.output, args.bitext, args.bitext_format, n,
                          formats.languages(result.candidates.meta))
            print(f"{args.bitext}: {n} pairs kept of {len(result.candidates)} candidates "
                  f"({result.selection.text()})", file=sys.stderr)
    print(json.dumps(result.summary), file=sys.stderr)


def user_dir_main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the fairseq ``--user-dir`` that registers trie-mine's task and architectures."""
    return _run(_user_dir, _user_dir_parser(), argv)


def _user_dir_parser() -> argparse.ArgumentParser:
    """trie-mine-user-dir's arguments: none."""
    return argparse.ArgumentParser(prog="trie-mine-user-dir", description=user_dir_main.__doc__)


def _user_dir(_parser: argparse.ArgumentParser, _args: argparse.Namespace) -> None:
    """trie-mine-user-dir's work on its parsed arguments."""
    print(user_dir())


# trie-mine-import  (owner: triemine.models)

def import_main(argv: Optional[Sequence[str]] = None) -> int:
    """Convert a CTranslate2 transformer or a Hugging Face MarianMTModel directory (OPUS-MT)
    into a trie-mine / fairseq model directory; the format is detected."""
    return _run(_import, _import_parser(), argv)


def _import_parser() -> argparse.ArgumentParser:
    """trie-mine-import's arguments."""
    parser = argparse.ArgumentParser(
        prog="trie-mine-import", description=import_main.__doc__,
        epilog="Writes OUT/checkpoint.pt, OUT/dict.SRC.txt, OUT/dict.TGT.txt, OUT/source.spm, "
               "OUT/target.spm (the model's own, or recovered for a CTranslate2 model that has "
               "none) and OUT/triemine-model.json. Default OUT for the shared OPUS-MT model: "
               "$TRIEMINE_CACHE/models/opus-mt-zh-en.")
    parser.add_argument("model_dir", metavar="MODEL_DIR", nargs="?",
                        help="CTranslate2 model directory or Hugging Face MarianMTModel directory "
                             "(default: the shared OPUS-MT zh-en CTranslate2 model)")
    parser.add_argument("-o", "--output", metavar="OUT", help="output model directory")
    parser.add_argument("-s", "--source-lang", default="zh")
    parser.add_argument("-t", "--target-lang", default="en")
    parser.add_argument("--target-spm", metavar="PATH",
                        help="the model's real target sentencepiece model, copied to OUT")
    parser.add_argument("--estimation-text", metavar="FILE",
                        help="source-language sentences (plain text or id<TAB>text) whose "
                             "translations drive the recovery of a missing target sentencepiece "
                             "model (CTranslate2 only; required unless the model ships one or is "
                             "the shared zh-en model)")
    parser.add_argument("--estimation-lines", type=int, default=2500, metavar="N",
                        help="use the first N non-empty lines of --estimation-text (2500)")
    parser.add_argument("--no-recover-target", action="store_true",
                        help="without a target sentencepiece model, do not recover one")
    parser.add_argument("--check", type=int, default=0, metavar="N",
                        help="afterwards compare N BUCC zh sample sentences with CTranslate2")
    return parser


def _import(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-import's work on its parsed arguments."""
    from triemine.models.convert import detect_model_format, import_model  # heavy: fairseq

    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("triemine").setLevel(logging.INFO)  # our progress notes, not fairseq's
    if args.estimation_lines < 1:
        parser.error("--estimation-lines must be >= 1")
    model_dir = Path(args.model_dir) if args.model_dir else shared_path(*OPUS_MT_ZH_EN_CT2)
    out = Path(args.output) if args.output else cache_root() / "models" / "opus-mt-zh-en"
    check_distinct([("-o", out, "folder")],  # replaced whole (a staged directory)
                   [("MODEL_DIR", model_dir), ("--target-spm", args.target_spm),
                    ("--estimation-text", args.estimation_text)])
    fmt = detect_model_format(model_dir)
    if fmt != "ctranslate2" and (args.estimation_text or args.check):
        parser.error("--estimation-text and --check apply to CTranslate2 models only")
    estimation = (sentences(args.estimation_text, args.estimation_lines,
                            "sentences in the estimation text")
                  if args.estimation_text else None)
    import_model(model_dir, out, args.source_lang, args.target_lang,
                 target_spm=args.target_spm, recover_target=not args.no_recover_target,
                 estimation_sources=estimation)
    print(f"wrote {out} (from a {fmt} model)", file=sys.stderr)
    if args.check > 0:
        from triemine.fidelity import check_fidelity  # heavy: torch, ctranslate2
        texts = sentences(shared_path(*BUCC_ZH_EN, "zh-en.sample.zh"), args.check)
        reports = check_fidelity(model_dir, out, texts)
        print(json.dumps({k: v.as_dict() for k, v in reports.items()}, ensure_ascii=False))


# trie-mine-filter, trie-mine-eval  (owners: triemine.filtering, triemine.evaluation)

def filter_main(argv: Optional[Sequence[str]] = None) -> int:
    """Score mined pairs with Bicleaner and/or keep those passing thresholds."""
    return _run(_filter, _filter_parser(), argv)


def _filter_parser() -> argparse.ArgumentParser:
    """trie-mine-filter's arguments."""
    parser = argparse.ArgumentParser(
        prog="trie-mine-filter", description=filter_main.__doc__,
        epilog="Thresholds: --thresholds (trie-mine-eval --save-thresholds), --ce-max, "
               "--bicleaner-min, --threshold NAME=VALUE (without --filter: the union of those "
               "given); none: the TSV configuration's shipped default (said on stderr), or every "
               "row when only adding --bicleaner/--classifier columns. --rule: the thresholds' "
               "rule, or the job's own for its filter, else every row.")
    parser.add_argument("mined", help="mining TSV written by trie-mine (l1->l2)")
    parser.add_argument("--second", metavar="TSV",
                        help="mining TSV of the other direction (l2->l1); with --bitext the union "
                             "of both directions' selections is written")
    parser.add_argument("-o", "--output", help="write the kept rows of MINED (with a bicleaner "
                        "column when scored) to this TSV")
    parser.add_argument("--bitext", help="write kept pairs as 'l1 text<TAB>l2 text' (union of "
                        "directions with --second)")
    parser.add_argument("--bitext-format", choices=list(formats.FORMATS), default=None,
                        help="the --bitext file: " + formats.help_text())
    parser.add_argument("--filter", default=None, help=cliargs.filter_help())
    parser.add_argument("--rule", default=None, choices=["none", "best-per-source", "one-to-one"],
                        help="selection before filtering (default: see below)")
    parser.add_argument("--rank-by", default=None,
                        help="score ranking the rows for --rule (default: the filter's first score)")
    parser.add_argument("--thresholds", metavar="JSON", help="thresholds file from trie-mine-eval")
    parser.add_argument("--ce-max", type=cliargs.finite, help="keep ce_word <= this")
    parser.add_argument("--bicleaner-min", type=cliargs.finite, help="keep bicleaner >= this")
    parser.add_argument("--threshold", type=cliargs.score_threshold, action="append", default=[],
                        metavar="NAME=VALUE", help="threshold of any registered score (repeatable)")
    parser.add_argument("--min-prob", type=cliargs.finite, metavar="P", help="keep rows whose "
                        "calibrated probability (the TSV configuration's) is >= P")
    parser.add_argument("--bicleaner", action="store_true",
                        help="score rows with the local Bicleaner model (adds column 'bicleaner')")
    parser.add_argument("--bicleaner-model", help="Bicleaner model .yaml or its dir (default: "
                        "<cache>/bicleaner/zh-en/zh-en.yaml, built by scripts/bicleaner_train.py)")
    parser.add_argument("--batch-size", type=int, default=5000, help="pairs per Bicleaner batch")
    parser.add_argument("--classifier", action="append", default=[], metavar="NAME",
                        help="score rows with a built-in baseline miner (repeatable): birnn, "
                             "ae_mlp, dual_enc, opus_enc (docs/baselines.md); trained on first use")
    parser.add_argument("--model", default=None, help="MT model directory the baselines use "
                        "(tokeniser, embeddings; default <cache>/models/opus-mt-zh-en)")
    return parser


def _filter(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-filter's work on its parsed arguments."""
    from triemine.baselines.systems import with_scores  # heavy: torch and the baselines' models

    if not args.output and not args.bitext:
        parser.error("give -o/--output and/or --bitext")
    for name in args.classifier:
        if name not in baselines.SYSTEMS:
            parser.error(f"unknown classifier {name!r} (choose from {', '.join(baselines.SYSTEMS)})")
    if args.second and args.output:
        parser.error("--second combines two directions; use --bitext for the union")
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    args.bitext_format = cliargs.bitext_format(parser, args)
    first = read_mined(args.mined)  # its sidecar names the model, whose languages it has
    langs = formats.languages(first.meta) if args.bitext else None
    bitexts = formats.outputs("--bitext", args.bitext_format, args.bitext, langs) \
        if args.bitext else []
    check_distinct([("-o", args.output, True)] + bitexts,
                   cliargs.with_meta("MINED", args.mined) + cliargs.with_meta(
                       "--second", args.second) + [("--thresholds", args.thresholds),
                                                   ("--bicleaner-model", args.bicleaner_model)])
    check_uncompressed([("-o", args.output)])
    if args.bitext:
        formats.check_output(args.bitext_format, args.bitext, langs)
    if args.min_prob is not None:
        if not 0 < args.min_prob < 1:
            parser.error("--min-prob must be in (0, 1)")
        args.threshold.append(min_prob_threshold(first.meta, args.min_prob, args.mined))
    saved, given = thresholds_of(args.thresholds, args.ce_max, args.bicleaner_min,
                                 args.threshold)
    if (args.bicleaner or args.classifier) and saved is None and not given:
        args.filter = args.filter or "none"  # only adding score columns: every row kept
    paths = [args.mined] + ([args.second] if args.second else [])
    mineds = [with_scores(first if k == 0 else read_mined(path), reverse=k == 1,
                          bicleaner=args.bicleaner, bicleaner_model=args.bicleaner_model,
                          batch_size=args.batch_size, classifiers=args.classifier,
                          model_dir=args.model) for k, path in enumerate(paths)]
    try:
        filter_tsvs(mineds, paths, saved=saved, given=given, filt=args.filter,
                    rule=args.rule, rank_by=args.rank_by, output=args.output,
                    bitext=args.bitext, bitext_format=args.bitext_format, langs=langs)
    except InputError as exc:  # the thresholds given do not fit: a usage error
        if exc.path is not None:
            raise
        parser.error(exc.problem)


def eval_main(argv: Optional[Sequence[str]] = None) -> int:
    """Precision, recall and F1 of mined pairs against a BUCC gold file, with a signature line."""
    return _run(_eval, _eval_parser(), argv)


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
    cliargs.add_bucc_args(parser)
    parser.add_argument("--filter", default=None, help=cliargs.filter_help() + " (default: see below)")
    parser.add_argument("--rank-by", default=None,
                        help="score choosing the candidates (default: see below)")
    parser.add_argument("--rule", default=None, choices=["best-per-source", "one-to-one"],
                        help="selection rule before the filter (default: see below)")
    parser.add_argument("--thresholds", metavar="JSON", help="apply these fixed thresholds instead of tuning")
    parser.add_argument("--save-thresholds", metavar="JSON", help="store the thresholds used")
    parser.add_argument("--folds", type=int, default=0,
                        help="k-fold estimate: tune on k-1 folds of the l1 sentences, score the rest")
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
                    ("--report", args.report)] + cliargs.plot_files(args.plot),
                   [x for i, m in enumerate(args.mined) for x in cliargs.with_meta(
                       f"MINED {i + 1}", m)] + [("--thresholds", args.thresholds)]
                   + cliargs.bucc_inputs(args.gold, args.src_corpus, args.tgt_corpus))
    check_uncompressed([("--save-thresholds", args.save_thresholds)])
    out, dirs, bucc = evaluate_files(
        args.mined, args.gold, args.src_corpus, args.tgt_corpus, filt=args.filter,
        rank_by=args.rank_by, rule=args.rule, thresholds=args.thresholds, folds=args.folds,
        seed=args.seed)
    write_outcome(out, dirs, bucc, args.mined, thresholds=args.thresholds,
                  save=args.save_thresholds, json_path=args.json, plot=args.plot,
                  html=args.report)


# trie-mine-prepare  (owner: triemine.prepare; its options: triemine.prepare.cliopts)

def prepare_main(argv: Optional[Sequence[str]] = None) -> int:
    """Clean and filter a raw corpus line by line for mining: a dropped line becomes an empty
    line (its TSV id kept), so line numbers and ids stay the input's."""
    return _run(_prepare, prepare_parser("trie-mine-prepare", prepare_main.__doc__), argv)


def _prepare(_parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-prepare's work on its parsed arguments."""
    result = prepare(args.input, args.output, args.lang, **options_of(args))
    print(f"{result['summary']}; report {result['report']}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))


# trie-mine-score  (owner: triemine.cleaning)

def score_main(argv: Optional[Sequence[str]] = None) -> int:
    """Score a parallel corpus you already have: every pair with every feature of the mining
    job, the combined score and a calibrated probability; keep the pairs above a cut."""
    return _run(_score, _score_parser(), argv)


def _score_parser() -> argparse.ArgumentParser:
    """trie-mine-score's arguments."""
    parser = argparse.ArgumentParser(prog="trie-mine-score", description=score_main.__doc__)
    parser.add_argument("pairs", nargs="+", metavar="PAIRS", help="src<TAB>tgt or id<TAB>src<TAB>"
                        "tgt TSV, TMX, JSON lines, or two files of a Moses pair; plain or gz/xz/zst")
    parser.add_argument("--model", required=True, help="trie-mine model directory")
    parser.add_argument("-o", "--output", required=True, help="scores TSV: one row per input pair")
    parser.add_argument("--format", choices=PAIR_FORMATS, default="auto", help="PAIRS' format "
                        "(auto: by name; two files: moses)")
    parser.add_argument("--config", default="combined", help="configuration whose combined "
                        "score, threshold and calibration apply (default combined)")
    parser.add_argument("--min-prob", type=cliargs.finite, help="keep pairs with prob >= this")
    parser.add_argument("--threshold", type=cliargs.finite, help="keep pairs with combined >= "
                        "this (default: the configuration's shipped threshold)")
    parser.add_argument("--bitext", metavar="OUT", help="write the kept pairs (each once)")
    parser.add_argument("--bitext-format", choices=list(formats.FORMATS), default=formats.DEFAULT,
                        help="the --bitext file: " + formats.help_text())
    parser.add_argument("--langs", nargs=2, metavar=("SRC", "TGT"), help="add language-ID flags "
                        "src_lang_ok/tgt_lang_ok (CLD2) for these language codes")
    parser.add_argument("--bicleaner", action="store_true", help="add the Bicleaner score")
    parser.add_argument("--bicleaner-model", help="Bicleaner model .yaml or its folder")
    parser.add_argument("--workers", type=int, default=0, help="exact scores in N processes")
    parser.add_argument("--ray", metavar="ADDRESS", help="exact scores on Ray actors")
    parser.add_argument("--resume", action="store_true", help="go on with an interrupted run")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def _score(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """trie-mine-score's work on its parsed arguments."""
    if args.min_prob is not None and not 0 < args.min_prob < 1:
        parser.error("--min-prob must be in (0, 1)")
    if args.min_prob is not None and args.threshold is not None:
        parser.error("give --min-prob or --threshold, not both")
    if len(args.pairs) > 2:
        parser.error("PAIRS: one file, or the two files of a Moses pair")
    _quiet_libraries()
    pairs = args.pairs[0] if len(args.pairs) == 1 else tuple(args.pairs)
    res = score(pairs, model=args.model, output=args.output, format=args.format,
                workers=args.workers, ray=args.ray, resume=args.resume,
                progress=not args.quiet, bitext=args.bitext, bitext_format=args.bitext_format,
                config=args.config, min_prob=args.min_prob, threshold=args.threshold,
                langs=tuple(args.langs) if args.langs else None, bicleaner=args.bicleaner,
                bicleaner_model=args.bicleaner_model)
    if res.bitext.skipped:
        print(f"trie-mine-score: warning: {res.bitext.report()}", file=sys.stderr)
    print(json.dumps(res.summary, ensure_ascii=False), file=sys.stderr)

