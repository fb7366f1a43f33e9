"""The sharded exact scores of candidate pairs, sentence embeddings and MT translations, and what
the sharded jobs share.

The sharded trie search is :func:`triemine.decoding.driver.mine_to_tsv` given a pool.  Both plan
their shards on the single-process run's own boundaries (blocks of the search, chunks of
:func:`triemine.mining.features.exact_scores`), so the merged output is byte-identical to the
single-process one with the same settings and threads per process.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import os
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from triemine.decoding.fingerprint import model_fingerprint
from triemine.distributed.shards import Shard, ShardStore, execute, execute_all, plan_shards
from triemine.distributed.worker import (EmbedShardTask, ModelSpec, ScoreShardTask,
                                         TranslateShardTask)
from triemine.mining.features import corpus_key, exact_scores, score_chunk
from triemine.mining.translate import TRANSLATE_BATCH, sub_batch, translation_backend
from triemine.checksum import (TRAILER, cached_npy, discard, dumps_sealed, load_npy, npy_writer,
                               read_sealed)
from triemine.errors import DamagedFile
from triemine.outfile import atomic_write, npy_header
from triemine.paths import content_sha256, file_sha256, remember_sha256

SHARDS_SUFFIX = ".shards"
HASH_ROWS = 1 << 20  # pairs hashed at a time for a shard store's key


def model_spec(model, device: str = "cpu") -> ModelSpec:
    spm = getattr(model, "target_spm_path", None)
    return ModelSpec(os.path.abspath(model.path), os.path.abspath(spm) if spm else None, device)


def progress_bar(total_n: int, initial: int, desc: str, unit: str, enabled: bool):
    from tqdm import tqdm
    return tqdm(total=total_n, initial=initial, desc=desc, unit=unit, disable=not enabled,
                dynamic_ncols=True)


def shard_stats(store: ShardStore, computed: Sequence[int]) -> dict:
    """Counts, and the CPU seconds each worker process spent on this run's shards."""
    cpu: dict = {}
    for i in computed:
        e = store.done[str(i)]
        cpu[str(e.get("pid"))] = round(cpu.get(str(e.get("pid")), 0.0) + e.get("cpu_s", 0.0), 3)
    return {"shards": len(store.shards), "shards_computed": len(computed),
            "shards_reused": len(store.reused), "shard_dir": str(store.dir),
            "worker_cpu_s": cpu}


def forced_scores_sharded(model, src_idx: np.ndarray, tgt_idx: np.ndarray, source_path,
                          target_path, work_dir: Path, pool, **kw):
    """:func:`triemine.mining.features.forced_scores` with the pairs cut into shards of whole
    chunks (:func:`forced_score_shards`); returns ``(score, n_tokens, shard statistics)``."""
    n = len(src_idx)
    parts, stats = forced_score_shards(model, src_idx, tgt_idx, source_path, target_path,
                                       work_dir, pool, **kw)
    score, ntok = np.empty(n), np.empty(n)  # each shard's rows go in place, one at a time
    a = 0
    for sc, nt in parts:
        score[a:a + len(sc)], ntok[a:a + len(sc)] = sc, nt
        a += len(sc)
    return score, ntok, stats


def forced_score_shards(model, src_idx: np.ndarray, tgt_idx: np.ndarray, source_path,
                        target_path, work_dir: Path, pool, *, name: str = "scores",
                        reverse: bool = False,
                        progress: bool = False, desc: str = "exact scores", device: str = "cpu",
                        resume: bool = True, chunk: Optional[int] = None,
                        precision: str = "fp32",
                        stale: str = "refuse"):
    """:func:`triemine.mining.features.forced_scores` with the pairs cut into shards of whole
    chunks (``chunk`` pairs: the function's own chunking), so every pair gets the very bits the
    single-process run computes.  ``src_idx`` indexes the model's input lines (the target corpus
    with ``reverse``; ``-1`` the empty source); the index arrays may be memory-mapped (a shard's
    slice is read when its task is made).  Shards live in ``work_dir/<name>.shards/``.
    ``stale``: what a manifest of other pairs does (:class:`~triemine.distributed.shards.ShardStore`).
    Runs every shard, then returns ``(parts, shard statistics)``: ``parts`` yields each shard's
    ``(score, n_tokens)`` in order, read from its file as it is asked for."""
    src_idx = np.asarray(src_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    n = len(src_idx)
    if not n:
        return iter(()), {"shards": 0, "shards_computed": 0, "shards_reused": 0}
    chunk = chunk or score_chunk(n)
    shards = plan_shards(range(0, n, chunk), n, chunk)
    h = hashlib.sha256()
    for arr in (src_idx, tgt_idx):  # a slice at a time: no copy of the pairs' bytes
        for a in range(0, n, HASH_ROWS):
            h.update(np.ascontiguousarray(arr[a:a + HASH_ROWS]).data)
    key = {"model": model_fingerprint(model), "source": content_sha256(source_path),
           "target": content_sha256(target_path), "pairs": h.hexdigest(), "reverse": reverse,
           "chunk": chunk, "precision": precision}
    store = ShardStore(Path(work_dir) / f"{name}{SHARDS_SUFFIX}", key, shards,
                       resume=resume, ext="npy", unit="pairs", stale=stale)
    spec = model_spec(model, device)

    def make_task(s: Shard) -> ScoreShardTask:
        return ScoreShardTask(s.id, spec, os.path.abspath(source_path),
                              os.path.abspath(target_path),
                              tuple(src_idx[s.start:s.end].tolist()),
                              tuple(tgt_idx[s.start:s.end].tolist()), chunk=chunk,
                              reverse=reverse, precision=precision)
    reused = sum(len(store.by_id[i]) for i in store.reused)
    with progress_bar(n, reused, desc + " (shards)", "pair", progress) as bar:
        computed = execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
    parts = (tuple(np.load(io.BytesIO(store.read(s.id)))) for s in store.shards)
    return parts, shard_stats(store, computed)


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
    from triemine.distributed.local import InlinePool
    from triemine.embedding import ENCODERS, get_encoder

    if lines % 256:
        raise ValueError("embedding shards must be whole batches of 256 lines")
    if encoder not in ENCODERS:
        get_encoder(encoder)  # the registry's own error, before any shard is planned
    module = getattr(ENCODERS[encoder], "__module__", "") or ""
    if module.split(".")[0] != "triemine":
        pool = InlinePool()
    done: List[Optional[np.ndarray]] = [None] * len(corpora)
    runs, todo = [], []
    with contextlib.ExitStack() as bars:
        for i, (corpus_path, n_lines, out_path, *mask) in enumerate(corpora):
            key = {"encoder": encoder, "corpus": content_sha256(corpus_path),
                   "lines": int(n_lines), "batch": 256}
            blank = (np.flatnonzero(mask[0]) if mask and mask[0] is not None
                     else np.zeros(0, dtype=np.int64))
            if len(blank):  # other vectors: other shards (no key change without any)
                key["blank"] = hashlib.sha256(blank.astype("<i8").tobytes()).hexdigest()
            shards = plan_shards(range(0, n_lines, lines), n_lines, lines)
            store = ShardStore(Path(str(out_path) + SHARDS_SUFFIX), key, shards, resume=resume,
                               ext="npy", unit="lines")
            if Path(out_path).is_file() and not store.pending():
                # a merged file that was truncated, damaged or replaced is merged again
                merged = cached_npy(out_path, "embeddings", np.float32)
                if merged is not None and merged.ndim == 2 and merged.shape[0] == n_lines:
                    done[i] = merged
                    continue
            corpus = os.path.abspath(corpus_path)

            def make_task(s: Shard, corpus=corpus, blank=blank) -> EmbedShardTask:
                lo, hi = np.searchsorted(blank, [s.start, s.end])
                return EmbedShardTask(s.id, encoder, corpus, s.start, s.end, module,
                                      tuple(blank[lo:hi].tolist()))
            reused = sum(len(store.by_id[j]) for j in store.reused)
            bar = bars.enter_context(progress_bar(n_lines, reused, f"embed ({encoder}, "
                                                  f"{Path(corpus_path).name})", "sent", progress))
            runs.append((store, make_task, lambda s, _info, bar=bar: bar.update(len(s))))
            todo.append(i)
        execute_all(runs, pool)
    for (store, _make, _bar), i in zip(runs, todo):
        corpus_path, n_lines, out_path = corpora[i][:3]
        _merge_rows(store, n_lines, getattr(ENCODERS[encoder], "dim", 0), Path(out_path))
        done[i] = load_npy(out_path, "embeddings", written=True)
    return done


def _merge_rows(store: ShardStore, n_rows: int, dim: int, out_path: Path) -> None:
    """The shards' float32 rows, in order, as one ``.npy`` written atomically by plain writes (a
    full disk is an :class:`~triemine.errors.OutputError` naming the file, not the SIGBUS of a
    memory map that cannot get its page)."""
    parts = (np.ascontiguousarray(np.load(io.BytesIO(store.read(s.id))), dtype=np.float32)
             for s in store.shards)
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


# sources a translation shard: whole batches of the backend, so a shard's lines are the bits of
# one call over the corpus (8 batches: two workers share a 4,096-line corpus)
TRANSLATE_SHARD_LINES = TRANSLATE_BATCH * 8


def inline_model_pool(model, device: str = "cpu"):
    """This process as a pool for shards that need ``model``, as loaded (no second load); a
    shard that fails is not tried again, as the code would fail the same way."""
    from triemine.distributed.local import InlinePool
    return InlinePool(max_attempts=1, models={model_spec(model, device): model})


def cached_translations(model, source_path, cache: Path, pool, *, beam: int = 4,
                        device: str = "cpu", progress: bool = False,
                        lines: int = TRANSLATE_SHARD_LINES, batch: int = TRANSLATE_BATCH):
    """The MT model's translation of every line of ``source_path`` (as
    :func:`~triemine.corpus.open_corpus` reads it), one line each (``""`` for an empty line), by
    :func:`~triemine.mining.translate.translation_backend` with ``beam``, ``batch`` texts a call;
    returns ``(translations, shard statistics)``.

    Cached in ``cache/<key>.txt``, the key naming the model's weights, the backend, the beam,
    the batch, the device and the texts, so every later job and benchmark on the same corpus
    reads the file.  Otherwise computed in shards of ``lines`` lines (whole batches: the bits of
    one pass over the corpus) on ``pool`` (:func:`inline_model_pool`: this process), kept in
    ``cache/<key>.shards/`` until merged, so a job killed mid-way, and any later job on the same
    corpus, with ``--resume`` or without, redoes only the unfinished shards.  A lock file
    serialises concurrent jobs on one key (the second finds the file); a cache file that is not
    one line a text is computed again."""
    import fcntl
    import shutil

    from triemine.corpus import open_corpus

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
            return done, {"shards": 0, "shards_computed": 0, "shards_reused": 0}
        store = ShardStore(cache / f"{key}{SHARDS_SUFFIX}",
                           {"model": model_fingerprint(model), "corpus": content_sha256(source_path),
                            "lines": n, "backend": backend, "beam": int(beam),
                            "batch": int(batch), "device": device, **sub},
                           plan_shards(range(0, n, lines), n, lines), resume=True,
                           stale="restart", ext="txt", unit="lines")
        spec, corpus = model_spec(model, device), os.path.abspath(source_path)

        def make_task(s: Shard) -> TranslateShardTask:
            return TranslateShardTask(s.id, spec, corpus, s.start, s.end, int(beam), backend,
                                      int(batch))
        reused = sum(len(store.by_id[i]) for i in store.reused)
        with progress_bar(n, reused, "translate (shards)", "sent", progress) as bar:
            computed = execute(store, make_task, pool, lambda s, _info: bar.update(len(s)))
        for s in store.shards:  # one line a source, before the cache names them
            if store.read(s.id).count(b"\n") != len(s):
                shutil.rmtree(store.dir)
                raise RuntimeError(f"{store.path(s.id)}: not one translation a line of "
                                   f"{source_path} {s.start + 1}-{s.end}; the shards are removed")
        store.merge_to(path)
        atomic_write(_sum_path(path), dumps_sealed({"sha256": file_sha256(path)}),
                     "translations checksum")
        stats = shard_stats(store, computed)
        shutil.rmtree(store.dir)
        done = _read_translations(path, n)
        if done is None:
            raise RuntimeError(f"{path}: the merged translations are not {n} lines")
        return done, stats


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
