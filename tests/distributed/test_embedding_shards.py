"""The embedding stage in shards: translation and embedding shards, kNN grid shards, IVF and HNSW
indexes built on the pool give the single call's bits and resume.

Tiny synthetic model (tests/conftest.py); the corpora, the single-process reference and the
environment: tests/distributed/conftest.py.
"""
import hashlib
import json
import os

import numpy as np
import pytest

from triemine.io import keys
from triemine.cli import mine_main
from triemine.distributed import ShardFailures
from triemine.distributed.local import InlinePool
from triemine.distributed.worker import FAULTS_ENV

from helpers import computed_shards, fault_env

pytestmark = pytest.mark.usefixtures("shard_env")


# -- the embedding stage: sentence embeddings and kNN in shards ---------------------------------

class _RecordingPool(InlinePool):
    """Runs in this process and logs ``("submit", *what(task))`` and ``("result",)`` in
    ``events``: whether shards were queued together shows in the order."""

    def __init__(self, events, what):
        super().__init__()
        self.events, self.what = events, what

    def submit(self, shard_id, task):
        self.events.append(("submit", *self.what(task)))
        super().submit(shard_id, task)

    def next_result(self):
        self.events.append(("result",))
        return super().next_result()


@pytest.mark.cluster
def test_translation_shards_are_one_pass_lines_on_workers_and_resume(tiny_model, corpora,
                                                                      tmp_path, monkeypatch):
    """The translation-retrieval generator's translations in line shards of whole batches: the
    very lines of one pass over the corpus, in this process and on 2 workers; a run that
    stopped after some shards redoes only the others, whoever runs next; the merged file is the
    cache every later call reads (its shards gone), and a cache file that is not one line a
    source is made again."""
    from triemine.io.corpus import read_corpus
    from triemine.distributed import make_pool
    from triemine.decoding.model_spec import inline_model_pool
    from triemine.mining.translate_shards import cached_translations
    from triemine.mining.translate import make_translator, translate_lines

    src, _ = corpora
    texts = read_corpus(src).texts
    want = translate_lines(make_translator(tiny_model, beam=2), texts, batch=4)
    assert want[7] == "" and sum(bool(w) for w in want) == len(texts) - 1
    inline = inline_model_pool(tiny_model)

    def run(pool, name, **kw):
        return cached_translations(tiny_model, src, tmp_path / f"cache.{name}", pool, beam=2,
                                   **{"lines": 8, "batch": 4, **kw})
    d, _ = fault_env(tmp_path, monkeypatch, fail=[2])
    with pytest.raises(ShardFailures, match="shard 2"):
        run(inline, "one")
    assert sorted(computed_shards(d)) == [0, 1, 3, 4, 5]
    assert not list((tmp_path / "cache.one").glob("*.txt"))
    fault_env(tmp_path, monkeypatch)  # no failure now; still logging what is computed
    got, stats = run(inline, "one")
    assert got == want and stats["shards_reused"] == 5 and stats["shards_computed"] == 1
    assert sorted(computed_shards(d)) == [0, 1, 2, 3, 4, 5]  # only shard 2 redone
    (cached,) = (tmp_path / "cache.one").glob("*.txt")
    assert cached.read_text(encoding="utf-8") == "".join(w + "\n" for w in want)
    assert not list((tmp_path / "cache.one").glob("*.shards"))
    assert run(inline, "one")[0] == want and len(computed_shards(d)) == 6  # read from the cache
    cached.write_text("".join(w + "\n" for w in want[:20]), encoding="utf-8")  # cut short
    assert run(inline, "one")[0] == want and len(computed_shards(d)) == 12
    monkeypatch.delenv(FAULTS_ENV)
    with make_pool(2) as pool:
        got, stats = run(pool, "two")
    assert got == want and stats["shards_computed"] == 6
    assert len(stats["worker_cpu_s"]) == 2 and str(os.getpid()) not in stats["worker_cpu_s"]
    with pytest.raises(ValueError, match="whole batches of 4"):
        run(inline, "three", lines=6)


def test_the_fairseq_translator_decodes_a_whole_batch_together_off_the_cpu(tiny_model, corpora,
                                                                            monkeypatch):
    """The fairseq decoder's sub-batch: SUB_BATCH sources on the CPU, the whole batch on any
    other device (measured on an H200: 720 sentences a second against 154 in 32s); the
    translations of the tiny model are the same whatever the sub-batch."""
    from triemine.io.corpus import read_corpus
    from triemine.decoding import generator
    from triemine.mining import translate

    texts = list(read_corpus(corpora[0]).texts)
    sizes = []
    real = generator.TrieSequenceGenerator.generate
    monkeypatch.setattr(generator.TrieSequenceGenerator, "generate", lambda self, models, sample,
                        **kw: (sizes.append(sample["net_input"]["src_tokens"].size(0)),
                               real(self, models, sample, **kw))[1])
    got = {}
    for device in ("cpu", "cpu:0"):
        sizes.clear()
        got[device] = translate.translate_lines(
            translate.make_translator(tiny_model, beam=2, device=device, backend="fairseq"),
            texts, batch=translate.TRANSLATE_BATCH)
        want = translate.SUB_BATCH if device == "cpu" else translate.DEVICE_SUB_BATCH
        assert max(sizes) == min(want, sum(bool(t.strip()) for t in texts)), device
    assert got["cpu"] == got["cpu:0"]
    assert translate.DEVICE_SUB_BATCH == translate.TRANSLATE_BATCH > translate.SUB_BATCH
    one = translate.make_translator(tiny_model, beam=2, backend="fairseq", sub=3)
    sizes.clear()
    assert translate.translate_lines(one, texts) == got["cpu"] and max(sizes) == 3
    # the job's translation cache names the sub-batch off the CPU (other padding, other bits)
    from triemine.decoding.model_spec import inline_model_pool
    from triemine.mining.translate_shards import cached_translations

    cache = corpora[0].parent / "translations"
    for device in ("cpu", "cpu:0"):
        lines, _ = cached_translations(tiny_model, corpora[0], cache,
                                       inline_model_pool(tiny_model, device), beam=2,
                                       device=device)
        assert lines == got["cpu"]
    assert len(list(cache.glob("*.txt"))) == 2
    monkeypatch.setattr(translate, "DEVICE_SUB_BATCH", 5)  # another sub-batch: another cache
    cached_translations(tiny_model, corpora[0], cache, inline_model_pool(tiny_model, "cpu:0"),
                        beam=2, device="cpu:0")
    assert len(list(cache.glob("*.txt"))) == 3


@pytest.mark.integration
def test_embedding_shards_are_the_single_calls_bits_and_resume(tmp_path, monkeypatch):
    """Line shards of whole encoder batches give the very rows of one encode() call; a run that
    stopped after some shards redoes only the others; the merged file is reused when complete."""
    from triemine.embedding.embed_shards import embed_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding import get_encoder

    texts = [f"sentence number {i} about {'cats' if i % 3 else 'the weather'}" for i in range(600)]
    texts[5] = ""  # an empty line: a zero row
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    ref = get_encoder("use").encode(texts)
    d, _ = fault_env(tmp_path, monkeypatch, fail=[1])
    with pytest.raises(ShardFailures, match="shard 1"):
        embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert sorted(computed_shards(d)) == [0, 2] and not (tmp_path / "e.npy").exists()
    fault_env(tmp_path, monkeypatch)  # no failure now; still logging what is computed
    got = embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert sorted(computed_shards(d)) == [0, 1, 2]  # only shard 1 redone
    assert got.shape == ref.shape and np.asarray(got).tobytes() == ref.tobytes()
    assert not np.asarray(got)[5].any()
    again = embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert isinstance(again, np.memmap) and np.asarray(again).tobytes() == ref.tobytes()
    assert sorted(computed_shards(d)) == [0, 1, 2]  # reused, nothing computed
    # the merge recorded the digest of what it wrote: the kNN's keys do not read the file back
    real = keys.file_sha256
    monkeypatch.setattr(keys, "file_sha256", lambda path: pytest.fail(f"{path} read whole"))
    assert keys.content_sha256(tmp_path / "e.npy") == hashlib.sha256(
        (tmp_path / "e.npy").read_bytes()).hexdigest()
    monkeypatch.setattr(keys, "file_sha256", real)
    data = (tmp_path / "e.npy").read_bytes()
    (tmp_path / "e.npy").write_bytes(data[: len(data) // 2])  # truncated: merged again
    fixed = embed_sharded("use", corpus, len(texts), tmp_path / "e.npy", InlinePool(), lines=256)
    assert np.asarray(fixed).tobytes() == ref.tobytes() and sorted(computed_shards(d)) == [0, 1, 2]
    with pytest.raises(ValueError, match="whole batches"):
        embed_sharded("use", corpus, len(texts), tmp_path / "f.npy", InlinePool(), lines=100)
    # two corpora at once (a job's sources and targets): every shard of both submitted before
    # the first result, the same files and bits as one call each; a finished one is reused
    from triemine.embedding.embed_shards import embed_corpora

    small = tmp_path / "s.txt"
    small.write_text("a short one\nanother\n", encoding="utf-8")
    events = []

    def Recording():
        return _RecordingPool(events, lambda t: (os.path.basename(t.corpus), t.start))
    (tmp_path / "e.npy").unlink()
    both = embed_corpora("use", [(corpus, len(texts), tmp_path / "e.npy"),
                                 (small, 2, tmp_path / "s.npy")], Recording(), lines=256,
                         resume=False)
    assert events[:events.index(("result",))] == [("submit", "c.txt", 0), ("submit", "c.txt", 256),
                                                  ("submit", "c.txt", 512), ("submit", "s.txt", 0)]
    assert np.asarray(both[0]).tobytes() == ref.tobytes()
    assert np.asarray(both[1]).tobytes() == get_encoder("use").encode(["a short one",
                                                                       "another"]).tobytes()
    events.clear()
    again = embed_corpora("use", [(corpus, len(texts), tmp_path / "e.npy"),
                                  (small, 2, tmp_path / "s.npy")], Recording(), lines=256)
    assert events == [] and [np.asarray(a).tobytes() for a in again] == \
        [np.asarray(a).tobytes() for a in both]


def test_knn_grid_shards_merge_to_the_exhaustive_search(tmp_path):
    """A grid of query x database shards merged per query ranks exactly as one exhaustive
    search: the same neighbours and similarities (ties to the lower row)."""
    from triemine.embedding.knn_shards import knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import knn

    rng = np.random.default_rng(5)
    q = rng.normal(size=(53, 16)).astype(np.float32)
    db = rng.normal(size=(71, 16)).astype(np.float32)
    db[40] = db[3]  # a tie: the lower row first
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    db /= np.linalg.norm(db, axis=1, keepdims=True)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "d.npy", db)
    ref_sim, ref_idx = knn(q, db, 4)
    sim, idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path, InlinePool(),
                           name="t", rows=10)
    assert sim.shape == (53, 4) and idx.shape == (53, 4)
    manifest = json.loads((tmp_path / "t.shards" / "manifest.json").read_text())
    assert len(manifest["done"]) == 6 * 8  # 53 queries x 71 rows in cells of 10 x 10
    np.testing.assert_allclose(sim, ref_sim, rtol=0, atol=1e-6)
    exact = np.abs(np.diff(ref_sim, axis=1)).min(axis=1) > 1e-6  # rows without a near-tie
    assert (idx[exact] == ref_idx[exact]).all()
    tie = np.flatnonzero((idx == 3).any(axis=1) & (idx == 40).any(axis=1))
    for r in tie:
        assert list(idx[r]).index(3) < list(idx[r]).index(40)
    one_sim, one_idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                                   InlinePool(), name="t")  # one cell: the exhaustive call
    assert one_sim.tobytes() == ref_sim.tobytes() and one_idx.tobytes() == ref_idx.tobytes()
    # the merged lists are a file the driver maps, not memory it holds; a resumed run whose cells
    # are all reused maps the same file, one with a cell computed again merges a new one
    assert isinstance(sim, np.memmap) and isinstance(idx, np.memmap)
    (lists,) = tmp_path.glob("t.lists.*.npy")
    stamp = lists.stat().st_mtime_ns
    again = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path, InlinePool(),
                        name="t", rows=10)
    assert [a.tobytes() for a in again] == [sim.tobytes(), idx.tobytes()]
    assert list(tmp_path.glob("t.lists.*.npy")) == [lists] and lists.stat().st_mtime_ns == stamp
    (tmp_path / "t.shards" / "shard-000007.npz").unlink()
    with pytest.warns(UserWarning, match="shard-000007.npz: shard file missing"):
        redone = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path, InlinePool(),
                             name="t", rows=10)
    assert [a.tobytes() for a in redone] == [sim.tobytes(), idx.tobytes()]
    (merged,) = tmp_path.glob("t.lists.*.npy")
    assert merged != lists  # merged again, the old file removed


def test_knn_searches_queue_both_directions_together_with_the_bits_of_one_call_each(tmp_path):
    """A job's two directions: every cell of both submitted before the first result (each
    direction of a small job is one cell, and one after the other a worker idles through each),
    and the same neighbour lists, bit for bit, as one knn_sharded call each."""
    from triemine.embedding.knn_shards import knn_searches, knn_sharded
    from triemine.distributed.local import InlinePool

    rng = np.random.default_rng(8)
    for name, rows in (("x", 30), ("y", 50)):
        a = rng.normal(size=(rows, 16)).astype(np.float32)
        np.save(tmp_path / f"{name}.npy", a / np.linalg.norm(a, axis=1, keepdims=True))
    x, y = tmp_path / "x.npy", tmp_path / "y.npy"
    events = []

    def Recording():
        return _RecordingPool(events, lambda t: (os.path.basename(t.queries), t.rows))
    both = knn_searches([(x, y, "fwd"), (y, x, "bwd")], 4, tmp_path / "both", Recording(),
                        rows=20)
    first = events.index(("result",))
    assert sorted(events[:first]) == sorted(
        [("submit", "x.npy", r) for r in ((0, 20), (20, 30)) for _ in range(3)]
        + [("submit", "y.npy", r) for r in ((0, 20), (20, 40), (40, 50)) for _ in range(2)])
    for (sim, idx), (q, d, name) in zip(both, [(x, y, "fwd"), (y, x, "bwd")]):
        one = knn_sharded(q, d, 4, tmp_path / "one", InlinePool(), name=name, rows=20)
        assert sim.tobytes() == one[0].tobytes() and idx.tobytes() == one[1].tobytes()


@pytest.mark.cluster
def test_default_job_on_workers_embeds_and_searches_in_shards_identically(tiny_model_dir,
                                                                         corpora, tmp_path,
                                                                         monkeypatch):
    """The default configuration (USE candidates) with --workers 2: embeddings, kNN, exact
    scores and priors on the workers, the single process's TSV byte for byte."""
    src, tgt = corpora
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-one"))
    assert mine_main(base + ["-o", str(one)]) == 0
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-two"))
    assert mine_main(base + ["-o", str(two), "--workers", "2"]) == 0
    work = tmp_path / "two.tsv.work"
    for part in ("emb.use.src.npy.shards", "emb.use.tgt.npy.shards", "knn.use.fwd.shards",
                 "knn.use.bwd.shards", "scores.shards", "priors.shards"):
        assert json.loads((work / part / "manifest.json").read_text())["done"], part
    assert one.read_bytes() == two.read_bytes()


def _clustered(tmp_path, seed: int):
    """700 queries near 6,000 L2-normalised rows in 40 clusters, saved as q.npy and d.npy."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, 32))
    db = (centres[rng.integers(0, 40, 6000)] +
          0.35 * rng.normal(size=(6000, 32))).astype(np.float32)
    q = (db[rng.choice(6000, 700, replace=False)] +
         0.2 * rng.normal(size=(700, 32))).astype(np.float32)
    for a in (q, db):
        a /= np.linalg.norm(a, axis=1, keepdims=True)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "d.npy", db)
    return q, db


@pytest.mark.cluster
def test_ivf_knn_sharded_is_the_same_on_any_pool_finds_the_neighbours_and_rebuilds_bad_index(
        tmp_path):
    """The approximate index: the same bits in this process and on 2 worker processes, recall@4
    against the exact search on clustered data, similarities that are the found rows' exact inner
    products, and an index file that is truncated or another database's is named and rebuilt."""
    from triemine.distributed import make_pool
    from triemine.embedding.knn_shards import knn_method, knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import knn

    q, db = _clustered(tmp_path, seed=11)
    args = dict(name="t", rows=256, index="ivf", nprobe=8)
    sim, idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                           InlinePool(), **args)
    assert sim.shape == (700, 4) and idx.min() >= 0
    with make_pool(2) as pool:
        sim2, idx2 = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "two",
                                 pool, **args)
    assert sim2.tobytes() == sim.tobytes() and idx2.tobytes() == idx.tobytes()
    ref_sim, ref_idx = knn(q, db, 4)
    recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(idx.tolist(), ref_idx.tolist())])
    assert recall >= 0.95
    np.testing.assert_allclose(sim, np.einsum("qd,qkd->qk", q, db[idx]), atol=1e-5)
    assert (sim <= ref_sim + 1e-6).all()  # never better than the exact k-th best
    manifest = json.loads((tmp_path / "one" / "t.shards" / "manifest.json").read_text())
    assert len(manifest["done"]) == 3  # 700 queries in shards of 256

    index_file = tmp_path / "one" / "t.ivf" / "index.faiss"
    index_file.write_bytes(index_file.read_bytes()[:-100])
    with pytest.warns(UserWarning, match=r"index\.faiss.*truncated or replaced"):
        again = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                            InlinePool(), **args)
    assert again[1].tobytes() == idx.tobytes()
    np.save(tmp_path / "d2.npy", db[::-1].copy())  # another database, the same file size
    (tmp_path / "one" / "t.ivf").rename(tmp_path / "old.ivf")
    (tmp_path / "one" / "t.ivf").mkdir()
    for f in ("index.faiss", "index.json"):
        (tmp_path / "one" / "t.ivf" / f).write_bytes((tmp_path / "old.ivf" / f).read_bytes())
    with pytest.warns(UserWarning, match="another database"):
        rev = knn_sharded(tmp_path / "q.npy", tmp_path / "d2.npy", 4, tmp_path / "one",
                          InlinePool(), **args)
    assert (rev[1] == 5999 - idx).mean() > 0.95  # rows of the reversed database

    from triemine.embedding.knn_shards import ivf_nprobe
    from triemine.embedding.ivf import n_lists
    assert ivf_nprobe(1_000_000) == 500 and n_lists(1_000_000) == 4000  # an eighth
    assert ivf_nprobe(48) == n_lists(48) == 27  # a small index: every list
    assert knn_method(8624, 1_000_000) == "exact"  # the haystack: about 9 x 10^9 pairs
    assert knn_method(1_000_000, 1_000_000) == "hnsw"
    assert knn_method(10**9, 1000) == "exact"  # a small database: nothing to cluster
    # off the CPU the exact search at any size (a GPU's products; docs/scale.md), unless told
    assert knn_method(10**8, 10**8, device="cuda") == "exact"
    assert knn_method(10**8, 10**8, "hnsw", device="cuda") == "hnsw"
    with pytest.raises(ValueError):
        knn_method(1, 1, "annoy")


def test_knn_index_ivf_on_the_cli_builds_an_index_and_finds_the_exact_candidates(
        tiny_model_dir, corpora, tmp_path, monkeypatch):
    """``--knn-index ivf`` runs the job on the IVF index (built in the work directory, searched
    in shards); on 48 targets every list is probed, so the candidates are the exact search's.
    With ``--config paper`` (the trie search alone) the option is refused."""
    from triemine.io.tsv import read_mined

    src, tgt = corpora
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    exact, ivf = tmp_path / "exact.tsv", tmp_path / "ivf.tsv"
    assert mine_main(base + ["-o", str(exact), "--knn-index", "exact"]) == 0
    assert mine_main(base + ["-o", str(ivf), "--knn-index", "ivf"]) == 0
    assert (tmp_path / "ivf.tsv.work" / "knn.use.fwd.ivf" / "index.faiss").is_file()
    assert not (tmp_path / "exact.tsv.work" / "knn.use.fwd.ivf").exists()
    a, b = read_mined(exact), read_mined(ivf)
    assert list(zip(a.src_ids, a.tgt_ids)) == list(zip(b.src_ids, b.tgt_ids))
    np.testing.assert_allclose(a.col("use_cos"), b.col("use_cos"), atol=1e-5)
    with pytest.raises(SystemExit):
        mine_main(base + ["-o", str(tmp_path / "m.tsv"), "--config", "paper", "--knn-index", "ivf"])


@pytest.mark.cluster
def test_hnsw_knn_sharded_builds_graphs_on_the_pool_gives_the_same_bits_and_rebuilds_bad_graph(
        tmp_path):
    """The graph index: 6,000 rows in 3 graphs of 2,048 built on the pool (one thread each),
    700 queries in 3 shards x 3 graphs; the same bits in this process and on 2 worker processes,
    recall@4 against the exact search, exact similarities of the rows found; a graph file that is
    truncated is built again (alone), a worker's leftover temporary file is removed."""
    from triemine.distributed import make_pool
    from triemine.embedding.knn_shards import knn_method, knn_sharded
    from triemine.distributed.local import InlinePool
    from triemine.embedding.knn import knn

    q, db = _clustered(tmp_path, seed=5)
    args = dict(name="t", rows=256, index="hnsw", graph_rows=2048, ef_search=64)
    sim, idx = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                           InlinePool(), **args)
    assert sim.shape == (700, 4) and idx.min() >= 0 and idx.max() < 6000
    with make_pool(2) as pool:
        sim2, idx2 = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "two",
                                 pool, **args)
    assert sim2.tobytes() == sim.tobytes() and idx2.tobytes() == idx.tobytes()
    graphs = tmp_path / "one" / "t.hnsw"
    files = sorted(p.name for p in graphs.iterdir())
    assert files == ["manifest.json"] + [f"shard-{i:06d}.faiss" for i in range(3)]
    for g in range(3):  # the graph files themselves: one thread, the same bytes
        assert (graphs / f"shard-{g:06d}.faiss").read_bytes() == \
            (tmp_path / "two" / "t.hnsw" / f"shard-{g:06d}.faiss").read_bytes()
    ref_sim, ref_idx = knn(q, db, 4)
    recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(idx.tolist(), ref_idx.tolist())])
    assert recall >= 0.98
    np.testing.assert_allclose(sim, np.einsum("qd,qkd->qk", q, db[idx]), atol=1e-5)
    assert (sim <= ref_sim + 1e-6).all()
    cells = json.loads((tmp_path / "one" / "t.shards" / "manifest.json").read_text())
    assert len(cells["done"]) == 9  # and every query found 4 rows walking each graph:
    assert sum(e["exhaustive"] for e in cells["done"].values()) == 0  # no exhaustive fallback

    g1 = graphs / "shard-000001.faiss"
    g1.write_bytes(g1.read_bytes()[:-100])
    (graphs / "shard-000002.faiss.tmp999").write_bytes(b"a killed worker's partial graph")
    before = {g: (graphs / f"shard-{g:06d}.faiss").stat().st_mtime_ns for g in (0, 2)}
    with pytest.warns(UserWarning, match=r"shard-000001\.faiss: shard file missing, truncated"):
        again = knn_sharded(tmp_path / "q.npy", tmp_path / "d.npy", 4, tmp_path / "one",
                            InlinePool(), **args)
    assert again[0].tobytes() == sim.tobytes() and again[1].tobytes() == idx.tobytes()
    assert g1.stat().st_size == (tmp_path / "two" / "t.hnsw" / g1.name).stat().st_size
    assert {g: (graphs / f"shard-{g:06d}.faiss").stat().st_mtime_ns for g in (0, 2)} == before
    assert not list(graphs.glob("*.tmp*"))
    np.save(tmp_path / "d2.npy", db[::-1].copy())  # another database: its graphs are rebuilt
    with pytest.warns(UserWarning, match=r"t\.hnsw/manifest\.json: HNSW graphs built for another"):
        rev = knn_sharded(tmp_path / "q.npy", tmp_path / "d2.npy", 4, tmp_path / "one",
                          InlinePool(), **args)
    assert (rev[1] == 5999 - idx).mean() > 0.95
    assert knn_method(10, 10, "hnsw") == "hnsw"
    from triemine.embedding.hnsw import graph_plan  # measured at 10^6, grown with the database
    assert graph_plan(1_000_000) == (262144, 512) and graph_plan(6000) == (262144, 512)
    assert graph_plan(10**7) == (1_250_000, 1118) and graph_plan(10**8) == (4_194_304, 2048)


@pytest.mark.cluster
def test_knn_index_hnsw_on_the_cli_finds_the_exact_candidates(tiny_model_dir, corpora,
                                                               tmp_path, monkeypatch):
    """``--knn-index hnsw``: a graph of the 48 targets (and one of the 48 sources) in the work
    directory; on so few rows the walk finds the exact neighbours, so the candidates are the
    exact search's, and two workers give the same bytes."""
    from triemine.io.tsv import read_mined

    src, tgt = corpora
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    exact, one, two = tmp_path / "exact.tsv", tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(base + ["-o", str(exact), "--knn-index", "exact"]) == 0
    assert mine_main(base + ["-o", str(one), "--knn-index", "hnsw"]) == 0
    assert mine_main(base + ["-o", str(two), "--knn-index", "hnsw", "--workers", "2"]) == 0
    assert (tmp_path / "one.tsv.work" / "knn.use.fwd.hnsw" / "shard-000000.faiss").is_file()
    assert one.read_bytes() == two.read_bytes()
    a, b = read_mined(exact), read_mined(one)
    assert list(zip(a.src_ids, a.tgt_ids)) == list(zip(b.src_ids, b.tgt_ids))
    np.testing.assert_allclose(a.col("use_cos"), b.col("use_cos"), atol=1e-5)
