"""Bitext formats (triemine.filtering.formats): each written and read back, compressed too."""
from __future__ import annotations

import gzip
import json
import lzma
import os
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml
import zstandard

from triemine.errors import InputError
from triemine.filtering import formats
from triemine.filtering.selection import write_bitext, write_pairs, write_union
from triemine.io.tsv import Mined, read_meta, record_bitext, write_mined

SRC = ["你好 <b>&amp; \"quoted\"", "ctrl\x01char\x1f and\rcr", "tab\there", "plain"]
TGT = ["hello", "line\nbreak", "z", "last > first"]
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


@pytest.fixture
def mined(tmp_path):
    """A mining TSV read back, with a model directory recording zh -> en."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "triemine-model.json").write_text(json.dumps(
        {"format": 1, "source_lang": "zh", "target_lang": "en"}))
    m = Mined.from_columns(["s1", "s2", "s3", "s4"], ["t1", "t2", "t3", "t4"], SRC, TGT, {
        "score": [-1.5, -2.25, -0.125, -9.0], "ce_word": [0.5, 0.75, 1 / 3, 3.0],
        "ce_token": [0.4, 0.6, 0.2, 2.0], "combined": [1.0, 0.5, 0.25, -1.0],
        "origin": [1, 3, 2, 1]}, meta={"model_path": str(model)})
    return m


KEPT = np.array([2, 0, 1])


def test_registry_names_the_formats():
    assert list(formats.FORMATS) == ["tsv", "moses", "tmx", "jsonl", "hf"]
    with pytest.raises(InputError, match="unknown bitext format 'csv'"):
        write_bitext([("a", "b")], "x", "csv")
    assert formats.output_paths("moses", "out.gz", ("zh", "en")) == [
        ("out.zh.gz", False), ("out.en.gz", False)]
    assert formats.output_paths("hf", "d", ("zh", "en")) == [("d", True)]


def test_tsv_bytes_unchanged(tmp_path, mined):
    assert write_pairs(mined, KEPT, tmp_path / "b.txt") == 3
    assert (tmp_path / "b.txt").read_bytes() == (
        "tab here\tz\n你好 <b>&amp; \"quoted\"\thello\nctrl\x01char\x1f and cr\tline break\n"
    ).encode("utf-8")
    assert write_bitext([("a\tb", "c")], tmp_path / "t.txt") == 1
    assert (tmp_path / "t.txt").read_bytes() == b"a b\tc\n"


def test_moses_files_line_aligned(tmp_path, mined):
    assert write_pairs(mined, KEPT, tmp_path / "m", "moses") == 3
    zh = (tmp_path / "m.zh").read_text(encoding="utf-8").split("\n")
    en = (tmp_path / "m.en").read_text(encoding="utf-8").split("\n")
    assert len(zh) == len(en) == 4 and zh[-1] == en[-1] == ""
    assert zh[:3] == ["tab here", SRC[0], "ctrl\x01char\x1f and cr"]
    assert en[:3] == ["z", "hello", "line break"]
    with pytest.raises(InputError, match="two language codes"):
        write_pairs(mined, KEPT, tmp_path / "m2", "moses", "en", "en")


def test_tmx_parses_back_with_escaping_and_props(tmp_path, mined, caplog):
    assert write_pairs(mined, KEPT, tmp_path / "b.tmx", "tmx") == 3
    root = ET.parse(tmp_path / "b.tmx").getroot()
    assert root.tag == "tmx" and root.get("version") == "1.4"
    header = root.find("header")
    assert header.get("srclang") == "zh" and header.get("segtype") == "sentence"
    tus = root.findall("body/tu")
    assert len(tus) == 3
    for tu, i in zip(tus, KEPT.tolist()):
        props = {p.get("type"): p.text for p in tu.findall("prop")}
        assert props["x-src_id"] == mined.src_ids[i] and props["x-tgt_id"] == mined.tgt_ids[i]
        for col in ("score", "ce_word", "ce_token", "combined", "origin"):
            assert float(props[f"x-{col}"]) == mined.numeric[col][i]
        tuvs = tu.findall("tuv")
        assert [t.get(XML_LANG) for t in tuvs] == ["zh", "en"]
        assert tuvs[1].find("seg").text == TGT[i]  # newlines kept, XML-escaped text exact
        want = SRC[i].replace("\x01", "\ufffd").replace("\x1f", "\ufffd")
        assert tuvs[0].find("seg").text == want  # control characters replaced, \r kept
    assert "2 character(s) XML 1.0 cannot hold" in caplog.text


def test_jsonl_every_column(tmp_path, mined):
    assert write_pairs(mined, KEPT, tmp_path / "b.jsonl", "jsonl") == 3
    recs = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text("utf-8").splitlines()]
    assert list(recs[0]) == ["src_id", "tgt_id", "src", "tgt", "score", "ce_word", "ce_token",
                             "combined", "origin"]
    for rec, i in zip(recs, KEPT.tolist()):
        assert (rec["src_id"], rec["tgt_id"], rec["src"], rec["tgt"]) == (
            mined.src_ids[i], mined.tgt_ids[i], SRC[i], TGT[i])
        assert all(rec[c] == mined.numeric[c][i] for c in mined.numeric)  # full precision


def test_union_of_two_directions(tmp_path, mined):
    # the l2->l1 TSV: ids and texts swapped; its row for (s1, t1) is the l1->l2 one's twin
    rev = Mined.from_columns(["t1", "t9"], ["s1", "s9"], ["hello", "en only"], ["zh1", "zh only"],
                             {"score": [-3.0, -4.0], "bicleaner": [0.9, 0.8]})
    assert write_union([mined.take(np.array([0, 1])), rev], tmp_path / "u.jsonl", "jsonl") == 3
    recs = [json.loads(x) for x in (tmp_path / "u.jsonl").read_text("utf-8").splitlines()]
    assert [(r["src_id"], r["tgt_id"], r["direction"]) for r in recs] == [
        ("s1", "t1", "l1-l2"), ("s2", "t2", "l1-l2"), ("s9", "t9", "l2-l1")]
    assert recs[2]["src"] == "zh only" and recs[2]["bicleaner"] == 0.8
    assert recs[0]["bicleaner"] is None and recs[2]["ce_word"] is None


def check_hf_card(folder, mined):
    """The file contract of an hf folder: the data file and the declared features."""
    text = (folder / "README.md").read_text("utf-8")
    card = yaml.safe_load(text.split("---\n")[1])
    assert card["configs"] == [{"config_name": "default", "data_files": [
        {"split": "train", "path": "train.jsonl"}]}]
    feats = {f["name"]: f["dtype"] for f in card["dataset_info"]["features"]}
    assert feats == {"src_id": "string", "tgt_id": "string",
                     "translation": {"translation": {"languages": ["zh", "en"]}},
                     **{c: "float64" for c in mined.numeric}}
    assert card["dataset_info"]["splits"] == [{"name": "train", "num_examples": 3}]
    recs = [json.loads(x) for x in (folder / "train.jsonl").read_text("utf-8").splitlines()]
    assert [set(r) for r in recs] == [set(feats)] * 3
    assert recs[1]["translation"] == {"zh": SRC[0], "en": TGT[0]}


LOAD = """
import json, sys, datasets
ds = datasets.load_dataset(sys.argv[1], split="train")
print(json.dumps({"features": sorted(ds.features),
                  "translation": type(ds.features["translation"]).__name__,
                  "rows": [dict(r) for r in ds]}, ensure_ascii=False))
"""


@pytest.mark.cluster
def test_hf_folder_loads(tmp_path, mined):
    out = tmp_path / "hf"
    assert write_pairs(mined, KEPT, out, "hf") == 3
    assert sorted(os.listdir(out)) == ["README.md", "train.jsonl"]
    check_hf_card(out, mined)
    # datasets itself, when this Python has it or $TRIEMINE_DATASETS_PYTHON names one that does
    python = os.environ.get("TRIEMINE_DATASETS_PYTHON")
    try:
        import datasets  # noqa: F401
        import sys
        python = sys.executable
    except ImportError:
        pass
    if python:
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"))
        got = json.loads(subprocess.run([python, "-c", LOAD, str(out)], env=env, check=True,
                                        capture_output=True, text=True).stdout)
        assert got["translation"] == "Translation" and len(got["rows"]) == 3
        assert got["rows"][1]["translation"] == {"zh": SRC[0], "en": TGT[0]}
        assert got["rows"][0]["ce_word"] == pytest.approx(1 / 3, abs=0)
    # written again over itself: replaced whole; a folder of other files is refused
    assert write_pairs(mined, KEPT[:1], out, "hf") == 1
    assert len((out / "train.jsonl").read_text().splitlines()) == 1
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(InputError, match="not a bitext folder"):
        write_pairs(mined, KEPT, other, "hf")
    assert os.listdir(other) == ["keep.txt"]
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p or ".old" in p]


DECOMPRESS = {".gz": gzip.decompress, ".xz": lzma.decompress,
              ".zst": lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)}


@pytest.mark.parametrize("suffix", sorted(DECOMPRESS))
def test_compressed_outputs(tmp_path, mined, suffix):
    plain = tmp_path / "b.jsonl"
    write_pairs(mined, KEPT, plain, "jsonl")
    packed = tmp_path / f"b.jsonl{suffix}"
    assert write_pairs(mined, KEPT, packed, "jsonl") == 3
    assert DECOMPRESS[suffix](packed.read_bytes()) == plain.read_bytes()
    write_pairs(mined, KEPT, tmp_path / f"m{suffix}", "moses")
    assert (
        DECOMPRESS[suffix]((tmp_path / f"m.en{suffix}").read_bytes()) == b"z\nhello\nline break\n"
    )
    with pytest.raises(InputError, match="drop the"):
        write_pairs(mined, KEPT, tmp_path / f"d{suffix}", "hf")


def test_languages_given_recorded_or_default(mined, caplog):
    assert formats.languages(mined.meta) == ("zh", "en")
    assert formats.languages(mined.meta, "de", "fr") == ("de", "fr")
    assert formats.languages({}) == ("l1", "l2") and "not known" in caplog.text


def test_failed_write_leaves_nothing(tmp_path, mined):
    class Boom(Exception):
        pass

    def rows():
        yield "s", "t", "a", "b", None, ()
        raise Boom
    for fmt in ("moses", "tmx", "hf"):
        with pytest.raises(Boom):
            write_bitext(formats.Pairs([], rows), tmp_path / "x", fmt, "zh", "en")
    assert os.listdir(tmp_path) == ["model"]


def test_meta_records_the_bitext(tmp_path, mined):
    tsv = tmp_path / "out.tsv"
    write_mined(mined, str(tsv))
    n = write_pairs(mined, KEPT, tmp_path / "b.tmx", "tmx")
    record_bitext(tsv, tmp_path / "b.tmx", "tmx", n, ("zh", "en"))
    meta = read_meta(tsv)
    assert meta["bitext"] == {"path": str(tmp_path / "b.tmx"), "format": "tmx", "pairs": 3,
                              "languages": ["zh", "en"]}
    assert meta["rows"] == 4  # the rest of the sidecar kept
