"""The Python API (triemine.mine): mines sentence lists and writes a bitext and a TSV; refuses bad
items, arguments and a missing model by name; keeps a tab inside a sentence as text; never
writes its results over an input.

Tiny synthetic model (tests/conftest.py).
"""
import pytest

import triemine
from triemine.errors import InputError
from triemine.io.tsv import read_mined

from helpers import OTHER, PAIRS, snapshot

pytestmark = pytest.mark.usefixtures("tmp_cache")


def test_python_api_mines_lists_and_writes_bitext_and_tsv(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    from triemine.judging.combination import Combination

    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    pairs = PAIRS[:10]
    sources = [s for s, _ in pairs]
    targets = OTHER[:10] + [t for _, t in pairs]
    with pytest.raises(InputError, match="ships no default threshold|not the shipped one"):
        triemine.mine(sources, targets, model=tiny_model_dir, config="combined",
                      encoder="cipher", combination=str(comb), min_margin=0.0)
    res = triemine.mine(sources, targets, model=tiny_model_dir, config="combined",
                        encoder="cipher", combination=str(comb), min_margin=0.0,
                        threshold={"combined": -1e9},
                        output=tmp_path / "all.tsv")
    assert len(res.candidates) == res.summary["candidates"] == len(read_mined(tmp_path / "all.tsv"))
    assert res.summary["kept"] == len(res.pairs) == len(res.kept) > 0
    # one-to-one over every candidate: each source and target at most once, in row order
    assert (
        len({p.src_id for p in res.pairs}) == len({p.tgt_id for p in res.pairs}) == len(res.pairs)
    )
    assert res.kept.tolist() == sorted(res.kept.tolist())
    assert res.selection.rule == "one-to-one" and res.selection.rank_by == "combined"
    right = sum(p.tgt == dict(pairs)[p.src] for p in res.pairs)
    assert right >= 8  # the tiny pair's translations win
    assert res.write_bitext(tmp_path / "b.txt") == len(res.pairs)
    assert (tmp_path / "b.txt").read_text(encoding="utf-8").splitlines()[0] == \
        f"{res.pairs[0].src}\t{res.pairs[0].tgt}"
    res.write_tsv(tmp_path / "kept.tsv")
    assert read_mined(tmp_path / "kept.tsv").src_ids == [p.src_id for p in res.pairs]
    import xml.etree.ElementTree as ET
    assert res.write_bitext(tmp_path / "b.tmx", format="tmx", src_lang="zh",
                            tgt_lang="en") == len(res.pairs)
    units = ET.parse(tmp_path / "b.tmx").getroot().iter("tu")
    assert [[s.text for s in u.iter("seg")] for u in units] == [[p.src, p.tgt] for p in res.pairs]
    with pytest.raises(InputError, match="unknown bitext format"):
        res.write_bitext(tmp_path / "b.x", format="xml")
    with pytest.raises(InputError, match="output"):  # the job's own output is never overwritten
        res.write_bitext(tmp_path / "all.tsv", format="jsonl")
    with pytest.raises(InputError, match="unknown option"):
        triemine.mine(sources, targets, model=tiny_model_dir, bream=3)


# -- 3. the Python API -----------------------------------------------------------------------------

@pytest.mark.parametrize("source,match", [
    ([], r"source: no sentences"),
    (["", "  "], r"source: no sentences"),
    (["ok", None], r"source\[1\]: expected a sentence \(str\), got NoneType"),
    (["ok", 7], r"source\[1\]: expected a sentence \(str\), got int"),
    ([b"bytes"], r"source\[0\]: expected a sentence \(str\), got bytes"),
    (["ok", "two\nlines"], r"source\[1\]: a sentence must not contain a line break"),
    (["ok", "cr\r"], r"source\[1\]: a sentence must not contain a line break"),
    (b"raw bytes", r"source: expected a corpus file path or a list of sentences"),
    (42, r"source: expected a corpus file path or a list of sentences"),
])
def test_the_api_refuses_bad_items_naming_the_argument_and_index(tiny_model_dir, source, match):
    with pytest.raises(triemine.InputError, match=match) as info:
        triemine.mine(source, ["a target"], model=tiny_model_dir)
    assert "triemine-" not in str(info.value)  # no internal temporary path


@pytest.mark.parametrize("kwargs,match", [
    ({"threshold": {"combined": "abc"}}, r"threshold\['combined'\]: expected a finite number"),
    ({"threshold": {"combined": float("nan")}}, r"threshold\['combined'\]"),
    ({"threshold": {"combined": True}}, r"threshold\['combined'\]"),
    ({"threshold": 5.0}, r"threshold: expected a mapping"),
    ({"threshold": {"no_such_score": 1.0}}, r"no_such_score"),
    ({"bream": 3}, r"unknown option\(s\): bream"),
    ({"workers": "2"}, r"option workers: '2' is not a valid value \(expected an integer\)"),
    ({"beam": 2.5}, r"option beam"),
    ({"min_margin": float("inf")}, r"option min_margin"),
    ({"config": 3}, r"config"),
    ({"output": 3}, r"output: expected a file path"),
    ({"resume": "yes"}, r"resume: expected True or False"),
])
def test_the_api_refuses_bad_arguments_by_name(tiny_model_dir, kwargs, match):
    with pytest.raises(triemine.InputError, match=match):
        triemine.mine(["a source"], ["a target"], model=tiny_model_dir, **kwargs)


def test_the_api_refuses_a_missing_model_by_name():
    with pytest.raises(triemine.InputError, match="model: expected a model directory"):
        triemine.mine(["a"], ["b"], model=None)


def test_the_api_keeps_a_tab_inside_a_sentence_as_text(tiny_model_dir, pair, tmp_path):
    """A tab in a list item is part of the sentence (never read as ``id<TAB>sentence``): ids
    are the items' 1-based positions, the text is the whole item (its tab a space in the TSV,
    as every text cell's)."""
    from triemine.api import _corpus_file
    from triemine.io.corpus import read_corpus

    _src, _tgt, comb = pair
    items = ["saa\tsab sac", "sad", "plain one"]
    corpus = read_corpus(_corpus_file(items, tmp_path, "source"))
    assert list(corpus.ids) == ["1", "2", "3"] and list(corpus.texts) == items
    sources = [s for s, _ in PAIRS[:6]]
    sources[2] = sources[2].replace(" ", "\t", 1)
    res = triemine.mine(sources, [t for _, t in PAIRS[:6]], model=tiny_model_dir,
                        config="combined", encoder="cipher", combination=comb, min_margin=0.0,
                        threshold={"combined": -1e9})
    assert set(res.candidates.src_ids) <= {str(i) for i in range(1, 7)}
    assert sources[2].replace("\t", " ") in res.candidates.src


def test_the_api_refuses_writing_its_results_over_an_input(tiny_model_dir, pair, tmp_path):
    src, tgt, comb = pair
    out = tmp_path / "all.tsv"
    res = triemine.mine(src, tgt, model=tiny_model_dir, config="combined", encoder="cipher",
                        combination=comb, min_margin=0.0, threshold={"combined": -1e9},
                        output=out)
    before = snapshot(src, tgt, out)
    for path, write in ((src, res.write_bitext), (out, res.write_bitext), (tgt, res.write_tsv),
                        (str(out) + ".meta.json", res.write_bitext)):
        with pytest.raises(triemine.InputError, match="must not be an input"):
            write(path)
    assert snapshot(src, tgt, out) == before
    with pytest.raises(triemine.InputError,
                       match="output .*is the same file as the source .*must not be an input"):
        triemine.mine(src, tgt, model=tiny_model_dir, output=src)


@pytest.mark.cluster  # a fresh interpreter: the package's import sets it
@pytest.mark.parametrize("given,want", [
    ({}, "PASSIVE"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"),
                                        ({"GOMP_SPINCOUNT": "300000"}, None)])
def test_importing_triemine_lets_openmp_threads_sleep_unless_told_otherwise(given, want):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = "import os, triemine; print(os.environ.get('OMP_WAIT_POLICY'))"
    out = subprocess.run([sys.executable, "-c", code], env={**env, **given}, check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == str(want)


@pytest.mark.cluster
def test_importing_the_api_leaves_the_programs_logging_alone():
    """fairseq configures the root logger at import (DEBUG) and logs INFO lines; a program
    that configured no logging keeps none, and nothing of fairseq's reaches its stderr."""
    import subprocess
    import sys

    code = ("import logging, triemine.api, triemine.cleaning, triemine.decoding.task\n"
            "root = logging.getLogger()\n"
            "print(len(root.handlers), root.level)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", str(logging_warning())], proc.stdout
    assert "tensorboardX" not in proc.stderr and "INFO" not in proc.stderr, proc.stderr


def logging_warning() -> int:
    import logging
    return logging.WARNING
