"""Sentence embeddings of corpora in shards: the embedding stage's task and its sharded driver.

:class:`EmbedShardTask` (a task of :mod:`triemine.distributed.tasks`): sentence embeddings of a
range of corpus lines (whole batches of the encoder, so the rows are the single call's bits);
payload: ``.npy`` bytes of float32 rows.  :func:`embed_corpora` plans, runs and merges them.
"""
from __future__ import annotations

import hashlib
import importlib
import io
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from triemine.io import cached_npy, load_npy, npy_header, npy_writer, remember_sha256, TRAILER
from triemine.distributed.local import InlinePool
from triemine.distributed.shards import SHARDS_SUFFIX
from triemine.distributed.stage import Stage, StageRun, npy_payload, run_stages
from triemine.distributed.tasks import Corpus, WorkerContext
from triemine.embedding.encoders import ENCODERS, get_encoder


@dataclass(frozen=True)
class Encoder:
    """The sentence encoder ``name`` of :mod:`triemine.embedding`'s registry; one registered by
    another module (a trained baseline, a user's own) is found by importing ``module`` first."""

    name: str
    module: str = ""

    def load(self, ctx: WorkerContext):
        if self.name not in ENCODERS and self.module:
            importlib.import_module(self.module)
        return get_encoder(self.name)


@dataclass(frozen=True)
class EmbedShardTask:
    shard: int
    encoder: str             # a name of triemine.embedding's registry
    corpus: str              # the corpus file
    start: int               # lines [start, end), start a multiple of the encoder's batch
    end: int
    module: str = ""         # the module that registers the encoder (imported when unknown)
    blank: Tuple[int, ...] = ()  # lines of [start, end) embedded as empty lines (zero vectors)

    def needs(self) -> list:
        return [Encoder(self.encoder, self.module), Corpus(self.corpus)]

    def run(self, ctx: WorkerContext) -> Tuple[bytes, dict]:
        texts = ctx.get(Corpus(self.corpus)).texts[self.start:self.end]
        for i in self.blank:  # a line the job skips: no embedding, in no one's neighbours
            texts[i - self.start] = ""
        vecs = np.ascontiguousarray(ctx.get(Encoder(self.encoder, self.module)).encode(texts),
                                    dtype=np.float32)
        buf = io.BytesIO()
        np.save(buf, vecs)
        return buf.getvalue(), {"lines": len(texts)}


# lines per embedding shard: whole batches of the encoder (SentenceEncoder.encode's 256), so a
# shard's rows are the single call's bits
EMBED_SHARD_LINES = 256 * 32


def embed_sharded(encoder: str, corpus_path, n_lines: int, out_path: Path, pool, *,
                  progress: bool = False, resume: bool = True,
                  lines: int = EMBED_SHARD_LINES) -> np.ndarray:
    """The sentence embeddings of a corpus's ``n_lines`` lines, computed in shards of ``lines``
    lines on ``pool`` (an :class:`~triemine.distributed.local.InlinePool` runs them here) and
    merged into ``out_path`` (a float32 ``.npy``, written atomically once complete), returned
    memory-mapped.  Shards live in ``<out_path>.shards/``; a resumed run redoes only the
    unfinished ones, and a finished ``out_path`` is reused when its shard manifest says it
    belongs to this corpus and encoder.  Workers build the encoder by name, importing the
    package's module that registered it; an encoder registered outside ``triemine`` (a user's
    script or module, which a Ray actor on another node may not be able to import) runs here,
    in this process, on the same shards: the same bits either way."""
    return embed_corpora(encoder, [(corpus_path, n_lines, out_path)], pool, progress=progress,
                         resume=resume, lines=lines)[0]


def embed_corpora(encoder: str, corpora: Sequence[tuple], pool, *, progress: bool = False,
                  resume: bool = True, lines: int = EMBED_SHARD_LINES) -> List[np.ndarray]:
    """:func:`embed_sharded` of every ``(corpus_path, n_lines, out_path)`` of ``corpora``, their
    shards queued on ``pool`` together (a small corpus's lone shard does not hold the other
    workers idle); the same files and bits as one call each.  A corpus may come with a fourth
    item, a boolean mask of its lines to embed as empty lines (zero vectors: lines the job
    skips, e.g. as too long, so that they are no one's neighbours)."""
    if lines % 256:
        raise ValueError("embedding shards must be whole batches of 256 lines")
    if encoder not in ENCODERS:
        get_encoder(encoder)  # the registry's own error, before any shard is planned
    module = getattr(ENCODERS[encoder], "__module__", "") or ""
    if module.split(".")[0] != "triemine":
        pool = InlinePool()
    done: List[Optional[np.ndarray]] = [None] * len(corpora)
    stages, todo = [], []
    for i, (corpus_path, n_lines, out_path, *mask) in enumerate(corpora):
        stage = _embed_stage(encoder, module, corpus_path, n_lines, out_path,
                             mask[0] if mask else None, lines=lines, resume=resume,
                             progress=progress)
        done[i] = _merged_file(stage, out_path, n_lines)
        if done[i] is None:
            stages.append(stage)
            todo.append(i)
    for ran, i in zip(run_stages(stages, pool), todo):
        corpus_path, n_lines, out_path = corpora[i][:3]
        _merge_rows(ran, n_lines, getattr(ENCODERS[encoder], "dim", 0), Path(out_path))
        done[i] = load_npy(out_path, "embeddings", written=True)
    return done


def _embed_stage(encoder: str, module: str, corpus_path, n_lines: int, out_path, mask, *,
                 lines: int, resume: bool, progress: bool) -> Stage:
    """The embedding stage of one corpus (shards in ``<out_path>.shards/``); ``mask``: its lines
    to embed as empty lines, or None."""
    blank = np.flatnonzero(mask) if mask is not None else np.zeros(0, dtype=np.int64)
    # other vectors: other shards (no key change without any)
    extra = ({"blank": hashlib.sha256(blank.astype("<i8").tobytes()).hexdigest()}
             if len(blank) else {})
    return Stage(f"embed ({encoder}, {Path(corpus_path).name})",
                 Path(str(out_path) + SHARDS_SUFFIX),
                 {"encoder": encoder, "lines": int(n_lines), "batch": 256, **extra},
                 (range(0, n_lines, lines), n_lines, lines), inputs={"corpus": corpus_path},
                 make_task=_task_maker(encoder, module, os.path.abspath(corpus_path), blank),
                 unit="lines", bar_unit="sent", ext="npy", resume=resume, progress=progress,
                 task=EmbedShardTask)


def _merged_file(stage: Stage, out_path, n_lines: int) -> Optional[np.ndarray]:
    """The merged embeddings of a stage whose shards are all recorded, when ``out_path`` is
    whole (one truncated, damaged or replaced is merged again: None)."""
    if Path(out_path).is_file() and not stage.store.pending():
        merged = cached_npy(out_path, "embeddings", np.float32)
        if merged is not None and merged.ndim == 2 and merged.shape[0] == n_lines:
            return merged
    return None


def _task_maker(encoder: str, module: str, corpus: str, blank: np.ndarray):
    """The embedding stage's ``make_task`` for one corpus (``blank``: sorted lines to embed as
    empty lines)."""
    def make_task(s) -> EmbedShardTask:
        lo, hi = np.searchsorted(blank, [s.start, s.end])
        return EmbedShardTask(s.id, encoder, corpus, s.start, s.end, module,
                              tuple(blank[lo:hi].tolist()))
    return make_task


def _merge_rows(ran: StageRun, n_rows: int, dim: int, out_path: Path) -> None:
    """The shards' float32 rows, in order, as one ``.npy`` written atomically by plain writes (a
    full disk is an :class:`~triemine.errors.OutputError` naming the file, not the SIGBUS of a
    memory map that cannot get its page)."""
    parts = (np.ascontiguousarray(p, dtype=np.float32) for p in ran.parts(npy_payload))
    first = next(parts, np.zeros((0, dim), dtype=np.float32))
    shape = (n_rows, first.shape[1] if first.ndim == 2 else dim)
    digest = hashlib.sha256()  # the kNN's keys name the file by content: hashed as written
    with npy_writer(out_path, np.float32, shape, "embeddings") as f:
        digest.update(npy_header(np.float32, shape))
        for part in itertools.chain([first], parts):
            raw = memoryview(np.ascontiguousarray(part, dtype=np.float32)).cast("B")
            digest.update(raw)
            f.write(raw)
    with open(out_path, "rb") as f:  # and the checksum trailer after them
        f.seek(-TRAILER.size, os.SEEK_END)
        digest.update(f.read())
    remember_sha256(out_path, digest.hexdigest())
