"""Compressed corpora (triemine.io.compression): read through a decompressed copy in the cache,
made once, atomically; damaged or truncated files are InputErrors naming the file."""
from __future__ import annotations

import gzip
import logging
import lzma
import os
import subprocess
import sys

import pytest
import zstandard

from triemine.io import compression
from triemine.io.compression import CODECS, plain_copy
from triemine.io.corpus import open_corpus, read_corpus
from triemine.errors import InputError
from triemine.io.keys import content_sha256

COMPRESS = {".gz": lambda b: gzip.compress(b, mtime=0), ".xz": lzma.compress,
            ".zst": lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b)}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def corpus_bytes(n: int = 3000) -> bytes:
    lines = [f"s{i}\t第{i}句 sentence <{i}> &" if i % 97 != 96 else "" for i in range(n)]
    lines[5] = "s5\tsame id as line 7"
    lines[7] = "s5\tduplicate"  # a skipped line: its message must name the original file
    return ("\n".join(lines) + "\n").encode("utf-8")


def copies(cache):
    d = cache / "decompressed"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_compressed_corpus_reads_as_the_plain_file(tmp_path, suffix, cache):
    data = corpus_bytes()
    plain = tmp_path / "c.tsv"
    plain.write_bytes(data)
    packed = tmp_path / f"c.tsv{suffix}"
    packed.write_bytes(COMPRESS[suffix](data))
    a, b = open_corpus(plain), open_corpus(packed)
    assert b.path == str(packed) and b.format == a.format == "tsv"
    assert list(b.ids) == list(a.ids) and list(b.texts) == list(a.texts)
    assert b.empty_lines == a.empty_lines and list(b.skipped_lines) == [8]
    assert b.skipped_report().startswith(f"{packed}: skipped 1 bad line")
    assert read_corpus(packed).texts == list(a.texts)
    # the copy is keyed by the compressed file's content, and holds the plain bytes
    [copy] = [n for n in copies(cache) if not n.endswith(".json")]
    assert copy == f"{content_sha256(packed)}.c.tsv"
    assert (cache / "decompressed" / copy).read_bytes() == data
    assert b.texts.file_key()["file"] == content_sha256(plain)


def test_magic_bytes_not_the_name_decide(tmp_path):
    data = corpus_bytes(50)
    odd = tmp_path / "corpus.txt"  # xz data under a plain name
    odd.write_bytes(lzma.compress(data))
    assert open_corpus(odd).texts[1] == "第1句 sentence <1> &"
    fake = tmp_path / "plain.gz"  # a .gz name over plain text
    fake.write_bytes(data)
    with pytest.raises(InputError, match=r"named \.gz but not gzip data") as exc:
        open_corpus(fake)
    assert exc.value.path == str(fake)


def test_copy_is_reused_not_decompressed_again(tmp_path, monkeypatch, cache):
    packed = tmp_path / "c.gz"
    packed.write_bytes(COMPRESS[".gz"](corpus_bytes()))
    first = plain_copy(packed)
    calls = []
    real = compression.decompressed
    monkeypatch.setattr(compression, "decompressed", lambda *a: calls.append(a) or real(*a))
    assert plain_copy(packed) == first and calls == []
    assert list(open_corpus(packed).texts)[:2] == ["第0句 sentence <0> &", "第1句 sentence <1> &"]
    assert calls == []
    # a copy changed in place is not what its record says: decompressed again, with a warning
    with open(first, "r+b") as f:
        f.write(b"X")
    assert plain_copy(packed) == first and len(calls) == 1
    assert open(first, "rb").read(1) == b"s"


def test_corrupt_gz_names_the_file_and_leaves_no_copy(tmp_path, cache):
    raw = bytearray(COMPRESS[".gz"](corpus_bytes()))
    raw[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "bad.gz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(InputError) as exc:
        open_corpus(bad)
    assert exc.value.path == str(bad) and "damaged compressed data" in exc.value.problem
    assert copies(cache) == []


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_truncated_file_names_the_file_and_leaves_no_copy(tmp_path, suffix, cache):
    raw = COMPRESS[suffix](corpus_bytes())
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(raw[:len(raw) * 2 // 3])
    with pytest.raises(InputError) as exc:
        read_corpus(cut)
    assert exc.value.path == str(cut) and exc.value.problem.startswith("truncated")
    assert copies(cache) == []


def test_multi_member_gzip_and_multi_frame_zstd(tmp_path):
    a, b = b"one\ntwo\n", b"three\n"
    for suffix in (".gz", ".zst"):
        p = tmp_path / f"m{suffix}"
        p.write_bytes(COMPRESS[suffix](a) + COMPRESS[suffix](b))
        assert read_corpus(p).texts == ["one", "two", "three"]


KILLED = """
import os, sys
from triemine.io import compression
def killed(path, codec):
    yield b"s1\\tpart of the corpus\\n"
    os._exit(9)  # killed in the middle of the decompression
compression.decompressed = killed
compression.plain_copy(sys.argv[1])
"""


@pytest.mark.cluster
def test_killed_decompression_leaves_no_copy_taken_as_complete(tmp_path, cache, caplog):
    packed = tmp_path / "k.xz"
    data = corpus_bytes()
    packed.write_bytes(COMPRESS[".xz"](data))
    env = dict(os.environ, TRIEMINE_CACHE=str(cache))
    rc = subprocess.run([sys.executable, "-c", KILLED, str(packed)], env=env).returncode
    assert rc == 9
    left = copies(cache)
    assert left and all(".tmp" in n for n in left)  # only the killed run's temporary file
    with caplog.at_level(logging.INFO):
        corp = open_corpus(packed)
    assert list(corp.texts)[:1] == ["第0句 sentence <0> &"] and len(corp) == 3000
    assert not any(".tmp" in n for n in copies(cache))  # the dead run's file is removed
    # a copy without its record (killed between the two renames) is not used either
    copy = cache / "decompressed" / f"{content_sha256(packed)}.k"
    (cache / "decompressed" / (copy.name + ".json")).unlink()
    copy.write_bytes(b"s1\thalf\n")
    assert read_corpus(packed).texts[:1] == ["第0句 sentence <0> &"]
    assert copy.read_bytes() == data


def test_compressed_outputs_round_trip(tmp_path):
    chunks = [b"alpha\n", b"", "βeta\n".encode() * 1000]
    for name, codec in CODECS.items():
        p = tmp_path / f"o{codec.suffix}"
        with open(p, "wb") as f:
            w = compression.CompressingFile(f, compression.codec_of_name(p))
            for c in chunks:
                w.write(c)
            w.close()
        assert compression.sniff(p) is codec
        assert b"".join(compression.decompressed(p, codec)) == b"".join(chunks)


def test_cli_reports_a_corrupt_corpus_with_exit_2(tmp_path, capsys):
    import sentencepiece as spm

    from triemine.cli import trie_build_main

    text = tmp_path / "train.txt"
    text.write_text("".join(f"the city river house number {i}\n" for i in range(200)))
    spm.SentencePieceTrainer.Train(input=str(text), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=30, bos_id=-1, eos_id=-1, unk_id=0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    (tmp_path / "dict.txt").write_text(
        "".join(f"{sp.IdToPiece(i)} 1\n" for i in range(1, sp.GetPieceSize())))
    raw = bytearray(COMPRESS[".gz"](text.read_bytes()))
    raw[-6] ^= 0xFF  # the stored CRC32
    bad = tmp_path / "target.gz"
    bad.write_bytes(bytes(raw))
    argv = ["--spm", str(tmp_path / "sp.model"), "--dict", str(tmp_path / "dict.txt"), "-q",
            str(bad), "-o", str(tmp_path / "t.trie")]
    assert trie_build_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trie-build: error: {bad}: damaged compressed data")
    assert "Traceback" not in err
    good = tmp_path / "target.zst"
    good.write_bytes(COMPRESS[".zst"](text.read_bytes()))
    assert trie_build_main(argv[:-3] + [str(good), "-o", str(tmp_path / "t.trie")]) == 0
