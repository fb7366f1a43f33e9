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

import os
from typing import Optional, Sequence, Tuple, Union

from triemine.cleaning.job import ScoreOptions, Scored, score_bitext
from triemine.cleaning.pairs import Bitext, read_pairs
from triemine.models.model_dir import load_model_dir
from triemine.distributed import make_pool
from triemine.errors import InputError
from triemine.filtering import formats
from triemine.io import check_distinct, output_lock

PairsArg = Union[str, os.PathLike, Tuple[str, str], Sequence[Tuple[str, str]]]


def given_pairs(pairs: PairsArg, format: str = "auto") -> Bitext:
    """``pairs`` (see the module docstring) as a :class:`Bitext`."""
    if isinstance(pairs, (str, os.PathLike)):
        return read_pairs(pairs, format)
    if isinstance(pairs, tuple) and len(pairs) == 2 and all(
            isinstance(p, (str, os.PathLike)) and os.path.isfile(p) for p in pairs):
        return read_pairs(list(pairs), "moses" if format == "auto" else format)
    out = Bitext("pairs", "list")
    for i, item in enumerate(pairs):
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and
                all(isinstance(x, str) for x in item)):
            raise InputError(f"pairs[{i}]: expected a (src, tgt) pair of strings, got {item!r}")
        out.add(i + 1, item[0], item[1])
    return out.check()


def score(pairs: PairsArg, *, model, output, format: str = "auto", workers: int = 0,
          ray: Optional[str] = None, resume: bool = False, progress: bool = False,
          bitext: Optional[str] = None, bitext_format: str = formats.DEFAULT,
          **options) -> Scored:
    """Score every pair of ``pairs`` with ``model`` (a model directory or a loaded one) and
    write the scores TSV ``output`` (one row per input pair, input order); with ``bitext``,
    also the kept pairs in ``bitext_format``.  ``options``: :class:`ScoreOptions` fields
    (``min_prob``, ``threshold``, ``config``, ``langs``, ``bicleaner``, ``encoder``, ``k``;
    with ``config="judge"``: ``judge``, a judge file, and ``density``).
    ``workers``/``ray``: the exact scores' shards on a pool
    (:func:`triemine.distributed.make_pool`). Raises :class:`InputError` for bad input (file, line
    and problem)."""
    try:
        opts = ScoreOptions(**options)
    except TypeError as exc:
        raise InputError(f"unknown option: {exc}") from None
    if opts.min_prob is not None and opts.threshold is not None:
        raise InputError("give --min-prob or --threshold, not both")
    inputs = [("PAIRS", p) for p in ([pairs] if isinstance(pairs, (str, os.PathLike)) else
                                     pairs if isinstance(pairs, tuple) and
                                     all(isinstance(p, (str, os.PathLike)) for p in pairs)
                                     else [])]
    model_path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else \
        os.fspath(getattr(model, "path", "") or "") or None
    langs = formats.languages({"model_path": model_path}, *(opts.langs or (None, None))) \
        if bitext else None
    bitexts = [("--bitext", out, "folder" if folder else False)
               for out, folder in formats.output_paths(bitext_format, bitext, langs)] \
        if bitext else []
    check_distinct([("-o", output, True)] + bitexts, inputs)
    bt = given_pairs(pairs, format)
    if isinstance(model, (str, os.PathLike)):
        model = load_model_dir(model)
    pool = make_pool(workers, ray=ray, threads=int(os.environ.get("OMP_NUM_THREADS") or 1)) \
        if (workers or ray) else None
    with output_lock(os.fspath(output)):
        if pool is not None:
            with pool:
                res = score_bitext(model, bt, output, opts, pool=pool, resume=resume,
                                   progress=progress)
        else:
            res = score_bitext(model, bt, output, opts, resume=resume, progress=progress)
    if bitext:
        res.summary["bitext"] = formats.write(res.pairs(), bitext, bitext_format, langs)
    return res


__all__ = ["Bitext", "ScoreOptions", "Scored", "given_pairs", "read_pairs", "score",
           "score_bitext"]
