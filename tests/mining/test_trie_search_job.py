"""The mining API, trie cache, ``trie-mine`` CLI, --resume and bad input (tiny synthetic model)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triemine.cli import mine_main
from triemine.decoding import SearchSettings, get_trie, mine, mine_to_tsv
from triemine.decoding.batching import block_batches, plan_batches, plan_blocks, resolve_batch_size
from triemine.io.tsv import HEADER as TSV_HEADER, read_mined
from triemine.testing.tiny_model import synthetic_pairs
from triemine.errors import InputError
from triemine.trie import Trie

PAIRS = synthetic_pairs(48, seed=11)
OTHER = [t for _, t in synthetic_pairs(40, seed=12)]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def corpora(tmp_path):
    """BUCC-style TSV source and target; target lines 2, 5 and 40 are the same sentence."""
    src = tmp_path / "src.tsv"
    src.write_text("".join(f"s{i}\t{s}\n" for i, (s, _) in enumerate(PAIRS)), encoding="utf-8")
    tgt_texts = [t for _, t in PAIRS[:24]] + OTHER[:24]
    tgt_texts[5] = tgt_texts[2]
    tgt_texts[40] = tgt_texts[2]
    tgt = tmp_path / "tgt.tsv"
    tgt.write_text("".join(f"t{i}\t{t}\n" for i, t in enumerate(tgt_texts)), encoding="utf-8")
    return src, tgt, tgt_texts


def read_rows(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == TSV_HEADER
    return [ln.split("\t") for ln in lines[1:]]


def test_mine_api_yields_trie_lines_with_all_ids(tiny_model, corpora):
    src, tgt, tgt_texts = corpora
    trie = get_trie(tiny_model, tgt)
    matches = list(mine(tiny_model, [s for s, _ in PAIRS], trie,
                        SearchSettings(mode="pre", beam=4, batch_size=5)))
    assert {m.src_index for m in matches} == set(range(len(PAIRS)))  # pre: >= 1 per source
    for m in matches:
        ids = sorted(i for i, t in enumerate(tgt_texts) if t == m.text)
        assert list(m.tgt_line_ids) == ids
        assert m.ce_token == pytest.approx(-m.score / m.n_tokens)
        assert m.ce_word == pytest.approx(-m.score / (len(m.text.split()) + 1))
    best = {m.src_index: m for m in matches if m.rank == 0}
    assert best[2].tgt_line_ids == (2, 5, 40)
    assert sum(best[i].text == PAIRS[i][1] for i in range(24)) >= 18


def test_trie_cache_is_reused_and_keyed_by_target(tiny_model, corpora, tmp_path):
    src, tgt, _ = corpora
    t1 = get_trie(tiny_model, tgt)
    files = sorted((tmp_path / "cache" / "tries").iterdir())
    assert len(files) == 1
    mtime = files[0].stat().st_mtime_ns
    t2 = get_trie(tiny_model, tgt)
    assert files[0].stat().st_mtime_ns == mtime
    assert [(k, v.tolist()) for k, v in t1] == [(k, v.tolist()) for k, v in t2]
    # built or reused, the trie knows its file (node priors are stored beside it)
    assert t1.path == t2.path == str(files[0])
    tgt.write_text(tgt.read_text(encoding="utf-8") + "t99\ttab tac\n", encoding="utf-8")
    get_trie(tiny_model, tgt)
    assert len(list((tmp_path / "cache" / "tries").iterdir())) == 2


def test_cli_writes_header_and_one_row_per_target_id(tiny_model_dir, corpora, tmp_path):
    src, tgt, tgt_texts = corpora
    out = tmp_path / "out.tsv"
    rc = mine_main(["--candidates", "trie", "--pre-expansion", "--model", str(tiny_model_dir),
                    "--source", str(src),
                    "--target", str(tgt), "-o", str(out), "--beam", "3", "--nbest", "1", "-q"])
    assert rc == 0
    rows = read_rows(out)
    assert [r[0] for r in rows if r[1] in ("t2", "t5", "t40")][:3] == ["s2"] * 3
    assert {r[0] for r in rows} == {f"s{i}" for i in range(len(PAIRS))}
    for r in rows:
        assert len(r) == 7
        assert r[6] == tgt_texts[int(r[1][1:])]
        assert r[5] == PAIRS[int(r[0][1:])][0]
        assert float(r[2]) <= 0 and float(r[3]) >= 0 and float(r[4]) >= 0


def test_cli_writes_run_sidecar_read_by_evaluation(tiny_model_dir, corpora, tmp_path, monkeypatch):
    """trie-mine records its settings next to the TSV; loading needs no torch env switch."""
    from triemine.io.tsv import read_meta

    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)
    src, tgt, _ = corpora
    out = tmp_path / "out.tsv"
    assert mine_main(["--candidates", "trie", "--pre-expansion", "--model", str(tiny_model_dir),
                      "--source", str(src),
                      "--target", str(tgt), "-o", str(out), "--beam", "3", "-q"]) == 0
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in os.environ
    meta = read_meta(out)
    assert meta["model"] == tiny_model_dir.name and meta["mode"] == "pre" and meta["beam"] == 3
    assert meta["source"] == str(src.resolve()) and meta["target"] == str(tgt.resolve())


def test_cli_post_expansion_skips_sources_without_translation(tiny_model_dir, corpora, tmp_path):
    src, tgt, _ = corpora
    out = tmp_path / "post.tsv"
    assert mine_main(["--candidates", "trie", "--post-expansion", "--model", str(tiny_model_dir),
                      "--source", str(src),
                      "--target", str(tgt), "-o", str(out), "--beam", "3", "-q"]) == 0
    rows = read_rows(out)
    found = {int(r[0][1:]) for r in rows}
    assert len(found - set(range(24))) <= 3  # sources 24.. have no translation in the target
    assert len(found & set(range(24))) >= 18


def test_resume_in_process_truncates_partial_batch(tiny_model, corpora, tmp_path):
    src, tgt, _ = corpora
    full, part = tmp_path / "full.tsv", tmp_path / "part.tsv"
    search = SearchSettings(mode="pre", beam=3, batch_size=2, sort_window=2)
    per = search.for_job(len(PAIRS)).sources_per_block  # 3: a 16th of 48, at least one batch
    assert per == 3
    mine_to_tsv(tiny_model, src, tgt, full, search=search)
    s = mine_to_tsv(tiny_model, src, tgt, part, search=search, stop_after_blocks=3)
    assert s.decoded == 3 * per
    with open(part, "ab") as f:  # a block half-written when the process died
        f.write(f"s{3 * per}\tt0\t-1.0\t0.1\t0.1\tgarbage".encode())
    s2 = mine_to_tsv(tiny_model, src, tgt, part, search=search, resume=True)
    assert s2.resumed_from == 3 * per and s2.decoded == len(PAIRS) - 3 * per
    assert part.read_bytes() == full.read_bytes()
    with pytest.raises(InputError, match="different settings"):
        mine_to_tsv(tiny_model, src, tgt, part, resume=True, search=SearchSettings(
            mode="post", beam=3, batch_size=2, sort_window=2))
    with pytest.raises(InputError, match="different settings"):
        mine_to_tsv(tiny_model, src, tgt, part, resume=True, search=SearchSettings(
            mode="pre", beam=3, batch_size=2, sort_window=1))
    with pytest.raises(InputError, match="different settings"):  # another trie of the targets
        mine_to_tsv(tiny_model, src, tgt, part, resume=True, search=SearchSettings(
            mode="pre", beam=3, batch_size=2, sort_window=2, trie_nbest=2))


def test_resume_refuses_another_model(tiny_model_dir, corpora, tmp_path):
    """Rows of two different models must never end up in one resumed file."""
    from triemine.decoding import load_model_dir

    src, tgt, _ = corpora
    out = tmp_path / "part.tsv"
    search = SearchSettings(mode="pre", beam=3, batch_size=4)
    mine_to_tsv(load_model_dir(tiny_model_dir), src, tgt, out, search=search, stop_after_blocks=1)
    other_dir = shutil.copytree(tiny_model_dir, tmp_path / "other-model")
    with pytest.raises(InputError, match="different settings.*model"):
        mine_to_tsv(load_model_dir(other_dir), src, tgt, out, search=search, resume=True)


def _cli(*args):
    return [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
            "sys.exit(mine_main(sys.argv[1:]))", *args]


@pytest.mark.cluster
def test_resume_after_kill_gives_identical_file(tiny_model_dir, corpora, tmp_path):
    src, tgt, _ = corpora
    env = dict(os.environ, TRIEMINE_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1",
               TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    common = ["--candidates", "trie", "--pre-expansion", "--model", str(tiny_model_dir), "--source",
              str(src),
              "--target", str(tgt), "--beam", "6", "--batch-size", "1", "-q"]
    full, killed = tmp_path / "full.tsv", tmp_path / "killed.tsv"
    subprocess.run(_cli(*common, "-o", str(full)), env=env, check=True, capture_output=True)
    proc = subprocess.Popen(_cli(*common, "-o", str(killed)), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prog = tmp_path / "killed.tsv.progress"
    deadline = time.time() + 120
    done = 0
    while time.time() < deadline and proc.poll() is None:
        if prog.is_file():
            try:
                done = json.loads(prog.read_text())["sources_done"]
            except (ValueError, KeyError):
                done = 0
            if done >= 8:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert killed.read_bytes() != full.read_bytes()
    r = subprocess.run(_cli(*common, "-o", str(killed), "--resume"), env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stderr.strip().splitlines()[-1])["resumed_from"] >= 8
    assert killed.read_bytes() == full.read_bytes()


def test_plan_batches_respects_limits_and_is_resumable():
    lengths = [5, 0, 7, 3, 9, 0, 0, 4, 6]
    plan = plan_batches(lengths, batch_size=2)
    assert plan[0][0] == 0 and plan[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in zip(plan, plan[1:]))
    assert all(sum(1 for n in lengths[s:e] if n) <= 2 for s, e in plan)
    for s, e in plan_batches(lengths, batch_size=10, max_tokens=14):
        nz = [n for n in lengths[s:e] if n]
        assert len(nz) * max(nz) <= 14 or len(nz) == 1


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(0, 30), max_size=60), batch=st.integers(1, 5),
       window=st.integers(1, 4), max_tokens=st.one_of(st.none(), st.integers(30, 80)),
       job=st.one_of(st.none(), st.integers(1, 200)))
def test_blocks_cover_every_source_once_in_sorted_batches_within_limits(lengths, batch, window,
                                                                         max_tokens, job):
    from triemine.decoding.batching import block_size

    block = None if job is None else block_size(job, batch, window)  # a job's blocks
    blocks = plan_blocks(lengths, batch, max_tokens, window, block)
    assert [s for s, _ in blocks[1:]] == [e for _, e in blocks[:-1]]
    if lengths:
        assert blocks[0][0] == 0 and blocks[-1][1] == len(lengths)
    for s, e in blocks:
        batches = block_batches(lengths, s, e, batch, max_tokens if window > 1 else None)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == [i for i in range(s, e) if lengths[i]]  # each non-empty once
        assert [lengths[i] for i in flat] == sorted(lengths[i] for i in flat)
        for b in batches:
            assert len(b) <= batch
            if max_tokens is not None and len(b) > 1:
                assert len(b) * max(lengths[i] for i in b) <= max_tokens
        # planned again from this block's start: the same blocks (resume, shards)
        again = plan_blocks(lengths[s:], batch, max_tokens, window, block)
        assert [(a + s, b + s) for a, b in again] == [blk for blk in blocks if blk[0] >= s]
        if window > 1:  # at most the block's sources, and never less than a batch's
            limit = block if block is not None else batch * window
            assert sum(1 for n in lengths[s:e] if n) <= limit and limit >= batch
    if window == 1:
        assert blocks == plan_batches(lengths, batch, max_tokens)


def test_block_plans_of_an_array_are_the_sequential_plans():
    """The job's block plan over an array of lengths (vectorised, a chunk of them at a time: no
    Python int nor index a source at 10^8) is the sequential rule's, block for block, for any
    block and chunk size, empty lines included."""
    from triemine.decoding.batching import _every_nth

    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 500, 5000):
        lengths = rng.integers(0, 4, n).astype(np.int32) * rng.integers(1, 40, n)
        for size in (1, 2, 3, 64, 512, 10**6):
            want = plan_batches(lengths.tolist(), size)
            got = plan_blocks(lengths, 1, None, 8, size)
            assert got == want and all(type(v) is int for blk in got for v in blk)
            for chunk in (1, 3, 64, 4999):  # read a chunk at a time: the same blocks
                assert _every_nth(lengths, size, chunk) == want
    assert plan_blocks(np.zeros(5, dtype=np.int32), 2, None, 4) == [(0, 5)]


def test_a_small_job_gets_blocks_and_shards_for_several_workers(tmp_path):
    """A 120-source job at beam 5 was one block of 8 batches of 64, hence one shard, and two
    workers ran it at 0.80x of one: blocks are now at most a 16th of the job (never under one
    batch) and default shards at most a 16th too; a large job keeps its 8-batch blocks."""
    from triemine.decoding.settings import DEFAULT_SHARD_SOURCES
    from triemine.distributed import plan_shards

    search = SearchSettings(beam=5)
    assert search.sources_per_batch == 64 and search.sources_per_block == 8 * 64
    small = search.for_job(120)
    assert small.sources_per_block == 64
    blocks = plan_blocks([7] * 120, small.sources_per_batch, None, small.sort_window,
                         small.sources_per_block)
    assert blocks == [(0, 64), (64, 120)]
    shards = plan_shards([s for s, _ in blocks], 120, small.shard_size(120))
    assert [(s.start, s.end) for s in shards] == [(0, 64), (64, 120)]
    # a block planned on a shard's own slice is the same block (the workers' plan)
    assert plan_blocks([7] * 56, 64, None, 8, small.sources_per_block) == [(0, 56)]
    large = search.for_job(100_000)
    assert large.sources_per_block == 512 and large.shard_size(100_000) == DEFAULT_SHARD_SOURCES
    assert SearchSettings(beam=5, shard_sources=300).shard_size(120) == 300  # as given
    # the blocks are in the resume key, so a run planned with other blocks is never continued
    from triemine.decoding.driver import search_key

    src, tgt = tmp_path / "s", tmp_path / "t"  # the key hashes the corpora's content
    src.write_text("a\n", encoding="utf-8")
    tgt.write_text("b\n", encoding="utf-8")
    assert search_key(None, small, src, tgt, 120)["block_sources"] == 64
    assert search_key(None, large, src, tgt, 100_000)["block_sources"] == 512


def test_default_batch_size_follows_the_beam():
    assert [resolve_batch_size(None, b) for b in (1, 5, 20, 90, 400)] == [64, 64, 16, 3, 1]
    assert resolve_batch_size(7, 90) == 7
    with pytest.raises(ValueError):
        resolve_batch_size(0, 5)


def test_a_search_off_the_cpu_batches_more_sources_by_default(tiny_model, corpora, tmp_path):
    """Off the CPU the search's default batch is DEVICE_ROWS_PER_STEP rows (measured on an H200:
    1,024 sources at beam 5 decoded 2.9x as fast as the CPU's 64) and its padded source tokens
    at most DEVICE_ROW_TOKENS over the beam; the CPU keeps its defaults, and a batch or a cap
    that was asked for is kept.  The driver applies them, so its resume key records them, and
    the search finds the same matches (torch's "cpu:0" stands in for a GPU)."""
    from triemine.decoding.batching import DEVICE_ROW_TOKENS, device_batch

    assert device_batch(5, "cpu") == (None, None)
    assert device_batch(5, "cuda") == (1024, DEVICE_ROW_TOKENS // 5)
    assert [device_batch(b, "cuda")[0] for b in (1, 90, 10_000)] == [1024, 56, 1]
    base = SearchSettings(beam=5)
    assert base.on_device("cpu") is base
    on = base.on_device("cuda:1")
    assert (on.batch_size, on.max_tokens) == (1024, DEVICE_ROW_TOKENS // 5)
    told = SearchSettings(beam=5, batch_size=7, max_tokens=99).on_device("cuda")
    assert (told.batch_size, told.max_tokens) == (7, 99)
    src, tgt, _ = corpora
    search = SearchSettings(beam=3)
    mine_to_tsv(tiny_model, src, tgt, tmp_path / "cpu.tsv", search=search)
    mine_to_tsv(tiny_model, src, tgt, tmp_path / "dev.tsv", search=search, device="cpu:0")
    key = json.loads((tmp_path / "dev.tsv.progress").read_text())["settings"]
    assert (key["batch_size"], key["max_tokens"]) == (1024, DEVICE_ROW_TOKENS // 3)
    # the key records the settings as the search ran them: on the CPU the batch left unset
    # (resolved from the beam, 64 at beam 3)
    assert json.loads((tmp_path / "cpu.tsv.progress").read_text())["settings"]["batch_size"] is None
    a, b = read_mined(tmp_path / "cpu.tsv"), read_mined(tmp_path / "dev.tsv")
    assert list(zip(a.src_ids, a.tgt_ids)) == list(zip(b.src_ids, b.tgt_ids)) and len(a) > 10
    assert b.col("score") == pytest.approx(a.col("score"), abs=1e-4)


def test_bad_batching_is_refused_before_the_output_is_touched(tiny_model, corpora, tmp_path):
    src, tgt, _ = corpora
    out = tmp_path / "kept.tsv"
    out.write_text("an earlier run\n", encoding="utf-8")
    for kw in (dict(sort_window=0), dict(batch_size=0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            mine_to_tsv(tiny_model, src, tgt, out, search=SearchSettings(beam=3, **kw))
    assert out.read_text(encoding="utf-8") == "an earlier run\n"


def test_length_sorted_blocks_find_the_same_matches_in_input_order(tiny_model, corpora):
    src, tgt, _ = corpora
    sources = src.read_text(encoding="utf-8").splitlines()
    trie = get_trie(tiny_model, tgt)
    plain = list(mine(tiny_model, sources, trie, SearchSettings("pre", 4, batch_size=3,
                                                                 sort_window=1)))
    window = list(mine(tiny_model, sources, trie, SearchSettings("pre", 4, batch_size=3,
                                                                  sort_window=5)))
    assert [(m.src_index, m.tgt_line_ids) for m in window] == \
        [(m.src_index, m.tgt_line_ids) for m in plain]
    assert [m.score for m in window] == pytest.approx([m.score for m in plain], abs=1e-4)


# -- bad input ------------------------------------------------------------------------------------

def _err(capsys, argv):
    rc = mine_main(argv)
    return rc, capsys.readouterr().err


def test_missing_model_file(tiny_model_dir, corpora, tmp_path, capsys):
    src, tgt, _ = corpora
    broken = tmp_path / "model"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "dict.tgt.txt").unlink()
    rc, err = _err(capsys, ["--candidates", "trie", "--pre-expansion", "--model", str(broken),
                            "--source", str(src),
                            "--target", str(tgt), "-o", str(tmp_path / "o.tsv"), "-q"])
    assert rc == 2 and "dict.tgt.txt: missing model file" in err
    shutil.copy(tiny_model_dir / "dict.tgt.txt", broken / "dict.tgt.txt")
    (broken / "checkpoint.pt").write_bytes(b"not a checkpoint")
    rc, err = _err(capsys, ["--candidates", "trie", "--pre-expansion", "--model", str(broken),
                            "--source", str(src),
                            "--target", str(tgt), "-o", str(tmp_path / "o.tsv"), "-q"])
    assert rc == 2 and "checkpoint.pt: cannot load fairseq checkpoint" in err


def test_trie_of_another_dictionary(tiny_model_dir, tiny_model, corpora, tmp_path, capsys):
    src, tgt, _ = corpora
    foreign = tmp_path / "foreign.trie"
    Trie.build([[4, 5, 2]], eos=2, metadata={"dict_fingerprint": "sha256:other",
                                             "dict_size": len(tiny_model.tgt_dict)}).save(foreign)
    rc, err = _err(capsys, ["--candidates", "trie", "--pre-expansion", "--model",
                            str(tiny_model_dir), "--source",
                            str(src), "--target", str(tgt), "-o", str(tmp_path / "o.tsv"),
                            "--trie", str(foreign), "-q"])
    assert rc == 2 and "foreign.trie" in err and "another dictionary" in err


def test_empty_source_and_unreadable_line(tiny_model_dir, corpora, tmp_path, capsys):
    _, tgt, _ = corpora
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    base = ["--candidates", "trie", "--pre-expansion", "--model", str(tiny_model_dir), "--target",
            str(tgt),
            "-o", str(tmp_path / "o.tsv"), "-q"]
    rc, err = _err(capsys, base + ["--source", str(empty)])
    assert rc == 2 and "empty.txt: empty source file" in err
    bad = tmp_path / "bad.txt"  # one bad line: skipped in place and counted, the rest mined
    bad.write_bytes("saa sab\nsac\n".encode() + b"sad \xff\xfe sae\n")
    rc, err = _err(capsys, base + ["--source", str(bad)])
    assert rc == 0 and json.loads(err.strip().splitlines()[-1])["skipped_bad"] == {
        "source": 1, "target": 0}
    assert {r[0] for r in read_rows(tmp_path / "o.tsv")} <= {"1", "2"}
    assert read_mined(tmp_path / "o.tsv").meta["skipped_bad"] == {"source": 1, "target": 0}
    bad.write_bytes(b"saa sab\nsac \xff\nsad \xff\xfe sae\n")  # mostly bad: refused
    rc, err = _err(capsys, base + ["--source", str(bad)])
    assert rc == 2 and "bad.txt:2: invalid UTF-8" in err and "not a UTF-8 corpus" in err


def test_over_long_source_is_skipped_with_warning(tiny_model, corpora, tmp_path):
    """Issue 20: one rule for every configuration: a source over the encoder's 64 positions is
    skipped (it used to be truncated here, and to crash the mining job), counted and named;
    --max-length lowers the limit on both sides."""
    _, tgt, _ = corpora
    src = tmp_path / "long.txt"
    words = " ".join(s for s, _ in PAIRS[:30])  # ~130 words > 64 positions
    src.write_text(f"{PAIRS[0][0]}\n{words}\n{PAIRS[1][0]}\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"long.txt: skipped 1 source sentence.*lines 2\)"):
        s = mine_to_tsv(tiny_model, src, tgt, tmp_path / "o.tsv", search=SearchSettings(beam=2))
    assert s.skipped_long == {"source": 1, "target": 0} and s.decoded == 3
    assert {r[0] for r in read_rows(tmp_path / "o.tsv")} == {"1", "3"}
    assert read_mined(tmp_path / "o.tsv").meta["skipped_long"] == {"source": 1, "target": 0}
    limit = max(len(tiny_model.encode_source(PAIRS[i][0])) for i in (0, 1))
    from triemine.io.corpus import read_corpus
    lengths = [len(tiny_model.encode_target(t)) for t in read_corpus(tgt).texts if t.strip()]
    assert any(n > limit for n in lengths) and any(n <= limit for n in lengths)
    with pytest.warns(UserWarning, match="skipped"):
        s = mine_to_tsv(tiny_model, src, tgt, tmp_path / "m.tsv",
                        search=SearchSettings(beam=4, max_length=limit))
    rows = read_rows(tmp_path / "m.tsv")
    assert s.skipped_long == {"source": 1, "target": sum(n > limit for n in lengths)} and rows
    assert all(len(tiny_model.encode_target(r[6])) <= limit for r in rows)
    assert {r[0] for r in rows} <= {"1", "3"}
