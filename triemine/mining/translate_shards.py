"""MT translations of a corpus in shards, cached per corpus: the translation stage's task and
its sharded driver.

:class:`TranslateShardTask` (a task of :mod:`triemine.distributed.tasks`): the MT model's
translations of a range of corpus lines (whole batches of the backend, so they are one pass's
lines); payload: UTF-8 text, one line a source.  :func:`cached_translations` plans, runs, merges
and caches them.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from triemine.io import atomic_write, discard, dumps_sealed, file_sha256, open_corpus, read_sealed
from triemine.models.fingerprint import model_fingerprint
from triemine.decoding.model_spec import ModelSpec, model_spec
from triemine.distributed.shards import SHARDS_SUFFIX
from triemine.distributed.stage import Stage, empty_stats, run_stage
from triemine.distributed.tasks import Corpus, WorkerContext
from triemine.errors import DamagedFile
from triemine.mining.features import corpus_key
from triemine.mining.translate import (TRANSLATE_BATCH, make_translator, sub_batch,
                                       translate_lines, translation_backend)


@dataclass(frozen=True)
class Translator:
    """The backend's translator for a model and beam (a CTranslate2 model loaded once per
    worker)."""

    model: ModelSpec
    beam: int
    backend: str

    def load(self, ctx: WorkerContext):
        return make_translator(ctx.get(self.model), self.beam, self.model.device, self.backend)


@dataclass(frozen=True)
class TranslateShardTask:
    shard: int
    model: ModelSpec
    source: str              # the corpus file
    start: int               # lines [start, end), start a multiple of the backend's batch
    end: int
    beam: int
    backend: str             # triemine.mining.translate's: ctranslate2 or fairseq
    batch: int               # texts a backend call

    def needs(self) -> list:
        return [Translator(self.model, self.beam, self.backend), Corpus(self.source)]

    def run(self, ctx: WorkerContext) -> Tuple[bytes, dict]:
        texts = ctx.get(Corpus(self.source)).texts[self.start:self.end]
        out = translate_lines(ctx.get(Translator(self.model, self.beam, self.backend)), texts,
                              self.batch)
        return "".join(o + "\n" for o in out).encode("utf-8"), {"lines": len(out)}


# sources a translation shard: whole batches of the backend, so a shard's lines are the bits of
# one call over the corpus (8 batches: two workers share a 4,096-line corpus)
TRANSLATE_SHARD_LINES = TRANSLATE_BATCH * 8


def cached_translations(model, source_path, cache: Path, pool, *, beam: int = 4,
                        device: str = "cpu", progress: bool = False,
                        lines: int = TRANSLATE_SHARD_LINES, batch: int = TRANSLATE_BATCH):
    """The MT model's translation of every line of ``source_path`` (as
    :func:`~triemine.io.corpus.open_corpus` reads it), one line each (``""`` for an empty line), by
    :func:`~triemine.mining.translate.translation_backend` with ``beam``, ``batch`` texts a call;
    returns ``(translations, shard statistics)``.

    Cached in ``cache/<key>.txt``, the key naming the model's weights, the backend, the beam,
    the batch, the device and the texts, so every later job and benchmark on the same corpus
    reads the file.  Otherwise computed in shards of ``lines`` lines (whole batches: the bits of
    one pass over the corpus) on ``pool`` (:func:`~triemine.decoding.model_spec.inline_model_pool`:
    this process), kept in
    ``cache/<key>.shards/`` until merged, so a job killed mid-way, and any later job on the same
    corpus, with ``--resume`` or without, redoes only the unfinished shards.  A lock file
    serialises concurrent jobs on one key (the second finds the file); a cache file that is not
    one line a text is computed again."""
    if lines % batch:
        raise ValueError(f"translation shards must be whole batches of {batch} lines")
    backend = translation_backend(model)
    texts = open_corpus(source_path).texts
    # off the CPU the fairseq decoder's sub-batch (which moves the last bits) is in the keys too;
    # the CPU's keys are those of before it was
    sub = {"sub": sub_batch(device)} if backend == "fairseq" and device != "cpu" else {}
    key = corpus_key(model, texts, f"translations|{backend}|beam={beam}|batch={batch}|"
                                   f"device={device}" + "".join(f"|sub={v}" for v in sub.values()))
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    path, n = cache / f"{key}.txt", len(texts)
    with open(cache / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = _read_translations(path, n)
        if done is not None:  # (shards a killed merge left behind go too)
            shutil.rmtree(cache / f"{key}{SHARDS_SUFFIX}", ignore_errors=True)
            return done, empty_stats()
        stats = _translate(model, source_path, n, cache / f"{key}{SHARDS_SUFFIX}", path, pool,
                           dict(backend=backend, beam=int(beam), batch=int(batch), device=device,
                                **sub), lines=lines, progress=progress)
        done = _read_translations(path, n)
        if done is None:
            raise RuntimeError(f"{path}: the merged translations are not {n} lines")
        return done, stats


def _translate(model, source_path, n: int, shards: Path, path: Path, pool, settings: dict, *,
               lines: int, progress: bool) -> dict:
    """The translation stage: ``n`` lines of ``source_path`` in shards of ``lines`` in
    ``shards`` (kept until merged, whoever resumes them), checked one line a source, merged into
    ``path`` with its checksum file; returns the shard statistics."""
    spec, corpus = model_spec(model, settings["device"]), os.path.abspath(source_path)
    ran = run_stage(Stage(
        "translate (shards)", shards, {"model": model_fingerprint(model), "lines": n, **settings},
        (range(0, n, lines), n, lines), inputs={"corpus": source_path}, unit="lines",
        bar_unit="sent", ext="txt", stale="restart", progress=progress, task=TranslateShardTask,
        make_task=lambda s: TranslateShardTask(s.id, spec, corpus, s.start, s.end,
                                               settings["beam"], settings["backend"],
                                               settings["batch"])), pool)
    for s in ran.store.shards:  # one line a source, before the cache names them
        if ran.store.read(s.id).count(b"\n") != len(s):
            shutil.rmtree(shards)
            raise RuntimeError(f"{ran.store.path(s.id)}: not one translation a line of "
                               f"{source_path} {s.start + 1}-{s.end}; the shards are removed")
    ran.merge_to(path)
    atomic_write(_sum_path(path), dumps_sealed({"sha256": file_sha256(path)}),
                 "translations checksum")
    stats = ran.stats()
    shutil.rmtree(shards)
    return stats


def _sum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sum")


def _read_translations(path: Path, n: int) -> Optional[List[str]]:
    """The ``n`` lines of ``path``, or None when it is missing, not ``n`` whole lines, or not
    the bytes its checksum file (``<path>.sum``, sealed JSON) records: a damaged cache is
    named in a warning and removed (computed again)."""
    try:  # bytes: a translation may hold a carriage return, which read_text makes a newline
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        want = read_sealed(_sum_path(path), "translations checksum").get("sha256")
        if hashlib.sha256(raw).hexdigest() != want:
            raise DamagedFile(path, "checksum mismatch (changed after it was written)",
                              "translations cache")
        text = raw.decode("utf-8")
    except (OSError, DamagedFile, AttributeError, UnicodeDecodeError) as exc:
        discard(exc if isinstance(exc, DamagedFile) else
                DamagedFile(path, f"unverifiable ({exc})", "translations cache"))
        _sum_path(path).unlink(missing_ok=True)
        return None
    lines = text.split("\n")
    if lines[-1] != "" or len(lines) != n + 1:
        return None
    return lines[:-1]
