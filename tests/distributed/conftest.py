"""Fixtures of the sharded jobs: their environment, their corpora and the single-process output
every sharded run must equal."""
import pytest

from triemine.cli import mine_main
from triemine.distributed.worker import FAULTS_ENV

from helpers import SHARD_OTHER as OTHER, SHARD_PAIRS as PAIRS, paper_args


@pytest.fixture
def shard_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(FAULTS_ENV, raising=False)


@pytest.fixture
def corpora(tmp_path):
    """TSV source (48 lines, line 7 empty) and target (48 lines, three of them the same)."""
    src = tmp_path / "src.tsv"
    lines = [f"s{i}\t{s}\n" for i, (s, _) in enumerate(PAIRS)]
    lines[7] = "s7\t\n"
    src.write_text("".join(lines), encoding="utf-8")
    tgt_texts = [t for _, t in PAIRS[:24]] + OTHER[:24]
    tgt_texts[5] = tgt_texts[40] = tgt_texts[2]
    tgt = tmp_path / "tgt.tsv"
    tgt.write_text("".join(f"t{i}\t{t}\n" for i, t in enumerate(tgt_texts)), encoding="utf-8")
    return src, tgt


@pytest.fixture
def single(tiny_model_dir, corpora, tmp_path):
    """The single-process trie search output (the reference every sharded run must equal)."""
    src, tgt = corpora
    out = tmp_path / "single.tsv"
    assert mine_main(paper_args(tiny_model_dir, src, tgt, "-o", str(out))) == 0
    return out

