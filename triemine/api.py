"""The main job from Python: mine two monolingual corpora, keep the pairs above the threshold.

::

    import triemine
    result = triemine.mine("corpus.zh", "corpus.en", model="path/to/model")  # config="judge"
    print(result.summary["kept"], "pairs kept by", result.selection.text())
    for p in result.pairs[:3]:
        print(p.score, p.src, "|||", p.tgt)
    result.write_bitext("mined.zh-en.txt")     # l1 text<TAB>l2 text
    result.write_tsv("kept.tsv")               # the kept rows with all their scores

``source`` and ``target`` are corpus files (plain text, or BUCC ``id<TAB>sentence``) or lists of
sentences: each item one sentence, its id its 1-based position; a tab inside an item is kept
as text (never read as ``id<TAB>sentence``; the TSV shows it as a space).  ``model`` is a trie-mine
model directory (``trie-mine-import``) or a loaded one.
Every candidate with its scores is written to ``output`` (the mining TSV; a temporary file when
not given) and returned as ``result.candidates``; ``result.pairs`` are the ones the selection
keeps: the configuration's rule (one-to-one for the mining job, best per source for ``paper``)
and threshold, by default the one shipped with the configuration
(:mod:`triemine.filtering.selection`); ``threshold`` / ``thresholds`` override it.

``trie-mine`` (:func:`triemine.cli.mine_main`) is a thin layer over :class:`MineOptions` (the
settings tree, :mod:`triemine.mining.options`) and :func:`run`.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from triemine.io import check_distinct, check_uncompressed, output_lock
from triemine.config.configurations import DEFAULT
from triemine.errors import describe, InputError
from triemine.filtering import formats, registry
from triemine.filtering.selection import load_thresholds, min_prob_cut
from triemine.mining.job import argument_name, inputs_of, job_inputs, run_job
from triemine.mining.options import MineOptions
from triemine.mining.result import MiningResult
from triemine.config.settings import paths

Texts = Union[str, os.PathLike, Sequence[str]]


def _corpus_file(texts: Texts, tmp: Path, name: str) -> str:
    """A corpus file of ``texts``: a path as given, a list of sentences written to ``tmp`` as
    ``i<TAB>sentence`` lines (ids 1, 2, ..., as a plain file's line numbers), so that a tab
    inside a sentence is text, never an id; items that are not ``str``, hold a line break,
    or a list without one non-blank sentence are an :class:`InputError` naming ``name`` and
    the item's 0-based index."""
    if isinstance(texts, (str, os.PathLike)):
        return os.fspath(texts)
    if isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Sequence):
        raise InputError(f"{name}: expected a corpus file path or a list of sentences (str), "
                         f"got {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputError(f"{name}[{i}]: expected a sentence (str), got "
                             f"{type(t).__name__} {t!r:.40}")
        if "\n" in t or "\r" in t:
            raise InputError(f"{name}[{i}]: a sentence must not contain a line break")
    if not any(t.strip() for t in texts):
        raise InputError(f"{name}: no sentences (the list is empty or every item is blank)")
    path = tmp / f"{name}.txt"
    path.write_text("".join(f"{i}\t{t}\n" for i, t in enumerate(texts, 1)), encoding="utf-8")
    return str(path)


def _check_threshold(threshold) -> None:
    """``mine(threshold=...)``: a mapping of score names to finite numbers."""
    if threshold is None:
        return
    if not isinstance(threshold, Mapping):
        raise InputError(f"threshold: expected a mapping of score name to number, e.g. "
                         f"{{'combined': 5.0}}, got {type(threshold).__name__}")
    for name, v in threshold.items():
        if not isinstance(name, str):
            raise InputError(f"threshold: the key {name!r} is not a score name")
        if (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                or not math.isfinite(v)):
            raise InputError(f"threshold[{name!r}]: expected a finite number, got {v!r}")
    registry.named_thresholds(threshold.items())  # an unknown score name: the registry's error


def _check_arguments(source, target, model, output, thresholds, resume, progress,
                     options) -> None:
    """:func:`mine`'s arguments of the wrong type: an :class:`InputError` naming the argument."""
    unknown = set(options) - set(paths(MineOptions))
    if unknown:
        raise InputError(f"unknown option(s): {', '.join(sorted(unknown))} (options are the "
                         "settings of triemine.MineOptions, by field name)")
    if model is None or isinstance(model, (bytes, int, float)):
        raise InputError(f"model: expected a model directory or a loaded model, got {model!r}")
    for name, value in (("output", output), ("thresholds", thresholds)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise InputError(f"{name}: expected a file path, got {type(value).__name__}")
    for name, value in (("resume", resume), ("progress", progress)):
        if not isinstance(value, bool):
            raise InputError(f"{name}: expected True or False, got {value!r}")
    for name, value in (("source", source), ("target", target)):
        if isinstance(value, (str, os.PathLike)) and not os.fspath(value):
            raise InputError(f"{name}: an empty path")


def _named(exc: InputError, tmp: str) -> InputError:
    """``exc`` with the temporary corpus file of a sentence list named as its argument
    (``source[i]`` for its line i + 1), never the internal path."""
    for name in ("source", "target"):
        path = os.path.join(tmp, f"{name}.txt")
        if exc.path == path or path in str(exc):
            where = name if exc.line is None else f"{name}[{exc.line - 1}]"
            return InputError(f"{where}: {exc.problem.replace(path, name)}")
    return exc


def mine(source: Texts, target: Texts, *, model, config: str = DEFAULT,
         output: Optional[os.PathLike | str] = None,
         threshold: Optional[Mapping[str, float]] = None,
         thresholds: Optional[os.PathLike | str] = None, min_prob: Optional[float] = None,
         resume: bool = False, progress: bool = False, **options) -> MiningResult:
    """Mine ``source`` against ``target`` (module docstring); ``options`` are settings of
    :class:`MineOptions` by field name (``workers=2``, ``beam=5``, ``max_length=200``, ...;
    ``None``: the configuration's).
    ``threshold``: ``{score name: value}`` overriding the shipped default, e.g.
    ``{"combined": 5.0}``; ``thresholds``: a file from ``trie-mine-eval --save-thresholds``;
    ``min_prob``: keep the pairs whose calibrated probability ``prob`` (the judge's, or the
    configuration's ``mined`` calibration of ``combined``) is >= this, in (0, 1) (``trie-mine
    --min-prob``; not with ``threshold`` or ``thresholds``).

    Raises :class:`triemine.InputError` (before any work) for every bad argument, naming it:
    a list item that is not a ``str`` or holds a line break (``source[3]: ...``, the 0-based
    index), a list without one non-blank sentence, a threshold that is not a finite number or
    names no score, a ``min_prob`` outside (0, 1) or given with a threshold, an unknown option
    or one of the wrong type, a ``device`` this machine does
    not have, an ``output`` that is one of the inputs; never an internal temporary path."""
    _check_arguments(source, target, model, output, thresholds, resume, progress, options)
    if not isinstance(config, str):
        raise InputError(f"config: expected a configuration name, got {config!r}")
    _check_threshold(threshold)
    opts = MineOptions.of(config, **options).check()
    if min_prob is not None:
        if threshold is not None or thresholds is not None:
            raise InputError("give min_prob or threshold/thresholds, not both")
        threshold = dict([min_prob_cut(opts.config, opts.scores.combination, min_prob,
                                       "min_prob")])
    with tempfile.TemporaryDirectory(prefix="triemine-") as tmp:
        src = _corpus_file(source, Path(tmp), "source")
        tgt = _corpus_file(target, Path(tmp), "target")
        out = os.fspath(output) if output is not None else os.path.join(tmp, "mined.tsv")
        try:
            return run(opts, model, src, tgt, out, resume=resume, progress=progress,
                       select=True, given=threshold, thresholds=thresholds, api=True)
        except InputError as exc:
            raise _named(exc, tmp) from None


def run(opts: MineOptions, model, source: str, target: str, output: str, *, resume: bool = False,
        progress: bool = False, select: bool = False,
        given: Optional[Mapping[str, float]] = None,
        thresholds: Optional[os.PathLike | str] = None,
        bitext: Optional[os.PathLike | str] = None, bitext_format: str = formats.DEFAULT,
        api: bool = False) -> MiningResult:
    """Run the job ``opts`` describes, write the mining TSV to ``output``; with ``select``, also
    choose the kept pairs (``given`` thresholds over the ``thresholds`` file over the shipped
    default; :func:`triemine.mining.result.job_result`).  ``model``: a directory or a loaded
    model.

    Before any work: every output (``output`` with its side files and work folders,
    ``bitext`` in ``bitext_format``) is checked against every input and each other
    (:func:`triemine.io.outfile.check_distinct`), ``output`` must not be named as compressed and
    ``bitext`` must be writable in its format (:func:`triemine.filtering.formats.check_output`),
    and ``output`` is locked for the run
    (:func:`triemine.io.outfile.output_lock`: a second job on it is refused); ``api``: name them
    as :func:`mine`'s arguments (``output``), not as ``trie-mine``'s flags (``-o``)."""
    opts.check()
    inputs = job_inputs(opts, model, source, target, thresholds, api)
    bitexts = []
    if bitext is not None:  # moses: two files, hf: a folder
        langs = formats.languages({"model_path": inputs_of(inputs, "--model")})
        bitexts = formats.outputs(argument_name("--bitext", api), bitext_format, bitext, langs)
    check_distinct([(argument_name("-o", api), output, True)] + bitexts, inputs)
    check_uncompressed([(argument_name("-o", api), output)])
    if bitext is not None:
        formats.check_output(bitext_format, bitext, langs)
    for what, path in (("source file", source), ("target file", target),
                       ("trie file", opts.trie)):  # fail before the slow model load
        if path is not None and describe(path):
            raise InputError(f"{what} {describe(path)}", path)
    saved = load_thresholds(thresholds) if thresholds is not None else None
    given = registry.named_thresholds((given or {}).items())
    with output_lock(output):
        result = run_job(opts, model, source, target, output, resume=resume, progress=progress,
                         select=select, saved=saved, given=given)
    result.inputs = inputs
    return result
