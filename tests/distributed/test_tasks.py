"""The task protocol (triemine.distributed.tasks): a worker runs any task, loads each resource it
needs once, holds a ``single`` resource one at a time, uses what the caller adopted; every
stage's task is a small picklable value whose needs are hashable cache keys."""
import os
import pickle
from dataclasses import dataclass
from typing import ClassVar

from triemine.decoding.model_spec import ModelSpec
from triemine.decoding.settings import SearchSettings
from triemine.decoding.shards import NodePriors, TrieFile, TrieShardTask
from triemine.distributed.local import InlinePool
from triemine.distributed.tasks import Corpus, WorkerContext
from triemine.distributed.worker import ShardWorker
from triemine.embedding.embed_shards import EmbedShardTask, Encoder
from triemine.embedding.knn_tasks import GraphShardTask, HnswGraph, IvfIndex, KnnShardTask
from triemine.mining.score_shards import ScoreShardTask
from triemine.mining.translate_shards import TranslateShardTask, Translator

LOADS = []


@dataclass(frozen=True)
class Text:
    name: str

    def load(self, ctx):
        LOADS.append(("text", self.name))
        return self.name.upper()


@dataclass(frozen=True)
class Graph:
    single: ClassVar[bool] = True
    name: str

    def load(self, ctx):
        LOADS.append(("graph", self.name))
        return ctx.get(Text(self.name)) + "!"


@dataclass(frozen=True)
class Echo:
    shard: int
    name: str

    def needs(self):
        return [Text(self.name)]

    def run(self, ctx):
        return ctx.get(Text(self.name)).encode(), {"chars": len(self.name)}


def test_a_worker_runs_any_task_loading_each_resource_once():
    LOADS.clear()
    worker = ShardWorker()
    assert worker.warm(Echo(0, "ab")) == os.getpid() and LOADS == [("text", "ab")]
    payload, info = worker.run(Echo(1, "ab"))
    assert payload == b"AB" and LOADS == [("text", "ab")]  # loaded by warm, kept
    assert info["chars"] == 2 and info["pid"] == os.getpid()
    assert info["seconds"] >= 0 and info["cpu_s"] >= 0
    worker.adopt(Text("cd"), "loaded by the caller")
    assert worker.run(Echo(2, "cd"))[0] == b"loaded by the caller"
    assert LOADS == [("text", "ab")]


def test_an_inline_pool_uses_what_its_caller_loaded():
    LOADS.clear()
    with InlinePool(loaded={Text("x"): "mine"}) as pool:
        pool.submit(7, Echo(7, "x"))
        shard_id, ok, (payload, _info) = pool.next_result()
    assert (shard_id, ok, payload, LOADS) == (7, True, b"mine", [])


def test_a_single_resource_is_held_one_at_a_time():
    LOADS.clear()
    ctx = WorkerContext()
    assert ctx.get(Graph("x")) == "X!" and ctx.get(Graph("x")) == "X!"
    assert ctx.get(Graph("y")) == "Y!"  # drops x's graph, not its text
    assert ctx.get(Graph("x")) == "X!"
    assert LOADS == [("graph", "x"), ("text", "x"), ("graph", "y"), ("text", "y"),
                     ("graph", "x")]


def test_every_stage_task_pickles_small_and_names_hashable_needs():
    model = ModelSpec("/m", "/m/target.spm", "cpu")
    search = SearchSettings(with_prior=True)
    tasks = [
        TrieShardTask(0, model, "/s.txt", "/t.txt", 0, 8, (("/a.trie", 0), ("/b.trie", 5)),
                      search),
        ScoreShardTask(1, model, "/s.txt", "/t.txt", (0, 1), (2, 3), chunk=256),
        TranslateShardTask(2, model, "/s.txt", 0, 256, 4, "fairseq", 256),
        EmbedShardTask(3, "use", "/s.txt", 0, 256),
        KnnShardTask(4, "/q.npy", "/d.npy", (0, 4), (0, 9), 4),
        KnnShardTask(5, "/q.npy", "/d.npy", (0, 4), (0, 9), 4, index="/i.faiss", nprobe=8),
        KnnShardTask(6, "/q.npy", "/d.npy", (0, 4), (0, 9), 4, graph="/g.faiss", ef_search=64),
        GraphShardTask(7, "/d.npy", (0, 9), "/g.faiss", 32, 40),
    ]
    for task in tasks:
        blob = pickle.dumps(task)
        assert pickle.loads(blob) == task and len(blob) < 2000
        assert len({hash(r) for r in task.needs()}) == len(task.needs())
    assert tasks[0].needs() == [model, Corpus("/s.txt"), Corpus("/t.txt"),
                                TrieFile("/a.trie"), NodePriors(model, "/a.trie"),
                                TrieFile("/b.trie"), NodePriors(model, "/b.trie")]
    assert tasks[1].needs() == [model, Corpus("/s.txt"), Corpus("/t.txt")]
    assert tasks[2].needs() == [Translator(model, 4, "fairseq"), Corpus("/s.txt")]
    assert tasks[3].needs() == [Encoder("use", ""), Corpus("/s.txt")]
    assert [t.needs() for t in tasks[4:]] == [[], [IvfIndex("/i.faiss", 8)],
                                              [HnswGraph("/g.faiss", 64)], []]
