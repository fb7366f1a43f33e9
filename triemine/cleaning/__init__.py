"""Cleaning a parallel corpus a person already has: every given pair judged by the MT model.

::

    import triemine
    res = triemine.score("crawl.zh-en.tsv", model="path/to/model", output="scored.tsv")
    print(res.summary["kept"], "kept")
    res.write_bitext("clean.zh-en.tmx", "tmx")

``pairs`` is a file (TSV, TMX, JSON lines; plain or compressed), a ``(source file, target
file)`` Moses pair, or a list of ``(src, tgt)`` strings (:mod:`triemine.cleaning.pairs`).  Every
pair gets the mining job's features, the ``combined`` score and the calibrated ``prob``
(:mod:`triemine.cleaning.job`); ``trie-mine-score`` (:func:`triemine.cli.score_main`) is a thin
layer over :func:`score`.
"""
from __future__ import annotations

import math
import os
from contextlib import ExitStack
from dataclasses import fields
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from triemine.cleaning.job import ScoreOptions, Scored, score_bitext
from triemine.cleaning.pairs import Bitext, read_pairs
from triemine.config.configurations import configuration
from triemine.judging.model import check_reads, judge_path, load_judge
from triemine.judging.shipped import judge_only, learned, shipped_calibration, shipped
from triemine.models.model_dir import check_model_dir, load_model_dir, model_languages
from triemine.distributed import make_pool
from triemine.embedding.encoders import ENCODERS
from triemine.errors import InputError
from triemine.filtering import formats
from triemine.filtering.bicleaner import BicleanerUnavailable, check_model
from triemine.prepare.run import check_language
from triemine.scoring.precision import DEFAULT as DEFAULT_PRECISION, check_precision, \
    resolve_precision
from triemine.io import check_distinct, output_lock
from triemine.config.settings import check_value, flag_of

SHARED = ("combination", "judge", "density")  # ScoreOptions' settings declared in the tree

PairsArg = Union[str, os.PathLike, Tuple[str, str], Sequence[Tuple[str, str]]]


def _pair_files(pairs) -> list:
    """The files ``pairs`` names (one path, or a Moses pair of two), else ``[]`` (a list)."""
    if isinstance(pairs, (str, os.PathLike)):
        return [pairs]
    if isinstance(pairs, tuple) and len(pairs) == 2 and all(
            isinstance(p, (str, os.PathLike)) for p in pairs):
        return list(pairs)
    return []


def given_pairs(pairs: PairsArg, format: str = "auto",
                langs: Optional[Tuple[str, str]] = None) -> Bitext:
    """``pairs`` (see the module docstring) as a :class:`Bitext`, each pair the way round of
    ``langs`` (the model's source and target) where a file names its languages
    (:func:`triemine.cleaning.pairs.read_pairs`).  A path that is no file is an
    :class:`InputError` naming it; a list item that is not two strings, one naming its index."""
    files = _pair_files(pairs)
    if files:
        for p in files:
            if not os.fspath(p) or not os.path.isfile(p):
                raise InputError("no such file" if not os.path.exists(p) else
                                 "is not a file (a pairs file is expected)", os.fspath(p))
        return read_pairs(files if len(files) == 2 else files[0],
                          "moses" if format == "auto" and len(files) == 2 else format, langs)
    if isinstance(pairs, (bytes, bytearray)) or not isinstance(pairs, Sequence):
        raise InputError(f"pairs: expected a pairs file, a (source file, target file) pair or a "
                         f"list of (src, tgt) strings, got {type(pairs).__name__}")
    out = Bitext("pairs", "list")
    for i, item in enumerate(pairs):
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and
                all(isinstance(x, str) for x in item)):
            raise InputError(f"pairs[{i}]: expected a (src, tgt) pair of strings, got {item!r}")
        out.add(i + 1, item[0], item[1])
    return out.check()


def _int(name: str, value, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InputError(f"{name}: expected a whole number >= {least}, got {value!r}")


def check_options(opts: ScoreOptions) -> ScoreOptions:
    """``opts`` with every field checked before any work (no model loaded): an
    :class:`InputError` naming the field (as ``trie-mine-score``'s flag where it has one).
    ``langs`` as two codes CLD2 knows (lower case), ``min_prob`` in (0, 1), ``threshold``
    finite, not both, ``k >= 1``, a known ``encoder``, a ``config`` whose combined score this
    job computes (and, without ``threshold``, that ships a ``pairs`` calibration), a Bicleaner
    model that exists when ``bicleaner``, a ``precision`` this job runs (on the CPU; None and
    ``auto`` resolved to the arithmetic run)."""
    for name in ("min_prob", "threshold"):
        v = getattr(opts, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.number))
                              or not math.isfinite(v)):
            raise InputError(f"--{name.replace('_', '-')}: expected a finite number, got {v!r}")
    if opts.min_prob is not None and not 0 < opts.min_prob < 1:
        raise InputError(f"--min-prob must be in (0, 1), got {opts.min_prob!r}")
    if opts.min_prob is not None and opts.threshold is not None:
        raise InputError("give --min-prob or --threshold, not both")
    _int("k", opts.k, 1)
    if not isinstance(opts.encoder, str) or opts.encoder not in ENCODERS:
        raise InputError(f"encoder: unknown sentence encoder {opts.encoder!r} (choose from "
                         f"{', '.join(sorted(ENCODERS))})")
    if opts.langs is not None:
        if isinstance(opts.langs, str) or not isinstance(opts.langs, Sequence) or \
                len(opts.langs) != 2:
            raise InputError(f"--langs: expected two language codes (source, target), got "
                             f"{opts.langs!r}")
        opts.langs = tuple(check_language(x, "--langs") for x in opts.langs)
    for name in ("bicleaner",):
        if not isinstance(getattr(opts, name), bool):
            raise InputError(f"{name}: expected True or False, got {getattr(opts, name)!r}")
    if not isinstance(opts.config, str):
        raise InputError(f"--config: expected a configuration name, got {opts.config!r}")
    if opts.combination is None:
        comb = shipped(opts.config)
        missing = [f for f in comb.features if f not in opts.features()]
        if missing:
            raise InputError(f"--config {opts.config}: its combined score needs "
                             f"{', '.join(missing)}, which scoring given pairs does not compute "
                             "(a mining feature); use --config judge or combined")
    _check_judge(opts)
    if opts.calibration is None and not learned(opts.config) and \
            opts.threshold is None:
        shipped_calibration(opts.config, "pairs")  # none shipped: its error, naming it
    if opts.precision is None:  # the configuration's (combined: fp32), else auto
        opts.precision = configuration(opts.config).settings.get("precision", DEFAULT_PRECISION)
    # resolved before any work: the summary names the one run
    opts.precision = resolve_precision(opts.precision, "cpu")
    check_precision(opts.precision, "cpu")
    if opts.bicleaner:
        try:
            check_model(opts.bicleaner_model)
        except BicleanerUnavailable as exc:
            raise InputError(f"--bicleaner-model: {exc}") from None
    return opts


def _check_judge(opts: ScoreOptions) -> None:
    """The settings only a judge reads (``judge``, ``density``: by their one declaration, as
    ``trie-mine`` checks them) and, for a configuration with a judge, its file: read, checked
    and refused when it reads a column this job does not write (:data:`ScoreOptions.features`,
    ``combined``).  Without a judge ``judge`` and ``density`` are refused (ignored otherwise)."""
    for name in SHARED:
        setattr(opts, name, check_value(_field(name), getattr(opts, name),
                                        flag_of(_field(name))))
    if not learned(opts.config) or opts.calibration is not None:
        for name in ("judge", "density"):
            if getattr(opts, name) is not None:
                raise judge_only(flag_of(_field(name)),
                                 opts.config + (" with a calibration" if opts.calibration else ""))
        return
    judge = load_judge(opts.judge)  # a missing or broken judge file: its error, naming it
    check_reads(judge, set(opts.features()) | {"combined"}, judge_path(opts.judge),
                "trie-mine-score")


def _field(name: str):
    return next(f for f in fields(ScoreOptions) if f.name == name)


def score(pairs: PairsArg, *, model, output, format: str = "auto", workers: int = 0,
          ray: Optional[str] = None, resume: bool = False, progress: bool = False,
          bitext: Optional[str] = None, bitext_format: str = formats.DEFAULT,
          **options) -> Scored:
    """Score every pair of ``pairs`` with ``model`` (a model directory or a loaded one) and
    write the scores TSV ``output`` (one row per input pair, input order; compressed when its
    name ends in ``.gz``, ``.xz`` or ``.zst``); with ``bitext``, also the kept pairs in
    ``bitext_format``.  ``options``: :class:`ScoreOptions` fields (``min_prob``, ``threshold``,
    ``config``, ``langs``, ``bicleaner``, ``encoder``, ``k``, ``precision``; with
    ``config="judge"``: ``judge``, a judge file, and ``density``).
    ``workers``/``ray``: the exact scores' shards on a pool
    (:func:`triemine.distributed.make_pool`).

    Before any model is loaded: every argument is checked (:func:`check_options`; ``output``
    and ``bitext`` paths, ``workers >= 0``, ``resume``/``progress`` booleans, the pairs files
    exist), the outputs against the inputs and each other, their folders exist, and both
    ``output`` and ``bitext`` are locked for the run (a second job on either is refused).
    Raises :class:`InputError` for bad input (file, line and problem)."""
    try:
        opts = ScoreOptions(**options)
    except TypeError as exc:
        raise InputError(f"unknown option: {exc}") from None
    check_options(opts)
    if output is None or not isinstance(output, (str, os.PathLike)) or not os.fspath(output):
        raise InputError(f"output: expected a file path, got {output!r}")
    if bitext is not None and (not isinstance(bitext, (str, os.PathLike)) or
                               not os.fspath(bitext)):
        raise InputError(f"bitext: expected a file path, got {bitext!r}")
    _int("workers", workers, 0)
    for name, value in (("resume", resume), ("progress", progress)):
        if not isinstance(value, bool):
            raise InputError(f"{name}: expected True or False, got {value!r}")
    if ray is not None and not isinstance(ray, str):
        raise InputError(f"ray: expected an address, got {ray!r}")
    if model is None or not (isinstance(model, (str, os.PathLike)) or hasattr(model, "models")):
        raise InputError(f"model: expected a model directory or a loaded model, got {model!r}")
    model_langs = model_languages(model)
    inputs = [("PAIRS", p) for p in _pair_files(pairs)]
    model_path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else \
        os.fspath(getattr(model, "path", "") or "") or None
    langs = formats.languages({"model_path": model_path}, *(opts.langs or (None, None))) \
        if bitext else None
    bitexts = formats.outputs("--bitext", bitext_format, bitext, langs) if bitext else []
    check_distinct([("-o", output, True)] + bitexts, inputs)
    if bitext:
        formats.check_output(bitext_format, bitext, langs)
    bt = given_pairs(pairs, format, model_langs)
    if isinstance(model, (str, os.PathLike)):
        check_model_dir(model)
    with ExitStack() as locks:
        locks.enter_context(output_lock(os.fspath(output)))
        if bitext:
            locks.enter_context(output_lock(os.fspath(bitext)))
        if isinstance(model, (str, os.PathLike)):
            model = load_model_dir(model)
        pool = make_pool(workers, ray=ray, threads=int(os.environ.get("OMP_NUM_THREADS") or 1)) \
            if (workers or ray) else None
        if pool is not None:
            with pool:
                res = score_bitext(model, bt, output, opts, pool=pool, resume=resume,
                                   progress=progress)
        else:
            res = score_bitext(model, bt, output, opts, resume=resume, progress=progress)
        if bitext:
            res.summary["bitext"] = formats.write(res.pairs(), bitext, bitext_format, langs)
    return res


__all__ = ["Bitext", "ScoreOptions", "Scored", "check_options", "given_pairs", "read_pairs",
           "score", "score_bitext"]
