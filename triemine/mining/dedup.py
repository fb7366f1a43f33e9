"""Deduplication inside the job: mine each distinct text once, map the pairs back to every id.

**The rule** (:func:`normalise`, the one place it is written): Unicode NFKC, then optionally
case folding (``str.casefold``) and removal of punctuation (every character of a Unicode
``P*`` category), then whitespace runs collapsed to one space and the ends stripped.  Two
non-empty lines whose normalised texts are equal are duplicates; an empty line (text ``""`` as
:mod:`triemine.io.corpus` reads it: blank, or a bad line skipped) is no one's duplicate and is not
mined; a non-empty line whose normalised text is empty (only punctuation with ``punct``) is kept
as its own row, never merged.

**Grouping** (:func:`group_lines`): one pass over the corpus a chunk at a time gives each line
a 128-bit BLAKE2b digest of its normalised text, kept as two ``uint64`` arrays: the sort key and
a check.  The lines are grouped by a stable sort of the keys (``np.unique``), so memory is a few
tens of bytes a line and never a dict of strings.  Lines whose key matches their group's first
line but whose check does not (two different texts with one 64-bit key, about ``n**2 / 2**65``
for ``n`` distinct texts) are kept as rows of their own, so different texts are never merged
unless all 128 bits collide.

**Files** (:func:`dedup_corpus`, in the folder the caller gives, ``OUT.tsv.dedup/`` for the job):

* ``<side>.unique.tsv``: ``id<TAB>text`` of each distinct text once, under its first line's id,
  with that first line's original text, in first-occurrence order (the job's corpus);
* ``<side>.counts.npy`` (int64, one per row: how many lines share the row's text),
  ``<side>.offsets.npy`` (int64, rows + 1) and ``<side>.lines.npy`` (int64, 0-based line
  numbers of the original corpus grouped by row, in file order): the CSR map of each row to
  its lines; all sealed (:mod:`triemine.io.checksum`);
* ``<side>.key.json`` (sealed): the corpus's content digest, the rule, the counts and the
  unique corpus's size and CRC32; files whose key holds and that are whole (the arrays' seals,
  the unique corpus's size and CRC32) are reused (a resumed job does not group again); a
  damaged one is named in a warning and the side grouped again.

**The wrapper** (:func:`mine_unique`) runs the job on the two unique corpora and rewrites its
mining TSV with the columns ``src_dups``/``tgt_dups`` (lines sharing the row's text; 1 =
unique), or with ``every_pair`` one row per (source id, target id) of the duplicates; the counts
go to the summary and the ``.meta.json`` under ``dedup``.
"""
from __future__ import annotations

import hashlib
import logging
import os
import time
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Sequence

import numpy as np

from triemine.io import (atomic_write, column_order, crc32_range, discard, dumps_sealed,
                         input_digest, load_npy, open_corpus, read_meta, read_mined, read_sealed,
                         write_mined, write_npy)
from triemine.errors import DamagedFile, InputError

logger = logging.getLogger(__name__)

# bumped when normalise() or the files change: a key of another version is grouped again
RULE_VERSION = 1
DEDUP_SUFFIX = ".dedup"  # the job's folder of unique corpora and maps, beside its .work
CHUNK = 1 << 16  # lines normalised and hashed at a time
DUP_COLUMNS = ("src_dups", "tgt_dups")
JOB_TSV = "unique.tsv"  # the job's own TSV (and its .work) in the folder, of the unique texts


def normalise(text: str, case: bool = False, punct: bool = False) -> str:
    """``text`` under the deduplication rule: NFKC; with ``case``, case-folded (and NFKC
    again); with ``punct``, without the characters of Unicode categories ``P*`` (and NFKC
    again); whitespace runs (``str.split``'s)
    collapsed to one space, ends stripped.  Idempotent: ``normalise(normalise(t)) ==
    normalise(t)`` for the same flags."""
    t = unicodedata.normalize("NFKC", text)
    if case:
        t = unicodedata.normalize("NFKC", t.casefold())
    if punct:  # NFKC again: a mark that followed a removed character may compose now
        t = unicodedata.normalize("NFKC", "".join(
            ch for ch in t if not unicodedata.category(ch).startswith("P")))
    return " ".join(t.split())


def rule(case: bool = False, punct: bool = False) -> dict:
    """The rule's description, as keys and ``.meta.json`` record it."""
    return {"version": RULE_VERSION, "nfkc": True, "whitespace": True, "case": bool(case),
            "punct": bool(punct)}


def digests(texts: Sequence[str], case: bool = False, punct: bool = False):
    """``(key, check, empty)`` of ``texts``: two ``uint64`` arrays, the halves of the 128-bit
    BLAKE2b digest of each normalised text (UTF-8), and a bool array marking the texts that
    are ``""`` (never grouped)."""
    n = len(texts)
    raw = bytearray(16 * n)
    empty = np.zeros(n, dtype=bool)
    blake = hashlib.blake2b
    for i, t in enumerate(texts):
        if not t:
            empty[i] = True
            continue
        raw[16 * i:16 * i + 16] = blake(normalise(t, case, punct).encode("utf-8"),
                                        digest_size=16).digest()
    both = np.frombuffer(bytes(raw), dtype="<u8").reshape(n, 2)
    return both[:, 0].copy(), both[:, 1].copy(), empty


@dataclass
class Groups:
    """The distinct texts of a corpus of ``n`` lines.

    ``first``: int64 (rows,), the 0-based line of each row's first occurrence, ascending (rows
    in first-occurrence order); ``row``: int64 (n,), each line's row (-1 for an empty line);
    ``counts``: int64 (rows,), lines a row stands for; ``offsets`` (rows + 1,) and ``lines``
    (non-empty lines,): the lines of row ``r`` are ``lines[offsets[r]:offsets[r + 1]]``, in
    file order (the first one is ``first[r]``)."""

    first: np.ndarray
    row: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray
    lines: np.ndarray

    @property
    def n_lines(self) -> int:
        return len(self.row)

    def summary(self) -> Dict[str, int]:
        """``lines``, ``empty`` (not mined), ``unique`` (rows) and ``duplicates`` (lines
        beyond a row's first)."""
        empty = self.n_lines - len(self.lines)
        return {"lines": self.n_lines, "empty": int(empty), "unique": int(len(self.first)),
                "duplicates": int(len(self.lines) - len(self.first))}


def group_lines(key: np.ndarray, check: np.ndarray, empty: np.ndarray) -> Groups:
    """:class:`Groups` of lines by their digests (:func:`digests`): lines with equal ``key``
    and ``check`` share a row; ``empty`` lines are in none; a line whose key is its group's but
    whose check is not is a row of its own."""
    n = len(key)
    live = np.flatnonzero(~empty)
    # stable: each group's representative is its first line
    _, first_pos, inverse = np.unique(key[live], return_index=True, return_inverse=True)
    rep = np.full(n, -1, dtype=np.int64)
    rep[live] = live[first_pos[inverse.reshape(-1)]]
    del inverse, first_pos
    clash = live[check[live] != check[rep[live]]]
    if len(clash):  # a 64-bit key shared by different texts: never merge them
        logger.warning("%d line(s) share a 64-bit key with another text: kept apart", len(clash))
        rep[clash] = clash
    is_first = np.zeros(n, dtype=bool)
    is_first[live] = rep[live] == live
    first = np.flatnonzero(is_first)
    row_of_first = np.cumsum(is_first, dtype=np.int64) - 1
    row = np.full(n, -1, dtype=np.int64)
    row[live] = row_of_first[rep[live]]
    del rep, row_of_first, is_first
    counts = np.bincount(row[live], minlength=len(first)).astype(np.int64)
    offsets = np.zeros(len(first) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    lines = live[np.argsort(row[live], kind="stable")]
    return Groups(first, row, counts, offsets, lines)


@dataclass
class SideMap:
    """One side's deduplication, as :func:`dedup_corpus` leaves it: the unique corpus, the
    original corpus's ids and the CSR map (:class:`Groups` without ``row``)."""

    path: str            # the unique corpus (id<TAB>text)
    counts: np.ndarray   # (rows,)
    offsets: np.ndarray  # (rows + 1,)
    lines: np.ndarray    # original 0-based lines grouped by row
    ids: Sequence[str]   # the original corpus's ids, by 0-based line
    stats: Dict[str, int]
    skipped: Sequence[int] = ()  # the original corpus's bad lines (1-based), skipped as empty

    def ids_of(self, r: int) -> list:
        """The original ids of row ``r``, its first line's first."""
        return [self.ids[int(i)] for i in self.lines[self.offsets[r]:self.offsets[r + 1]]]


def _key(corpus_path: str, case: bool, punct: bool) -> dict:
    return {"corpus": input_digest(corpus_path), "rule": rule(case, punct)}


def _verify_text(path: Path, seal) -> None:
    """The unique corpus at ``path`` is what its key's ``seal`` (``{"size", "crc32"}``)
    records; else a :class:`DamagedFile` naming it (a missing file: ``FileNotFoundError``)."""
    size = path.stat().st_size
    if not isinstance(seal, dict):
        raise DamagedFile(path, "its key records no size and checksum (an older version's)",
                          "unique corpus")
    if size != seal.get("size"):
        raise DamagedFile(path, f"{size} bytes, its key records {seal.get('size')}",
                          "unique corpus")
    with open(path, "rb") as f:
        crc = crc32_range(f, 0, size)
    if crc != seal.get("crc32"):
        raise DamagedFile(path, "checksum mismatch (the file was changed after it was written)",
                          "unique corpus")


def dedup_corpus(corpus_path, folder, side: str, *, case: bool = False,
                 punct: bool = False) -> SideMap:
    """Deduplicate the corpus at ``corpus_path`` (plain or ``id<TAB>text``, read with
    :func:`triemine.io.corpus.open_corpus`, so its errors are that reader's) into ``folder``
    (module docstring: ``<side>.unique.tsv`` and the maps, each written atomically), or reuse
    the files there whose key (content digest and rule) is this corpus's.  Raises
    :class:`~triemine.errors.InputError` for a corpus the reader refuses."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    corpus = open_corpus(corpus_path)
    if len(corpus.skipped_lines):
        logger.warning("%s", corpus.skipped_report())
    if len(corpus.empty_lines) == len(corpus):
        raise InputError(f"empty {side} file (no non-empty lines)", os.fspath(corpus_path))
    key = _key(os.fspath(corpus_path), case, punct)
    names = {x: folder / f"{side}.{x}.npy" for x in ("counts", "offsets", "lines")}
    unique = folder / f"{side}.unique.tsv"
    key_file = folder / f"{side}.key.json"
    try:
        saved = read_sealed(key_file, "dedup key")
        if not isinstance(saved, dict):
            raise DamagedFile(key_file, "not a dedup key", "dedup key")
        if saved.get("key") == key:
            _verify_text(unique, saved.get("unique"))
            arrays = {x: load_npy(p, f"dedup {x}", mmap=False) for x, p in names.items()}
            return SideMap(str(unique), arrays["counts"], arrays["offsets"], arrays["lines"],
                           corpus.ids, saved["stats"], corpus.skipped_lines)
    except FileNotFoundError:
        pass  # not grouped yet, or a file removed: group again
    except (OSError, DamagedFile) as exc:  # damaged or foreign: named, then grouped again
        discard(exc if isinstance(exc, DamagedFile) else DamagedFile(key_file, str(exc)),
                f"deduplicating the {side} corpus again")
    key_file.unlink(missing_ok=True)  # the key is written last: it vouches for the files
    n = len(corpus)
    k = np.empty(n, dtype=np.uint64)
    c = np.empty(n, dtype=np.uint64)
    e = np.empty(n, dtype=bool)
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        k[a:b], c[a:b], e[a:b] = digests(corpus.texts[a:b], case, punct)
    groups = group_lines(k, c, e)
    del k, c, e

    def rows():
        first = groups.first
        for a in range(0, len(first), CHUNK):
            block = first[a:a + CHUNK]
            lo, hi = int(block[0]), int(block[-1]) + 1
            ids, texts = corpus.ids[lo:hi], corpus.texts[lo:hi]
            yield "".join(f"{ids[i - lo]}\t{texts[i - lo]}\n"
                          for i in block.tolist()).encode("utf-8")
    seal = {"size": 0, "crc32": 0}

    def sealed(chunks):  # the unique corpus's size and CRC32, as it is written
        for chunk in chunks:
            seal["size"] += len(chunk)
            seal["crc32"] = zlib.crc32(chunk, seal["crc32"])
            yield chunk
    atomic_write(unique, sealed(rows()), "unique corpus")
    for x, p in names.items():
        write_npy(p, getattr(groups, x), f"dedup {x}")
    stats = groups.summary()
    atomic_write(key_file, dumps_sealed({"key": key, "stats": stats, "unique": seal}),
                 "dedup key")
    return SideMap(str(unique), groups.counts, groups.offsets, groups.lines, corpus.ids, stats,
                   corpus.skipped_lines)


def _row_index(sm: SideMap, names: Sequence[str], what: str) -> np.ndarray:
    """The row of each id in ``names`` (ids of the unique corpus ``sm.path``, which are each
    row's first id), found through the sorted 64-bit hashes of the unique corpus's ids (16 bytes
    a row, no dict of strings) and confirmed on the id itself; an id the unique corpus does not
    hold is a ``ValueError``."""
    ids = open_corpus(sm.path, "tsv").ids
    h = np.fromiter((hash(i) for i in ids), dtype=np.int64, count=len(ids))
    order = np.argsort(h, kind="stable")
    h = h[order]
    want = np.fromiter((hash(i) for i in names), dtype=np.int64, count=len(names))
    out = np.empty(len(names), dtype=np.int64)
    lo = np.searchsorted(h, want, side="left")
    hi = np.searchsorted(h, want, side="right")
    for j, (a, b, name) in enumerate(zip(lo.tolist(), hi.tolist(), names)):
        rows = [int(order[k]) for k in range(a, b) if ids[int(order[k])] == name]
        if not rows:
            raise ValueError(f"{what} id {name!r} of the job's TSV is not in {sm.path}")
        out[j] = rows[0]
    return out


def expand_rows(mined, src: SideMap, tgt: SideMap, every_pair: bool = False):
    """``mined`` (rows naming the unique corpora's ids, which are each row's first ids) with
    the float columns ``src_dups`` and ``tgt_dups``; with ``every_pair``, each row repeated
    for every (source id, target id) of its two groups, source-major, the texts the first
    lines' (the ``.meta.json``'s ``rows`` is left to the writer)."""
    sr = _row_index(src, mined.src_ids, "source")
    tr = _row_index(tgt, mined.tgt_ids, "target")
    out = mined.with_column("src_dups", src.counts[sr]).with_column("tgt_dups", tgt.counts[tr])
    out.columns = column_order(c for c in out.columns if c not in ("src", "tgt", "src_id",
                                                                   "tgt_id"))
    if not every_pair:
        return out
    take, s_ids, t_ids = [], [], []
    for j in range(len(out)):
        ss, ts = src.ids_of(int(sr[j])), tgt.ids_of(int(tr[j]))
        for s in ss:
            for t in ts:
                take.append(j)
                s_ids.append(s)
                t_ids.append(t)
    big = out.take(np.asarray(take, dtype=np.int64))
    big.src_ids, big.tgt_ids = s_ids, t_ids
    big.lines = np.arange(2, len(take) + 2, dtype=np.int64)
    return big


def side_maps(output):
    """``(source map, target map)`` of the deduplicated job that wrote ``output``: its
    ``.meta.json`` names the original corpora and :func:`dedup_corpus` reuses the maps in
    ``output + ".dedup"`` (or groups again); for :func:`expand_rows` of a selection's kept rows
    (``expand_rows(mined.take(kept), *side_maps(output), every_pair=True)``).  A ``ValueError``
    for an output that was not deduplicated."""
    output = os.fspath(output)
    meta = read_meta(output)
    if "dedup" not in meta:
        raise ValueError(f"{output} was mined without deduplication")
    rule_ = meta["dedup"]["rule"]
    folder = Path(output + DEDUP_SUFFIX)
    return tuple(dedup_corpus(meta[side], folder, side, case=rule_["case"], punct=rule_["punct"])
                 for side in ("source", "target"))


def mine_unique(run_job: Callable[[str, str, str], dict], source, target, output,
                work_dir=None, *, every_pair: bool = False, case: bool = False,
                punct: bool = False) -> dict:
    """The job on the distinct texts of ``source`` and ``target``: both deduplicated
    (:func:`dedup_corpus`) into ``work_dir`` (default ``output + ".dedup"``), ``run_job(unique
    source, unique target, output)`` (the job, returning its summary dict), then ``output``
    rewritten atomically (:func:`expand_rows`; its ``.meta.json`` kept, with ``source`` and
    ``target`` the original corpora, ``unique_source``/``unique_target`` the job's and ``dedup``
    the counts); the job itself writes ``work_dir/unique.tsv`` (its stages where ``run_job``
    keeps them), so ``output`` never holds a TSV without the columns.  Returns the job's summary
    with ``dedup``: ``{"rule": ..., "every_pair": ...,
    "source": {lines, empty, unique, duplicates}, "target": {...}}``, ``rows`` (the rows
    written) and in ``stage_s`` the seconds of ``dedup`` (grouping both sides, or reusing
    their files) and ``dedup_map`` (rewriting the TSV).  The job's own errors and resume rules
    apply unchanged; the unique corpora of an unchanged input are reused."""
    unique = unique_inputs(source, target, output, work_dir, case=case, punct=punct)
    summary = run_job(unique.sides["source"].path, unique.sides["target"].path,
                      str(unique.job_output))
    return expand_output(unique, summary, every_pair=every_pair)


@dataclass
class Unique:
    """The deduplication stage's result: the job's corpora and where it writes its TSV."""

    source: str                # the original corpora, the output the job is for
    target: str
    output: str
    case: bool
    punct: bool
    sides: Dict[str, object]   # "source"/"target" -> dedup_corpus's SideMap
    job_output: Path           # the job's TSV, in the dedup folder
    seconds: float             # grouping both sides (or reusing their files)


def unique_inputs(source, target, output, work_dir=None, *, case: bool = False,
                  punct: bool = False) -> Unique:
    """The deduplication stage (:func:`mine_unique`'s first half): both corpora grouped
    (:func:`dedup_corpus`) into ``work_dir`` (default ``output + ".dedup"``)."""
    output = os.fspath(output)
    folder = Path(work_dir) if work_dir is not None else Path(output + DEDUP_SUFFIX)
    t0 = time.perf_counter()
    sides = {side: dedup_corpus(path, folder, side, case=case, punct=punct)
             for side, path in (("source", source), ("target", target))}
    # the job writes its TSV in the folder; ``output`` is written once, whole, with the columns
    return Unique(source, target, output, case, punct, sides, folder / JOB_TSV,
                  time.perf_counter() - t0)


def expand_output(unique: Unique, summary: dict, *, every_pair: bool = False) -> dict:
    """The stage after the job on the unique corpora (:func:`mine_unique`'s second half): its
    TSV expanded to the original lines' ids, written to the output; returns the summary."""
    source, target, output, sides = unique.source, unique.target, unique.output, unique.sides
    summary = dict(summary)
    t0 = time.perf_counter()
    mined = read_mined(unique.job_output)
    if any(c in mined.columns for c in DUP_COLUMNS):
        raise ValueError(f"{output}: the job's TSV already has {'/'.join(DUP_COLUMNS)}")
    out = expand_rows(mined, sides["source"], sides["target"], every_pair)
    info = {"rule": rule(unique.case, unique.punct), "every_pair": bool(every_pair),
            "source": dict(sides["source"].stats), "target": dict(sides["target"].stats)}
    out.meta = dict(mined.meta, source=os.path.abspath(source), target=os.path.abspath(target),
                    unique_source=os.path.abspath(sides["source"].path),
                    unique_target=os.path.abspath(sides["target"].path), dedup=info)
    out.meta.pop("rows", None)
    skipped = {side: len(sm.skipped) for side, sm in sides.items()}
    if "skipped_bad" in out.meta:  # the original corpora's bad lines, not the unique ones'
        out.meta["skipped_bad"] = summary["skipped_bad"] = skipped
    write_mined(out, output)
    stage_s = dict(summary.get("stage_s") or {})
    stage_s = {"dedup": round(unique.seconds, 3), **stage_s,
               "dedup_map": round(time.perf_counter() - t0, 3)}
    summary.update(dedup=info, rows=len(out), stage_s=stage_s, output=output)
    return summary
