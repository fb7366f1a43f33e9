"""trie-build end to end: tiny sentencepiece model trained here, fairseq dict written from it."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import sentencepiece as spm

from triemine.cli import trie_build_main
from triemine.errors import InputError
from triemine.trie import Trie, build_trie_from_corpus, dictionary_fingerprint
from triemine.trie.build import load_dictionary

WORDS = ("the a of to and in is was for on with as by at from that this city river house "
         "music history team season school people year first new old small large north south "
         "played built called known became German French station church village").split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A 300-line corpus, a 100-piece unigram spm trained on it, a dict.txt of all its pieces."""
    d = tmp_path_factory.mktemp("tiny")
    rng = random.Random(7)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))).capitalize() + "."
             for _ in range(300)]
    (d / "train.txt").write_text("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.Train(input=str(d / "train.txt"), model_prefix=str(d / "sp"),
                                   vocab_size=100, model_type="unigram", bos_id=-1, eos_id=-1,
                                   unk_id=0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(d / "sp.model"))
    pieces = [sp.IdToPiece(i) for i in range(1, sp.GetPieceSize())]
    (d / "dict.txt").write_text("".join(f"{p} {1000 - i}\n" for i, p in enumerate(pieces)))
    # a dictionary missing one piece that the corpus certainly uses
    used = sp.Encode(lines[0], out_type=str)
    (d / "short.txt").write_text("".join(f"{p} 1\n" for p in pieces if p != used[1]))
    return d, lines, sp, used[1]


def test_trie_build_end_to_end(tiny, tmp_path, capsys):
    d, lines, sp, _ = tiny
    corpus = tmp_path / "target.tsv"
    rows = [f"en-{i}\t{t}" for i, t in enumerate(lines[:40])]
    rows[5] = "en-5\t"          # empty sentence: reported, not inserted, not renumbered
    rows[9] = rows[9].split("\t")[0] + "\t" + lines[3]  # duplicate text of line 3 (index 3)
    corpus.write_text("\n".join(rows) + "\n")
    out = tmp_path / "t.trie"
    rc = trie_build_main(["--spm", str(d / "sp.model"), "--dict", str(d / "dict.txt"), "-q",
                          str(corpus), "-o", str(out)])
    assert rc == 0
    report = capsys.readouterr().out
    assert "empty lines          1 (lines 6)" in report and "bytes/node" in report
    assert "unique lines         38" in report

    trie = Trie.load(out)
    dic = load_dictionary(d / "dict.txt")
    assert trie.eos == dic.eos() and trie.dict_size == len(dic)
    assert trie.dict_fingerprint == dictionary_fingerprint(dic)
    assert trie.metadata["source_format"] == "tsv" and trie.metadata["nbest"] == 1
    assert len(trie) == 39 and trie.n_lines == 39 and trie.n_terminals == 38
    for i, text in enumerate(lines[:40]):
        if i == 5:
            continue
        ids = [dic.index(p) for p in sp.Encode(lines[3] if i == 9 else text, out_type=str)]
        node = trie.walk(ids + [dic.eos()])
        assert i in trie.terminal_ids(node).tolist()
    assert trie.terminal_ids(trie.walk(
        [dic.index(p) for p in sp.Encode(lines[3], out_type=str)] + [dic.eos()])).tolist() == [3, 9]
    # iteration gives back every line's text through the dictionary
    for seq, lids in trie:
        text = sp.DecodePieces([dic[t] for t in seq[:-1]])
        for lid in lids.tolist():
            assert text == (lines[3] if lid == 9 else lines[lid])


def test_nbest_inserts_several_segmentations_per_line(tiny, tmp_path):
    d, lines, sp, _ = tiny
    corpus = tmp_path / "plain.txt"
    corpus.write_text("\n".join(lines[:20]) + "\n")
    one, s1 = build_trie_from_corpus(corpus, d / "sp.model", d / "dict.txt")
    three, s3 = build_trie_from_corpus(corpus, d / "sp.model", d / "dict.txt", nbest=3)
    assert s1.sequences == 20 and s3.sequences > 20 and s3.sequences <= 60
    assert three.n_lines == 20 and three.metadata["nbest"] == 3
    dic = load_dictionary(d / "dict.txt")
    per_line = {}
    for seq, lids in three:
        text = sp.DecodePieces([dic[t] for t in seq[:-1]])
        for lid in lids.tolist():
            assert text == lines[lid]
            per_line[lid] = per_line.get(lid, 0) + 1
    assert sorted(per_line) == list(range(20)) and max(per_line.values()) > 1
    for seq, _ in one:  # the 1-best segmentation is among the n-best ones
        assert three.contains(seq)


def test_piece_missing_from_dictionary(tiny, tmp_path, capsys):
    d, lines, sp, missing = tiny
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n" + lines[0] + "\n")
    argv = ["--spm", str(d / "sp.model"), "--dict", str(d / "short.txt"), "-q", str(corpus),
            "-o", str(tmp_path / "x.trie")]
    assert trie_build_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trie-build: error: {corpus}:3: sentencepiece piece {missing!r} "
                          f"is not in the dictionary")
    assert not (tmp_path / "x.trie").exists()
    assert trie_build_main(argv[:-1] + [str(tmp_path / "no-dir" / "x.trie"), "--unk", "map"]) == 2
    assert "cannot write the trie" in capsys.readouterr().err
    assert trie_build_main(argv + ["--unk", "map", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["unk_lines"] == 1 and stats["empty_lines"] == [1, 2] and stats["sentences"] == 1
    trie = Trie.load(tmp_path / "x.trie")
    (seq, lids), = list(trie)
    assert 3 in seq and lids.tolist() == [2]  # <unk> is id 3 in a fairseq dictionary


@pytest.mark.parametrize("setup,where,problem", [
    # more bad lines than good: refused at the first (one bad line is skipped: the next test)
    (lambda d, t: (t / "c.tsv").write_text("a\tHello.\na\tWorld.\na\tAgain.\n"), "c.tsv:2",
     "duplicate id"),
    (lambda d, t: (t / "c.tsv").write_bytes(b"Hello.\nbad \xff\nbad \xfe\n"), "c.tsv:2",
     "invalid UTF-8"),
    (lambda d, t: (t / "dict.txt").write_text("\u2581the 5\nbroken-line\n"), "dict.txt:2",
     "bad dictionary line"),
    (lambda d, t: (t / "sp.model").write_text("not a model"), "sp.model", "not a sentencepiece"),
])
def test_bad_inputs_are_reported_with_file_and_line(tiny, tmp_path, capsys, setup, where, problem):
    d, lines, _, _ = tiny
    (tmp_path / "c.tsv").write_text("Hello.\n")
    (tmp_path / "dict.txt").write_bytes((d / "dict.txt").read_bytes())
    (tmp_path / "sp.model").write_bytes((d / "sp.model").read_bytes())
    setup(d, tmp_path)
    rc = trie_build_main(["--spm", str(tmp_path / "sp.model"), "--dict", str(tmp_path / "dict.txt"),
                          "-q", str(tmp_path / "c.tsv"), "-o", str(tmp_path / "o.trie")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{tmp_path / where}" in err and problem in err
    assert "Traceback" not in err


def test_a_bad_line_is_skipped_reported_and_not_inserted(tiny, tmp_path, capsys):
    d, lines, _, _ = tiny
    (tmp_path / "c.tsv").write_bytes(b"a\tHello.\nb\tbad \xff byte\nc\tWorld.\n")
    rc = trie_build_main(["--spm", str(d / "sp.model"), "--dict", str(d / "dict.txt"),
                          str(tmp_path / "c.tsv"), "-o", str(tmp_path / "o.trie")])
    out = capsys.readouterr().out
    assert rc == 0 and "bad lines skipped" in out and "line 2: invalid UTF-8 at byte 6" in out
    trie = Trie.load(tmp_path / "o.trie")
    assert sorted(int(x) for _, lids in trie for x in lids) == [0, 2]  # line ids 0 and 2 only


def test_dictionary_too_large_for_uint16(tiny, tmp_path):
    d, lines, sp, _ = tiny
    from fairseq.data import Dictionary
    big = Dictionary()
    for i in range(70000):
        big.add_symbol(f"filler{i}")
    for i in range(1, sp.GetPieceSize()):
        big.add_symbol(sp.IdToPiece(i))
    corpus = tmp_path / "c.txt"
    corpus.write_text(lines[0] + "\n" + lines[1] + "\n")
    with pytest.raises(InputError) as info:
        build_trie_from_corpus(corpus, d / "sp.model", big)
    assert info.value.line == 1 and "out of range" in info.value.problem
    assert np.all(np.asarray(sp.Encode(lines[0])) >= 0)
