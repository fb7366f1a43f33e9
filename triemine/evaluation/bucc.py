"""Reading BUCC-style data and the miner's output.

* BUCC layout: ``<l1>-<l2>.<split>.<l1>`` and ``.<l2>`` hold ``id<TAB>sentence`` lines, and
  ``<l1>-<l2>.<split>.gold`` holds ``l1-id<TAB>l2-id`` lines. Plain one-sentence-per-line files
  are accepted as corpora too (their ids are 1-based line numbers, as in ``triemine.io.corpus``).
* The mining TSV written by ``trie-mine`` is read by :mod:`triemine.io.tsv`; this module checks that
  its ids exist in the BUCC corpora.

Every reader raises :class:`triemine.errors.InputError` naming file, line and problem.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple


from triemine.io import Mined, read_corpus, read_text
from triemine.errors import describe, InputError

_BUCC_NAME = re.compile(r"^(?P<l1>[^.\-]+)-(?P<l2>[^.\-]+)\.(?P<split>[^.]+)\.(?P<kind>[^.]+)$")


# ---------------------------------------------------------------------------------------------
# corpora
# ---------------------------------------------------------------------------------------------

@dataclass
class Sentences:
    """Ids and texts of one corpus (same fields as ``triemine.io.corpus.Corpus``)."""

    path: str
    ids: List[str]
    texts: List[str]
    format: str
    _index: Optional[Dict[str, int]] = field(default=None, repr=False)

    def index(self) -> Dict[str, int]:
        if self._index is None:
            self._index = {cid: i for i, cid in enumerate(self.ids)}
        return self._index

    def text_of(self, cid: str) -> str:
        return self.texts[self.index()[cid]]


def read_sentences(path: os.PathLike | str) -> Sentences:
    """Read a BUCC ``id<TAB>sentence`` file or a plain one-sentence-per-line file
    (``triemine.io.corpus.read_corpus`` rules: plain-text ids are 1-based line numbers)."""
    path = os.fspath(path)
    corpus = read_corpus(path)
    return Sentences(path, list(corpus.ids), list(corpus.texts), corpus.format)


def read_gold(path: os.PathLike | str) -> List[Tuple[str, str]]:
    """Gold pairs ``l1-id<TAB>l2-id``, in file order; duplicates, malformed lines and a file
    without any pair are errors."""
    path = os.fspath(path)
    if describe(path):
        raise InputError(f"gold file {describe(path)}", path)
    pairs: List[Tuple[str, str]] = []
    seen: Dict[Tuple[str, str], int] = {}
    for no, line in enumerate(read_text(path, "gold file").split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2 or not cols[0] or not cols[1]:
            raise InputError(f"expected 'src-id<TAB>tgt-id', got {len(cols)} column(s)", path, no)
        pair = (cols[0], cols[1])
        if pair in seen:
            raise InputError(f"duplicate gold pair (first on line {seen[pair]})", path, no)
        seen[pair] = no
        pairs.append(pair)
    if not pairs:
        raise InputError("gold file has no pairs (expected 'src-id<TAB>tgt-id' lines)", path)
    return pairs


@dataclass
class BuccSet:
    l1: str
    l2: str
    split: str
    src: Sentences
    tgt: Sentences
    gold: List[Tuple[str, str]]
    gold_path: str


def bucc_files(gold_path: os.PathLike | str) -> Tuple[str, str, str, str, str]:
    """``(l1, l2, split, l1_path, l2_path)`` for a gold file named ``<l1>-<l2>.<split>.gold``."""
    gold_path = os.fspath(gold_path)
    m = _BUCC_NAME.match(os.path.basename(gold_path))
    if not m or m.group("kind") != "gold":
        raise InputError("not a BUCC gold file name (expected <l1>-<l2>.<split>.gold)", gold_path)
    base = gold_path[: -len(".gold")]
    return (m.group("l1"), m.group("l2"), m.group("split"), f"{base}.{m.group('l1')}",
            f"{base}.{m.group('l2')}")


def read_bucc(gold_path: os.PathLike | str, src_path: Optional[str] = None,
              tgt_path: Optional[str] = None) -> BuccSet:
    """Read a BUCC set from its gold file; the corpora default to the BUCC file names beside it.

    Every gold id must exist in its corpus.
    """
    gold_path = os.fspath(gold_path)
    try:
        l1, l2, split, p1, p2 = bucc_files(gold_path)
    except InputError:
        if src_path is None or tgt_path is None:
            raise
        l1, l2, split = _lang_of(src_path), _lang_of(tgt_path), "custom"
        p1, p2 = src_path, tgt_path
    src = read_sentences(src_path or p1)
    tgt = read_sentences(tgt_path or p2)
    gold = read_gold(gold_path)
    check_ids(gold, src, tgt, gold_path, line_of=_gold_line_numbers(gold_path))
    return BuccSet(l1, l2, split, src, tgt, gold, gold_path)


def _gold_line_numbers(path: str) -> Dict[Tuple[str, str], int]:
    out: Dict[Tuple[str, str], int] = {}
    for no, line in enumerate(read_text(path, "gold file").split("\n"), 1):
        cols = line.rstrip("\r").split("\t")
        if len(cols) == 2:
            out.setdefault((cols[0], cols[1]), no)
    return out


def check_ids(pairs: Iterable[Tuple[str, str]], src: Sentences, tgt: Sentences, path: str,
              line_of: Optional[Dict[Tuple[str, str], int]] = None,
              lines: Optional[Sequence[int]] = None) -> None:
    """Raise InputError for the first pair whose source or target id is not in its corpus."""
    si, ti = src.index(), tgt.index()
    for k, (s, t) in enumerate(pairs):
        bad = None
        if s not in si:
            bad = f"source id {s!r} is not in {src.path}"
        elif t not in ti:
            bad = f"target id {t!r} is not in {tgt.path}"
        if bad:
            line = None
            if line_of is not None:
                line = line_of.get((s, t))
            elif lines is not None:
                line = lines[k]
            raise InputError(bad, path, line)


def _lang_of(path_or_lang: str) -> str:
    """``zh`` for ``zh``, ``.../zh-en.sample.zh`` or ``train.zh``; else the file name."""
    s = os.path.basename(str(path_or_lang))
    if re.fullmatch(r"[A-Za-z]{2,3}", s):
        return s
    suffix = s.rsplit(".", 1)[-1] if "." in s else s
    return suffix


# ---------------------------------------------------------------------------------------------
# mining TSV ids (the format itself lives in triemine.io.tsv)
# ---------------------------------------------------------------------------------------------

def check_mined_ids(mined: Mined, src: Sentences, tgt: Sentences) -> None:
    """Every row's ids must exist in the corpora it claims to come from."""
    check_ids(zip(mined.src_ids, mined.tgt_ids), src, tgt, mined.path, lines=mined.lines.tolist())
