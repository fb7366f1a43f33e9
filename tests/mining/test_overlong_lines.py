"""A user's first hour (issue 20): the installed wheel mines from outside the checkout; a bitext
from two corpora without gold (the shipped threshold); an overlong line is skipped and counted,
never the end of the run; a Ray address with nothing behind it fails fast; a TSV that lost its
``combined`` column is refused; the Python API.

Tiny synthetic model (tests/conftest.py) except where marked ``shared_model``.
"""
import json
import os
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import triemine
from triemine.cli import eval_main, filter_main, mine_main
from triemine.errors import InputError
from triemine.configurations import NAMES
from triemine.filtering.selection import SELECTION, choose, shipped_default
from triemine.mining.combine import shipped
from triemine.tsv import read_mined

from test_decoding import OTHER, PAIRS
from test_mining import CipherEncoder  # noqa: F401  (registers the tiny pair's encoder)

REPO = Path(__file__).resolve().parents[1]
TSV_HEADER = "src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt\tcombined\n"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


# -- the wheel ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """``pip wheel .`` of this checkout (no dependencies, this environment's build tools)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(REPO)], check=True, cwd=out)
    wheels = list(out.glob("trie_mine-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_holds_every_module_and_data_file(wheel):
    tracked = subprocess.run(["git", "ls-files", "triemine"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()
    wanted = {p for p in tracked if p.endswith((".py", ".pyx", ".pxd", ".json"))}
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(wanted - names)
    assert not missing, f"the wheel lacks {missing}"
    assert any(n.startswith("triemine/trie/_trie.") and n.endswith(".so") for n in names)
    for folder in {os.path.dirname(p) for p in wanted if p.endswith(".py")}:
        assert f"{folder}/__init__.py" in names, f"{folder} is no package"


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A separate environment with the wheel installed non-editable; its dependencies are read
    from this environment's site-packages (a path entry, so the editable finder there is not
    run: ``triemine`` can only come from the wheel)."""
    env = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    py = env / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "triemine-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True)
    return env


@pytest.mark.shared_model
def test_installed_wheel_mines_a_slice_from_outside_the_checkout(installed, tmp_path):
    from triemine.paths import BUCC_ZH_EN, cache_root, shared_path

    model = cache_root() / "models" / "opus-mt-zh-en"
    base = shared_path(*BUCC_ZH_EN) / "zh-en.sample"
    zh = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.zh", encoding="utf-8"))
    en = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.en", encoding="utf-8"))
    gold = [ln.split() for ln in open(f"{base}.gold", encoding="utf-8")][:12]
    others = [i for i in en if i not in {e for _, e in gold}][:40]
    src, tgt = tmp_path / "s.zh", tmp_path / "t.en"
    src.write_text("".join(f"{z}\t{zh[z]}\n" for z, _ in gold), encoding="utf-8")
    tgt.write_text("".join(f"{e}\t{en[e]}\n" for e in [e for _, e in gold] + others),
                   encoding="utf-8")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRIEMINE_CACHE"] = str(tmp_path / "cache")
    where = subprocess.run([str(installed / "bin" / "python"), "-c",
                            "import triemine, triemine.scoring.forced, triemine.api; "
                            "print(triemine.__file__)"], cwd=work, env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(installed)), where
    r = subprocess.run([str(installed / "bin" / "trie-mine"), "--model", str(model), "--source",
                        str(src), "--target", str(tgt), "-o", "m.tsv", "--bitext", "m.txt", "-q"],
                       cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pairs = [ln.split("\t") for ln in (work / "m.txt").read_text(encoding="utf-8").splitlines()]
    truth = {(zh[z], en[e]) for z, e in gold}
    correct = sum((a, b) in truth for a, b in pairs)
    assert correct >= 10 and correct >= len(pairs) - 1, (correct, len(pairs))
    assert "pairs kept of" in r.stderr and "shipped default for combined" in r.stderr


# -- a bitext without gold: the shipped threshold --------------------------------------------------

def _mined_tsv(path, rows, meta):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(TSV_HEADER)
        for r in rows:
            fh.write("\t".join(str(x) for x in r) + "\n")
    Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return str(path)


@pytest.fixture
def combined_tsv(tmp_path):
    """A mining-job TSV (its sidecar names the shipped combination): s1 has two candidates,
    t1 is wanted by s1 and s2, s3's only candidate is below the shipped threshold."""
    th = shipped_default("combined")
    t = next(iter(th.thresholds.values()))["combined"]
    rows = [("s1", "t1", -3, 1, 1, "a", "A", t + 3), ("s1", "t2", -3, 1, 1, "a", "B", t + 1),
            ("s2", "t1", -3, 1, 1, "b", "A", t + 2), ("s2", "t3", -3, 1, 1, "b", "C", t + 0.5),
            ("s3", "t4", -3, 1, 1, "c", "D", t - 0.5)]
    meta = {"model": "m", "mode": "knn", "beam": "-", "pipeline": {"candidates": ["knn"]},
            "combination": asdict(shipped("combined"))}
    return _mined_tsv(tmp_path / "m.tsv", rows, meta), t


def test_every_configuration_ships_its_selection_and_threshold():
    names = [n for n in NAMES if shipped_default(n) is not None]
    assert names == list(NAMES)
    for name in names:
        th = shipped_default(name)
        assert (th.rule, th.rank_by, th.filter) == SELECTION[name]
        if name != "paper":  # the threshold belongs to the exact shipped combination
            assert th.combination == asdict(shipped(name))


def test_filter_without_thresholds_uses_the_shipped_default(combined_tsv, tmp_path, capsys):
    path, t = combined_tsv
    assert filter_main([path, "--bitext", str(tmp_path / "b.txt")]) == 0
    err = capsys.readouterr().err
    assert "shipped default for combined" in err and "kept 2 of 5 rows" in err
    # one-to-one: s1-t1 first, then s2's best free target t3; s3 is below the threshold
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == "a\tA\nb\tC\n"
    assert filter_main([path, "--threshold", f"combined={t + 0.75}", "-o",
                        str(tmp_path / "k.tsv")]) == 0
    assert "kept 1 of 5 rows" in capsys.readouterr().err  # a given threshold overrides it


def test_no_shipped_default_is_refused_not_kept_whole(combined_tsv, tmp_path, capsys):
    path, _ = combined_tsv
    meta = json.loads(Path(path + ".meta.json").read_text())
    meta["combination"]["weights"][0] = 2.0  # a custom combination file of the same name
    Path(path + ".meta.json").write_text(json.dumps(meta))
    assert filter_main([path, "-o", str(tmp_path / "k.tsv")]) == 2
    err = capsys.readouterr().err
    assert "not the shipped one" in err and "Traceback" not in err
    assert not (tmp_path / "k.tsv").exists()
    Path(path + ".meta.json").write_text(json.dumps({"model": "m", "mode": "knn"}))
    assert filter_main([path, "-o", str(tmp_path / "k.tsv")]) == 2
    assert "no shipped default threshold" in capsys.readouterr().err
    assert not (tmp_path / "k.tsv").exists()


def test_a_tsv_that_lost_its_combined_column_is_refused(combined_tsv, tmp_path, capsys):
    path, _ = combined_tsv
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    Path(path).write_text("".join("\t".join(ln.split("\t")[:7]) + "\n" for ln in lines),
                          encoding="utf-8")
    gold = tmp_path / "xx-yy.t.gold"
    gold.write_text("s1\tt1\n", encoding="utf-8")
    for corpus, texts in (("xx-yy.t.xx", "s1\ta\ns2\tb\ns3\tc\n"),
                          ("xx-yy.t.yy", "t1\tA\nt2\tB\nt3\tC\nt4\tD\n")):
        (tmp_path / corpus).write_text(texts, encoding="utf-8")
    assert eval_main([path, "--gold", str(gold)]) == 2
    assert "wrote a 'combined' column" in capsys.readouterr().err
    assert filter_main([path, "-o", str(tmp_path / "k.tsv")]) == 2
    assert "wrote a 'combined' column" in capsys.readouterr().err
    # asked for by name, the other columns still select
    assert filter_main([path, "--ce-max", "2", "-o", str(tmp_path / "k.tsv")]) == 0


# -- overlong lines, the Python API ----------------------------------------------------------------

@pytest.fixture
def long_corpora(tmp_path):
    """Sources and targets of the tiny pair, one line on each side longer than the tiny model's
    64 positions, and the combination the tiny pair's encoder can feed."""
    from triemine.mining.combine import Combination

    pairs = PAIRS[:12]
    src_lines = [s for s, _ in pairs]
    src_lines[3] = " ".join([pairs[3][0]] * 20)  # ~80 pieces
    tgt_lines = OTHER[:12] + [t for _, t in pairs]
    tgt_lines[14] = " ".join([pairs[2][1]] * 20)
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(s + "\n" for s in src_lines), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for t in tgt_lines), encoding="utf-8")
    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    return src, tgt, str(comb)


def _job(model_dir, src, tgt, comb, *extra):
    return ["--model", str(model_dir), "--source", str(src), "--target", str(tgt),
            "--encoder", "cipher", "--min-margin", "0", "--combination", comb, "-q", *extra]


def test_overlong_lines_are_skipped_and_counted_not_the_end_of_the_run(
        tiny_model_dir, long_corpora, tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    src, tgt, comb = long_corpora
    out = tmp_path / "m.tsv"
    assert mine_main(_job(tiny_model_dir, src, tgt, comb, "-o", str(out))) == 0, \
        capsys.readouterr().err
    err = capsys.readouterr().err
    summary = json.loads(err.strip().splitlines()[-1])
    assert summary["skipped_long"] == {"source": 1, "target": 1}
    assert "skipped 1 source line(s) longer than 64 tokens (lines 4)" in caplog.text
    assert "skipped 1 target line(s) longer than 64 tokens (lines 15)" in caplog.text
    from triemine.decoding.lengths import SHOWN, report

    mask = np.zeros(10**6, dtype=bool)
    mask[5::2] = True  # half a million skipped lines: the first ones named, each once
    caplog.clear()
    assert report(mask, "big.txt", "target", 64) == 499998
    shown = ", ".join(str(i) for i in range(6, 6 + 2 * SHOWN, 2))
    assert f"big.txt: skipped 499998 target line(s) longer than 64 tokens (lines {shown}, ...)" \
        in caplog.text
    m = read_mined(out)
    assert m.meta["skipped_long"] == {"source": 1, "target": 1}
    assert "4" not in m.src_ids and "15" not in m.tgt_ids
    assert {str(i + 1) for i in range(12) if i != 3} <= set(m.src_ids)  # nothing else lost
    # --max-length lowers the limit on both sides
    out2 = tmp_path / "m2.tsv"
    assert mine_main(_job(tiny_model_dir, src, tgt, comb, "-o", str(out2),
                          "--max-length", "8")) == 0
    skipped = read_mined(out2).meta["skipped_long"]
    assert skipped["source"] > 1 and skipped["target"] > 1


def test_token_lengths_are_counted_chunk_by_chunk_with_the_same_result(tmp_path):
    """The overlong-line rule tokenises a corpus a chunk at a time (a million lines' pieces were
    760 MB of the driver's memory): the same lengths as one call, never more than a chunk's
    lines in one call, through a corpus file's view too."""
    from triemine.corpus import open_corpus
    from triemine.decoding.lengths import token_lengths

    class Words:  # a tokenizer that records its calls
        calls: list = []

        def encode(self, texts, out_type=str, num_threads=None):
            self.calls.append(len(texts))
            return [t.split() for t in texts]
    texts = [("w " * (i % 7)).strip() for i in range(50)]  # every seventh line empty
    path = tmp_path / "c.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    want = [len(t.split()) + 1 if t else 0 for t in texts]
    assert token_lengths(Words(), texts, chunk=10**6).tolist() == want
    Words.calls.clear()
    assert token_lengths(Words(), open_corpus(path, cache=tmp_path / "lines").texts,
                         chunk=8).tolist() == want
    assert max(Words.calls) <= 8 and sum(Words.calls) == sum(1 for t in texts if t)


def test_token_lengths_of_a_corpus_file_are_computed_once_per_corpus_and_model(tmp_path,
                                                                             monkeypatch):
    """A corpus file's token lengths are kept in the cache: the job's start, its trie search's
    driver and its workers read them, where each tokenised the corpus again (6.8 s a million
    lines); another corpus, another version of the file or another sentencepiece model is
    tokenised anew, and a list of texts (no file) is never cached."""
    from triemine.corpus import open_corpus
    from triemine.decoding.lengths import corpus_token_lengths

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))

    class Words:
        calls: list = []

        def encode(self, texts, out_type=str, num_threads=None):
            self.calls.append(len(texts))
            return [t.split() for t in texts]
    spm_a, spm_b = tmp_path / "a.spm", tmp_path / "b.spm"
    spm_a.write_bytes(b"model a")
    spm_b.write_bytes(b"model b")
    path = tmp_path / "c.txt"
    path.write_text("a b\n\nc\n", encoding="utf-8")
    texts = open_corpus(path, cache=tmp_path / "lines").texts
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [3, 0, 2]
    assert Words.calls == [2]
    got = corpus_token_lengths(Words(), spm_a, texts)
    assert got.tolist() == [3, 0, 2] and got.dtype == np.int32
    assert Words.calls == [2]  # read from the cache, memory-mapped read-only
    assert isinstance(got, np.memmap) and not got.flags.writeable
    assert corpus_token_lengths(Words(), spm_b, texts).tolist() == [3, 0, 2]
    assert Words.calls == [2, 2]  # another model
    corpus_token_lengths(Words(), spm_a, ["x y z"])
    corpus_token_lengths(Words(), spm_a, ["x y z"])
    assert Words.calls == [2, 2, 1, 1]  # no file: no cache
    new = tmp_path / "c.new"
    new.write_text("a b c d\nx\n\n", encoding="utf-8")  # as many lines, other lengths
    new.replace(path)  # the file replaced (the old view still maps the old one)
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [3, 0, 2]  # the old view's
    assert Words.calls[-1] == 2 and texts.file_key() is None  # lines, never cached as the new
    texts = open_corpus(path, cache=tmp_path / "lines").texts
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [5, 2, 0]
    cached = list((tmp_path / "cache" / "lengths").glob("*.npy"))
    assert len(cached) == 3
    for f in cached:  # a cache file cut to nothing is computed and written again
        f.write_bytes(b"")
    n = len(Words.calls)
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [5, 2, 0]
    assert corpus_token_lengths(Words(), spm_a, texts).tolist() == [5, 2, 0]
    assert Words.calls[n:] == [2]


def test_overlong_lines_give_the_same_output_with_workers(tiny_model_dir, long_corpora, tmp_path,
                                                          capsys, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    src, tgt, comb = long_corpora
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(_job(tiny_model_dir, src, tgt, comb, "-o", str(one))) == 0
    assert mine_main(_job(tiny_model_dir, src, tgt, comb, "-o", str(two), "--workers", "2")) == 0, \
        capsys.readouterr().err
    assert one.read_bytes() == two.read_bytes()
    assert read_mined(two).meta["skipped_long"] == {"source": 1, "target": 1}
    import ray  # the [ray] extra is installed with the tests (scripts/setup_env.sh)

    three = tmp_path / "ray.tsv"
    try:  # a private cluster on 127.0.0.1 (triemine.distributed.ray_backend)
        assert mine_main(_job(tiny_model_dir, src, tgt, comb, "-o", str(three), "--ray", "local",
                              "--workers", "2")) == 0, capsys.readouterr().err
    finally:
        ray.shutdown()
    assert one.read_bytes() == three.read_bytes()


def test_bad_lines_are_skipped_counted_and_named_not_the_end_of_the_run(
        tiny_model_dir, tmp_path, capsys, caplog, monkeypatch):
    """A line that is not UTF-8 in the sources and a TSV line without a tab among the targets:
    each is skipped in place, counted (summary and .meta.json, ``skipped_bad``) and named in a
    warning; every other pair is mined, the same with two workers."""
    from triemine.mining.combine import Combination

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    pairs = PAIRS[:12]
    src, tgt = tmp_path / "src.tsv", tmp_path / "tgt.tsv"
    src_lines = [f"s{i}\t{s}".encode() for i, (s, _) in enumerate(pairs)]
    src_lines[5] = b"s5\t" + pairs[5][0].encode()[:3] + b"\xff"
    src.write_bytes(b"\n".join(src_lines) + b"\n")
    tgt_lines = [f"t{i}\t{t}" for i, (_, t) in enumerate(pairs)]
    tgt_lines[7] = "a stray line without a tab"
    tgt.write_text("\n".join(tgt_lines) + "\n", encoding="utf-8")
    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    assert mine_main(_job(tiny_model_dir, src, tgt, str(comb), "-o", str(one))) == 0, \
        capsys.readouterr().err
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["skipped_bad"] == {"source": 1, "target": 1}
    assert f"{src}: skipped 1 bad line" in caplog.text and "line 6: invalid UTF-8" in caplog.text
    assert f"{tgt}: skipped 1 bad line" in caplog.text and "line 8: no tab" in caplog.text
    m = read_mined(one)
    assert m.meta["skipped_bad"] == {"source": 1, "target": 1}
    assert "s5" not in m.src_ids and "" not in m.tgt_ids and "" not in m.src_ids
    assert {f"s{i}" for i in range(12) if i != 5} <= set(m.src_ids)  # nothing else lost
    assert {f"t{i}" for i in range(12) if i != 7} <= set(m.tgt_ids)
    assert mine_main(_job(tiny_model_dir, src, tgt, str(comb), "-o", str(two),
                          "--workers", "2")) == 0, capsys.readouterr().err
    assert one.read_bytes() == two.read_bytes()


def _same_length_rule(model, texts):
    """The package's one length rule counts what the model's encoder is given."""
    from triemine.decoding.lengths import model_token_lengths

    got = model_token_lengths(model, texts, "source")
    want = [len(model.encode_source(t)) if t.strip() else 0 for t in texts]
    assert got.tolist() == want and sum(want) > len(texts)


def test_the_searchs_source_lengths_are_the_models_encoded_lengths(tiny_model):
    """The trie search plans its batches and skips long sources by the mining job's length
    rule (the pieces as the dictionary splits them + EOS, batched, cached per corpus file:
    int32, no Python int a source), which counts the tokens the model's encoder is given."""
    from triemine.decoding.runner import source_lengths
    from triemine.testing.tiny_model import synthetic_pairs

    texts = [s for s, _ in synthetic_pairs(60, seed=5)] + ["", "  "]
    _same_length_rule(tiny_model, texts + ["a\x1fb", "a\x85b c", "\x1f"])
    with pytest.warns(UserWarning, match=r"^src\.txt: skipped \d+ source sentence\(s\) longer "
                      r"than 12 tokens \(lines \d+(, \d+)*(, \.\.\.)?\)$") as caught:
        lengths, skipped = source_lengths(tiny_model, texts, "src.txt", max_length=12)
    assert lengths.dtype == np.int32 and len(skipped) and (lengths <= 12).all()
    named = str(caught[0].message).split("(lines ")[1].rstrip(" .)").rstrip(",").split(", ")
    assert named == [str(i) for i in skipped[:10]]  # the first ten, as the job's warning
    assert skipped.tolist() == [i + 1 for i, t in enumerate(texts)
                                if t.strip() and len(tiny_model.encode_source(t)) > 12]
    assert not lengths[skipped - 1].any() and lengths[-2:].tolist() == [0, 0]


@pytest.mark.shared_model
def test_the_length_rule_counts_opus_mts_encoded_tokens_on_the_bucc_sample():
    from triemine.decoding.model_dir import load_model_dir
    from triemine.evaluation.bucc import read_bucc
    from triemine.paths import BUCC_ZH_EN, cache_root, shared_path

    model = load_model_dir(cache_root() / "models" / "opus-mt-zh-en")
    texts = read_bucc(shared_path(*BUCC_ZH_EN) / "zh-en.sample.gold").src.texts
    # whitespace sentencepiece keeps inside a piece, which the dictionary splits on
    odd = ["a\x1fb", "a\x85b", "中\x1c文\x1d字\x1e。", "x\u2028y"]
    assert [len(model.source_spm.encode(t)) for t in odd[:2]] == [3, 3]
    _same_length_rule(model, list(texts) + odd)


@pytest.mark.shared_model
def test_a_2403_token_line_in_the_default_configuration_is_skipped(tmp_path, capsys, monkeypatch):
    """The report of issue 20: the default job ended in a traceback on a web-corpus line longer
    than OPUS-MT's 2,048 positions; now it is skipped, counted, and every other pair is mined."""
    from triemine.paths import BUCC_ZH_EN, cache_root, shared_path

    model = cache_root() / "models" / "opus-mt-zh-en"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    base = shared_path(*BUCC_ZH_EN) / "zh-en.sample"
    zh = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.zh", encoding="utf-8"))
    en = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.en", encoding="utf-8"))
    gold = [ln.split() for ln in open(f"{base}.gold", encoding="utf-8")][:4]
    src, tgt = tmp_path / "s.zh", tmp_path / "t.en"
    lines = [f"{z}\t{zh[z]}\n" for z, _ in gold]
    lines.insert(2, "long\t" + "，".join(["中国经济增长"] * 801) + "\n")
    src.write_text("".join(lines), encoding="utf-8")
    tgt.write_text("".join(f"{e}\t{en[e]}\n" for _, e in gold), encoding="utf-8")
    out = tmp_path / "m.tsv"
    rc = mine_main(["--model", str(model), "--source", str(src), "--target", str(tgt),
                    "-o", str(out), "--bitext", str(tmp_path / "b.txt"), "-q"])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err, err
    m = read_mined(out)
    assert m.meta["skipped_long"] == {"source": 1, "target": 0}
    assert "long" not in m.src_ids and {z for z, _ in gold} <= set(m.src_ids)
    assert json.loads(err.strip().splitlines()[-1])["skipped_long"]["source"] == 1


def test_python_api_mines_lists_and_writes_bitext_and_tsv(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    from triemine.mining.combine import Combination

    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    pairs = PAIRS[:10]
    sources = [s for s, _ in pairs]
    targets = OTHER[:10] + [t for _, t in pairs]
    with pytest.raises(InputError, match="ships no default threshold|not the shipped one"):
        triemine.mine(sources, targets, model=tiny_model_dir, encoder="cipher",
                      combination=str(comb), min_margin=0.0)
    res = triemine.mine(sources, targets, model=tiny_model_dir, encoder="cipher",
                        combination=str(comb), min_margin=0.0, threshold={"combined": -1e9},
                        output=tmp_path / "all.tsv")
    assert len(res.candidates) == res.summary["candidates"] == len(read_mined(tmp_path / "all.tsv"))
    assert res.summary["kept"] == len(res.pairs) == len(res.kept) > 0
    # one-to-one over every candidate: each source and target at most once, in row order
    assert len({p.src_id for p in res.pairs}) == len({p.tgt_id for p in res.pairs}) == len(res.pairs)
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


def test_the_paper_configuration_keeps_what_its_shipped_threshold_passes(tiny_model_dir, tmp_path,
                                                                         monkeypatch):
    """--config paper without gold: best per source by ce_word, then ce_word <= the shipped
    threshold (tuned on the BUCC sample)."""
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    limit = next(iter(shipped_default("paper").thresholds.values()))
    pairs = PAIRS[:12]  # sources PAIRS[12:24] have no translation among the targets
    res = triemine.mine([s for s, _ in PAIRS[:24]], OTHER[:12] + [t for _, t in pairs],
                        model=tiny_model_dir, config="paper", beam=3)
    assert "shipped default for paper" in res.selection.source
    assert res.selection.thresholds == limit
    assert (res.selection.rule, res.selection.rank_by) == ("best-per-source", "ce_word")
    m = res.candidates
    best = {}
    for i in range(len(m)):  # the reference: each source's lowest ce_word, first row on ties
        if m.src_ids[i] not in best or m.col("ce_word")[i] < m.col("ce_word")[best[m.src_ids[i]]]:
            best[m.src_ids[i]] = i
    want = sorted(i for i in best.values() if m.col("ce_word")[i] <= limit["ce_word"])
    assert res.kept.tolist() == want and res.summary["kept"] == len(want)
    # measured: the 12 translations have ce_word <= 1.4, the 12 others >= 4.5
    assert len(want) == 12 and {m.src_ids[i] for i in want} == {f"{k + 1}" for k in range(12)}


def test_the_mt_only_configuration_ships_its_threshold(tiny_model_dir, tmp_path, monkeypatch):
    """--config mt-only without gold: one-to-one by combined above the threshold shipped with it
    (tuned on the BUCC sample mined with --config mt-only), never refused for want of one."""
    from triemine.filtering.registry import apply_rule

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    saved = shipped_default("mt-only")
    limit = next(iter(saved.thresholds.values()))
    assert saved.combination == asdict(shipped("mt-only")) and limit["combined"] > 0
    res = triemine.mine([s for s, _ in PAIRS[:24]], OTHER[:12] + [t for _, t in PAIRS[:12]],
                        model=tiny_model_dir, config="mt-only")
    assert "shipped default for mt-only" in res.selection.source
    assert res.selection.thresholds == limit
    m = res.candidates
    want = [i for i in apply_rule(m, "one-to-one", "combined").tolist()
            if m.col("combined")[i] >= limit["combined"]]
    assert res.kept.tolist() == want and res.summary["kept"] == len(want)


def test_choose_refuses_a_filter_the_shipped_default_is_not_for(combined_tsv):
    path, _ = combined_tsv
    with pytest.raises(InputError, match="no threshold for filter ce: the shipped default is for combined"):
        choose(read_mined(path), filt="ce")


# -- Ray: an address with nothing behind it ---------------------------------------------------------

def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_ray_address_with_nothing_listening_fails_fast_with_one_line(tiny_model_dir, tmp_path):
    src = tmp_path / "s.txt"
    src.write_text("saa sab\n", encoding="utf-8")
    port = _free_loopback_port()
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
                        "sys.exit(mine_main(sys.argv[1:]))", "--ray", f"127.0.0.1:{port}",
                        "--model", str(tiny_model_dir), "--source", str(src), "--target",
                        str(src), "-o", str(tmp_path / "o.tsv"), "-q"],
                       capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "no Ray cluster" in lines[0]
    assert not (tmp_path / "o.tsv").exists()


def test_ray_address_that_is_no_address_is_refused():
    from triemine.distributed.ray_connect import RayUnavailable, split_address

    assert split_address("ray://127.0.0.1:10001") == ("127.0.0.1", 10001)
    assert split_address("[::1]:6379") == ("::1", 6379)
    for bad in ("127.0.0.1", "127.0.0.1:x", ":6379", "127.0.0.1:0"):
        with pytest.raises(RayUnavailable, match="not a Ray address"):
            split_address(bad)
