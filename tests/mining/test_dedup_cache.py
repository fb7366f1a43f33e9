"""The dedup folder's files are sealed (damage is named and rebuilt, the output unchanged); a
refused resume names what changed.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
hang guard in a subprocess.
"""
import os

import pytest

from triemine.cli import mine_main
from triemine.mining.options import MineOptions

from helpers import PAIRS, mine_args, run_main

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- the dedup folder ------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["random bytes", "letters of a kept target"])
def test_a_damaged_unique_corpus_is_named_and_rebuilt_with_the_same_output(
        tiny_model_dir, pair, tmp_path, capsys, caplog, how):
    src, tgt, comb = pair
    out, bt = tmp_path / "o.tsv", tmp_path / "o.bt"
    argv = mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out), "--bitext", str(bt),
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
    assert mine_main(mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out))) == 0
    capsys.readouterr()
    rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out),
                                          "--resume", "--min-margin", "0.5"))
    assert rc == 2 and "changed since the interrupted run: the settings min_margin" in err
    tgt.write_text(tgt.read_text(encoding="utf-8") + "one more line\n", encoding="utf-8")
    rc, err = run_main(capsys, mine_main, mine_args(tiny_model_dir, src, tgt, comb, "-o", str(out),
                                          "--resume"))
    assert rc == 2 and "the target corpus's content" in err and "settings" not in \
        err.split("changed since the interrupted run:")[1]


def test_the_resume_key_names_the_exact_rows_only_with_coverage(tiny_model_dir, pair):
    from triemine.mining.run import _settings_digest, _what_differs
    from triemine.models.model_dir import load_model_dir
    from triemine.scoring.rows import JUDGE_ROWS

    src, tgt, _ = pair
    model = load_model_dir(tiny_model_dir)
    plain = _settings_digest(model, src, tgt, MineOptions.of("combined"))
    judged = _settings_digest(model, src, tgt, MineOptions.of("judge"))
    assert "exact_rows" not in plain and judged["exact_rows"] == list(JUDGE_ROWS)
    # a job stored before the exact pass gave these rows is not resumed: it lacks their columns
    older = {k: v for k, v in judged.items() if k != "exact_rows"}
    assert _what_differs(older, judged, src, tgt) == "the exact rows"
