"""Build a trie from a text corpus: sentencepiece pieces → fairseq dictionary ids → + EOS.

The piece → id mapping is a numpy lookup table over the sentencepiece vocabulary, so the corpus is
mapped in vectorised batches; the trie itself is built by :meth:`Trie.from_arrays`. Line ids are
0-based corpus line indices (``corpus.ids[i]`` gives the corpus id back).
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Tuple, Union

import numpy as np

from triemine.io import Corpus, file_sha256, read_corpus
from triemine.errors import InputError
from triemine.trie.core import FORMAT_VERSION, Trie

UNK_POLICIES = ("error", "map")


@dataclass
class BuildStats:
    """What ``trie-build`` reports at the end."""
    corpus: str
    format: str
    lines: int                       # lines in the corpus file
    sentences: int                   # non-empty lines inserted
    empty_lines: List[int]           # 1-based line numbers of empty lines (not inserted)
    unsegmentable_lines: List[int]   # non-empty lines sentencepiece turned into no piece
    unique_lines: int                # distinct sentence texts among the inserted lines
    unk_lines: int                   # lines with at least one <unk> id
    sequences: int                   # distinct (token sequence, line id) insertions
    nodes: int
    terminals: int
    bytes: int
    bytes_per_node: float
    depth: int
    segment_s: float
    build_s: float
    nbest: int = 1
    extra: dict = field(default_factory=dict)
    skipped_lines: List[int] = field(default_factory=list)  # bad lines (in empty_lines too)
    problems: List[Tuple[int, str]] = field(default_factory=list)  # the first skipped, and why

    def as_dict(self) -> dict:
        return asdict(self)

    def report(self) -> str:
        def lines_list(xs: List[int]) -> str:
            if not xs:
                return "0"
            shown = ", ".join(map(str, xs[:10]))
            return f"{len(xs)} (lines {shown}{', ...' if len(xs) > 10 else ''})"
        rows = [
            ("corpus", f"{self.corpus} ({self.format}, {self.lines} lines)"),
            ("sentences inserted", self.sentences),
            ("empty lines", lines_list(self.empty_lines)),
            ("bad lines skipped", f"{len(self.skipped_lines)}" + "".join(
                f"; line {i}: {why}" for i, why in self.problems)),
            ("lines with no piece", lines_list(self.unsegmentable_lines)),
            ("unique lines", self.unique_lines),
            ("lines with <unk>", self.unk_lines),
            ("sequences (nbest %d)" % self.nbest, self.sequences),
            ("nodes", self.nodes),
            ("terminals", self.terminals),
            ("bytes", self.bytes),
            ("bytes/node", f"{self.bytes_per_node:.2f} (node arrays only)"),
            ("depth", self.depth),
            ("segmentation s", f"{self.segment_s:.2f}"),
            ("build s", f"{self.build_s:.2f}"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def dictionary_fingerprint(dictionary) -> str:
    """Stable fingerprint of a fairseq dictionary's symbol list (counts ignored)."""
    h = hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8"))
    return "sha256:" + h.hexdigest()[:32]


def load_dictionary(path: Union[str, os.PathLike]):
    """``fairseq.data.Dictionary.load`` with errors that name the file and line."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise InputError("dictionary file not found", p) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 ({exc.reason})", p, raw.count(b"\n", 0,
                                                                       exc.start) + 1) from None
    seen = {}
    for i, ln in enumerate(text.splitlines(), 1):
        parts = ln.rstrip().rsplit(" ", 1)
        if len(parts) == 2 and parts[1] == "#fairseq:overwrite":
            parts = parts[0].rsplit(" ", 1)
        if len(parts) != 2 or not parts[0] or not parts[1].lstrip("-").isdigit():
            raise InputError("bad dictionary line, expected '<symbol> <count>'", p, i)
        if parts[0] in seen and not ln.rstrip().endswith("#fairseq:overwrite"):
            raise InputError(
                f"duplicate symbol {parts[0]!r} (first on line {seen[parts[0]]})", p, i
            )
        seen[parts[0]] = i
    from fairseq.data import Dictionary  # heavy import, only when a corpus is built
    return Dictionary.load(p)


def _load_spm(path: Union[str, os.PathLike]):
    import sentencepiece as spm
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise InputError("sentencepiece model not found", p)
    sp = spm.SentencePieceProcessor()
    try:
        sp.Load(p)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"not a sentencepiece model ({exc})", p) from None
    return sp


def piece_map(sp, dictionary, unk: str = "error") -> np.ndarray:
    """int64[spm vocab]: fairseq id of every sentencepiece piece; -1 when missing (``unk=
    'error'``) or the dictionary's unk (``unk='map'``)."""
    table = np.empty(sp.GetPieceSize(), dtype=np.int64)
    missing = dictionary.unk() if unk == "map" else -1
    for i in range(table.size):
        table[i] = dictionary.indices.get(sp.IdToPiece(i), missing)
    return table


def build_trie_from_corpus(corpus: Union[str, os.PathLike, Corpus], spm_model, dictionary, *,
                           nbest: int = 1, format: str = "auto", unk: str = "error",
                           progress: bool = False, batch_size: int = 4096,
                           metadata: Optional[dict] = None):
    """Segment every non-empty line, map pieces to ``dictionary`` ids, append EOS, build the trie.

    ``spm_model`` / ``dictionary`` are paths or loaded objects (``SentencePieceProcessor``,
    ``fairseq.data.Dictionary``). ``nbest > 1`` inserts up to ``nbest`` distinct segmentations
    per line under the same line id. ``unk='error'`` makes a piece missing from the dictionary an
    :class:`InputError` naming corpus file and line; ``'map'`` maps it to ``<unk>``.
    Returns ``(trie, BuildStats)``.
    """
    if unk not in UNK_POLICIES:
        raise ValueError(f"unk must be one of {UNK_POLICIES}")
    if nbest < 1:
        raise ValueError("nbest must be >= 1")
    from tqdm import tqdm

    corp = corpus if isinstance(corpus, Corpus) else read_corpus(corpus, format)
    spm_path = None if not isinstance(spm_model, (str, os.PathLike)) else os.fspath(spm_model)
    sp = _load_spm(spm_model) if spm_path else spm_model
    dict_path = None if not isinstance(dictionary, (str, os.PathLike)) else os.fspath(dictionary)
    d = load_dictionary(dictionary) if dict_path else dictionary
    table = piece_map(sp, d, unk)
    eos, unk_id = d.eos(), d.unk()

    t0 = time.perf_counter()
    idx = corp.non_empty
    chunks: List[np.ndarray] = []
    lengths: List[int] = []
    owners: List[int] = []  # 0-based line index of every sequence
    no_piece: List[int] = []
    with tqdm(total=len(idx), unit="line", desc="segment", disable=not progress) as bar:
        for b in range(0, len(idx), batch_size):
            batch = idx[b:b + batch_size]
            texts = [corp.texts[i] for i in batch]
            if nbest == 1:
                segs = [[s] for s in sp.Encode(texts, out_type=int)]
            else:
                segs = [_distinct(sp.NBestEncode(t, out_type=int, nbest_size=nbest)) for t in texts]
            for line_index, alts in zip(batch, segs):
                alts = [a for a in alts if a]
                if not alts:
                    no_piece.append(line_index + 1)
                    continue
                for a in alts:
                    chunks.append(np.asarray(a, dtype=np.int64))
                    lengths.append(len(a))
                    owners.append(line_index)
            bar.update(len(batch))
    lens = np.asarray(lengths, dtype=np.int64)
    owner = np.asarray(owners, dtype=np.int64)
    pieces = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    ids = table[pieces]
    bad = np.flatnonzero(ids < 0)
    if bad.size:
        seq = int(np.searchsorted(np.cumsum(lens), bad[0], side="right"))
        piece = sp.IdToPiece(int(pieces[bad[0]]))
        where = f" ({dict_path})" if dict_path else ""
        raise InputError(f"sentencepiece piece {piece!r} is not in the dictionary{where}; "
                         f"use unk='map' (trie-build --unk map) to map it to <unk>",
                         corp.path, int(owner[seq]) + 1)
    # append EOS to every sequence
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens + 1, out=offsets[1:])
    flat = np.full(int(offsets[-1]), eos, dtype=np.int64)
    keep = np.ones(flat.size, dtype=bool)
    keep[offsets[1:] - 1] = False
    flat[keep] = ids
    seg_s = time.perf_counter() - t0

    meta = {
        "format_version": FORMAT_VERSION,
        "source": os.path.abspath(corp.path), "source_format": corp.format,
        "spm": os.path.abspath(spm_path) if spm_path else None,
        "spm_sha256": file_sha256(spm_path) if spm_path else None,
        "dict": os.path.abspath(dict_path) if dict_path else None,
        "dict_fingerprint": dictionary_fingerprint(d), "dict_size": len(d), "eos": eos,
        "nbest": nbest, "unk": unk, "lines": len(corp), "empty_lines": len(corp.empty_lines),
    }
    meta.update(metadata or {})
    t1 = time.perf_counter()
    trie = Trie.from_arrays(flat, offsets, owner, eos=eos, metadata=meta, path=corp.path,
                            lines=owner + 1)
    build_s = time.perf_counter() - t1
    has_unk = np.zeros(len(corp), dtype=bool)
    if lens.size:
        unk_seq = np.unique(np.searchsorted(np.cumsum(lens), np.flatnonzero(ids == unk_id),
                                            side="right"))
        has_unk[owner[unk_seq]] = True
    stats = BuildStats(
        corpus=corp.path, format=corp.format, lines=len(corp),
        sentences=len(idx) - len(no_piece), empty_lines=list(corp.empty_lines),
        unsegmentable_lines=no_piece, unique_lines=len({corp.texts[i] for i in idx}),
        unk_lines=int(has_unk.sum()), sequences=len(trie), nodes=int(trie.n_nodes),
        terminals=int(trie.n_terminals), bytes=trie.nbytes,
        bytes_per_node=trie.node_nbytes / trie.n_nodes, depth=trie.depth, segment_s=seg_s,
        build_s=build_s, nbest=nbest, skipped_lines=[int(i) for i in corp.skipped_lines],
        problems=list(corp.problems))
    return trie, stats


def _distinct(alts):
    out, seen = [], set()
    for a in alts:
        t = tuple(a)
        if t not in seen:
            seen.add(t)
            out.append(list(a))
    return out


def check_trie_dict(trie, tgt_dict, path=None) -> None:
    """Raise :class:`InputError` if ``trie`` was built for another dictionary than ``tgt_dict``."""
    meta = getattr(trie, "metadata", {}) or {}
    if int(trie.eos) != tgt_dict.eos():
        raise InputError(f"trie EOS id {trie.eos} differs from the model dictionary's "
                         f"{tgt_dict.eos()}: trie built for another dictionary", path)
    size = meta.get("dict_size")
    if size is not None and int(size) != len(tgt_dict):
        raise InputError(f"trie built for a dictionary of {size} symbols, the model's has "
                         f"{len(tgt_dict)}: rebuild the trie with this model", path)
    fp = meta.get("dict_fingerprint")
    if fp is not None and fp != dictionary_fingerprint(tgt_dict):
        raise InputError("trie built for another dictionary (fingerprint differs): rebuild it "
                         "with this model's target dictionary", path)
    keys = getattr(trie, "keys", None)
    if keys is not None and len(keys) > 1 and int(keys[1:].max()) >= len(tgt_dict):
        raise InputError(f"trie holds token id {int(keys[1:].max())} but the model dictionary "
                         f"has {len(tgt_dict)} symbols", path)
