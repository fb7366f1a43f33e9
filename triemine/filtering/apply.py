"""``trie-mine-filter``'s work, without the command line: the thresholds, each mining TSV's
selection and filter, the kept rows and the bitext (the union of the directions).

:func:`filter_tsvs` is what :func:`triemine.cli.filter_main` runs once its arguments are
checked; the TSVs come scored (the Bicleaner or baseline columns added by
:func:`triemine.baselines.systems.with_scores`), so this module needs neither.
"""
from __future__ import annotations

import sys
from typing import List, Optional, Sequence, Tuple

import numpy as np

from triemine.errors import InputError
from triemine.filtering import registry
from triemine.filtering.selection import choose, load_thresholds, write_pairs, write_union
from triemine.io import Mined, record_bitext, write_mined

THRESHOLD_FLAGS = "--thresholds, --ce-max, --bicleaner-min or --threshold"


def thresholds_of(thresholds: Optional[str], ce_max: Optional[float],
                  bicleaner_min: Optional[float], named: Sequence[Tuple[str, float]]):
    """``(saved, given)``: the thresholds file's (None without one) and those given by name
    (``ce_max`` for ``ce_word``, ``bicleaner_min`` for ``bicleaner``, then ``named``)."""
    given = registry.named_thresholds([("ce_word", ce_max), ("bicleaner", bicleaner_min)]
                                      + list(named))
    return (load_thresholds(thresholds) if thresholds else None), given


def filter_tsvs(mineds: Sequence[Mined], paths: Sequence[str], *, saved, given, filt=None,
                rule=None, rank_by=None, output: Optional[str] = None,
                bitext: Optional[str] = None, bitext_format: str = "", langs=None,
                given_as: str = "given") -> List[Mined]:
    """Each of ``mineds`` (read from ``paths``; the second the other direction) selected and
    filtered (:func:`~triemine.filtering.selection.choose`), its count said on stderr; the kept
    rows of each written to ``output`` when given; with ``bitext``, the kept pairs (the union of
    both directions: each id pair once) in ``bitext_format`` and, with ``output``, recorded in
    its sidecar (``given_as``: how the count's line names where ``given`` came from).
    Returns the kept rows of each.  A threshold problem is an
    :class:`~triemine.errors.InputError` naming the flags that give them."""
    kepts = []
    for k, (mined, path) in enumerate(zip(mineds, paths)):
        try:
            sel = choose(mined, saved=saved, index=k, given=given, filt=filt, rule=rule,
                         rank_by=rank_by, given_as=given_as)
        except InputError as exc:
            if exc.path is not None:
                raise
            raise InputError(f"{exc.problem} ({THRESHOLD_FLAGS})") from None
        kept = mined.take(sel.keep(mined))
        print(f"{path}: kept {len(kept)} of {len(mined)} rows ({sel.text()})", file=sys.stderr)
        if output:
            write_mined(kept, output)
        kepts.append(kept)
    if bitext:
        n = (write_union(kepts, bitext, bitext_format, *langs) if len(kepts) > 1
             else write_pairs(kepts[0], np.arange(len(kepts[0])), bitext, bitext_format, *langs))
        if output:
            record_bitext(output, bitext, bitext_format, n, langs)
        print(f"{bitext}: {n} pairs", file=sys.stderr)
    return kepts
