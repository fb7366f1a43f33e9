"""Bitext formats: the kept pairs written as files that other tools load, each named once.

:data:`FORMATS` maps a format name to its writer (:func:`register_format`); the CLI's
``--bitext-format`` choices and :func:`triemine.filtering.selection.write_bitext`'s dispatch come
from it.  Every writer streams the pairs (one block of rows in memory), writes atomically (a
reader sees no file, the old one or the whole new one: :mod:`triemine.io.outfile`) and compresses a
file whose path ends in ``.gz``, ``.xz`` or ``.zst`` (:mod:`triemine.io.compression`):

* ``tsv`` (default): ``l1 text<TAB>l2 text`` lines (tabs and line breaks in a text become
  spaces: :func:`triemine.io.tsv.clean_cell`);
* ``moses``: two line-aligned files, ``OUT.<l1>`` and ``OUT.<l2>`` (``OUT.gz`` gives
  ``OUT.<l1>.gz`` and ``OUT.<l2>.gz``), one sentence a line (:func:`moses_paths`);
* ``tmx``: TMX 1.4, ``srclang`` l1, one ``<tu>`` per pair with ``<prop type="x-NAME">`` for
  the ids and every score; text XML-escaped, a ``\\r`` written ``&#13;``, characters XML 1.0
  cannot hold (control characters other than tab and newline, lone surrogates) replaced by
  U+FFFD and counted in a warning;
* ``jsonl``: one JSON object per pair: ``src_id``, ``tgt_id``, ``src``, ``tgt``, then every
  score column of the mining TSV by its name, as floats at full precision;
* ``hf``: a directory that ``datasets.load_dataset(OUT)`` reads without network: ``train.jsonl``
  (``src_id``, ``tgt_id``, ``translation: {l1: text, l2: text}``, the scores) and a
  ``README.md`` whose YAML header declares the split and the features (``translation`` a
  ``datasets.Translation`` of the two languages, ids strings, scores float64); writing it needs
  no ``datasets``.  Not compressed (``datasets`` reads a directory, not an archive).

A union of two directions (``trie-mine-filter --second``) adds a ``direction`` field
(``l1-l2`` or ``l2-l1``, whose model's scores the row holds) to ``jsonl``, ``hf`` and ``tmx``.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from triemine import __version__
from triemine.io import atomic_open, clean_cell, codec_of_name, column_order, output_file, SUFFIXES
from triemine.errors import InputError, OutputError

logger = logging.getLogger(__name__)

BLOCK_ROWS = 4096
DEFAULT_LANGS = ("l1", "l2")  # when neither given nor recorded by the model directory
HF_FILES = ("README.md", "train.jsonl")
# (src_id, tgt_id, l1 text, l2 text, direction or None, score values (None: no such column))
Row = Tuple[str, str, str, str, Optional[str], Tuple[Optional[float], ...]]


@dataclass
class Pairs:
    """The pairs a writer writes, oriented l1 -> l2: ``numeric`` names the score columns (the
    mining TSV's order), ``rows()`` iterates :data:`Row` tuples (may be called once per file a
    writer writes; each writer calls it once); ``ids``: whether the rows carry ids; ``direction``:
    whether they name their direction (a union of both directions' TSVs)."""

    numeric: List[str]
    rows: Callable[[], Iterator[Row]]
    ids: bool = True
    direction: bool = False


def _mined_rows(mined, rows: np.ndarray, numeric: Sequence[str], reverse: bool,
                direction: bool, skip=None) -> Iterator[Row]:
    tag = ("l2-l1" if reverse else "l1-l2") if direction else None
    for a in range(0, len(rows), BLOCK_ROWS):
        idx = rows[a:a + BLOCK_ROWS]
        cols = [mined.numeric[c][idx].tolist() if c in mined.numeric else [None] * len(idx)
                for c in numeric]
        for j, i in enumerate(idx.tolist()):
            s, t = (mined.tgt_ids[i], mined.src_ids[i]) if reverse else \
                (mined.src_ids[i], mined.tgt_ids[i])
            if skip is not None and skip(s, t):
                continue
            a_text, b_text = (mined.tgt[i],
                              mined.src[i]) if reverse else (mined.src[i], mined.tgt[i])
            yield s, t, a_text, b_text, tag, tuple(c[j] for c in cols)


def from_mined(mined, rows=None) -> Pairs:
    """The rows ``rows`` (0-based, in the order given; default all) of a
    :class:`~triemine.io.tsv.Mined` with every numeric column."""
    rows = np.arange(len(mined)) if rows is None else np.asarray(rows, dtype=np.int64)
    numeric = [c for c in column_order(mined.numeric) if c in mined.numeric]
    return Pairs(numeric, lambda: _mined_rows(mined, rows, numeric, False, False))


def union(parts: Sequence[Tuple[object, bool]]) -> Pairs:
    """The union of the rows of several :class:`~triemine.io.tsv.Mined` (``(kept rows, reverse)``
    each; ``reverse``: an l2 -> l1 TSV), each ``(l1 id, l2 id)`` once, from the first part that
    has it; the score columns are those of every part (a part without one: ``None``)."""
    numeric = column_order(set().union(*(m.numeric for m, _ in parts)))
    numeric = [c for c in numeric if any(c in m.numeric for m, _ in parts)]
    direction = any(rev for _, rev in parts)

    def rows() -> Iterator[Row]:
        seen = set()

        def skip(s, t):
            if (s, t) in seen:
                return True
            seen.add((s, t))
            return False
        for m, rev in parts:
            yield from _mined_rows(m, np.arange(len(m)), numeric, rev, direction, skip)
    return Pairs(numeric, rows, direction=direction)


def from_texts(pairs: Iterable[Tuple[str, str]]) -> Pairs:
    """``(l1 text, l2 text)`` pairs without ids or scores (an iterator is read once)."""
    return Pairs([], lambda: (("", "", a, b, None, ()) for a, b in pairs), ids=False)


def languages(meta=None, src_lang: Optional[str] = None, tgt_lang: Optional[str] = None
              ) -> Tuple[str, str]:
    """``(l1, l2)``: those given, else the model directory's (``meta["model_path"]``, a mining
    TSV's sidecar, read for ``triemine-model.json``), else :data:`DEFAULT_LANGS` (warned)."""
    if src_lang and tgt_lang:
        return src_lang, tgt_lang
    found = (None, None)
    model = (meta or {}).get("model_path")
    if isinstance(model, str):
        try:
            with open(Path(model) / "triemine-model.json", encoding="utf-8") as f:
                info = json.load(f)
            found = (info.get("source_lang"), info.get("target_lang"))
        except (OSError, ValueError, AttributeError):
            pass
    l1, l2 = src_lang or found[0], tgt_lang or found[1]
    if not (l1 and l2):
        logger.warning("the bitext's languages are not known (no model directory recorded): "
                       "naming them %s and %s", *DEFAULT_LANGS)
        l1, l2 = l1 or DEFAULT_LANGS[0], l2 or DEFAULT_LANGS[1]
    return str(l1), str(l2)


# -- the registry -------------------------------------------------------------------------------

Writer = Callable[[Pairs, str, Tuple[str, str]], int]


@dataclass(frozen=True)
class BitextFormat:
    name: str
    description: str
    write: Writer                    # (pairs, path, (l1, l2)) -> pairs written
    outputs: Callable[[str, Tuple[str, str]], List[Tuple[str, bool]]]  # (path, is a folder)
    languages: bool                  # whether the files name the languages


FORMATS: Dict[str, BitextFormat] = {}
DEFAULT = "tsv"


def register_format(name: str, description: str, write: Writer, outputs=None,
                    languages: bool = True) -> BitextFormat:
    """Name a bitext format once (``outputs(path, langs)``: the files or folders it writes,
    default ``path`` itself; ``languages``: whether it names the two languages)."""
    fmt = BitextFormat(name, description, write,
                       outputs or (lambda path, langs: [(os.fspath(path), False)]), languages)
    FORMATS[name] = fmt
    return fmt


def get_format(name: str) -> BitextFormat:
    if name not in FORMATS:
        raise InputError(f"unknown bitext format {name!r} (choose from {', '.join(FORMATS)})")
    return FORMATS[name]


def help_text() -> str:
    """One line naming every format and what it writes (the CLI's help)."""
    return "; ".join(f"{f.name}: {f.description}" for f in FORMATS.values()) + \
        f" (default {DEFAULT}; .gz/.xz/.zst compress it)"


def output_paths(name: str, path, langs: Tuple[str, str]) -> List[Tuple[str, bool]]:
    """What format ``name`` writes for ``path``: ``(path, is a folder)`` each, for
    :func:`triemine.io.outfile.check_distinct` (a folder as ``(label, path, "folder")``)."""
    return get_format(name).outputs(os.fspath(path), langs)


def outputs(label: str, name: str, path, langs: Tuple[str, str]) -> List[Tuple[str, str, object]]:
    """:func:`output_paths` as :func:`triemine.io.outfile.check_distinct`'s outputs named
    ``label``: ``(label, file, False)``, or ``(label, folder, "folder")``."""
    return [(label, out, "folder" if folder else False)
            for out, folder in output_paths(name, path, langs)]


# -- writers ------------------------------------------------------------------------------------

def _write_files(paths: Sequence[str], blocks: Iterator[Sequence[bytes]]) -> None:
    """Files written together, atomically, compressed by their names: ``blocks`` yields one
    chunk per file at a time."""
    with ExitStack() as stack:
        sinks = [stack.enter_context(output_file(p, "bitext", hint="")) for p in paths]
        for chunks in blocks:
            for sink, chunk in zip(sinks, chunks):
                sink.write(chunk)


def _blocks(pairs: Pairs) -> Iterator[List[Row]]:
    block: List[Row] = []
    for row in pairs.rows():
        block.append(row)
        if len(block) >= BLOCK_ROWS:
            yield block
            block = []
    if block:
        yield block


def _counted(pairs: Pairs, paths, render: Callable[[List[Row]], Sequence[bytes]],
             head: Sequence[bytes] = (), tail: Sequence[bytes] = ()) -> int:
    n = 0

    def blocks():
        nonlocal n
        if head:
            yield head
        for block in _blocks(pairs):
            n += len(block)
            yield render(block)
        if tail:
            yield tail
    _write_files(paths, blocks())
    return n


def write_tsv(pairs: Pairs, path: str, langs) -> int:
    return _counted(pairs, [path], lambda rows: ["".join(
        f"{clean_cell(r[2])}\t{clean_cell(r[3])}\n" for r in rows).encode("utf-8")])


def moses_paths(path, langs: Tuple[str, str]) -> List[str]:
    """``OUT.<l1>``, ``OUT.<l2>``; a compression suffix stays last (``OUT.gz``: ``OUT.<l1>.gz``)."""
    p = os.fspath(path)
    codec = codec_of_name(p)
    stem, suffix = (p[:-len(codec.suffix)], p[-len(codec.suffix):]) if codec else (p, "")
    return [f"{stem}.{lang}{suffix}" for lang in langs]


def write_moses(pairs: Pairs, path: str, langs) -> int:
    if langs[0] == langs[1]:
        raise InputError(f"moses needs two language codes to name its two files, got "
                         f"{langs[0]!r} twice", path)
    return _counted(pairs, moses_paths(path, langs), lambda rows: [
        "".join(clean_cell(r[k]) + "\n" for r in rows).encode("utf-8") for k in (2, 3)])


def _number(v) -> Optional[float]:
    return v if v is not None and math.isfinite(v) else None


def _json_lines(pairs: Pairs, rows: List[Row], langs) -> bytes:
    out = []
    for s, t, a, b, tag, values in rows:
        rec = {"src_id": s, "tgt_id": t} if pairs.ids else {}
        if langs is None:
            rec.update(src=a, tgt=b)
        else:
            rec["translation"] = {langs[0]: a, langs[1]: b}
        rec.update(zip(pairs.numeric, map(_number, values)))
        if pairs.direction:
            rec["direction"] = tag
        out.append(json.dumps(rec, ensure_ascii=False, allow_nan=False))
    return ("\n".join(out) + "\n").encode("utf-8")


def write_jsonl(pairs: Pairs, path: str, langs) -> int:
    return _counted(pairs, [path], lambda rows: [_json_lines(pairs, rows, None)])


# characters XML 1.0 cannot hold (tab, newline and carriage return it can; \r is escaped so
# that a parser's line-end normalisation keeps it)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;"})


def xml_text(text: str) -> Tuple[str, int]:
    """``text`` escaped for XML element content and attribute values, and how many characters
    XML 1.0 cannot hold were replaced by U+FFFD."""
    text, n = _NOT_XML.subn("\ufffd", text)
    return text.translate(_ESCAPES), n


def _tmx_head(langs) -> bytes:
    l1 = xml_text(langs[0])[0]
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n'
            f'<header creationtool="trie-mine" creationtoolversion="{__version__}" '
            f'segtype="sentence" o-tmf="trie-mine" adminlang="en" srclang="{l1}" '
            'datatype="plaintext"/>\n<body>\n').encode("utf-8")


def write_tmx(pairs: Pairs, path: str, langs) -> int:
    l1, l2 = (xml_text(x)[0] for x in langs)
    replaced = 0

    def render(rows: List[Row]) -> List[bytes]:
        nonlocal replaced
        out = []
        for k, (s, t, a, b, tag, values) in enumerate(rows):
            props = [("src_id", s), ("tgt_id", t)] if pairs.ids else []
            props += [(c, repr(float(v))) for c, v in zip(pairs.numeric, values)
                      if _number(v) is not None]
            props += [("direction", tag)] if pairs.direction else []
            texts = []
            for x in [v for _, v in props] + [a, b]:
                esc, n = xml_text(x)
                replaced += n
                texts.append(esc)
            body = "".join(f'<prop type="x-{xml_text(c)[0]}">{v}</prop>'
                           for (c, _), v in zip(props, texts))
            out.append(f'<tu>{body}<tuv xml:lang="{l1}"><seg>{texts[-2]}</seg></tuv>'
                       f'<tuv xml:lang="{l2}"><seg>{texts[-1]}</seg></tuv></tu>\n')
        return ["".join(out).encode("utf-8")]
    n = _counted(pairs, [path], render, [_tmx_head(langs)], [b"</body>\n</tmx>\n"])
    if replaced:
        logger.warning("%s: %d character(s) XML 1.0 cannot hold (control characters) were "
                       "written as U+FFFD", path, replaced)
    return n


def _yaml(x) -> str:
    return json.dumps(x, ensure_ascii=False)  # a JSON string is a YAML flow scalar


def hf_card(pairs: Pairs, langs, rows: int) -> str:
    """The ``README.md`` of an ``hf`` directory: YAML declaring the ``train`` split
    (``train.jsonl``) and the features ``datasets`` reads it with."""
    feats = [("src_id", "string"), ("tgt_id", "string")] if pairs.ids else []
    lines = ["---", "configs:", "- config_name: default", "  data_files:", "  - split: train",
             "    path: train.jsonl", "dataset_info:", "  features:"]
    for name, dtype in feats:
        lines += [f"  - name: {_yaml(name)}", f"    dtype: {dtype}"]
    lines += ["  - name: translation", "    dtype:", "      translation:", "        languages:",
              f"        - {_yaml(langs[0])}", f"        - {_yaml(langs[1])}"]
    for name in pairs.numeric:
        lines += [f"  - name: {_yaml(name)}", "    dtype: float64"]
    if pairs.direction:
        lines += ["  - name: direction", "    dtype: string"]
    lines += ["  splits:", "  - name: train", f"    num_examples: {rows}", "---", "",
              f"# Mined {langs[0]}-{langs[1]} bitext", "",
              f"{rows} sentence pairs mined by trie-mine: `translation` holds the pair, the other "
              "float columns the mining TSV's scores (triemine.filtering.registry names them). "
              "Load with `datasets.load_dataset(\"<this folder>\")`.", ""]
    return "\n".join(lines)


def _check_hf(path: Path) -> None:
    """Refuse an ``hf`` output path that is named as compressed, or where something other
    than an earlier ``hf`` folder is."""
    if path.name.lower().endswith(SUFFIXES):
        raise InputError("the hf format writes a folder, which is not compressed: drop the "
                         f"{codec_of_name(path).suffix} suffix", path)
    if path.exists() or path.is_symlink():
        if not path.is_dir() or not set(os.listdir(path)) <= set(HF_FILES):
            raise InputError("exists and is not a bitext folder trie-mine wrote (choose another "
                             "path, or remove it)", path)


def check_output(name: str, path, langs: Tuple[str, str]) -> None:
    """Refuse, before any work, a bitext output that format ``name`` could not write at
    ``path``: an :class:`InputError` naming it (a folder that does not exist; for ``hf``, a
    compression suffix or a path holding something else; for ``moses`` and ``hf``, one
    language code twice)."""
    fmt = get_format(name)
    for out, _folder in fmt.outputs(os.fspath(path), langs):
        parent = Path(out).parent
        if not parent.is_dir():
            raise InputError(f"its folder {parent} does not exist (create it, or choose another "
                             "path)", out)
    if name == "hf":
        _check_hf(Path(os.fspath(path)))
    if name in ("moses", "hf") and langs[0] == langs[1]:
        raise InputError(f"{name} needs two language codes, got {langs[0]!r} twice",
                         os.fspath(path))


def _replace_folder(tmp: Path, path: Path) -> None:
    """``tmp`` renamed to ``path``; an earlier ``hf`` folder at ``path`` replaced, anything
    else there refused."""
    if path.exists() or path.is_symlink():
        _check_hf(path)
        old = path.with_name(f"{path.name}.old{os.getpid()}")
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, path)


def write_hf(pairs: Pairs, path: str, langs) -> int:
    p = Path(os.fspath(path))
    _check_hf(p)
    if langs[0] == langs[1]:
        raise InputError(f"hf needs two language codes for its translation feature, got "
                         f"{langs[0]!r} twice", p)
    tmp = p.with_name(f"{p.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=False)
        n = _counted(pairs, [str(tmp / "train.jsonl")],
                     lambda rows: [_json_lines(pairs, rows, langs)])
        with atomic_open(tmp / "README.md", "bitext", hint="") as f:
            f.write(hf_card(pairs, langs, n).encode("utf-8"))
        _replace_folder(tmp, p)
    except OSError as exc:
        raise OutputError(p, exc, "bitext folder", hint="") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return n


register_format("tsv", "l1 text<TAB>l2 text lines", write_tsv, languages=False)
register_format("moses", "two line-aligned files OUT.<l1> and OUT.<l2>", write_moses,
                lambda path, langs: [(p, False) for p in moses_paths(path, langs)])
register_format("tmx", "TMX 1.4, ids and scores as <prop type=\"x-NAME\">", write_tmx)
register_format("jsonl", "one JSON object per pair: ids, texts, every score", write_jsonl,
                languages=False)
register_format("hf", "a folder datasets.load_dataset reads (train.jsonl + README.md features)",
                write_hf, lambda path, langs: [(os.fspath(path), True)])


def write(pairs: Pairs, path, fmt: str = DEFAULT, langs: Tuple[str, str] = DEFAULT_LANGS) -> int:
    """``pairs`` written to ``path`` in format ``fmt`` of :data:`FORMATS`; the pairs written.
    :class:`InputError` for an unknown format; :class:`~triemine.errors.OutputError` when a
    file cannot be written (nothing partial is left)."""
    return get_format(fmt).write(pairs, os.fspath(path), tuple(langs))
