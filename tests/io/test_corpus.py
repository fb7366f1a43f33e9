"""triemine.io.corpus: plain/TSV detection, ids, empty lines kept in place, file:line errors."""
from __future__ import annotations

import pytest

from triemine.io.corpus import open_corpus, read_corpus
from triemine.errors import InputError
from triemine.io.paths import BUCC_ZH_EN, shared_path


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_plain_lines_keep_positions_and_empty_lines(tmp_path):
    p = write(tmp_path, "a.txt", "first line\n\n  \nvierte Zeile\r\nlast without newline".encode())
    c = read_corpus(p)
    assert c.format == "plain"
    assert c.ids == ["1", "2", "3", "4", "5"]
    assert c.texts == ["first line", "", "", "vierte Zeile", "last without newline"]
    assert c.empty_lines == [2, 3]
    assert c.non_empty == [0, 3, 4] and len(c) == 5


def test_tsv_auto_detection_ids_and_blank_lines(tmp_path):
    p = write(tmp_path, "b.tsv",
              "\ufeffen-1\tHello there.\nen-2\t\t\nen-7\tA\ttab inside\n\nen-9\tEnd\n".encode())
    c = read_corpus(p)
    assert c.format == "tsv"
    assert c.ids == ["en-1", "en-2", "en-7", "", "en-9"]
    assert c.texts == ["Hello there.", "", "A\ttab inside", "", "End"]
    assert c.empty_lines == [2, 4]


def test_auto_falls_back_to_plain(tmp_path, caplog):
    # an id field with a space, or one TSV-looking line in 20: plain text (the latter warned)
    few = "a\tb\n" + "".join(f"plain sentence {i}\n" for i in range(19))
    for data in ("two words\tsentence\n", few):
        c = read_corpus(write(tmp_path, "c.txt", data.encode()))
        assert c.format == "plain" and c.texts == data.splitlines()
    assert "1 of 20 non-blank lines look like id<TAB>sentence" in caplog.text
    c = read_corpus(write(tmp_path, "d.txt", b"x\ty\n"), format="plain")
    assert c.format == "plain" and c.texts == ["x\ty"] and c.ids == ["1"]


@pytest.mark.parametrize("data,fmt,line,problem", [
    (b"a\tone\nb\ttwo\nno tab\nc\tthree\n", "tsv", 3, "no tab"),
    (b"a\tone\nb\ttwo\nno tab\nc\tthree\n", "auto", 3, "no tab"),  # one stray line: still TSV
    (b"a\tone\na\ttwo\nb\tthree\n", "auto", 2, "duplicate id 'a' (first on line 1)"),
    (b"a\tone\nb c\ttwo\nd\tfour\n", "tsv", 2, "bad id 'b c'"),
    (b"a\tone\nb\tbad \xff\xfe here\nc\tthree\n", "auto", 2, "invalid UTF-8 at byte 6"),
    (b"ok\nbad \xff\xfe here\nstill ok\n", "auto", 2, "invalid UTF-8 at byte 4"),
])
def test_a_bad_line_is_skipped_in_place_and_counted(tmp_path, data, fmt, line, problem):
    p = write(tmp_path, "e.tsv", data)
    c = read_corpus(p, format=fmt)
    n = data.count(b"\n")
    assert len(c) == n and c.texts[line - 1] == "" and line in c.empty_lines
    assert list(c.skipped_lines) == [line] and c.problems[0][0] == line
    assert problem in c.problems[0][1]
    good = [i for i in range(n) if i != line - 1]
    assert c.non_empty == good and all(c.texts[i] for i in good)
    if c.format == "tsv":
        assert c.ids[line - 1] == "" and all(c.ids[i] for i in good)
    assert c.skipped_report().startswith(f"{p}: skipped 1 bad line (")
    assert f"line {line}: {problem}" in c.skipped_report()


def test_a_corpus_with_more_bad_lines_than_good_is_refused(tmp_path):
    p = write(tmp_path, "plain.txt", b"one sentence\nanother one\nx\ty\n")
    with pytest.raises(InputError) as info:
        read_corpus(p, format="tsv")
    assert info.value.line == 1 and "no tab" in info.value.problem
    assert "2 of 3 non-blank lines are bad, so this is not a TSV corpus" in info.value.problem
    p = write(tmp_path, "latin1.txt", "café\nthé\nok\n".encode("latin-1"))
    with pytest.raises(InputError) as info:
        read_corpus(p)
    assert info.value.line == 1 and "not a UTF-8 corpus" in info.value.problem
    assert str(info.value).startswith(f"{p}:1: invalid UTF-8")
    c = read_corpus(write(tmp_path, "half.tsv", b"a\tone\nno tab\n"), format="tsv")
    assert list(c.skipped_lines) == [2]  # as many bad as good: skipped, not refused


def test_many_bad_lines_report_the_first_ones(tmp_path):
    rows = [f"s{i}\tsentence {i}" if i % 3 else f"no tab {i}" for i in range(60)]
    c = read_corpus(write(tmp_path, "m.tsv", ("\n".join(rows) + "\n").encode()))
    assert c.format == "tsv" and list(c.skipped_lines) == list(range(1, 61, 3))
    assert [i for i, _ in c.problems] == list(range(1, 31, 3))  # the first ten
    assert "skipped 20 bad lines" in c.skipped_report() and c.skipped_report().endswith("; ...")


def test_missing_file_and_bad_format(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_corpus(tmp_path / "nope.txt")
    with pytest.raises(ValueError):
        read_corpus(write(tmp_path, "g.txt", b"x\n"), format="csv")


def test_real_bucc_sample_english_side():
    c = read_corpus(shared_path(*BUCC_ZH_EN, "zh-en.sample.en"))
    assert c.format == "tsv" and len(c) == 13589
    assert c.ids[0] == "en-000000001" and c.texts[0].startswith("Coalition strategy")
    assert len(set(c.ids)) == len(c.ids)


@pytest.mark.parametrize("reader", [read_corpus, open_corpus])
def test_auto_refuses_a_tsv_that_lost_most_tabs(tmp_path, reader, monkeypatch):
    # 4 of 10 lines id<TAB>sentence, the others without their tab: neither format, refused
    # with the counts (never read silently as plain text with the ids inside the sentences)
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    data = "".join(f"s{i}\tsentence {i}\n" if i < 4 else f"s{i} sentence {i}\n"
                   for i in range(10))
    with pytest.raises(InputError, match="4 of 10 non-blank lines look like id<TAB>sentence"):
        reader(write(tmp_path, "c.txt", data.encode()))


def test_corpus_directory_and_fifo_are_named(tmp_path):
    import os
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO"):
        open_corpus(fifo)
    with pytest.raises(InputError, match="is a directory"):
        open_corpus(tmp_path)
    with pytest.raises(InputError, match="corpus file not found"):
        open_corpus(tmp_path / "missing")
    with pytest.raises(InputError, match="is a FIFO"):
        read_corpus(fifo)  # never blocks waiting for a writer
