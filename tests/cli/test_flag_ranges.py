"""Issue 46, the newer surfaces: the dedup folder's files are sealed (damage is named and
rebuilt, the output unchanged); a refused resume names what changed; outputs are compressed by
their name or refused before any work; checksum-less zstd files changed in place are refused;
every flag's range, emptiness and kind is checked from its declaration before any model loads;
the late refusals come first; --bitext is locked; trie-mine-eval without a sidecar does not
guess; --target-shards on a tiny corpus does not search once per line.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
hang guard in a subprocess.
"""
import gzip
import json
import lzma
import os
import socket
import subprocess
import sys
import time

import pytest

import triemine
from triemine.cli import eval_main, filter_main, mine_main, prepare_main
from triemine.errors import InputError
from triemine.tsv import write_rows

from test_decoding import OTHER, PAIRS
from test_first_hour import _job  # the mining job with the tiny pair's encoder
from test_mining import CipherEncoder  # noqa: F401  (registers the tiny pair's encoder)
from test_trust_io import _env, _err, pair  # noqa: F401  (fixtures: the cache, the tiny pair)


def _paper(model_dir, src, tgt, *extra):
    return ["--config", "paper", "--model", str(model_dir), "--source", str(src), "--target",
            str(tgt), "--beam", "5", "-q", *extra]


# -- the dedup folder ------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["random bytes", "letters of a kept target"])
def test_a_damaged_unique_corpus_is_named_and_rebuilt_with_the_same_output(
        tiny_model_dir, pair, tmp_path, capsys, caplog, how):
    src, tgt, comb = pair
    out, bt = tmp_path / "o.tsv", tmp_path / "o.bt"
    argv = _job(tiny_model_dir, src, tgt, comb, "-o", str(out), "--bitext", str(bt),
                "--threshold", "combined=-1e9")
    assert mine_main(argv) == 0, capsys.readouterr().err
    want, want_bt = out.read_bytes(), bt.read_bytes()
    unique = tmp_path / "o.tsv.dedup" / "target.unique.tsv"
    data = bytearray(unique.read_bytes())
    if how == "random bytes":
        data[20:40] = os.urandom(20)
    else:
        text = data.decode("utf-8")
        first = PAIRS[0][1]
        assert first in text
        data = bytearray(text.replace(first, first[::-1], 1).encode("utf-8"))
    assert len(data) == unique.stat().st_size
    unique.write_bytes(bytes(data))
    for extra in ((), ("--resume",)):
        caplog.clear()
        assert mine_main(argv + list(extra)) == 0, capsys.readouterr().err
        assert out.read_bytes() == want and bt.read_bytes() == want_bt
        if not extra:  # named once, when it is found
            assert "target.unique.tsv" in caplog.text and "deduplicating the target" in caplog.text
            unique.write_bytes(bytes(data))  # damaged again for the resumed run


def test_a_damaged_dedup_array_is_named_and_rebuilt(tmp_path, caplog):
    from triemine.mining.dedup import dedup_corpus

    corpus = tmp_path / "c.txt"
    corpus.write_text("a\nb\na\nc\n", encoding="utf-8")
    first = dedup_corpus(corpus, tmp_path / "d", "source")
    lines = tmp_path / "d" / "source.lines.npy"
    raw = bytearray(lines.read_bytes())
    raw[-30] ^= 0xFF
    lines.write_bytes(bytes(raw))
    again = dedup_corpus(corpus, tmp_path / "d", "source")
    assert "source.lines.npy" in caplog.text
    assert again.lines.tolist() == first.lines.tolist() == [0, 2, 1, 3]


def test_a_refused_resume_names_what_changed(tiny_model_dir, pair, tmp_path, capsys):
    src, tgt, comb = pair
    out = tmp_path / "o.tsv"
    assert mine_main(_job(tiny_model_dir, src, tgt, comb, "-o", str(out))) == 0
    capsys.readouterr()
    rc, err = _err(capsys, mine_main, _job(tiny_model_dir, src, tgt, comb, "-o", str(out),
                                          "--resume", "--min-margin", "0.5"))
    assert rc == 2 and "changed since the interrupted run: the settings min_margin" in err
    tgt.write_text(tgt.read_text(encoding="utf-8") + "one more line\n", encoding="utf-8")
    rc, err = _err(capsys, mine_main, _job(tiny_model_dir, src, tgt, comb, "-o", str(out),
                                          "--resume"))
    assert rc == 2 and "the target corpus's content" in err and "settings" not in \
        err.split("changed since the interrupted run:")[1]


# -- compressed outputs ----------------------------------------------------------------------------

def test_outputs_are_compressed_by_their_name_or_refused_before_any_work(
        tiny_model_dir, pair, tmp_path, capsys):
    src, tgt, comb = pair
    for name in ("o.tsv.gz", "o.tsv.xz", "o.tsv.zst"):
        rc, err = _err(capsys, mine_main, _paper(tiny_model_dir, src, tgt, "-o",
                                                 str(tmp_path / name)))
        assert rc == 2 and "-o" in err and "drop the" in err and "\n" == err[-1]
        assert err.count("\n") == 1 and not list(tmp_path.glob("o.tsv*"))
    out = tmp_path / "m.tsv"
    assert mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(out), "--bitext",
                            str(tmp_path / "b.tsv.gz"))) == 0
    assert gzip.decompress((tmp_path / "b.tsv.gz").read_bytes()).count(b"\n") > 0
    rc, err = _err(capsys, filter_main, [str(out), "--ce-max", "9", "-o",
                                         str(tmp_path / "k.tsv.gz")])
    assert rc == 2 and "k.tsv.gz" in err and "drop the .gz suffix" in err
    assert filter_main([str(out), "--ce-max", "9", "--bitext", str(tmp_path / "k.xz")]) == 0
    assert lzma.decompress((tmp_path / "k.xz").read_bytes()).count(b"\n") > 0


def test_eval_and_filter_read_a_compressed_mining_tsv_and_write_compressed_json(
        tmp_path, capsys):
    cells = {"src_id": ["1", "2"], "tgt_id": ["1", "2"], "score": [-1.0, -2.0],
             "ce_word": [1.0, 2.0], "ce_token": [1.0, 2.0], "src": ["a", "b"],
             "tgt": ["c", "e"]}
    mined = tmp_path / "m.tsv"
    write_rows(mined, list(cells), cells, meta={"mode": "pre"})
    gz = tmp_path / "g.tsv.gz"
    gz.write_bytes(gzip.compress(mined.read_bytes()))
    (tmp_path / "g.tsv.gz.meta.json").write_bytes((tmp_path / "m.tsv.meta.json").read_bytes())
    gold = tmp_path / "zh-en.t.gold"
    gold.write_text("1\t1\n")
    for name in ("zh-en.t.zh", "zh-en.t.en"):
        (tmp_path / name).write_text("1\ta\n2\tb\n")
    js = tmp_path / "e.json.gz"
    assert eval_main([str(gz), "--gold", str(gold), "--json", str(js)]) == 0, \
        capsys.readouterr().err
    assert json.loads(gzip.decompress(js.read_bytes()))["rule"] == "best-per-source"
    assert filter_main([str(gz), "--ce-max", "1.5", "-o", str(tmp_path / "k.tsv")]) == 0
    assert (tmp_path / "k.tsv").read_text().count("\n") == 2  # the header and one row


# -- zstd frames without a content checksum ----------------------------------------------------------

def test_a_checksumless_zstd_file_changed_in_place_is_refused(tmp_path, capsys, caplog):
    import zstandard

    lines = "".join(f"line number {i} of the corpus\n" for i in range(400)).encode()
    zst = tmp_path / "c.en.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(lines))  # no checksum: the default
    assert not zstandard.get_frame_parameters(zst.read_bytes()[:18]).has_checksum
    argv = [str(zst), "-o", str(tmp_path / "p.en"), "--lang", "en", "--skip", "lang,script"]
    assert prepare_main(argv) == 0
    capsys.readouterr()
    assert "without a content checksum" in caplog.text
    data = bytearray(zst.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 40] = bytes(b ^ 0x21 for b in data[middle:middle + 40])
    zst.write_bytes(bytes(data))
    rc, err = _err(capsys, prepare_main, argv)
    assert rc == 2 and str(zst) in err and "changed in place" in err and err.count("\n") == 1
    from triemine.compression import plain_copy

    with pytest.raises(InputError, match="changed in place"):
        plain_copy(zst)


# -- flag ranges and late refusals ---------------------------------------------------------------

def test_flag_ranges_and_kinds_are_refused_before_the_model_loads(pair, tmp_path, capsys):
    src, tgt, comb = pair
    broken = tmp_path / "no-model"  # cannot load: a later check would say so instead
    broken.mkdir()
    cases = [(["--config", "paper", "--trie-nbest", "513"], "--trie-nbest must be <= 512"),
             (["--candidates", "trie,knn", "--trie-nbest", "513"], "--trie-nbest must be <= 512"),
             (["--config", "paper", "--target-spm", str(src)], "not a sentencepiece model"),
             (["--config", "paper", "--target-spm", ""], "--target-spm: an empty path"),
             (["--config", "paper", "--trie", ""], "--trie: an empty path"),
             (["--encoder", "bogus"], "invalid choice: 'bogus'"),
             (["--config", "paper", "--bitext-format", "tmx"], "give --bitext"),
             (["--config", "paper", "--bitext", str(tmp_path / "no" / "b.txt")],
              "does not exist"),
             (["--config", "paper", "--bitext", str(tmp_path / "b.gz"), "--bitext-format",
               "hf"], "drop the .gz suffix"),
             (["--config", "paper", "-o", str(tmp_path / "no" / "o.tsv")], "does not exist")]
    (tmp_path / "hfx").mkdir()
    (tmp_path / "hfx" / "mine.txt").write_text("x")
    cases.append((["--config", "paper", "--bitext", str(tmp_path / "hfx"), "--bitext-format",
                   "hf"], "not a bitext folder"))
    for extra, want in cases:
        argv = ["--model", str(broken), "--source", str(src), "--target", str(tgt), "-q",
                *(["-o", str(tmp_path / "o.tsv")] if "-o" not in extra else []), *extra]
        rc, err = _err(capsys, mine_main, argv)
        assert rc == 2 and want in err and "Traceback" not in err, (extra, err)
        assert "checkpoint" not in err  # refused before the model's turn
    assert (tmp_path / "hfx" / "mine.txt").read_text() == "x"
    with pytest.raises(InputError, match="trie_nbest|--trie-nbest"):
        triemine.mine(["a"], ["b"], model=broken, config="paper", trie_nbest=600)


def test_an_empty_output_path_is_refused_and_leaves_nothing(pair, tmp_path, capsys,
                                                            monkeypatch):
    src, tgt, comb = pair
    monkeypatch.chdir(tmp_path)
    rc, err = _err(capsys, mine_main, ["--model", str(tmp_path), "--source", str(src),
                                       "--target", str(tgt), "-o", "", "-q"])
    assert rc == 2 and "-o: an empty path" in err
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_prepare_ranges_and_language_case(tmp_path, capsys):
    raw = tmp_path / "raw.en"
    raw.write_text("The cat sat on the mat today.\nA second English line is here.\n")
    assert prepare_main([str(raw), "-o", str(tmp_path / "p.en"), "--lang", "EN"]) == 0
    capsys.readouterr()
    for flag, value in (("--max-chars", "-1"), ("--max-words", "0")):
        rc, err = _err(capsys, prepare_main, [str(raw), "-o", str(tmp_path / "q.en"), "--lang",
                                              "en", flag, value])
        assert rc == 2 and flag in err and err.count("\n") == 1


def test_a_write_into_a_folder_that_refuses_it_names_the_output_not_a_temporary(
        tmp_path, capsys, monkeypatch):
    import errno

    raw = tmp_path / "raw.en"
    raw.write_text("The cat sat on the mat today.\n")
    real_open = open

    def read_only(path, mode="r", *a, **k):  # a read-only file system: no file is created
        if "w" in mode and ".tmp" in os.fspath(path):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_open(path, mode, *a, **k)
    real_unlink = os.unlink

    def unlink(path, *a, **k):  # ... nor removed, even when it is not there
        if ".tmp" in os.fspath(path):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_unlink(path, *a, **k)
    monkeypatch.setattr("builtins.open", read_only)
    monkeypatch.setattr(os, "unlink", unlink)
    rc, err = _err(capsys, prepare_main, [str(raw), "-o", str(tmp_path / "p.en"), "--lang", "en"])
    assert rc == 2 and "p.en: cannot write" in err and ".tmp" not in err


def test_a_bitext_is_locked_like_the_output(tiny_model_dir, pair, tmp_path, capsys):
    src, tgt, comb = pair
    bt = tmp_path / "b.txt"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "b.txt.lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        rc, err = _err(capsys, mine_main, _paper(tiny_model_dir, src, tgt, "-o",
                                                 str(tmp_path / "o2.tsv"), "--bitext", str(bt)))
    finally:
        holder.kill()
        holder.wait()
    assert rc == 2 and f"pid {holder.pid}" in err and "b.txt" in err and not bt.exists()
    assert mine_main(_paper(tiny_model_dir, src, tgt, "-o", str(tmp_path / "o2.tsv"),
                            "--bitext", str(bt))) == 0  # the stale lock is taken over
    assert bt.is_file() and not (tmp_path / "b.txt.lock").exists()


# -- eval and filter without a sidecar -----------------------------------------------------------

def test_eval_without_a_sidecar_refuses_unless_told_the_rule(tmp_path, capsys):
    cells = {"src_id": ["1", "1", "2"], "tgt_id": ["1", "2", "2"], "score": [-1.0, -2.0, -1.0],
             "ce_word": [2.0, 1.0, 1.0], "ce_token": [1.0, 1.0, 1.0],
             "combined": [9.0, 1.0, 9.0], "src": ["a", "a", "b"], "tgt": ["c", "e", "e"]}
    mined = tmp_path / "m.tsv"
    write_rows(mined, list(cells), cells)
    assert not os.path.exists(str(mined) + ".meta.json")
    gold = tmp_path / "zh-en.t.gold"
    gold.write_text("1\t1\n2\t2\n")
    for name in ("zh-en.t.zh", "zh-en.t.en"):
        (tmp_path / name).write_text("1\ta\n2\tb\n")
    rc, err = _err(capsys, eval_main, [str(mined), "--gold", str(gold)])
    assert rc == 2 and "no .meta.json sidecar" in err and "--rule" in err
    assert eval_main([str(mined), "--gold", str(gold), "--rule", "one-to-one", "--rank-by",
                      "combined"]) == 0
    assert "F1=1.0000" in capsys.readouterr().out
    rc, err = _err(capsys, filter_main, [str(mined), "-o", str(tmp_path / "k.tsv")])
    assert rc == 2 and "no .meta.json sidecar" in err and "names no known" not in err


# -- many target shards on a tiny corpus -------------------------------------------------------------

def test_target_shards_beyond_a_tiny_corpus_are_clamped_with_a_warning(
        tiny_model_dir, tmp_path):
    """Hang guard only (the timeout is no speed goal): --target-shards 100000 on 40 target lines
    searches 2 ranges of at least 16 lines, said once, and finishes."""
    from triemine.decoding.trie_cache import MIN_TARGET_SHARD_LINES, shard_count

    assert shard_count(240, 240) == 240 // MIN_TARGET_SHARD_LINES and shard_count(5, 3) == 1
    assert shard_count(2, 48) == 2
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(s + "\n" for s, _ in PAIRS[:4]), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in PAIRS[:20]) + "".join(
        t + "\n" for t in OTHER[:20]), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
         "sys.exit(mine_main(sys.argv[1:]))", *_paper(tiny_model_dir, src, tgt, "-o",
                                                       str(tmp_path / "o.tsv"),
                                                       "--target-shards", "100000")],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("--target-shards 100000") == 1
    assert "searching 2 range(s)" in proc.stderr, proc.stderr[-1000:]
    assert time.monotonic() - t0 < 600
