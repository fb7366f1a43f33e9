"""triemine.corpus: plain/TSV detection, ids, empty lines kept in place, errors with file:line."""
from __future__ import annotations

import pytest

from triemine.corpus import read_corpus
from triemine.errors import InputError
from triemine.paths import BUCC_ZH_EN, shared_path


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
    p = write(tmp_path, "b.tsv", "\ufeffen-1\tHello there.\nen-2\t\t\nen-7\tA\ttab inside\n\nen-9\tEnd\n".encode())
    c = read_corpus(p)
    assert c.format == "tsv"
    assert c.ids == ["en-1", "en-2", "en-7", "", "en-9"]
    assert c.texts == ["Hello there.", "", "A\ttab inside", "", "End"]
    assert c.empty_lines == [2, 4]


def test_auto_falls_back_to_plain(tmp_path):
    # one line without a tab, or an id field with a space: plain text
    for data in ("a\tb\nno tab here\n", "two words\tsentence\n"):
        c = read_corpus(write(tmp_path, "c.txt", data.encode()))
        assert c.format == "plain" and c.texts == data.splitlines()
    c = read_corpus(write(tmp_path, "d.txt", b"x\ty\n"), format="plain")
    assert c.format == "plain" and c.texts == ["x\ty"] and c.ids == ["1"]


@pytest.mark.parametrize("data,line,problem", [
    (b"a\tone\nb\ttwo\nno tab\n", 3, "no tab"),
    (b"a\tone\na\ttwo\n", 2, "duplicate id 'a' (first on line 1)"),
    (b"a\tone\nb c\ttwo\n", 2, "bad id"),
])
def test_tsv_errors_name_file_and_line(tmp_path, data, line, problem):
    p = write(tmp_path, "e.tsv", data)
    with pytest.raises(InputError) as info:
        read_corpus(p, format="tsv")
    assert info.value.line == line and problem in info.value.problem
    assert str(info.value).startswith(f"{p}:{line}: ")


def test_invalid_utf8_names_the_line(tmp_path):
    p = write(tmp_path, "f.txt", b"ok\nstill ok\nbad \xff\xfe here\n")
    with pytest.raises(InputError) as info:
        read_corpus(p)
    assert info.value.line == 3 and "invalid UTF-8 at byte 4" in info.value.problem


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
