"""The mining TSV and its sidecars: the one home of the format.

``OUT.tsv`` (written by ``trie-mine``, read by ``trie-mine-eval``/``trie-mine-filter``): a header
line naming the columns, then one row per (source, target line) pair.  Required columns, in any
order: ``src_id tgt_id score ce_word ce_token src tgt``; every other column is numeric and names a
score of the registry (:mod:`triemine.filtering.registry`), e.g. ``prior``, ``pmi``, ``bicleaner``.
Numbers must be finite.  ``trie-mine`` writes the required columns first, in that order, then
``prior``, ``pmi``, ``combined`` when present, the other numeric columns sorted by name and
``origin`` last (:func:`column_order`), numbers with 6 decimals; one writer does it for the trie
search and the mining job alike (:func:`format_rows`, :func:`write_rows`).

Sidecars:

* ``OUT.tsv.meta.json``: what produced the file (model, mode, beam, ...), for signatures, and
  ``rows``: the number of rows the writer wrote (``null`` while a ``--config paper`` run is
  still appending them): a reader refuses a file that holds other rows than that, e.g. one cut
  at a line boundary or a killed run's (:func:`check_rows`; files without the key, written
  before it was added, are read as they are);
* ``OUT.tsv.progress``: the run settings, the number of sources done, the byte offset of the
  last complete block of sources and the CRC32 of the output up to it, which makes ``--resume``
  exact (nothing lost, nothing duplicated), and a CRC32 of the whole record.  A progress file
  that is damaged, or an output that is not what it records (truncated, emptied, changed in
  place), is named in a warning and the run starts over.

Reading accepts a UTF-8 BOM and CRLF line ends; everything else that is wrong is an
:class:`~triemine.errors.InputError` naming the file, the line and the problem.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from triemine.io.checksum import crc32_range, json_crc32
from triemine.io.compression import plain_copy
from triemine.errors import InputError, describe
from triemine.io.keys import older_key
from triemine.io.outfile import atomic_write, write_text
from triemine.io.textfile import decode_utf8, open_binary, read_bytes, read_json

REQUIRED_COLUMNS = ("src_id", "tgt_id", "score", "ce_word", "ce_token", "src", "tgt")
TEXT_COLUMNS = ("src_id", "tgt_id", "src", "tgt")
# numeric columns written right after the required ones, in this order when present
LEADING_COLUMNS = ("prior", "pmi", "combined")
LAST_COLUMN = "origin"  # the mining job's bitmask of generators, written last
HEADER = "\t".join(REQUIRED_COLUMNS)
META_SUFFIX = ".meta.json"
PROGRESS_SUFFIX = ".progress"


def column_order(numeric: Iterable[str]) -> List[str]:
    """The columns of a mining TSV holding the ``numeric`` columns: the required ones, then
    :data:`LEADING_COLUMNS` that are present, the others sorted, ``origin`` last."""
    have = set(numeric) - set(REQUIRED_COLUMNS)
    lead = [c for c in LEADING_COLUMNS if c in have]
    rest = sorted(have - set(lead) - {LAST_COLUMN})
    return list(REQUIRED_COLUMNS) + lead + rest + ([LAST_COLUMN] if LAST_COLUMN in have else [])


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

    @classmethod
    def from_columns(cls, src_ids: Sequence[str], tgt_ids: Sequence[str], src: Sequence[str],
                     tgt: Sequence[str], numeric: Dict[str, np.ndarray], meta=None,
                     path: str = "<memory>") -> "Mined":
        """Rows built in memory (e.g. a baseline's scores) for the evaluation code."""
        numeric = {k: np.asarray(v, dtype=np.float64) for k, v in numeric.items()}
        return cls(path, list(REQUIRED_COLUMNS[:2]) + list(numeric) + ["src", "tgt"],
                   list(src_ids), list(tgt_ids), list(src), list(tgt), numeric,
                   np.arange(2, len(src_ids) + 2, dtype=np.int64), dict(meta or {}))

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
        if name in TEXT_COLUMNS:
            raise ValueError(f"{name} is a text column")
        numeric = dict(self.numeric)
        numeric[name] = values
        columns = list(self.columns) if name in self.columns else list(self.columns) + [name]
        return Mined(self.path, columns, self.src_ids, self.tgt_ids, self.src, self.tgt, numeric,
                     self.lines, dict(self.meta))


# -- sidecars ------------------------------------------------------------------------------------

# what to do about a mining TSV or sidecar that could not be written (filter and eval have no
# --resume; trie-mine keeps its finished stages for it)
WRITE_HINT = "fix this and run again; trie-mine keeps its finished work for --resume"


def _atomic_write_text(path: Path, text: str) -> None:
    write_text(path, text, "output", WRITE_HINT)


def read_meta(tsv_path) -> Dict[str, object]:
    """The ``<tsv>.meta.json`` sidecar; else the settings in ``<tsv>.progress``; else ``{}``."""
    meta_path = os.fspath(tsv_path) + META_SUFFIX
    if not os.path.isfile(meta_path):
        return _progress_settings(os.fspath(tsv_path) + PROGRESS_SUFFIX)
    meta = read_json(meta_path, "run sidecar")
    if not isinstance(meta, dict):
        raise InputError("expected a JSON object", meta_path, 1)
    return meta


def check_rows(path, meta: Mapping[str, object], rows: int) -> None:
    """Refuse a mining TSV of ``rows`` rows whose ``.meta.json`` records another count (or
    ``null``: a run that has not finished)."""
    if "rows" not in meta:
        return
    want = meta["rows"]
    if want is None:
        raise InputError("the run writing this file has not finished (its .meta.json records "
                         "no row count yet): wait for it, or finish it with trie-mine --resume",
                         path)
    if not isinstance(want, int) or isinstance(want, bool) or want != rows:
        raise InputError(f"holds {rows} rows but its .meta.json records {want!r}: the file was "
                         "cut or changed after it was written (run the job again)", path)


def count_rows(path) -> int:
    """The rows of a mining TSV (its lines after the header), counted as a stream."""
    n = 0
    last = b"\n"
    with open_binary(path, "mining TSV") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            n += block.count(b"\n")
            last = block[-1:]
    return max(0, n + (last != b"\n") - 1)


def write_meta(tsv_path, meta: Dict[str, object]) -> None:
    _atomic_write_text(Path(os.fspath(tsv_path) + META_SUFFIX),
                       json.dumps(meta, ensure_ascii=False, sort_keys=True) + "\n")


def record_bitext(tsv_path, bitext_path, fmt: str, pairs: int,
                  languages: Optional[Sequence[str]] = None) -> None:
    """Add to ``<tsv>.meta.json`` the key ``bitext``: ``{"path": absolute path, "format": the
    bitext format's name (:data:`triemine.filtering.formats.FORMATS`), "pairs": how many,
    "languages": [l1, l2] (when the format names them)}``, the rest of the sidecar kept."""
    meta = read_meta(tsv_path) if os.path.isfile(os.fspath(tsv_path) + META_SUFFIX) else {}
    rec = {"path": os.path.abspath(os.fspath(bitext_path)), "format": fmt, "pairs": int(pairs)}
    if languages is not None:
        rec["languages"] = list(languages)
    write_meta(tsv_path, dict(meta, bitext=rec))


def _progress_settings(path: str) -> Dict[str, object]:
    """Fallback for signatures: the run settings trie-mine keeps in ``OUT.progress``."""
    try:
        settings = json.loads(decode_utf8(read_bytes(path), path)).get("settings", {})
    except (InputError, ValueError, AttributeError):
        return {}
    if not isinstance(settings, dict):
        return {}
    return {k: settings[k] for k in ("model", "source", "target", "mode", "beam",
                                     "nbest") if k in settings}


def write_progress(tsv_path, settings: dict, done: int, offset: int, crc32: int) -> None:
    """The progress record: ``done`` sources written, the output's first ``offset`` bytes (whose
    CRC32 is ``crc32``) hold them."""
    prog = {"settings": settings, "sources_done": done, "offset": offset, "tsv_crc32": crc32}
    _atomic_write_text(Path(os.fspath(tsv_path) + PROGRESS_SUFFIX),
                       json.dumps(dict(prog, crc32=json_crc32(prog))))


def _read_progress(prog_path: Path) -> dict:
    """The progress record; ``ValueError`` (and its kin) when it is damaged."""
    with open(prog_path, "rb") as f:
        prog = json.loads(f.read().decode("utf-8"))
    crc = prog.pop("crc32")
    if crc != json_crc32(prog):
        raise ValueError("checksum mismatch")
    if not isinstance(prog["settings"], dict):
        raise TypeError("settings is not an object")
    if int(prog["sources_done"]) < 0 or int(prog["offset"]) <= 0:
        raise ValueError("negative counts")
    int(prog["tsv_crc32"])
    return prog


def prepare_resume(tsv_path, settings: dict, header: str) -> Optional[Tuple[int, int]]:
    """Validate an interrupted output and truncate it to its last complete block: ``(sources
    done (the first source to mine), CRC32 of the output kept)``; ``None`` when the run must
    start over: its progress file is damaged, or the output is not what it records (a warning
    names the file; so is a progress file of an older :data:`~triemine.io.keys.KEY_VERSION`).
    :class:`InputError` (``cannot resume``) when the output is not this
    command's: another header and no progress file of ours, or other settings."""
    out_path = Path(tsv_path)
    prog_path = Path(os.fspath(tsv_path) + PROGRESS_SUFFIX)
    with open(out_path, "rb") as f:
        first = f.readline().decode("utf-8", "replace").rstrip("\r\n")
    if not prog_path.is_file():
        if first != header:
            raise InputError(f"cannot resume: unexpected header (expected {header!r}; is this "
                             "the output of the same trie-mine command?)", out_path, 1)
        raise InputError("cannot resume: progress file missing (was the run started with this "
                         "trie-mine?)", prog_path)
    try:
        prog = _read_progress(prog_path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if first != header:
            raise InputError(f"cannot resume: unexpected header (expected {header!r}; is this "
                             "the output of the same trie-mine command?)", out_path, 1)
        warnings.warn(f"{prog_path}: damaged progress file ({type(exc).__name__}: {exc}); "
                      "starting the run over", stacklevel=2)
        return None
    old = prog["settings"]
    if older_key(old, prog_path, "the interrupted output"):
        return None
    diff = [k for k in settings if old.get(k) != settings[k]]
    if diff:
        raise InputError("cannot resume: the run used different settings ("
                         + ", ".join(f"{k}: {old.get(k)!r} != {settings[k]!r}" for k in diff)
                         + ")", prog_path)
    done, offset = int(prog["sources_done"]), int(prog["offset"])
    size = out_path.stat().st_size
    with open(out_path, "rb") as f:
        crc = crc32_range(f, 0, offset) if offset <= size else None
    if crc != prog["tsv_crc32"]:
        warnings.warn(f"{out_path}: the output is not what {prog_path.name} records "
                      f"({'truncated' if offset > size else 'changed'} since it was written: "
                      f"{size} bytes, {offset} recorded); starting the run over", stacklevel=2)
        return None
    with open(out_path, "r+b") as f:
        f.truncate(offset)
    return done, crc


# -- rows ----------------------------------------------------------------------------------------

def clean_cell(text: str) -> str:
    """A text cell: tabs and line breaks become spaces (they would break the row), NUL bytes
    too (no tool reads them back as text)."""
    return text.replace("\t", " ").replace("\n", " ").replace("\r", " ").replace("\0", " ")


DECIMALS = 6   # the decimal places of a number in a mining TSV (:func:`format_number`)


def format_number(v: float) -> str:
    return f"{v:.{DECIMALS}f}"


def full_precision(v: float) -> str:
    """A number written so that reading it back gives the very same float."""
    return repr(float(v))


def format_rows(columns: Sequence[str], cells: Mapping[str, Sequence],
                number: Callable[[float], str] = format_number) -> str:
    """Rows of a mining TSV, each ending in a newline: row ``i`` holds ``cells[c][i]`` of every
    column ``c`` of ``columns`` in that order; text columns (:data:`TEXT_COLUMNS`) with tabs and
    line breaks replaced (:func:`clean_cell`), numbers written by ``number`` (6 decimals by
    default).  Formatted column by column, then joined."""
    formatted = [list(map(clean_cell if c in TEXT_COLUMNS else number, cells[c]))
                 for c in columns]
    return "".join("\t".join(row) + "\n" for row in zip(*formatted))


def write_rows(path, columns: Sequence[str], cells: Mapping[str, Sequence],
               meta: Optional[Dict[str, object]] = None,
               number: Callable[[float], str] = format_number) -> None:
    """A whole mining TSV, atomically: the header naming ``columns``, then :func:`format_rows`;
    with ``meta``, the ``.meta.json`` sidecar after it."""
    write_row_blocks(path, columns, [cells], meta, number)


def write_row_blocks(path, columns: Sequence[str], blocks: Iterable[Mapping[str, Sequence]],
                     meta: Optional[Dict[str, object]] = None,
                     number: Callable[[float], str] = format_number) -> None:
    """:func:`write_rows` of the rows of ``blocks`` (each a ``cells`` mapping of the next rows),
    formatted and written one block at a time, so that the writer holds one block's text rather
    than the whole file's (tens of GB at 10^8 rows); the same bytes however the rows are cut.
    With ``meta`` (``{}`` included) the sidecar records the rows written."""
    path = Path(os.fspath(path))
    rows = 0

    def chunks():
        nonlocal rows
        yield ("\t".join(columns) + "\n").encode("utf-8")
        for cells in blocks:
            text = format_rows(columns, cells, number)
            rows += text.count("\n")
            yield text.encode("utf-8")
    if meta is not None:  # a sidecar of an earlier file never describes this one
        Path(os.fspath(path) + META_SUFFIX).unlink(missing_ok=True)
    atomic_write(path, chunks(), "output", WRITE_HINT)
    if meta is not None:
        write_meta(path, dict(meta, rows=rows))


def read_mined(path) -> Mined:
    """Read a mining TSV (compressed ones through their decompressed copy,
    :func:`triemine.io.compression.plain_copy`); missing columns, bad or non-finite numbers are
    InputErrors."""
    path = os.fspath(path)
    if describe(path):
        raise InputError(f"mining TSV {describe(path)}", path)
    text = decode_utf8(read_bytes(plain_copy(path), "mining TSV"), path)
    lines_ = text.split("\n")
    if lines_ and lines_[-1] == "":
        lines_.pop()
    columns = _header(lines_[0] if lines_ else "", path)
    pos = {c: i for i, c in enumerate(columns)}
    num_names = [c for c in columns if c not in TEXT_COLUMNS]
    text_cols: Dict[str, List[str]] = {c: [] for c in TEXT_COLUMNS}
    nums: Dict[str, List[float]] = {c: [] for c in num_names}
    line_nos: List[int] = []
    for no, line in enumerate(lines_[1:], 2):
        cells = _cells(line, columns, path, no)
        for c in TEXT_COLUMNS:
            text_cols[c].append(cells[pos[c]])
        for c in num_names:
            nums[c].append(_number(cells[pos[c]], c, path, no))
        if not text_cols["src_id"][-1] or not text_cols["tgt_id"][-1]:
            raise InputError("empty src_id or tgt_id", path, no)
        line_nos.append(no)
    meta = read_meta(path)
    check_rows(path, meta, len(line_nos))
    return Mined(path, columns, text_cols["src_id"], text_cols["tgt_id"], text_cols["src"],
                 text_cols["tgt"], {c: np.asarray(v, dtype=np.float64) for c, v in nums.items()},
                 np.asarray(line_nos, dtype=np.int64), meta)


def _header(line: str, path) -> List[str]:
    """The columns a mining TSV's header line names, checked."""
    line = line.rstrip("\r")
    columns = line.split("\t")
    if line == "" or "src_id" not in columns:
        raise InputError("missing header line (expected the column names "
                         f"{' '.join(REQUIRED_COLUMNS)}, tab-separated)", path, 1)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise InputError(f"header lacks column(s) {', '.join(missing)}", path, 1)
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise InputError(f"header names column(s) {', '.join(dup)} twice", path, 1)
    if any(not c for c in columns):
        raise InputError("header has an empty column name", path, 1)
    return columns


def _cells(line: str, columns: Sequence[str], path, no: int) -> List[str]:
    """Row ``no``'s cells, one per column."""
    line = line.rstrip("\r")
    if not line:
        raise InputError("empty line", path, no)
    cells = line.split("\t")
    if len(cells) != len(columns):
        raise InputError(f"expected {len(columns)} tab-separated columns ({' '.join(columns)}), "
                         f"got {len(cells)}", path, no)
    return cells


def _number(cell: str, column: str, path, no: int) -> float:
    try:
        v = float(cell)
    except ValueError:
        raise InputError(f"column {column}: not a number: {cell!r}", path, no) from None
    if not math.isfinite(v):
        raise InputError(f"column {column}: {cell} is not a finite number", path, no)
    return v


def mined_blocks(path, numeric: Sequence[str], rows: int = 1 << 16
                 ) -> Iterator[Dict[str, np.ndarray]]:
    """The ``numeric`` columns of a mining TSV as float64 arrays, ``rows`` rows at a time,
    read as a stream (for files too large to read whole: the mining job's trie search at 10^8
    sources) with :func:`read_mined`'s rules for what it reads: the header, every row's column
    count, finite numbers, errors naming the file and line."""
    path = os.fspath(path)
    with open_binary(path, "mining TSV") as f:
        columns = _header(decode_utf8(f.readline(), path).rstrip("\n"), path)
        missing = [c for c in numeric if c not in columns or c in TEXT_COLUMNS]
        if missing:
            raise InputError(f"no numeric column(s) {', '.join(missing)} (columns: "
                             f"{' '.join(columns)})", path, 1)
        pos = [columns.index(c) for c in numeric]
        block: List[List[float]] = []
        no = 1
        for no, raw in enumerate(f, 2):
            cells = _cells(decode_utf8(raw, path, no).rstrip("\n"), columns, path, no)
            block.append([_number(cells[i], c, path, no) for i, c in zip(pos, numeric)])
            if len(block) == rows:
                yield dict(zip(numeric, np.asarray(block, dtype=np.float64).T))
                block = []
        check_rows(path, read_meta(path), no - 1)
        if block:
            yield dict(zip(numeric, np.asarray(block, dtype=np.float64).T))


def write_mined(mined: Mined, path) -> None:
    """Write rows with the same columns (numbers with full float precision), atomically."""
    cells = {"src_id": mined.src_ids, "tgt_id": mined.tgt_ids, "src": mined.src, "tgt": mined.tgt,
             **mined.numeric}
    write_rows(path, mined.columns, cells, meta=mined.meta, number=full_precision)
