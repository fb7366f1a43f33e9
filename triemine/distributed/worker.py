"""What a worker runs: shard tasks, and the worker that keeps its model and tries loaded.

A task is a small picklable description (paths and ranges, never tensors); the worker loads a
model directory once, memory-maps each trie file once (``Trie.load``: the pages are shared by
every process of the node through the page cache) and reads each corpus once, then runs any
number of tasks.  A task returns ``(payload bytes, info)``; the driver writes the payload
(:class:`triemine.distributed.shards.ShardStore`).

* :class:`TrieShardTask`: the trie search of sources ``[start, end)`` (a range that starts and
  ends on block boundaries of the single-process plan) with the driver's
  :class:`~triemine.decoding.settings.SearchSettings`, against one trie or, with target shards,
  against several tries whose matches are merged by score (beam ``B`` best per source);
  payload: the mining-TSV rows.
* :class:`EmbedShardTask`: sentence embeddings of a range of corpus lines (whole batches of the
  encoder, so the rows are the single call's bits); payload: ``.npy`` bytes of float32 rows.
* :class:`KnnShardTask`: exact top-k inner products of a range of query rows against a range
  of database rows (both ``.npy`` files, memory-mapped); payload: ``.npz`` bytes of ``sim``
  (float32) and ``idx`` (int64, global rows).
  With ``graph``, the rows' HNSW graph is walked instead.
* :class:`GraphShardTask`: the HNSW graph of a range of database rows, built in one thread;
  payload: a :class:`~triemine.distributed.shards.FilePayload`, the graph file the worker wrote.
* :class:`ScoreShardTask`: forced-decoding scores of a range of pairs aligned to the chunks of
  :func:`triemine.mining.features.forced_scores` (exact scores or the targets' priors);
  payload: ``.npy`` bytes of a ``(2, n)`` float64 array (``score``, ``n_tokens``).
* :class:`TranslateShardTask`: the MT model's translations of a range of corpus lines (whole
  batches of the backend, so they are one pass's lines); payload: UTF-8 text, one line a source.

Fault injection for the tests (``TRIEMINE_TEST_FAULTS``, JSON, read at each task): ``{"dir":
DIR, "kill": [ids], "fail": [ids], "delay": seconds}`` kills the worker process (SIGKILL) the
first time it runs a shard of ``kill`` (a marker file in ``DIR`` makes it once), raises in
every run of a shard of ``fail``, sleeps ``delay`` seconds per shard, appends ``<id> <pid>`` to
``DIR/started.log`` when a worker process begins a shard and ``<id>`` to ``DIR/computed.log``
for every shard computed.
"""
from __future__ import annotations

import io
import json
import os
import signal
import time
import warnings
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from triemine.decoding.settings import SearchSettings

FAULTS_ENV = "TRIEMINE_TEST_FAULTS"


@dataclass(frozen=True)
class ModelSpec:
    path: str
    target_spm: Optional[str] = None
    device: str = "cpu"


@dataclass(frozen=True)
class TrieShardTask:
    shard: int
    model: ModelSpec
    source: str
    target: str
    start: int
    end: int
    tries: Tuple[Tuple[str, int], ...]   # (trie file, target line offset) per target shard
    search: SearchSettings               # the driver's settings, as they are
    debug: bool = False                  # check every hypothesis's node (no effect on the rows)


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


@dataclass(frozen=True)
class EmbedShardTask:
    shard: int
    encoder: str             # a name of triemine.embedding's registry
    corpus: str              # the corpus file
    start: int               # lines [start, end), start a multiple of the encoder's batch
    end: int
    module: str = ""         # the module that registers the encoder (imported when unknown)
    blank: Tuple[int, ...] = ()  # lines of [start, end) embedded as empty lines (zero vectors)


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


@dataclass(frozen=True)
class KnnShardTask:
    shard: int
    queries: str             # .npy of L2-normalised float32 rows
    database: str
    rows: Tuple[int, int]    # query rows [a, b)
    base: Tuple[int, int]    # database rows [a, b)
    k: int
    index: str = ""          # an IVF index file (triemine.embedding.ivf) searched instead
    nprobe: int = 0
    graph: str = ""          # the HNSW graph of the base rows (triemine.embedding.hnsw) instead
    ef_search: int = 0
    device: str = "cpu"      # an exact search's device (triemine.embedding.knn.device_knn)


@dataclass(frozen=True)
class GraphShardTask:
    shard: int
    database: str            # .npy of L2-normalised float32 rows
    base: Tuple[int, int]    # the graph's rows [a, b)
    out: str                 # the shard file: the worker writes <out>.tmp<pid>, the driver renames
    m: int
    ef_construction: int


def _faults() -> dict:
    text = os.environ.get(FAULTS_ENV)
    return json.loads(text) if text else {}


def _before(shard: int) -> dict:
    faults = _faults()
    if not faults:
        return faults
    if faults.get("dir"):
        with open(os.path.join(faults["dir"], "started.log"), "a") as f:
            f.write(f"{shard} {os.getpid()}\n")
    if shard in faults.get("fail", ()):
        raise RuntimeError(f"injected failure of shard {shard}")
    if shard in faults.get("kill", ()):
        marker = os.path.join(faults["dir"], f"killed-{shard}")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    if faults.get("delay"):
        time.sleep(float(faults["delay"]))
    return faults


def _after(shard: int, faults: dict) -> None:
    if faults.get("dir"):
        with open(os.path.join(faults["dir"], "computed.log"), "a") as f:
            f.write(f"{shard}\n")


def merge_matches(per_trie: Sequence[List], beam: int, prior_weight: float = 0.0) -> List:
    """One source's matches from several tries (line ids already global), merged as one trie's
    search would rank them: the same target text found in two tries is one match with both
    lines' ids; order by the search's own key; the ``beam`` best are kept, ranks renumbered."""
    by_tokens: Dict[Tuple[int, ...], object] = {}
    for matches in per_trie:
        for m in matches:
            old = by_tokens.get(m.tokens)
            if old is None:
                by_tokens[m.tokens] = m
            else:
                by_tokens[m.tokens] = replace(
                    old, tgt_line_ids=tuple(sorted(set(old.tgt_line_ids) | set(m.tgt_line_ids))))

    from triemine.decoding.generator import rank_key

    best = sorted(by_tokens.values(),
                  key=lambda m: rank_key(m.score, m.n_tokens, m.tokens, m.prior, prior_weight))[:beam]
    return [replace(m, rank=r) for r, m in enumerate(best)]


class ShardWorker:
    """Runs tasks; keeps what it loaded (one model, tries, corpora) for the next task.

    ``threads``: torch intra-op threads of this worker (``None`` leaves torch's setting)."""

    def __init__(self, threads: Optional[int] = None):
        if threads:
            import torch
            torch.set_num_threads(int(threads))
        self._models: Dict[ModelSpec, object] = {}
        self._tries: Dict[str, object] = {}
        self._corpora: Dict[str, object] = {}
        self._encoders: Dict[str, object] = {}
        self._indexes: Dict[str, object] = {}
        self._long_targets: Dict[tuple, np.ndarray] = {}
        self._translators: Dict[tuple, object] = {}

    def pid(self) -> int:
        return os.getpid()

    def adopt(self, spec: ModelSpec, model) -> None:
        """``model``, already loaded in this process, as the model of ``spec``."""
        self._models[spec] = model

    def model(self, spec: ModelSpec):
        if spec not in self._models:
            from triemine.decoding.model_dir import load_model_dir
            self._models[spec] = load_model_dir(spec.path, target_spm=spec.target_spm,
                                                device=spec.device)
        return self._models[spec]

    def trie(self, path: str):
        if path not in self._tries:
            from triemine.trie import Trie
            self._tries[path] = Trie.load(path, verify=False)  # memory-mapped, shared pages
        return self._tries[path]

    def corpus(self, path: str):
        if path not in self._corpora:
            from triemine.corpus import open_corpus
            self._corpora[path] = open_corpus(path)  # offsets only: the lines are read on demand
        return self._corpora[path]

    def encoder(self, name: str, module: str = ""):
        """The encoder ``name``; one registered by another module (a trained baseline, a
        user's own) is found by importing ``module`` first."""
        if name not in self._encoders:
            import importlib

            from triemine.embedding import ENCODERS, get_encoder
            if name not in ENCODERS and module:
                importlib.import_module(module)
            self._encoders[name] = get_encoder(name)
        return self._encoders[name]

    def warm(self, task) -> int:
        """Load what ``task`` needs (model, tries, node priors, corpora) without computing."""
        if isinstance(task, EmbedShardTask):
            self.encoder(task.encoder, task.module)
            self.corpus(task.corpus)
            return os.getpid()
        if isinstance(task, (KnnShardTask, GraphShardTask)):
            return os.getpid()
        if isinstance(task, TranslateShardTask):
            self.translator(task)
            self.corpus(task.source)
            return os.getpid()
        model = self.model(task.model)
        self.corpus(task.source)
        self.corpus(task.target)
        for trie_path, _ in getattr(task, "tries", ()):
            trie = self.trie(trie_path)
            if task.search.priors:
                from triemine.scoring.prior import get_node_priors
                get_node_priors(model, trie)
        return os.getpid()

    def run(self, task) -> Tuple[bytes, dict]:
        faults = _before(task.shard)
        t0, c0 = time.perf_counter(), time.process_time()
        if isinstance(task, TrieShardTask):
            payload, info = self._trie_search(task)
        elif isinstance(task, ScoreShardTask):
            payload, info = self._scores(task)
        elif isinstance(task, EmbedShardTask):
            payload, info = self._embed(task)
        elif isinstance(task, KnnShardTask):
            payload, info = self._knn(task)
        elif isinstance(task, GraphShardTask):
            payload, info = self._graph(task)
        elif isinstance(task, TranslateShardTask):
            payload, info = self._translate(task)
        else:
            raise TypeError(f"unknown task {type(task).__name__}")
        _after(task.shard, faults)
        info.update(seconds=round(time.perf_counter() - t0, 3),
                    cpu_s=round(time.process_time() - c0, 3), pid=os.getpid())
        return payload, info

    # -- the trie search ---------------------------------------------------------------------

    def _trie_search(self, task: TrieShardTask) -> Tuple[bytes, dict]:
        from triemine.decoding.matches import match_rows
        from triemine.decoding.runner import long_targets, mine_batches, source_lengths

        model = self.model(task.model)
        src, tgt = self.corpus(task.source), self.corpus(task.target)
        search = task.search
        a, b = task.start, task.end
        texts = src.texts[a:b]
        with warnings.catch_warnings():  # the driver already warned about skipped sources
            warnings.simplefilter("ignore")
            lengths, _ = source_lengths(model, texts, max_length=search.max_length)
        skip_tgt = None
        if search.max_length:  # the whole target corpus tokenised once per worker, not per shard
            key = (task.target, search.max_length)
            if key not in self._long_targets:
                self._long_targets[key] = long_targets(model, tgt.texts, search.max_length)
            skip_tgt = self._long_targets[key]
        # several tries: every match of each, merged below before the nbest cut
        per_trie_search = replace(search, nbest=None) if len(task.tries) > 1 else search
        per_trie = []
        for trie_path, offset in task.tries:
            trie = self.trie(trie_path)
            node_prior = None
            if search.priors:
                from triemine.scoring.prior import get_node_priors
                node_prior = get_node_priors(model, trie)
            results: List[List] = []
            for _, _, batch in mine_batches(model, texts, trie, per_trie_search,
                                            device=task.model.device, debug=task.debug,
                                            lengths=lengths, node_prior=node_prior):
                if offset:
                    batch = [[replace(m, tgt_line_ids=tuple(i + offset for i in m.tgt_line_ids))
                              for m in ms] for ms in batch]
                results.extend(batch)
            per_trie.append(results)
        if len(per_trie) == 1:
            results = per_trie[0]
        else:
            results = [merge_matches([r[i] for r in per_trie], search.beam,
                                     search.prior_weight)[:search.nbest or None]
                       for i in range(len(texts))]
        flat = [m for ms in results for m in ms]
        text = match_rows(flat, search.columns, src.ids[a:b], texts, tgt.ids, tgt.texts,
                          skip_tgt, first_source=a)
        return text.encode("utf-8"), {"rows": text.count("\n"),
                                      "with_matches": sum(1 for ms in results if ms),
                                      "sources": b - a}

    # -- exact scores ------------------------------------------------------------------------

    def _scores(self, task: ScoreShardTask) -> Tuple[bytes, dict]:
        from triemine.mining.features import forced_scores

        model = self.model(task.model)
        src, tgt = self.corpus(task.source), self.corpus(task.target)
        ins, outs = (tgt.texts, src.texts) if task.reverse else (src.texts, tgt.texts)
        score, ntok = forced_scores(model, np.asarray(task.src, dtype=np.int64),
                                    np.asarray(task.tgt, dtype=np.int64), ins, outs,
                                    chunk=task.chunk,
                                    precision=task.precision)
        buf = io.BytesIO()
        np.save(buf, np.stack([score, ntok]))
        return buf.getvalue(), {"pairs": len(task.src)}

    # -- translations (translation retrieval) ------------------------------------------------

    def translator(self, task: TranslateShardTask):
        """The backend's translator for ``task``'s model and beam (a CTranslate2 model is
        loaded once per worker)."""
        key = (task.model, task.beam, task.backend)
        if key not in self._translators:
            from triemine.mining.translate import make_translator
            self._translators[key] = make_translator(self.model(task.model), task.beam,
                                                     task.model.device, task.backend)
        return self._translators[key]

    def _translate(self, task: TranslateShardTask) -> Tuple[bytes, dict]:
        from triemine.mining.translate import translate_lines

        texts = self.corpus(task.source).texts[task.start:task.end]
        out = translate_lines(self.translator(task), texts, task.batch)
        return "".join(o + "\n" for o in out).encode("utf-8"), {"lines": len(out)}

    # -- sentence embeddings -----------------------------------------------------------------

    def _embed(self, task: EmbedShardTask) -> Tuple[bytes, dict]:
        texts = self.corpus(task.corpus).texts[task.start:task.end]
        for i in task.blank:  # a line the job skips: no embedding, in no one's neighbours
            texts[i - task.start] = ""
        vecs = np.ascontiguousarray(self.encoder(task.encoder, task.module).encode(texts),
                                    dtype=np.float32)
        buf = io.BytesIO()
        np.save(buf, vecs)
        return buf.getvalue(), {"lines": len(texts)}

    # -- nearest neighbours ------------------------------------------------------------------

    def _knn(self, task: KnnShardTask) -> Tuple[bytes, dict]:
        from triemine.embedding.knn import knn

        q = np.load(task.queries, mmap_mode="r")[task.rows[0]:task.rows[1]]
        if task.index:
            return self._ivf_search(task, q)
        if task.graph:
            return self._graph_search(task, q)
        d = np.load(task.database, mmap_mode="r")[task.base[0]:task.base[1]]
        sim, idx = knn(q, d, task.k, device=task.device)
        buf = io.BytesIO()
        np.savez(buf, sim=sim, idx=idx + task.base[0])
        return buf.getvalue(), {"queries": len(q), "database": len(d)}

    def _ivf_search(self, task: KnnShardTask, q) -> Tuple[bytes, dict]:
        """The index's ``k`` best for each query; a query whose probed lists held fewer than
        ``k`` rows is searched again over every list."""
        from triemine.embedding import ivf

        if task.index not in self._indexes:  # memory-mapped: the pages are shared
            self._indexes[task.index] = ivf.load_index(task.index, task.nprobe)
        index = self._indexes[task.index]
        index.nprobe = task.nprobe
        sim, idx = ivf.search(index, q, task.k)
        short = np.flatnonzero((idx < 0).any(axis=1))
        if len(short):
            index.nprobe = index.nlist
            sim[short], idx[short] = ivf.search(index, np.asarray(q)[short], task.k)
            index.nprobe = task.nprobe
        buf = io.BytesIO()
        np.savez(buf, sim=sim, idx=idx)
        return buf.getvalue(), {"queries": len(q), "exhaustive": int(len(short))}

    def _graph(self, task: GraphShardTask) -> Tuple[object, dict]:
        from triemine.distributed.shards import TMP, FilePayload
        from triemine.embedding import hnsw

        rows = np.load(task.database, mmap_mode="r")[task.base[0]:task.base[1]]
        tmp = f"{task.out}{TMP}{os.getpid()}"
        try:
            size = hnsw.build_graph(rows, tmp, task.m, task.ef_construction)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return FilePayload(tmp), {"rows": len(rows), "graph_bytes": size}

    def _graph_search(self, task: KnnShardTask, q) -> Tuple[bytes, dict]:
        """The graph's ``k`` best for each query (global rows); a query for which the walk found
        fewer than ``k`` rows is searched exactly over the graph's rows."""
        from triemine.embedding import hnsw
        from triemine.embedding.knn import knn

        if task.graph not in self._indexes:  # one graph at a time: the links of 10^6 rows are
            self._indexes = {task.graph: hnsw.load_graph(task.graph, task.ef_search)}  # ~0.3 GB
        index = self._indexes[task.graph]
        index.hnsw.efSearch = task.ef_search
        sim, idx = hnsw.search(index, q, task.k)
        short = np.flatnonzero((idx < 0).any(axis=1))
        if len(short):
            d = np.load(task.database, mmap_mode="r")[task.base[0]:task.base[1]]
            sim[short], idx[short] = knn(np.asarray(q)[short], d, task.k)
        buf = io.BytesIO()
        np.savez(buf, sim=sim, idx=idx + task.base[0])
        return buf.getvalue(), {"queries": len(q), "exhaustive": int(len(short))}
