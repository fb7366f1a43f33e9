"""trie-mine-prepare: each filter on small hand-made inputs, lines and ids kept in place,
compressed input and output, and the error cases through the CLI's exit code and message."""
import gzip
import json
import lzma

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triemine.cli import prepare_main
from triemine.errors import InputError
from triemine.prepare import FILTERS, clean, prepare, read_batches
from triemine.prepare.run import HashCounts
from triemine.prepare.scripts import line_stats

EN = ["The committee approved the new budget for the coming year.",
      "Heavy rain is expected across the north of the country tomorrow.",
      "She has worked as a teacher in the village school for twenty years.",
      "The museum will open a new exhibition of modern paintings next month.",
      "Scientists discovered a new species of frog in the rain forest."]
DE = ["Der Ausschuss hat den neuen Haushalt für das kommende Jahr genehmigt.",
      "Morgen wird im Norden des Landes starker Regen erwartet.",
      "Sie arbeitet seit zwanzig Jahren als Lehrerin an der Dorfschule."]
ZH = ["委员会批准了明年的新预算。", "预计明天全国北部将有大雨。", "她在村里的学校当了二十年老师。",
      "博物馆下个月将举办现代绘画新展览。", "科学家在雨林中发现了一种新的青蛙。"]


def write(path, lines):
    path.write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    return path


def lines_of(path):
    opener = gzip.open if str(path).endswith(".gz") else (
        lzma.open if str(path).endswith(".xz") else open)
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


def test_registry_names_each_filter_once():
    assert list(FILTERS) == ["markup", "length", "boilerplate", "lang", "script"]
    for f in FILTERS.values():
        assert f.drops and isinstance(f.params, tuple)


def test_markup_is_stripped_and_a_line_left_empty_is_dropped(tmp_path):
    src = write(tmp_path / "in.txt", [
        "<p>The committee <b>approved</b> the budget &amp; the plan.</p>",
        "<div><br/></div>",
        "Read more at https://example.com/page?id=3 about the new budget today.",
        "Tabs\tand\x07control\u200bchars are removed from this English line.",
    ] + EN)
    rep = prepare(src, tmp_path / "out.txt", "en")
    out = lines_of(tmp_path / "out.txt")
    assert out[0] == "The committee approved the budget & the plan."
    assert out[1] == ""
    assert out[2] == "Read more at about the new budget today."
    assert out[3] == "Tabs and control chars are removed from this English line."
    assert rep["filters"]["markup"]["dropped"] == 1
    assert rep["filters"]["markup"]["examples"][0] == [2, "<div><br/></div>"]
    assert rep["rewritten"] == 3  # lines 1, 3, 4; line 2 was dropped


def test_clean_keeps_one_line_per_line_even_for_entity_newlines():
    texts = ["a&#10;b", "x &lt;y&gt;", "", "\r\x0b"]
    assert clean(texts) == ["a b", "x <y>", "", ""]


@given(st.lists(st.text(max_size=30), max_size=20))
@settings(max_examples=150, deadline=None)
def test_clean_never_changes_the_number_of_lines(texts):
    texts = [t.replace("\n", " ") for t in texts]
    out = clean(texts)
    assert len(out) == len(texts)
    assert all("\n" not in t and "\t" not in t and t == t.strip(" ") for t in out)


def test_other_language_lines_are_dropped_in_place(tmp_path):
    lines = EN[:2] + DE[:1] + EN[2:4] + DE[1:2] + [""] + EN[4:]
    src = write(tmp_path / "in.txt", lines)
    rep = prepare(src, tmp_path / "out.txt", "en")
    out = lines_of(tmp_path / "out.txt")
    assert len(out) == len(lines)
    expected = [ln if ln in EN else "" for ln in lines]
    assert out == expected
    assert rep["filters"]["lang"]["dropped"] == 2
    assert rep["lang_dropped_as"] == {"de": 2}
    assert rep["empty_in_input"] == 1 and rep["kept"] == len(EN)


def test_script_filter_drops_lines_in_another_script(tmp_path):
    lines = ZH + ["2010 – 2015", "Apple iPhone 11 Pro Max 256GB"]
    src = write(tmp_path / "in.txt", lines)
    rep = prepare(src, tmp_path / "out.txt", "zh", skip=("lang",))
    assert lines_of(tmp_path / "out.txt") == ZH + ["", ""]
    assert rep["filters"]["script"]["dropped"] == 2
    assert rep["filters"]["script"]["params"]["expected_scripts"] == ["Han"]


@pytest.mark.parametrize("lang,lines,options", [
    ("en", EN[:2] + DE[:1] + ["<b>&amp;</b>", "", "Too short.", "word " * 50] + EN[2:],
     {"min_chars": 15, "max_words": 40}),
    ("zh", ZH + ["2010 – 2015", "Apple iPhone 11 Pro Max 256GB", "<p>" + ZH[0] + "</p>"], {}),
])
def test_rule_keeps_is_what_prepare_keeps_line_by_line(tmp_path, lang, lines, options):
    from triemine.prepare.run import rule_keeps

    prepare(write(tmp_path / "in.txt", lines), tmp_path / "out.txt", lang, **options)
    want = [bool(line) for line in lines_of(tmp_path / "out.txt")]
    assert rule_keeps(lines, lang, **options).tolist() == want
    assert not all(want) and any(want)  # both kinds of line in the set


def test_length_filter_counts_characters_and_words(tmp_path):
    lines = EN + ["Too short.", "word " * 50]
    src = write(tmp_path / "in.txt", lines)
    rep = prepare(src, tmp_path / "out.txt", "en", min_chars=15, max_words=40)
    out = lines_of(tmp_path / "out.txt")
    assert out[-2:] == ["", ""] and out[:5] == EN
    assert rep["filters"]["length"]["dropped"] == 2


def test_boilerplate_lines_are_dropped_everywhere(tmp_path):
    lines = ["Home", "Login"] + EN[:2] + ["HOME ", "Accept all cookies 1"] + EN[2:] + [
        "home", "accept all cookies 2", "Accept all cookies 3", "Login"]
    src = write(tmp_path / "in.txt", lines)
    rep = prepare(src, tmp_path / "out.txt", "en", boilerplate=2, skip=("length",),
                  batch_lines=3)
    out = lines_of(tmp_path / "out.txt")
    kept = [i for i, t in enumerate(lines) if t in EN or t == "Login"]  # Login: twice, <= 2
    assert [i for i, t in enumerate(out) if t] == kept
    assert rep["filters"]["boilerplate"]["dropped"] == 6  # "home" x3, "accept all cookies 0" x3
    assert rep["filters"]["boilerplate"]["examples"][0] == [1, "Home"]


def test_hash_counts_match_a_counter():
    rng = np.random.default_rng(0)
    counts = HashCounts()
    counts.FLUSH = 100
    data = rng.integers(-50, 50, size=1000)
    for part in np.array_split(data, 17):
        counts.add(part)
    probe = np.arange(-60, 60)
    want = [int((data == v).sum()) for v in probe]
    assert counts.of(probe).tolist() == want


def test_line_stats_per_line():
    s = line_stats(["中文 text", "", "  a  b ", "12 34"], ("Han",))
    assert s.chars.tolist() == [6, 0, 2, 4]
    assert s.words.tolist() == [2, 0, 2, 2]
    assert s.letters.tolist() == [6, 0, 2, 0]
    assert s.in_script.tolist() == [2, 0, 0, 0]
    assert s.other_runs.tolist() == [1, 0, 2, 0]


def test_script_filter_counts_a_foreign_word_once_in_chinese(tmp_path):
    lines = ["里尔组建了一个名叫Exovedate的议会。", "nmap-A-vtargetip", "China Radio 见 Bamako"]
    src = write(tmp_path / "in.txt", lines)
    prepare(src, tmp_path / "out.txt", "zh", skip=("lang",))
    assert lines_of(tmp_path / "out.txt") == [lines[0], "", ""]


def test_tsv_ids_are_kept_with_an_empty_text(tmp_path):
    lines = [f"zh-{i:03d}\t{t}" for i, t in enumerate(ZH + ["Hello world, this is English text."])]
    src = write(tmp_path / "in.tsv", lines)
    rep = prepare(src, tmp_path / "out.tsv", "zh")
    out = lines_of(tmp_path / "out.tsv")
    assert rep["format"] == "tsv"
    assert out[:5] == lines[:5] and out[5] == "zh-005\t"


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".zst"])
def test_compressed_round_trip(tmp_path, suffix):
    lines = EN + ["<b>Home</b>"] + DE[:1]
    write(tmp_path / "plain.txt", lines)
    prepare(tmp_path / "plain.txt", tmp_path / f"mid{suffix}", "en", skip=("lang",))
    prepare(tmp_path / f"mid{suffix}", tmp_path / "back.txt", "en", skip=("lang",))
    raw = b"".join(b for batch in read_batches(tmp_path / f"mid{suffix}") for b in
                   (x + b"\n" for x in batch))
    assert raw.decode("utf-8").split("\n")[:-1] == EN + ["Home", DE[0]]
    assert lines_of(tmp_path / "back.txt") == EN + ["Home", DE[0]]
    assert (tmp_path / f"mid{suffix}").read_bytes()[:2] != b"Th"  # really compressed


def test_batches_split_anywhere_keep_every_line(tmp_path):
    lines = [f"line {i}" for i in range(2500)] + ["last without newline"]
    (tmp_path / "x.gz").write_bytes(gzip.compress(("\n".join(lines)).encode()))
    got = [ln.decode() for b in read_batches(tmp_path / "x.gz", batch_lines=7) for ln in b]
    assert got == lines


def test_cli_report_and_summary(tmp_path, capsys):
    src = write(tmp_path / "in.txt", EN + DE[:1])
    assert prepare_main([str(src), "-o", str(tmp_path / "out.txt.gz"), "--lang", "en"]) == 0
    err = capsys.readouterr().err
    assert "kept 5 of 6 non-empty lines" in err and "lang 1" in err
    rep = json.loads((tmp_path / "out.txt.gz.report.json").read_text())
    assert rep["filters"]["lang"]["examples"] == [[6, DE[0]]]
    assert lines_of(tmp_path / "out.txt.gz") == EN + [""]


def cli_error(argv, capsys):
    assert prepare_main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_cli_errors(tmp_path, capsys):
    src = write(tmp_path / "in.txt", EN)
    out = tmp_path / "out.txt"
    assert "not found" in cli_error([tmp_path / "none.gz", "-o", out, "--lang", "en"], capsys)
    assert "must not be an input" in cli_error([src, "-o", src, "--lang", "en"], capsys)
    assert "unknown language 'qq'" in cli_error([src, "-o", out, "--lang", "qq"], capsys)
    assert "unknown filter 'nope'" in cli_error([src, "-o", out, "--lang", "en", "--skip",
                                                 "nope"], capsys)
    (tmp_path / "bad.gz").write_bytes(gzip.compress(("\n".join(EN * 50)).encode())[:200])
    err = cli_error([tmp_path / "bad.gz", "-o", out, "--lang", "en"], capsys)
    assert str(tmp_path / "bad.gz") in err and "truncated" in err
    assert not out.exists()


def test_cli_refuses_a_corpus_in_another_language(tmp_path, capsys):
    src = write(tmp_path / "de.txt", DE + EN[:1])
    err = cli_error([src, "-o", tmp_path / "out.txt", "--lang", "en"], capsys)
    assert str(src) in err and "are not 'en'" in err and "de 3" in err
    assert not (tmp_path / "out.txt").exists()


def test_cli_refuses_an_empty_result(tmp_path, capsys):
    src = write(tmp_path / "menu.txt", ["<a href='/'>Home</a>", "<br>", "Home", "Home"])
    err = cli_error([src, "-o", tmp_path / "out.txt", "--lang", "en", "--boilerplate", "1",
                     "--skip", "lang"], capsys)
    assert str(src) in err and "dropped every line" in err and "markup 1" in err
    assert "boilerplate 3" in err
    empty = write(tmp_path / "empty.txt", ["", "  "])
    assert "no text" in cli_error([empty, "-o", tmp_path / "out.txt", "--lang", "en"], capsys)


def test_invalid_utf8_lines_are_dropped_and_named(tmp_path):
    (tmp_path / "in.txt").write_bytes(("\n".join(EN[:2]) + "\n").encode() + b"\xff\xfe bad\n"
                                      + (EN[2] + "\n").encode())
    rep = prepare(tmp_path / "in.txt", tmp_path / "out.txt", "en")
    assert lines_of(tmp_path / "out.txt") == EN[:2] + ["", EN[2]]
    assert rep["bad_lines"] == 1 and rep["bad_line_examples"][0][0] == 3


def test_unknown_option_is_an_input_error(tmp_path):
    src = write(tmp_path / "in.txt", EN)
    with pytest.raises(InputError, match="unknown option 'min_char'"):
        prepare(src, tmp_path / "out.txt", "en", min_char=3)


@pytest.mark.cluster
def test_prepare_bench_runs_on_a_small_input(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from triemine.io.paths import BUCC_ZH_EN, shared_path
    try:
        shared_path(*BUCC_ZH_EN)
    except FileNotFoundError:
        pytest.skip("the shared BUCC sample is not here")
    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(repo / "bench" / "prepare_bench.py"), "--quick",
                          "--lines", "3000", "--record", "--results-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(repo)))
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["lang_id"]["pycld2"]["keep_en_pct"] > 99 and out["scale"]["lines"] == 3000
    (record,) = [json.loads(ln) for ln in (tmp_path / "prepare_bench.jsonl").open()]
    assert record["results"] == out
