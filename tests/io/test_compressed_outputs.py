"""Outputs are compressed by their name or refused before any work; eval and filter read them;
checksum-less zstd files changed in place are refused.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
hang guard in a subprocess.
"""
import gzip
import json
import lzma

import pytest

from triemine.cli import eval_main, filter_main, mine_main, prepare_main
from triemine.errors import InputError
from triemine.io.tsv import write_rows

from helpers import paper_job, run_main

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- compressed outputs ----------------------------------------------------------------------------

def test_outputs_are_compressed_by_their_name_or_refused_before_any_work(
        tiny_model_dir, pair, tmp_path, capsys):
    src, tgt, comb = pair
    for name in ("o.tsv.gz", "o.tsv.xz", "o.tsv.zst"):
        rc, err = run_main(capsys, mine_main, paper_job(tiny_model_dir, src, tgt, "-o",
                                                 str(tmp_path / name)))
        assert rc == 2 and "-o" in err and "drop the" in err and "\n" == err[-1]
        assert err.count("\n") == 1 and not list(tmp_path.glob("o.tsv*"))
    out = tmp_path / "m.tsv"
    assert mine_main(paper_job(tiny_model_dir, src, tgt, "-o", str(out), "--bitext",
                            str(tmp_path / "b.tsv.gz"))) == 0
    assert gzip.decompress((tmp_path / "b.tsv.gz").read_bytes()).count(b"\n") > 0
    rc, err = run_main(capsys, filter_main, [str(out), "--ce-max", "9", "-o",
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


# -- zstd frames without a content checksum
# ----------------------------------------------------------

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
    rc, err = run_main(capsys, prepare_main, argv)
    assert rc == 2 and str(zst) in err and "changed in place" in err and err.count("\n") == 1
    from triemine.io.compression import plain_copy

    with pytest.raises(InputError, match="changed in place"):
        plain_copy(zst)
