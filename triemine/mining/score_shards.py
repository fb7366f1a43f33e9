"""Exact scores of candidate pairs in shards: the scoring stage's task and its sharded driver.

:class:`ScoreShardTask` (a task of :mod:`triemine.distributed.tasks`): forced-decoding scores of
a range of pairs aligned to the chunks of :func:`triemine.mining.features.forced_scores` (exact
scores or the targets' priors); payload: ``.npy`` bytes of a ``(2, n)`` float64 array
(``score``, ``n_tokens``), ``(2 + len(JUDGE_ROWS), n)`` with ``coverage`` (and the rows of
:data:`triemine.scoring.rows.JUDGE_ROWS`: the share of source pieces left uncovered and the target's
token extremes).  :func:`forced_score_shards` plans the shards on the single-process
run's own chunks, so the merged scores are the single-process bits with the same settings and
threads per process.
"""
from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from triemine.models.fingerprint import model_fingerprint
from triemine.decoding.model_spec import ModelSpec, model_spec
from triemine.distributed.shards import SHARDS_SUFFIX
from triemine.distributed.stage import Stage, empty_stats, npy_payload, run_stage
from triemine.distributed.tasks import Corpus, WorkerContext
from triemine.mining.features import exact_scores, forced_scores, score_chunk
from triemine.scoring.rows import JUDGE_ROWS

HASH_ROWS = 1 << 20  # pairs hashed at a time for a shard store's key


@dataclass(frozen=True)
class ScoreShardTask:
    shard: int
    model: ModelSpec
    source: str
    target: str
    src: Tuple[int, ...]     # the model's input line of each pair (-1: the empty source, a prior)
    tgt: Tuple[int, ...]     # the line the model is forced to write
    chunk: int               # forced_scores' chunk: the shard is whole chunks of it
    reverse: bool = False    # the model reads the target corpus and writes the source corpus
    precision: str = "fp32"
    coverage: bool = False   # also the rows of JUDGE_ROWS (after score and n_tokens)

    def needs(self) -> list:
        return [self.model, Corpus(self.source), Corpus(self.target)]

    def run(self, ctx: WorkerContext) -> Tuple[bytes, dict]:
        model = ctx.get(self.model)
        src, tgt = ctx.get(Corpus(self.source)), ctx.get(Corpus(self.target))
        ins, outs = (tgt.texts, src.texts) if self.reverse else (src.texts, tgt.texts)
        rows = forced_scores(model, np.asarray(self.src, dtype=np.int64),
                             np.asarray(self.tgt, dtype=np.int64), ins, outs,
                             chunk=self.chunk, precision=self.precision, coverage=self.coverage)
        buf = io.BytesIO()
        np.save(buf, np.stack(rows))
        return buf.getvalue(), {"pairs": len(self.src)}


def forced_scores_sharded(model, src_idx: np.ndarray, tgt_idx: np.ndarray, source_path,
                          target_path, work_dir: Path, pool, **kw):
    """:func:`triemine.mining.features.forced_scores` with the pairs cut into shards of whole
    chunks (:func:`forced_score_shards`); returns ``(score, n_tokens, shard statistics)``, with
    ``coverage=True`` ``(score, n_tokens, *JUDGE_ROWS, shard statistics)``."""
    n = len(src_idx)
    parts, stats = forced_score_shards(model, src_idx, tgt_idx, source_path, target_path,
                                       work_dir, pool, **kw)
    cols = np.empty((2 + len(JUDGE_ROWS) * bool(kw.get("coverage")), n))  # shards in place
    a = 0
    for part in parts:
        cols[:, a:a + len(part[0])] = part
        a += len(part[0])
    return (*cols, stats)


def forced_score_shards(model, src_idx: np.ndarray, tgt_idx: np.ndarray, source_path,
                        target_path, work_dir: Path, pool, *, name: str = "scores",
                        reverse: bool = False, progress: bool = False,
                        desc: str = "exact scores", device: str = "cpu", resume: bool = True,
                        chunk: Optional[int] = None, precision: str = "fp32",
                        stale: str = "refuse", coverage: bool = False):
    """:func:`triemine.mining.features.forced_scores` in shards of whole ``chunk``-pair chunks
    (the single process's bits) in ``work_dir/<name>.shards/``.  ``src_idx`` indexes the model's
    input lines (the target corpus with ``reverse``; ``-1`` the empty source; memory-mapped
    arrays are read a shard at a time).  ``stale``: what a manifest of other pairs does.  Returns
    ``(parts, shard statistics)``: each shard's ``(score, n_tokens[, *JUDGE_ROWS])`` in order."""
    src_idx, tgt_idx = np.asarray(src_idx, dtype=np.int64), np.asarray(tgt_idx, dtype=np.int64)
    n, chunk = len(src_idx), chunk or score_chunk(len(src_idx))
    if not n:
        return iter(()), empty_stats()
    spec, source, target = model_spec(model, device), *map(os.path.abspath, (source_path,
                                                                             target_path))
    settings = {"model": model_fingerprint(model), "pairs": _pairs_digest(src_idx, tgt_idx),
                "reverse": reverse, "chunk": chunk, "precision": precision,
                **({"coverage": list(JUDGE_ROWS)} if coverage else {})}  # without: as they were
    stage = Stage(desc + " (shards)", Path(work_dir) / f"{name}{SHARDS_SUFFIX}", settings,
                  (range(0, n, chunk), n, chunk), inputs={"source": source, "target": target},
                  make_task=lambda s: ScoreShardTask(
                      s.id, spec, source, target, tuple(src_idx[s.start:s.end].tolist()),
                      tuple(tgt_idx[s.start:s.end].tolist()), chunk=chunk, reverse=reverse,
                      precision=precision, coverage=coverage),
                  unit="pairs", bar_unit="pair", ext="npy", resume=resume, stale=stale,
                  progress=progress, task=ScoreShardTask)
    ran = run_stage(stage, pool)
    return (tuple(p) for p in ran.parts(npy_payload)), ran.stats()


def _pairs_digest(src_idx: np.ndarray, tgt_idx: np.ndarray) -> str:
    """SHA-256 of the pairs' index arrays, a slice at a time (no copy of the pairs' bytes)."""
    h = hashlib.sha256()
    for arr in (src_idx, tgt_idx):
        for a in range(0, len(arr), HASH_ROWS):
            h.update(np.ascontiguousarray(arr[a:a + HASH_ROWS]).data)
    return h.hexdigest()


def exact_scores_sharded(model, cands, source_path, target_path, work_dir: Path, pool,
                         progress: bool = False, reverse: bool = False, device: str = "cpu",
                         resume: bool = True, chunk: Optional[int] = None,
                         precision: str = "fp32"):
    """:func:`triemine.mining.features.exact_scores` on a pool (:func:`forced_scores_sharded`),
    shards in ``work_dir/scores[_rev].shards/``.  Returns ``(candidates, shard statistics)``."""
    stats = {"shards": 0, "shards_computed": 0, "shards_reused": 0}

    def sharded(in_idx, out_idx, name, desc):
        score, ntok, st = forced_scores_sharded(
            model, in_idx, out_idx, source_path, target_path, work_dir, pool, name=name,
            reverse=reverse, progress=progress, device=device, resume=resume, chunk=chunk,
            precision=precision, desc=desc)
        stats.update(st)
        return score, ntok
    return exact_scores(model, cands, (), (), reverse=reverse, scores=sharded), stats
