"""Every flag's range, emptiness and kind is checked from its declaration before any model loads;
the late refusals come first; an empty output path leaves nothing; a folder that refuses a
write names the output; --bitext is locked like the output.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
hang guard in a subprocess.
"""
import os
import socket
import subprocess
import sys

import pytest

import triemine
from triemine.cli import mine_main, prepare_main
from triemine.errors import InputError

from helpers import paper_job, run_main

pytestmark = pytest.mark.usefixtures("tmp_cache")


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
        rc, err = run_main(capsys, mine_main, argv)
        assert rc == 2 and want in err and "Traceback" not in err, (extra, err)
        assert "checkpoint" not in err  # refused before the model's turn
    assert (tmp_path / "hfx" / "mine.txt").read_text() == "x"
    with pytest.raises(InputError, match="trie_nbest|--trie-nbest"):
        triemine.mine(["a"], ["b"], model=broken, config="paper", trie_nbest=600)


def test_an_empty_output_path_is_refused_and_leaves_nothing(pair, tmp_path, capsys,
                                                            monkeypatch):
    src, tgt, comb = pair
    monkeypatch.chdir(tmp_path)
    rc, err = run_main(capsys, mine_main, ["--model", str(tmp_path), "--source", str(src),
                                       "--target", str(tgt), "-o", "", "-q"])
    assert rc == 2 and "-o: an empty path" in err
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_prepare_ranges_and_language_case(tmp_path, capsys):
    raw = tmp_path / "raw.en"
    raw.write_text("The cat sat on the mat today.\nA second English line is here.\n")
    assert prepare_main([str(raw), "-o", str(tmp_path / "p.en"), "--lang", "EN"]) == 0
    capsys.readouterr()
    for flag, value in (("--max-chars", "-1"), ("--max-words", "0")):
        rc, err = run_main(capsys, prepare_main, [str(raw), "-o", str(tmp_path / "q.en"), "--lang",
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
    rc, err = run_main(capsys, prepare_main,
                       [str(raw), "-o", str(tmp_path / "p.en"), "--lang", "en"])
    assert rc == 2 and "p.en: cannot write" in err and ".tmp" not in err


@pytest.mark.cluster
def test_a_bitext_is_locked_like_the_output(tiny_model_dir, pair, tmp_path, capsys):
    src, tgt, comb = pair
    bt = tmp_path / "b.txt"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "b.txt.lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        rc, err = run_main(capsys, mine_main, paper_job(tiny_model_dir, src, tgt, "-o",
                                                 str(tmp_path / "o2.tsv"), "--bitext", str(bt)))
    finally:
        holder.kill()
        holder.wait()
    assert rc == 2 and f"pid {holder.pid}" in err and "b.txt" in err and not bt.exists()
    assert mine_main(paper_job(tiny_model_dir, src, tgt, "-o", str(tmp_path / "o2.tsv"),
                            "--bitext", str(bt))) == 0  # the stale lock is taken over
    assert bt.is_file() and not (tmp_path / "b.txt.lock").exists()
