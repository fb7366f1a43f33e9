"""Overlong and bad lines are skipped and counted, never the end of the run (workers too); token
lengths are counted chunk by chunk, once per corpus and model, as the search encodes them.

Tiny synthetic model (tests/conftest.py) except where marked ``shared_model``.
"""
import json

import numpy as np
import pytest

from triemine.cli import mine_main
from triemine.io.tsv import read_mined

from helpers import OTHER, PAIRS, mine_args

pytestmark = pytest.mark.usefixtures("one_thread")


# -- overlong lines, the Python API ----------------------------------------------------------------

@pytest.fixture
def long_corpora(tmp_path):
    """Sources and targets of the tiny pair, one line on each side longer than the tiny model's
    64 positions, and the combination the tiny pair's encoder can feed."""
    from triemine.judging.combination import Combination

    pairs = PAIRS[:12]
    src_lines = [s for s, _ in pairs]
    src_lines[3] = " ".join([pairs[3][0]] * 20)  # ~80 pieces
    tgt_lines = OTHER[:12] + [t for _, t in pairs]
    tgt_lines[14] = " ".join([pairs[2][1]] * 20)
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(s + "\n" for s in src_lines), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for t in tgt_lines), encoding="utf-8")
    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    return src, tgt, str(comb)


def test_overlong_lines_are_skipped_and_counted_not_the_end_of_the_run(
        tiny_model_dir, long_corpora, tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    src, tgt, comb = long_corpora
    out = tmp_path / "m.tsv"
    assert mine_main(mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out))) == 0, \
        capsys.readouterr().err
    err = capsys.readouterr().err
    summary = json.loads(err.strip().splitlines()[-1])
    assert summary["skipped_long"] == {"source": 1, "target": 1}
    assert "skipped 1 source line(s) longer than 64 tokens (lines 4)" in caplog.text
    assert "skipped 1 target line(s) longer than 64 tokens (lines 15)" in caplog.text
    from triemine.decoding.lengths import SHOWN, report

    mask = np.zeros(10**6, dtype=bool)
    mask[5::2] = True  # half a million skipped lines: the first ones named, each once
    caplog.clear()
    assert report(mask, "big.txt", "target", 64) == 499998
    shown = ", ".join(str(i) for i in range(6, 6 + 2 * SHOWN, 2))
    assert f"big.txt: skipped 499998 target line(s) longer than 64 tokens (lines {shown}, ...)" \
        in caplog.text
    m = read_mined(out)
    assert m.meta["skipped_long"] == {"source": 1, "target": 1}
    assert "4" not in m.src_ids and "15" not in m.tgt_ids
    assert {str(i + 1) for i in range(12) if i != 3} <= set(m.src_ids)  # nothing else lost
    # --max-length lowers the limit on both sides
    out2 = tmp_path / "m2.tsv"
    assert mine_main(mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out2),
                          "--max-length", "8")) == 0
    skipped = read_mined(out2).meta["skipped_long"]
    assert skipped["source"] > 1 and skipped["target"] > 1


def test_token_lengths_are_counted_chunk_by_chunk_with_the_same_result(tmp_path):
    """The overlong-line rule tokenises a corpus a chunk at a time (a million lines' pieces were
    760 MB of the driver's memory): the same lengths as one call, never more than a chunk's
    lines in one call, through a corpus file's view too."""
    from triemine.io.corpus import open_corpus
    from triemine.decoding.lengths import token_lengths

    class Words:  # a tokenizer that records its calls
        calls: list = []

        def encode(self, texts, out_type=str, num_threads=None):
            self.calls.append(len(texts))
            return [t.split() for t in texts]
    texts = [("w " * (i % 7)).strip() for i in range(50)]  # every seventh line empty
    path = tmp_path / "c.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    want = [len(t.split()) + 1 if t else 0 for t in texts]
    assert token_lengths(Words(), texts, chunk=10**6).tolist() == want
    Words.calls.clear()
    assert token_lengths(Words(), open_corpus(path, cache=tmp_path / "lines").texts,
                         chunk=8).tolist() == want
    assert max(Words.calls) <= 8 and sum(Words.calls) == sum(1 for t in texts if t)


def test_token_lengths_of_a_corpus_file_are_computed_once_per_corpus_and_model(tmp_path,
                                                                             monkeypatch):
    """A corpus file's token lengths are kept in the cache: the job's start, its trie search's
    driver and its workers read them, where each tokenised the corpus again (6.8 s a million
    lines); another corpus, another version of the file or another sentencepiece model is
    tokenised anew, and a list of texts (no file) is never cached."""
    from triemine.io.corpus import open_corpus
    from triemine.decoding.lengths import corpus_token_lengths

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))

    class Words:
        calls: list = []

        def encode(self, texts, out_type=str, num_threads=None):
            self.calls.append(len(texts))
            return [t.split() for t in texts]
    spm_a, spm_b = tmp_path / "a.spm", tmp_path / "b.spm"
    spm_a.write_bytes(b"model a")
    spm_b.write_bytes(b"model b")
    path = tmp_path / "c.txt"
    path.write_text("a b\n\nc\n", encoding="utf-8")
    texts = open_corpus(path, cache=tmp_path / "lines").texts
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [3, 0, 2]
    assert Words.calls == [2]
    got = corpus_token_lengths(Words(), spm_a, texts)
    assert got.tolist() == [3, 0, 2] and got.dtype == np.int32
    assert Words.calls == [2]  # read from the cache, memory-mapped read-only
    assert isinstance(got, np.memmap) and not got.flags.writeable
    assert corpus_token_lengths(Words(), spm_b, texts).tolist() == [3, 0, 2]
    assert Words.calls == [2, 2]  # another model
    corpus_token_lengths(Words(), spm_a, ["x y z"])
    corpus_token_lengths(Words(), spm_a, ["x y z"])
    assert Words.calls == [2, 2, 1, 1]  # no file: no cache
    new = tmp_path / "c.new"
    new.write_text("a b c d\nx\n\n", encoding="utf-8")  # as many lines, other lengths
    new.replace(path)  # the file replaced (the old view still maps the old one)
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [3, 0, 2]  # the old view's
    assert Words.calls[-1] == 2 and texts.file_key() is None  # lines, never cached as the new
    texts = open_corpus(path, cache=tmp_path / "lines").texts
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [5, 2, 0]
    cached = list((tmp_path / "cache" / "lengths").glob("*.npy"))
    assert len(cached) == 3
    for f in cached:  # a cache file cut to nothing is computed and written again
        f.write_bytes(b"")
    n = len(Words.calls)
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [5, 2, 0]
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [5, 2, 0]
    assert Words.calls[n:] == [2]


@pytest.mark.cluster
def test_overlong_lines_give_the_same_output_with_workers(tiny_model_dir, long_corpora, tmp_path,
                                                          capsys, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    src, tgt, comb = long_corpora
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(mine_args(tiny_model_dir, src, tgt, comb, "-o", str(one))) == 0
    assert mine_main(mine_args(tiny_model_dir, src, tgt, comb, "-o", str(two),
                               "--workers", "2")) == 0, \
        capsys.readouterr().err
    assert one.read_bytes() == two.read_bytes()
    assert read_mined(two).meta["skipped_long"] == {"source": 1, "target": 1}
    import ray  # the [ray] extra is installed with the tests (scripts/setup_env.sh)

    three = tmp_path / "ray.tsv"
    try:  # a private cluster on 127.0.0.1 (triemine.distributed.ray_backend)
        assert mine_main(mine_args(tiny_model_dir, src, tgt, comb, "-o",
                                   str(three), "--ray", "local",
                              "--workers", "2")) == 0, capsys.readouterr().err
    finally:
        ray.shutdown()
    assert one.read_bytes() == three.read_bytes()


@pytest.mark.cluster
def test_bad_lines_are_skipped_counted_and_named_not_the_end_of_the_run(
        tiny_model_dir, tmp_path, capsys, caplog, monkeypatch):
    """A line that is not UTF-8 in the sources and a TSV line without a tab among the targets:
    each is skipped in place, counted (summary and .meta.json, ``skipped_bad``) and named in a
    warning; every other pair is mined, the same with two workers."""
    from triemine.judging.combination import Combination

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    pairs = PAIRS[:12]
    src, tgt = tmp_path / "src.tsv", tmp_path / "tgt.tsv"
    src_lines = [f"s{i}\t{s}".encode() for i, (s, _) in enumerate(pairs)]
    src_lines[5] = b"s5\t" + pairs[5][0].encode()[:3] + b"\xff"
    src.write_bytes(b"\n".join(src_lines) + b"\n")
    tgt_lines = [f"t{i}\t{t}" for i, (_, t) in enumerate(pairs)]
    tgt_lines[7] = "a stray line without a tab"
    tgt.write_text("\n".join(tgt_lines) + "\n", encoding="utf-8")
    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(mine_args(tiny_model_dir, src, tgt, str(comb), "-o", str(one))) == 0, \
        capsys.readouterr().err
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["skipped_bad"] == {"source": 1, "target": 1}
    assert f"{src}: skipped 1 bad line" in caplog.text and "line 6: invalid UTF-8" in caplog.text
    assert f"{tgt}: skipped 1 bad line" in caplog.text and "line 8: no tab" in caplog.text
    m = read_mined(one)
    assert m.meta["skipped_bad"] == {"source": 1, "target": 1}
    assert "s5" not in m.src_ids and "" not in m.tgt_ids and "" not in m.src_ids
    assert {f"s{i}" for i in range(12) if i != 5} <= set(m.src_ids)  # nothing else lost
    assert {f"t{i}" for i in range(12) if i != 7} <= set(m.tgt_ids)
    assert mine_main(mine_args(tiny_model_dir, src, tgt, str(comb), "-o", str(two),
                          "--workers", "2")) == 0, capsys.readouterr().err
    assert one.read_bytes() == two.read_bytes()


def _same_length_rule(model, texts):
    """The package's one length rule counts what the model's encoder is given."""
    from triemine.decoding.lengths import model_token_lengths

    got = model_token_lengths(model, texts, "source")
    want = [len(model.encode_source(t)) if t.strip() else 0 for t in texts]
    assert got.tolist() == want and sum(want) > len(texts)


def test_the_searchs_source_lengths_are_the_models_encoded_lengths(tiny_model):
    """The trie search plans its batches and skips long sources by the mining job's length
    rule (the pieces as the dictionary splits them + EOS, batched, cached per corpus file:
    int32, no Python int a source), which counts the tokens the model's encoder is given."""
    from triemine.decoding.runner import source_lengths
    from triemine.testing.tiny_model import synthetic_pairs

    texts = [s for s, _ in synthetic_pairs(60, seed=5)] + ["", "  "]
    _same_length_rule(tiny_model, texts + ["a\x1fb", "a\x85b c", "\x1f"])
    with pytest.warns(UserWarning, match=r"^src\.txt: skipped \d+ source sentence\(s\) longer "
                      r"than 12 tokens \(lines \d+(, \d+)*(, \.\.\.)?\)$") as caught:
        lengths, skipped = source_lengths(tiny_model, texts, "src.txt", max_length=12)
    assert lengths.dtype == np.int32 and len(skipped) and (lengths <= 12).all()
    named = str(caught[0].message).split("(lines ")[1].rstrip(" .)").rstrip(",").split(", ")
    assert named == [str(i) for i in skipped[:10]]  # the first ten, as the job's warning
    assert skipped.tolist() == [i + 1 for i, t in enumerate(texts)
                                if t.strip() and len(tiny_model.encode_source(t)) > 12]
    assert not lengths[skipped - 1].any() and lengths[-2:].tolist() == [0, 0]


@pytest.mark.shared_model
def test_the_length_rule_counts_opus_mts_encoded_tokens_on_the_bucc_sample():
    from triemine.models.model_dir import load_model_dir
    from triemine.evaluation.bucc import read_bucc
    from triemine.io.paths import BUCC_ZH_EN, cache_root, shared_path

    model = load_model_dir(cache_root() / "models" / "opus-mt-zh-en")
    texts = read_bucc(shared_path(*BUCC_ZH_EN) / "zh-en.sample.gold").src.texts
    # whitespace sentencepiece keeps inside a piece, which the dictionary splits on
    odd = ["a\x1fb", "a\x85b", "中\x1c文\x1d字\x1e。", "x\u2028y"]
    assert [len(model.source_spm.encode(t)) for t in odd[:2]] == [3, 3]
    _same_length_rule(model, list(texts) + odd)


@pytest.mark.shared_model
def test_a_2403_token_line_in_the_default_configuration_is_skipped(tmp_path, capsys, monkeypatch):
    """The report of issue 20: the default job ended in a traceback on a web-corpus line longer
    than OPUS-MT's 2,048 positions; now it is skipped, counted, and every other pair is mined."""
    from triemine.io.paths import BUCC_ZH_EN, cache_root, shared_path

    model = cache_root() / "models" / "opus-mt-zh-en"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    base = shared_path(*BUCC_ZH_EN) / "zh-en.sample"
    zh = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.zh", encoding="utf-8"))
    en = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.en", encoding="utf-8"))
    gold = [ln.split() for ln in open(f"{base}.gold", encoding="utf-8")][:4]
    src, tgt = tmp_path / "s.zh", tmp_path / "t.en"
    lines = [f"{z}\t{zh[z]}\n" for z, _ in gold]
    lines.insert(2, "long\t" + "，".join(["中国经济增长"] * 801) + "\n")
    src.write_text("".join(lines), encoding="utf-8")
    tgt.write_text("".join(f"{e}\t{en[e]}\n" for _, e in gold), encoding="utf-8")
    out = tmp_path / "m.tsv"
    rc = mine_main(["--model", str(model), "--source", str(src), "--target", str(tgt),
                    "-o", str(out), "--bitext", str(tmp_path / "b.txt"), "-q"])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err, err
    m = read_mined(out)
    assert m.meta["skipped_long"] == {"source": 1, "target": 0}
    assert "long" not in m.src_ids and {z for z, _ in gold} <= set(m.src_ids)
    assert json.loads(err.strip().splitlines()[-1])["skipped_long"]["source"] == 1
