"""The mining job's settings: its candidate generators' and its scores' nodes of the settings tree
(:class:`triemine.mining.options.MineOptions`; each field declares its default, help, range
and flag, :mod:`triemine.config.settings`).  A configuration's record
(:mod:`triemine.config.configurations`) gives some
of them other values; a user's flags or keyword arguments override both."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from triemine.embedding.encoders import ENCODERS
from triemine.embedding.knn import KNN_INDEXES
from triemine.config.settings import finite, setting


@dataclass(frozen=True)
class NeighbourSettings:
    """Candidates from a sentence space: the encoder kNN generator's (``encoder``,
    ``knn_index``) and, with ``k``, ``per_source``, ``per_target``, the translation retrieval
    generator's ratio-margin neighbourhoods too."""

    encoder: str = setting("use", "sentence encoder of the knn generator (default {encoder})",
                           flag="--encoder", choices=lambda: sorted(ENCODERS))
    # the kNN search: exact, an IVF index, HNSW graphs, or auto (exact up to a size:
    # triemine.embedding.knn_shards.knn_method)
    knn_index: str = setting("auto", "knn: exact search, IVF index, HNSW graphs; default auto: "
                             "exact up to 2^34 query x database pairs (docs/scale.md)",
                             flag="--knn-index", choices=lambda: KNN_INDEXES)
    k: int = setting(4, low=1)            # neighbours a side of the ratio margin
    per_source: int = setting(2, low=1)   # candidates kept per source
    per_target: int = setting(1, low=1)   # candidates kept per target
    min_margin: Optional[float] = setting(
        1.02, "knn and retrieval: keep pairs with at least this ratio margin before exact "
        "scoring (default {min_margin})", flag="--min-margin", parse=finite,
        also=("retrieval_min_margin",))


@dataclass(frozen=True)
class RetrievalSettings:
    """The translation retrieval generator: the MT model's own translations, retrieved by
    TF-IDF."""

    translate_beam: int = setting(4, low=1)                 # beam of the translations
    retrieval_min_margin: Optional[float] = setting(None)   # its ratio margin's floor


@dataclass(frozen=True)
class LookSettings:
    """The second look (:mod:`triemine.mining.second_look`) of a configuration that lists it:
    the sources left without a kept pair get the ``look_k`` targets, among those left without
    one, nearest to the model's own translation in the encoder's space (cosine at least
    ``look_min_cos``), judged as every candidate is."""

    second_look: bool = setting(False, exclusive={
        "--second-look": (True, "a second look for the sources without a kept pair, by the MT "
                                "model's translation (configurations that list it: "
                                "docs/mining.md)"),
        "--no-second-look": (False, "no second look (default)")})
    look_k: int = setting(2, low=1)               # targets proposed per unpaired source
    look_min_cos: float = setting(0.54, parse=finite)  # floor of their cosine (chosen on
    #                                     devsets/zh-en/train: keeps 95% of true pairs)


@dataclass(frozen=True)
class DedupSettings:
    """Duplicate lines (:mod:`triemine.mining.dedup`): each distinct text mined once, the pairs
    written under their first ids with ``src_dups``/``tgt_dups``."""

    dedup: bool = setting(True, "mine every line, duplicates too (default: each distinct "
                          "normalised text once, docs/dedup.md)", flag="--no-dedup", const=False)
    every_pair: bool = setting(False, "the kept pairs (--bitext) with one row per (source id, "
                               "target id) of their duplicates, not only the first ids",
                               flag="--every-pair", const=True)
    dedup_case: bool = setting(False, "duplicates ignore case", flag="--dedup-case", const=True)
    dedup_punct: bool = setting(False, "duplicates ignore punctuation", flag="--dedup-punct",
                                const=True)


@dataclass(frozen=True)
class ScoreSettings:
    """The exact scores and the combined score of every candidate."""

    priors: bool = setting(True)  # the targets' priors log P(y|empty source), and pmi
    combination: Optional[str] = setting(
        None, "the combined score: a shipped name or a JSON file (default: the configuration's, "
        "e.g. combined or mt-only)", flag="--combination")
    coverage: bool = setting(False)  # the exact pass also gives `uncovered` (cross-attention)
    judge: Optional[str] = setting(
        None, "the judge of --config judge: a file from trie-mine-train-judge (default: the "
        "shipped one, triemine/judging/judge.json)", flag="--judge", path=True)
    density: Optional[float] = setting(
        None, "the expected share of the candidates (or given pairs) that are translations: the "
        "judge's prob is shifted to it (default: the share estimated from them)",
        flag="--density", low=1e-6, high=0.999999, parse=finite)
