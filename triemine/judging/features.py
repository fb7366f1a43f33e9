"""The judge's features of a pair that its texts give, and the lists of features it reads.

The exact features (``ce_token``, ``ce_word``, ``pmi``, ``prior``, ``numerals``,
``uncovered``, ``eos_lp``, ``tok_min_lp``) come from the mining job's exact stage and its
derived scores (:mod:`triemine.mining.features`), the encoder's from its kNN (``use_cos``,
``use_margin``); this module adds what the texts alone say, by the same functions for mined
candidates (:func:`triemine.mining.finish.finish_tsv`) and given pairs
(:func:`triemine.cleaning.job.score_pairs`):

* :func:`length_features`: ``src_chars``, ``tgt_chars`` and ``len_ratio``;
* :func:`number_features`: ``number_match`` (:func:`triemine.judging.numbers.number_matches`);
* :func:`text_features`: both.

Shapes: ``src``/``tgt`` are the pairs' texts, one a pair; each column is a float64 array of one
value a pair.
"""
from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np

from triemine.judging.numbers import number_matches

# what the judge reads of a pair, mined or given: the exact pass's columns (``uncovered`` with
# coverage on), the encoder's and the text features
MINED_FEATURES = ("use_margin", "use_cos", "ce_token", "ce_word", "pmi", "prior", "numerals",
                  "uncovered", "eos_lp", "tok_min_lp", "len_ratio", "number_match")
TEXT_COLUMNS = ("src_chars", "tgt_chars", "len_ratio", "number_match")


def length_features(src: Sequence[str], tgt: Sequence[str]) -> Dict[str, np.ndarray]:
    """``src_chars``, ``tgt_chars`` and ``len_ratio`` = log((tgt chars + 1) / (src chars + 1))
    of each pair."""
    a = np.fromiter((len(s) for s in src), dtype=np.float64, count=len(src))
    b = np.fromiter((len(t) for t in tgt), dtype=np.float64, count=len(tgt))
    return {"src_chars": a, "tgt_chars": b, "len_ratio": np.log((b + 1) / (a + 1))}


def number_features(src: Sequence[str], tgt: Sequence[str]) -> Dict[str, np.ndarray]:
    """``number_match`` of each pair (:func:`triemine.judging.numbers.number_match`)."""
    return {"number_match": number_matches(list(src), list(tgt))}


def text_features(src: Sequence[str], tgt: Sequence[str]) -> Dict[str, np.ndarray]:
    """:data:`TEXT_COLUMNS` of each pair (:func:`length_features`, :func:`number_features`)."""
    if len(src) != len(tgt):
        raise ValueError(f"{len(src)} sources for {len(tgt)} targets")
    return {**length_features(src, tgt), **number_features(src, tgt)}


def matrix(columns: Mapping[str, np.ndarray], features: Sequence[str]) -> np.ndarray:
    """The ``(pairs, len(features))`` float64 matrix of ``features`` from ``columns``; a
    ``KeyError`` naming the missing ones."""
    missing = [f for f in features if f not in columns]
    if missing:
        raise KeyError(f"the judge needs the column(s) {', '.join(missing)}")
    return np.stack([np.asarray(columns[f], dtype=np.float64) for f in features], axis=1)
