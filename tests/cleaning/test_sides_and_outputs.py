"""trie-mine-score's newest surfaces: pairs read by language (TMX, JSON ``translation``), every
argument checked before a model loads, its outputs compressed by name and locked; the same
``min_prob`` rules in trie-mine, trie-mine-filter, ``triemine.mine`` and ``triemine.score``."""
import gzip
import json
import logging
import os
import socket

import pytest

from triemine.cleaning import score
from triemine.cleaning.job import write_scores
from triemine.cleaning.pairs import Bitext, primary_subtag, read_pairs
from triemine.cli import score_main
from triemine.errors import InputError, TrieMineError

PAIRS = [("你好。", "Hello."), ("再见！", "Bye!"), ("谢谢", "Thanks")]
ZH_EN = ("zh", "en")


def _tmx(path, first, second, srclang, reverse=False):
    """A TMX of :data:`PAIRS` whose ``<tuv>`` come as ``first`` (the English) and ``second``
    (the Chinese) language tags (or the other way round with ``reverse``)."""
    def tuv(lang, text):
        return f'<tuv xml:lang="{lang}"><seg>{text}</seg></tuv>' if lang else \
            f"<tuv><seg>{text}</seg></tuv>"
    tus = "".join("<tu>" + (tuv(second, s) + tuv(first, t) if reverse else
                            tuv(first, t) + tuv(second, s)) + "</tu>\n" for s, t in PAIRS)
    path.write_text(f'<?xml version="1.0"?>\n<tmx version="1.4"><header srclang="{srclang}"/>'
                    f"<body>\n{tus}</body></tmx>\n", encoding="utf-8")
    return path


def test_primary_subtags():
    assert [primary_subtag(t) for t in ("zh-CN", "zh-Hant-TW", "EN-gb", "zh_TW", "", None)] == \
        ["zh", "zh", "en", "zh", "", ""]


@pytest.mark.parametrize("first,second,srclang", [
    ("en-US", "zh-CN", "zh"), ("en-GB", "zh-Hant-TW", "zh-CN"), ("EN", "ZH", "*all*"),
    ("", "zh", "zh"), ("en", "", "en")])
def test_tmx_sides_are_chosen_by_language_whatever_the_order(tmp_path, first, second, srclang):
    path = _tmx(tmp_path / "m.tmx", first, second, srclang)
    bt = read_pairs(path, langs=ZH_EN)
    assert list(zip(bt.src, bt.tgt)) == PAIRS
    assert list(zip(*[read_pairs(path, langs=("zh-CN", "en-US")).src])) == \
        list(zip(*[bt.src]))  # the model's tags are matched by primary subtag too


def test_region_subtags_and_srclang_orient_without_the_models_languages(tmp_path):
    bt = read_pairs(_tmx(tmp_path / "m.tmx", "en-US", "zh-CN", "zh"))
    assert list(zip(bt.src, bt.tgt)) == PAIRS


def test_an_en_zh_memory_is_read_the_models_way_round_with_a_warning(tmp_path, caplog):
    path = _tmx(tmp_path / "enzh.tmx", "en", "zh", "en")
    with caplog.at_level(logging.WARNING):
        bt = read_pairs(path, langs=ZH_EN)
    assert list(zip(bt.src, bt.tgt)) == PAIRS and bt.swapped == 3
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "enzh.tmx" in said[0] and "give the en side first" in said[0]
    # a zh->en memory whose segments list en first: the order is named, not a direction
    caplog.clear()
    path = _tmx(tmp_path / "zhen.tmx", "en-US", "zh", "zh")
    with caplog.at_level(logging.WARNING):
        bt = read_pairs(path, langs=ZH_EN)
    said = [r.getMessage() for r in caplog.records]
    assert list(zip(bt.src, bt.tgt)) == PAIRS and "en->zh" not in said[0], said
    assert "give the en side first" in said[0] and "zh as the source" in said[0]


def test_hf_translation_objects_are_read_by_key(tmp_path, caplog):
    path = tmp_path / "hf.jsonl"
    path.write_text("".join(json.dumps({"translation": {"en": t, "zh": s}}, ensure_ascii=False)
                            + "\n" for s, t in PAIRS), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        bt = read_pairs(path, langs=ZH_EN)
    assert list(zip(bt.src, bt.tgt)) == PAIRS and bt.swapped == 3 and caplog.records
    path.write_text("".join(json.dumps({"translation": {"zh-CN": s, "en-US": t}},
                                       ensure_ascii=False) + "\n" for s, t in PAIRS),
                    encoding="utf-8")
    bt = read_pairs(path, langs=ZH_EN)
    assert list(zip(bt.src, bt.tgt)) == PAIRS and bt.swapped == 0


def test_a_file_of_another_language_pair_is_refused_naming_file_line_and_languages(tmp_path):
    path = tmp_path / "de.jsonl"
    path.write_text(json.dumps({"translation": {"de": "Hallo", "en": "Hello"}}) + "\n",
                    encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_pairs(path, langs=ZH_EN)
    assert exc.value.line == 1 and "de.jsonl" in str(exc.value)
    assert "languages de, en do not fit the model's zh->en" in str(exc.value)
    with pytest.raises(InputError, match=r"languages en, de-DE do not fit"):
        read_pairs(_tmx(tmp_path / "de.tmx", "en", "de-DE", "de"), langs=ZH_EN)


def _fake_model(d, langs=ZH_EN):
    """A model directory that passes the checks made before loading (its checkpoint is no
    checkpoint: loading it would fail, so a test reaching the load fails)."""
    d.mkdir()
    (d / "triemine-model.json").write_text(json.dumps(
        {"format": 1, "source_lang": langs[0], "target_lang": langs[1]}), encoding="utf-8")
    for name in ("checkpoint.pt", f"dict.{langs[0]}.txt", f"dict.{langs[1]}.txt", "source.spm"):
        (d / name).write_bytes(b"")
    return d


@pytest.fixture
def pairs_tsv(tmp_path):
    p = tmp_path / "p.tsv"
    p.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    return p


REFUSED = [
    (dict(k=0), r"^k: expected a whole number >= 1, got 0"),
    (dict(k=-3), r"^k: expected a whole number >= 1"),
    (dict(k=2.5), r"^k: expected a whole number"),
    (dict(min_prob="abc"), r"--min-prob: expected a finite number, got 'abc'"),
    (dict(min_prob=1.5), r"--min-prob must be in \(0, 1\)"),
    (dict(min_prob=0.5, threshold=3.0), "give --min-prob or --threshold, not both"),
    (dict(threshold=float("nan")), "--threshold: expected a finite number"),
    (dict(encoder="bogus"), "encoder: unknown sentence encoder 'bogus'"),
    (dict(langs="zh"), r"--langs: expected two language codes"),
    (dict(langs=("xx", "yy")), r"unknown language 'xx' for --langs"),
    (dict(config="paper"), "paper"),
    (dict(config="mt-only"), r"--config mt-only: its combined score needs ret_margin"),
    (dict(config="mt-only", threshold=3.0), r"--config mt-only: its combined score needs"),
    (dict(workers="2"), r"^workers: expected a whole number >= 0, got '2'"),
    (dict(workers=-1), r"^workers: expected a whole number >= 0"),
    (dict(output=None), r"^output: expected a file path, got None"),
    (dict(resume="yes"), r"^resume: expected True or False"),
    (dict(precision="fp8"), r"--precision 'fp8': choose from fp32, bf16, fp16"),
    (dict(precision="fp16"), r"--precision fp16 runs on a GPU only"),
    (dict(bicleaner=True, bicleaner_model="/no/such/bicleaner.yaml"),
     "Bicleaner model not found"),
    (dict(config="judge", judge="/no/such/judge.json"), "no such judge file"),
    (dict(config="judge", density=1.5), r"--density must be <= 0.999999"),
    # the judge's settings by their one declaration, as trie-mine checks them
    (dict(config="judge", density=1e-9), r"--density must be >= 1e-06"),
    (dict(config="judge", judge=123), r"^--judge: 123 is not a valid value \(expected a file "
                                      r"path\)"),
    (dict(config="combined", judge="/no/such/judge.json"),
     "--judge applies to a configuration with a learned judge"),
    (dict(config="combined", density=0.3),
     "--density applies to a configuration with a learned judge"),
]


@pytest.mark.parametrize("given,message", REFUSED, ids=[str(g) for g, _ in REFUSED])
def test_score_refuses_every_bad_argument_before_loading_the_model(tmp_path, pairs_tsv, given,
                                                                  message):
    model = _fake_model(tmp_path / "m")
    kw = {"model": model, "output": tmp_path / "out.tsv", **given}
    with pytest.raises(TrieMineError, match=message):
        score(pairs_tsv, **kw)
    assert not (tmp_path / "out.tsv").exists()


def test_score_names_a_missing_file_of_a_moses_pair(tmp_path):
    (tmp_path / "a.zh").write_text("你好\n", encoding="utf-8")
    with pytest.raises(InputError, match="no such file") as exc:
        score((str(tmp_path / "a.zh"), str(tmp_path / "missing.en")),
              model=_fake_model(tmp_path / "m"), output=tmp_path / "o.tsv")
    assert exc.value.path.endswith("missing.en")


def test_a_bitext_into_a_missing_folder_is_refused_before_anything_is_written(tmp_path,
                                                                              pairs_tsv):
    with pytest.raises(InputError, match="does not exist"):
        score(pairs_tsv, model=_fake_model(tmp_path / "m"), output=tmp_path / "o.tsv",
              bitext=str(tmp_path / "no" / "kept.txt"))
    assert not (tmp_path / "o.tsv").exists()


def test_a_bitext_another_job_writes_is_refused_before_loading(tmp_path, pairs_tsv):
    kept = tmp_path / "kept.txt"
    (tmp_path / "kept.txt.lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")
    with pytest.raises(InputError, match=r"another job \(pid \d+\) is writing .*kept.txt"):
        score(pairs_tsv, model=_fake_model(tmp_path / "m"), output=tmp_path / "o.tsv",
              bitext=str(kept))
    assert not (tmp_path / "o.tsv.lock").exists()  # -o's lock is let go


def test_a_file_of_other_languages_is_refused_before_loading(tmp_path):
    path = _tmx(tmp_path / "de.tmx", "en", "de", "de")
    with pytest.raises(InputError, match="do not fit the model's zh->en"):
        score(path, model=_fake_model(tmp_path / "m"), output=tmp_path / "o.tsv")


@pytest.mark.parametrize("suffix,magic", [(".gz", b"\x1f\x8b"), (".xz", b"\xfd7zXZ"),
                                          (".zst", b"\x28\xb5\x2f\xfd")])
def test_the_scores_tsv_is_compressed_when_named_so(tmp_path, suffix, magic):
    import numpy as np

    from triemine.io import decompressed, sniff

    bt = Bitext("p", "list")
    for i, (s, t) in enumerate(PAIRS, 1):
        bt.add(i, s, t + "\0")
    path = tmp_path / f"scores.tsv{suffix}"
    write_scores(path, bt, {"prob": np.array([0.5, 0.25, float("nan")])}, ["scored"] * 3)
    raw = path.read_bytes()
    assert raw.startswith(magic)
    text = b"".join(decompressed(path, sniff(path))).decode("utf-8")
    rows = text.splitlines()
    assert rows[0] == "line\tid\tsrc\ttgt\tstatus\tprob" and len(rows) == 4
    assert rows[1] == "1\t1\t你好。\tHello. \tscored\t0.500000" and "\0" not in text
    if suffix == ".gz":
        assert gzip.decompress(raw).decode("utf-8") == text


def _error(capsys) -> str:
    """The one error line of a refusal on stderr (argparse's usage lines before it aside)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith((
        "usage:", " "))]
    assert len(lines) == 1, err
    return lines[0]


def test_cli_refusals_are_one_line_exit_2_before_the_model(tmp_path, pairs_tsv, capsys):
    model = str(_fake_model(tmp_path / "m"))
    for extra, want in ((["--workers", "-1"], "workers: expected a whole number >= 0"),
                        (["--langs", "xx", "yy"], "unknown language 'xx' for --langs"),
                        (["--min-prob", "0.5", "--threshold", "3"], "not both")):
        try:
            rc = score_main([str(pairs_tsv), "--model", model, "-o", str(tmp_path / "o.tsv"),
                             *extra])
        except SystemExit as exc:
            rc = exc.code
        err = _error(capsys)
        assert rc == 2 and want in err, (extra, err)
        assert "Traceback" not in err and not (tmp_path / "o.tsv").exists()


def test_min_prob_with_a_threshold_is_refused_by_filter_and_mine(tmp_path, capsys):
    from triemine.cli import filter_main, mine_main

    mined = tmp_path / "m.tsv"
    mined.write_text("src_id\ttgt_id\n", encoding="utf-8")
    for main, argv in (
            (filter_main, [str(mined), "--bitext", str(tmp_path / "b.txt"), "--min-prob", "0.5",
                           "--threshold", "combined=3"]),
            (mine_main, ["--model", str(tmp_path), "--source", "s", "--target", "t", "-o",
                         str(tmp_path / "o.tsv"), "--bitext", str(tmp_path / "b.txt"),
                         "--min-prob", "0.5", "--threshold", "combined=3"])):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        err = _error(capsys)
        assert rc == 2 and "not both" in err, err


def test_triemine_mine_takes_min_prob_as_trie_mine_does(tmp_path):
    import triemine
    from triemine.filtering.selection import min_prob_cut
    from triemine.judging.shipped import shipped_calibration

    name, value = min_prob_cut("combined", "combined", 0.5, "min_prob")
    assert name == "combined" and abs(shipped_calibration("combined", "mined")(value) - 0.5) < 1e-9
    assert min_prob_cut("judge", "judge", 0.7, "min_prob") == ("prob", 0.7)
    for kw, want in ((dict(min_prob="abc"), r"min_prob: expected a number in \(0, 1\)"),
                     (dict(min_prob=0.5, threshold={"combined": 3.0}), "not both"),
                     (dict(min_prob=0.5, config="paper"), "^min_prob: ")):
        with pytest.raises(InputError, match=want):
            triemine.mine(["你好"], ["Hello"], model=tmp_path, **kw)


def test_score_takes_precision_as_trie_mine_does(tmp_path, tiny_model, cipher_combination):
    from triemine.testing.tiny_model import synthetic_pairs

    path = tmp_path / "p.tsv"
    path.write_text("".join(f"{a}\t{b}\n" for a, b in synthetic_pairs(6, seed=3)),
                    encoding="utf-8")
    opts = dict(encoder="cipher", combination=str(cipher_combination),
                calibration={"a": 1.0, "b": 0.0, "fitted_on": "test"}, threshold=0.0)
    full = score(path, model=tiny_model, output=tmp_path / "fp32.tsv", precision="fp32", **opts)
    half = score(path, model=tiny_model, output=tmp_path / "bf16.tsv", precision="bf16", **opts)
    a, b = full.columns["score"], half.columns["score"]
    assert a.shape == b.shape and not (a == b).all()  # computed in another arithmetic
    assert abs(a - b).max() < 0.1  # ... to about the same log-probabilities (nats)
    with pytest.raises(InputError, match="cannot resume"):  # a run's precision is its own
        score(path, model=tiny_model, output=tmp_path / "fp32.tsv", precision="bf16",
              resume=True, **opts)


def _mined(d):
    from triemine.io.tsv import write_rows

    mined = d / "m.tsv"
    cells = {"src_id": ["1", "2"], "tgt_id": ["1", "2"], "score": [-1.0, -2.0],
             "ce_word": [1.0, 2.0], "ce_token": [1.0, 2.0], "src": ["a", "b"], "tgt": ["c", "e"]}
    write_rows(mined, list(cells), cells, meta={"mode": "pre"})
    return mined


@pytest.mark.parametrize("flag", ["-o", "--bitext"])
def test_filter_locks_its_outputs(tmp_path, capsys, flag):
    from triemine.cli import filter_main

    out = tmp_path / "out.txt"
    (tmp_path / "out.txt.lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")
    rc = filter_main([str(_mined(tmp_path)), "--ce-max", "9", flag, str(out)])
    err = _error(capsys)
    assert rc == 2 and "another job" in err and not out.exists(), err


def test_eval_locks_its_outputs(tmp_path, capsys):
    from triemine.cli import eval_main

    gold = tmp_path / "g.gold"
    gold.write_text("1\t1\n")
    out = tmp_path / "numbers.json"
    (tmp_path / "numbers.json.lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")
    rc = eval_main([str(_mined(tmp_path)), "--gold", str(gold), "--json", str(out)])
    err = _error(capsys)
    assert rc == 2 and "another job" in err and not out.exists(), err
