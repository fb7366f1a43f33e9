"""Reading BUCC-style data and the miner's output.

* BUCC layout: ``<l1>-<l2>.<split>.<l1>`` and ``.<l2>`` hold ``id<TAB>sentence`` lines, and
  ``<l1>-<l2>.<split>.gold`` holds ``l1-id<TAB>l2-id`` lines. Plain one-sentence-per-line files
  are accepted as corpora too (their ids are 1-based line numbers, as in ``triemine.corpus``).
* Mining TSV (written by ``trie-mine``): a header line naming the columns, at least
  ``src_id tgt_id score ce_word ce_token src tgt``; extra numeric columns (``bicleaner``, added by
  ``trie-mine-filter``) may follow. An optional ``<file>.meta.json`` sidecar describes the run
  (keys ``model source target mode beam nbest target_spm``).

Every reader raises :class:`triemine.errors.InputError` naming file, line and problem.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from triemine.errors import InputError

MINED_COLUMNS = ("src_id", "tgt_id", "score", "ce_word", "ce_token", "src", "tgt")
TEXT_COLUMNS = ("src_id", "tgt_id", "src", "tgt")
_BUCC_NAME = re.compile(r"^(?P<l1>[^.\-]+)-(?P<l2>[^.\-]+)\.(?P<split>[^.]+)\.(?P<kind>[^.]+)$")


# ---------------------------------------------------------------------------------------------
# corpora
# ---------------------------------------------------------------------------------------------

@dataclass
class Sentences:
    """Ids and texts of one corpus (same fields as ``triemine.corpus.Corpus``)."""

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
    (``triemine.corpus.read_corpus`` rules: plain-text ids are 1-based line numbers)."""
    from triemine.corpus import read_corpus

    path = os.fspath(path)
    corpus = read_corpus(path)
    return Sentences(path, list(corpus.ids), list(corpus.texts), corpus.format)


def read_gold(path: os.PathLike | str) -> List[Tuple[str, str]]:
    """Gold pairs ``l1-id<TAB>l2-id``, in file order; duplicates and malformed lines are errors."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError("gold file not found", path)
    pairs: List[Tuple[str, str]] = []
    seen: Dict[Tuple[str, str], int] = {}
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
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
    return m.group("l1"), m.group("l2"), m.group("split"), f"{base}.{m.group('l1')}", f"{base}.{m.group('l2')}"


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
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            cols = line.rstrip("\r\n").split("\t")
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
# mining TSV
# ---------------------------------------------------------------------------------------------

@dataclass
class Mined:
    """Rows of a mining TSV. Numeric columns are float64 arrays, text columns lists of str."""

    path: str
    columns: List[str]
    src_ids: List[str]
    tgt_ids: List[str]
    src: List[str]
    tgt: List[str]
    numeric: Dict[str, np.ndarray]
    lines: np.ndarray  # 1-based line number of every row in ``path``
    meta: Dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.src_ids)

    def col(self, name: str) -> np.ndarray:
        if name not in self.numeric:
            raise InputError(f"no column {name!r} (columns: {' '.join(self.columns)})", self.path)
        return self.numeric[name]

    def take(self, idx: np.ndarray) -> "Mined":
        idx = np.asarray(idx, dtype=np.int64)
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        return Mined(self.path, list(self.columns), pick(self.src_ids), pick(self.tgt_ids),
                     pick(self.src), pick(self.tgt), {k: v[idx] for k, v in self.numeric.items()},
                     self.lines[idx], dict(self.meta))

    def with_column(self, name: str, values: np.ndarray) -> "Mined":
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(self),):
            raise ValueError(f"column {name}: {values.shape} values for {len(self)} rows")
        numeric = dict(self.numeric)
        numeric[name] = values
        columns = list(self.columns) if name in self.columns else list(self.columns) + [name]
        return Mined(self.path, columns, self.src_ids, self.tgt_ids, self.src, self.tgt, numeric,
                     self.lines, dict(self.meta))


def read_meta(tsv_path: os.PathLike | str) -> Dict[str, object]:
    """The ``<tsv>.meta.json`` sidecar written by trie-mine; else the settings in ``<tsv>.progress``
    (trie-mine's resume file); else ``{}``."""
    meta_path = os.fspath(tsv_path) + ".meta.json"
    if not os.path.isfile(meta_path):
        return _progress_settings(os.fspath(tsv_path) + ".progress")
    try:
        with open(meta_path, encoding="utf-8") as fh:
            meta = json.load(fh)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", meta_path, exc.lineno) from None
    if not isinstance(meta, dict):
        raise InputError("expected a JSON object", meta_path, 1)
    return meta


def _progress_settings(path: str) -> Dict[str, object]:
    """Fallback: the run settings trie-mine keeps in ``OUT.progress`` for ``--resume``."""
    try:
        with open(path, encoding="utf-8") as fh:
            settings = json.load(fh).get("settings", {})
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(settings, dict):
        return {}
    return {k: settings[k] for k in ("model", "source", "target", "mode", "beam", "nbest") if k in settings}


def read_mined(path: os.PathLike | str) -> Mined:
    """Read a mining TSV; missing columns, bad or non-finite numbers are InputErrors."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError("mining TSV not found", path)
    with open(path, encoding="utf-8", newline="\n") as fh:
        header_line = fh.readline().rstrip("\r\n")
        columns = header_line.split("\t")
        if header_line == "" or columns[0] != "src_id":
            raise InputError("missing header line (expected 'src_id<TAB>tgt_id<TAB>score<TAB>"
                             "ce_word<TAB>ce_token<TAB>src<TAB>tgt')", path, 1)
        missing = [c for c in MINED_COLUMNS if c not in columns]
        if missing:
            raise InputError(f"header lacks column(s) {', '.join(missing)}", path, 1)
        if len(set(columns)) != len(columns):
            raise InputError("header names a column twice", path, 1)
        pos = {c: i for i, c in enumerate(columns)}
        num_names = [c for c in columns if c not in TEXT_COLUMNS]
        text = {c: [] for c in TEXT_COLUMNS}
        nums: Dict[str, List[float]] = {c: [] for c in num_names}
        lines: List[int] = []
        ncol = len(columns)
        for no, line in enumerate(fh, 2):
            line = line.rstrip("\r\n")
            if not line:
                raise InputError("empty line", path, no)
            cells = line.split("\t")
            if len(cells) != ncol:
                raise InputError(f"expected {ncol} tab-separated columns ({' '.join(columns)}), "
                                 f"got {len(cells)}", path, no)
            for c in TEXT_COLUMNS:
                text[c].append(cells[pos[c]])
            for c in num_names:
                cell = cells[pos[c]]
                try:
                    v = float(cell)
                except ValueError:
                    raise InputError(f"column {c}: not a number: {cell!r}", path, no) from None
                if not math.isfinite(v):
                    raise InputError(f"column {c}: {cell} is not a finite number", path, no)
                nums[c].append(v)
            if not text["src_id"][-1] or not text["tgt_id"][-1]:
                raise InputError("empty src_id or tgt_id", path, no)
            lines.append(no)
    return Mined(path, columns, text["src_id"], text["tgt_id"], text["src"], text["tgt"],
                 {c: np.asarray(v, dtype=np.float64) for c, v in nums.items()},
                 np.asarray(lines, dtype=np.int64), read_meta(path))


def write_mined(mined: Mined, path: os.PathLike | str) -> None:
    """Write rows with the same columns (numeric ones with full float precision)."""
    path = os.fspath(path)
    cols = mined.columns
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\t".join(cols) + "\n")
        textcols = {"src_id": mined.src_ids, "tgt_id": mined.tgt_ids, "src": mined.src, "tgt": mined.tgt}
        for i in range(len(mined)):
            row = [textcols[c][i] if c in textcols else repr(float(mined.numeric[c][i])) for c in cols]
            fh.write("\t".join(row) + "\n")
    if mined.meta:
        with open(path + ".meta.json", "w", encoding="utf-8") as fh:
            json.dump(mined.meta, fh, indent=1, sort_keys=True)
            fh.write("\n")


def check_mined_ids(mined: Mined, src: Sentences, tgt: Sentences) -> None:
    """Every row's ids must exist in the corpora it claims to come from."""
    check_ids(zip(mined.src_ids, mined.tgt_ids), src, tgt, mined.path, lines=mined.lines.tolist())
