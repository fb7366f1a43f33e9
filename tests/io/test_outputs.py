"""What the tools write: no output is an input or another output; every file goes through the
atomic writer; one job per output (a lock); a cut mining TSV is refused, a kept one records its
row count; a skipped overlong line moves no one's margins; refusals name no flag the tool
lacks.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
lock across two processes.
"""
import errno
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from triemine.cli import eval_main, filter_main, import_main, mine_main, trie_build_main
from triemine.errors import InputError, OutputError
from triemine.filtering.selection import write_bitext
from triemine.io.outfile import check_distinct, output_lock
from triemine.io.tsv import read_mined, write_rows

from helpers import mine_args, run_main, snapshot

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- 1. outputs are not inputs ---------------------------------------------------------------------

@pytest.mark.parametrize("case", ["o=source", "o=hardlink", "o=symlink", "bitext=o",
                                  "bitext=source",
                                  "o=checkpoint", "bitext=meta", "source-in-work"])
def test_an_output_that_is_an_input_is_refused_before_any_work(tiny_model_dir, pair, tmp_path,
                                                               capsys, case):
    src, tgt, comb = pair
    out, extra = tmp_path / "out.tsv", []
    (tmp_path / "hard.txt").unlink(missing_ok=True)
    os.link(src, tmp_path / "hard.txt")
    (tmp_path / "sym.txt").symlink_to(tgt)
    source = src
    if case == "o=source":
        out = src
    elif case == "o=hardlink":
        out = tmp_path / "hard.txt"
    elif case == "o=symlink":
        out = tmp_path / "sym.txt"
    elif case == "bitext=o":
        extra = ["--bitext", str(out)]
    elif case == "bitext=source":
        extra = ["--bitext", str(src)]
    elif case == "o=checkpoint":
        out = tiny_model_dir / "checkpoint.pt"
    elif case == "bitext=meta":
        extra = ["--bitext", str(out) + ".meta.json"]
    elif case == "source-in-work":
        (tmp_path / "out.tsv.work").mkdir()
        source = tmp_path / "out.tsv.work" / "src.txt"
        source.write_bytes(src.read_bytes())
    before = snapshot(src, tgt, source, tiny_model_dir / "checkpoint.pt")
    rc, err = run_main(capsys, mine_main,
                       mine_args(tiny_model_dir, source, tgt, comb, "-o", str(out),
                                           *extra))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "must not be an input" in err or "two outputs must be different" in err
    assert "Traceback" not in err
    assert snapshot(src, tgt, source, tiny_model_dir / "checkpoint.pt") == before
    assert not (tmp_path / "out.tsv.lock").exists()


def test_check_distinct_names_both_paths(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text("x\n")
    os.link(a, tmp_path / "b.txt")
    with pytest.raises(InputError, match=r"-o .*b.txt is the same file as the --source .*a.txt"):
        check_distinct([("-o", tmp_path / "b.txt")], [("--source", a)])
    with pytest.raises(InputError, match=r"--json .*c.json is the same file as --report .*c.json"):
        check_distinct([("--report", tmp_path / "c.json"), ("--json", tmp_path / "c.json")])
    with pytest.raises(InputError, match="is a directory, not a regular file"):
        check_distinct([("-o", tmp_path)])
    check_distinct([("-o", tmp_path / "new.tsv", True), ("--bitext", tmp_path / "b.bitext")],
                   [("--source", a)])  # different files: nothing said


def _mined_tsv(path, rows=4):
    cells = {"src_id": [f"s{i}" for i in range(rows)], "tgt_id": [f"t{i}" for i in range(rows)],
             "score": [-1.0] * rows, "ce_word": [1.0 + i for i in range(rows)],
             "ce_token": [1.0] * rows, "src": ["a"] * rows, "tgt": ["b"] * rows}
    write_rows(path, list(cells), cells, meta={"mode": "pre", "beam": 5})
    return path


def _bucc(tmp_path):
    """A BUCC gold file naming the rows of :func:`_mined_tsv`, its corpora beside it."""
    gold = tmp_path / "zh-en.sample.gold"
    gold.write_text("s0\tt0\n")
    (tmp_path / "zh-en.sample.zh").write_text("".join(f"s{i}\ta\n" for i in range(4)))
    (tmp_path / "zh-en.sample.en").write_text("".join(f"t{i}\tb\n" for i in range(4)))
    return gold


def test_filter_eval_build_and_import_refuse_an_output_that_is_an_input(tmp_path, capsys):
    mined = _mined_tsv(tmp_path / "m.tsv")
    before = snapshot(mined, tmp_path / "m.tsv.meta.json")
    for argv in ([str(mined), "--ce-max", "2", "-o", str(mined)],
                 [str(mined), "--ce-max", "2", "--bitext", str(mined) + ".meta.json"],
                 [str(mined), "--ce-max", "2", "-o", str(tmp_path / "k.tsv"),
                  "--bitext", str(tmp_path / "k.tsv")]):
        rc, err = run_main(capsys, filter_main, argv)
        assert rc == 2 and ("must not be an input" in err or "different files" in err), err
    gold = _bucc(tmp_path)
    corpus_before = snapshot(gold, tmp_path / "zh-en.sample.zh")
    for argv in ([str(mined), "--gold", str(gold), "--json", str(gold)],
                 [str(mined), "--gold", str(gold), "--save-thresholds", str(mined)],
                 [str(mined), "--gold", str(gold), "--report", str(tmp_path / "zh-en.sample.zh")]):
        rc, err = run_main(capsys, eval_main, argv)
        assert rc == 2 and "must not be an input" in err, err
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\n")
    rc, err = run_main(capsys, trie_build_main, [str(corpus), "-o", str(corpus), "--spm",
                                             str(tmp_path / "x.spm"), "--dict", str(tmp_path)])
    assert rc == 2 and "must not be an input" in err, err
    model = tmp_path / "hf"
    model.mkdir()
    (model / "source.spm").write_bytes(b"spm")
    rc, err = run_main(capsys, import_main, [str(model), "-o", str(model)])
    assert rc == 2 and "is the same file as the MODEL_DIR" in err, err
    rc, err = run_main(capsys, import_main, [str(model), "-o", str(tmp_path)])  # holds the input
    assert rc == 2 and "holds the MODEL_DIR" in err, err
    assert (model / "source.spm").read_bytes() == b"spm"
    assert snapshot(mined, tmp_path / "m.tsv.meta.json") == before
    assert snapshot(gold, tmp_path / "zh-en.sample.zh") == corpus_before
    assert corpus.read_text() == "a b\n"


# -- 8. the atomic writer, the lock ----------------------------------------------------------------

def test_a_failed_write_names_the_final_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "b.txt"
    with pytest.raises(OutputError) as info:
        write_bitext([("a", "b")], tmp_path / "missing" / "b.txt")
    assert str(tmp_path / "missing" / "b.txt") in str(info.value) and ".tmp" not in str(info.value)
    assert "does not exist" in str(info.value)

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    target.write_text("old\n")
    with pytest.raises(OutputError, match=r"b.txt: cannot write the bitext: No space left"):
        write_bitext([("a", "b")] * 1000, target)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]  # no temporary left


def test_filter_on_a_full_disk_exits_2_naming_the_output(tmp_path, monkeypatch, capsys):
    mined = _mined_tsv(tmp_path / "m.tsv")

    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    rc, err = run_main(capsys, filter_main, [str(mined), "--ce-max", "9", "--bitext",
                                         str(tmp_path / "k.txt")])
    assert rc == 2 and "k.txt: cannot write the bitext: No space left" in err, err
    assert ".tmp" not in err and not list(tmp_path.glob("k.txt*"))


@pytest.mark.cluster
def test_a_second_job_on_the_same_output_is_refused_and_a_stale_lock_taken_over(
        tiny_model_dir, pair, tmp_path, capsys, caplog):
    src, tgt, comb = pair
    out = tmp_path / "o.tsv"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "o.tsv.lock").write_text(f"{holder.pid} {socket.gethostname()}\n")
        rc, err = run_main(capsys, mine_main,
                           mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out)))
        assert rc == 2 and f"pid {holder.pid}" in err and "o.tsv.lock" in err, err
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: its lock is stale, taken over with a warning, removed at the end
    rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out)))
    assert rc == 0, err
    assert f"taking over the lock of pid {holder.pid}" in caplog.text
    assert out.is_file() and not (tmp_path / "o.tsv.lock").exists()


def test_the_lock_is_held_while_the_body_runs_and_released_after(tmp_path):
    out = tmp_path / "x.tsv"
    with output_lock(out) as lock:
        assert lock.read_text().split()[0] == str(os.getpid())
        with pytest.raises(InputError, match=f"pid {os.getpid()}"):
            with output_lock(out):
                pass
    assert not lock.exists()
    with pytest.raises(RuntimeError):
        with output_lock(out):
            raise RuntimeError("the job failed")
    assert not lock.exists()


# -- 9. cut TSVs, skipped lines --------------------------------------------------------------------

def test_a_tsv_cut_at_a_line_boundary_or_header_only_is_refused(tmp_path, capsys):
    mined = _mined_tsv(tmp_path / "m.tsv", rows=4)
    gold = _bucc(tmp_path)
    assert eval_main([str(mined), "--gold", str(gold)]) == 0
    assert json.loads((tmp_path / "m.tsv.meta.json").read_text())["rows"] == 4
    assert len(read_mined(mined)) == 4
    lines = mined.read_text().splitlines(keepends=True)
    for kept in (lines[:3], lines[:1]):  # two rows lost; header only
        mined.write_text("".join(kept))
        with pytest.raises(InputError, match=r"holds \d rows but its .meta.json records 4"):
            read_mined(mined)
        rc, err = run_main(capsys, filter_main, [str(mined), "--ce-max", "9", "-o",
                                             str(tmp_path / "k.tsv")])
        assert rc == 2 and "records 4" in err, err
        rc, err = run_main(capsys, eval_main, [str(mined), "--gold", str(gold)])
        assert rc == 2 and "records 4" in err, err
    meta = json.loads((tmp_path / "m.tsv.meta.json").read_text())
    (tmp_path / "m.tsv.meta.json").write_text(json.dumps(dict(meta, rows=None)))
    with pytest.raises(InputError, match="has not finished"):
        read_mined(mined)
    del meta["rows"]  # a TSV written before the count was recorded: read as it is
    (tmp_path / "m.tsv.meta.json").write_text(json.dumps(meta))
    assert len(read_mined(mined)) == 0


def test_a_kept_tsv_records_its_own_row_count(tmp_path):
    from triemine.io.tsv import write_mined

    m = read_mined(_mined_tsv(tmp_path / "m.tsv", rows=4))
    write_mined(m.take(np.array([0, 2])), tmp_path / "k.tsv")
    assert read_mined(tmp_path / "k.tsv").meta["rows"] == 2


def test_a_skipped_overlong_line_moves_no_margin(tiny_model_dir, pair, tmp_path, capsys):
    """An overlong source line is skipped: the TSV is the one of the same corpus with that line
    empty (it is embedded as nothing and is no one's neighbour)."""
    src, tgt, comb = pair
    lines = src.read_text(encoding="utf-8").splitlines()
    long_src, empty_src = tmp_path / "long.txt", tmp_path / "empty.txt"
    long_src.write_text("\n".join(lines[:3] + [" ".join([lines[3]] * 20)] + lines[4:]) + "\n",
                        encoding="utf-8")
    empty_src.write_text("\n".join(lines[:3] + [""] + lines[4:]) + "\n", encoding="utf-8")
    for s, out in ((long_src, "l.tsv"), (empty_src, "e.tsv")):
        rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, s, tgt, comb, "-o",
                                               str(tmp_path / out)))
        assert rc == 0, err
    assert read_mined(tmp_path / "l.tsv").meta["skipped_long"]["source"] == 1
    assert (tmp_path / "l.tsv").read_bytes() == (tmp_path / "e.tsv").read_bytes()


def test_refusals_name_no_flag_the_tool_lacks(tmp_path, tiny_model_dir, pair, capsys):
    _src, tgt, comb = pair
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"saa sab\nsac \xff\nsad \xff\xfe sae\n")
    rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, bad, tgt, comb, "-o",
                                           str(tmp_path / "o.tsv")))
    assert rc == 2 and "not a UTF-8 corpus" in err and "--format" not in err, err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, fifo, tgt, comb, "-o",
                                           str(tmp_path / "o.tsv")))
    assert rc == 2 and "is a FIFO" in err and "not found" not in err, err
    rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, tmp_path, tgt, comb, "-o",
                                           str(tmp_path / "o.tsv")))
    assert rc == 2 and "is a directory" in err, err


def test_a_paper_run_records_its_rows_only_when_it_finishes(tiny_model, pair, tmp_path):
    """A killed ``--config paper`` run leaves its TSV at the final name: its sidecar says
    ``rows: null`` until the run (resumed) finishes, so the readers refuse it meanwhile."""
    from triemine.decoding import SearchSettings, mine_to_tsv

    src, tgt, _ = pair
    out = tmp_path / "p.tsv"
    search = SearchSettings(mode="pre", beam=3, batch_size=1, sort_window=1)
    s = mine_to_tsv(tiny_model, src, tgt, out, search=search, stop_after_blocks=1)
    assert s.decoded < 10
    assert json.loads((tmp_path / "p.tsv.meta.json").read_text())["rows"] is None
    with pytest.raises(InputError, match="has not finished"):
        read_mined(out)
    mine_to_tsv(tiny_model, src, tgt, out, search=search, resume=True)
    rows = len(out.read_text(encoding="utf-8").splitlines()) - 1
    assert rows > 0 and json.loads((tmp_path / "p.tsv.meta.json").read_text())["rows"] == rows
    assert len(read_mined(out)) == rows
