"""Deduplication inside the job (triemine.mining.dedup): the rule, the grouping, the unique
corpora and their maps, and the job run on unique texts with its pairs mapped back to the ids."""
import json
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import OTHER, PAIRS
from triemine.errors import InputError
from triemine.mining.dedup import (DUP_COLUMNS, dedup_corpus, digests, expand_rows, group_lines,
                                   mine_unique, normalise, side_maps)
from triemine.io.tsv import column_order, read_mined

TEXT = st.text(alphabet=st.sampled_from(list("aAbB ,.!\t\u3000\uff21\ufb01\u00e9e\u0301")),
               max_size=8)


def _reference_rule(text, case, punct):
    t = unicodedata.normalize("NFKC", text)
    if case:
        t = unicodedata.normalize("NFKC", t.casefold())
    if punct:
        t = unicodedata.normalize("NFKC", "".join(
            c for c in t if not unicodedata.category(c).startswith("P")))
    words, word = [], ""
    for c in t:
        if c.isspace():
            if word:
                words.append(word)
            word = ""
        else:
            word += c
    return " ".join(words + ([word] if word else []))


@settings(max_examples=200, deadline=None)
@given(TEXT, st.booleans(), st.booleans())
def test_normalise_is_the_documented_rule_and_idempotent(text, case, punct):
    n = normalise(text, case, punct)
    assert n == _reference_rule(text, case, punct)
    assert normalise(n, case, punct) == n
    assert n == n.strip() and "  " not in n


def test_normalise_examples():
    assert normalise("  Ｈｅｌｌｏ,\u3000world\t! ") == "Hello, world !"
    assert normalise("caf\u0065\u0301") == normalise("caf\u00e9") == "caf\u00e9"
    assert normalise("Hello, World!", case=True, punct=True) == "hello world"
    assert normalise("Hello") != normalise("hello")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.just(""), TEXT), max_size=30), st.booleans())
def test_grouping_matches_a_dict_of_normalised_texts(texts, case):
    g = group_lines(*digests(texts, case=case))
    ref, first, rows = {}, [], []
    for i, t in enumerate(texts):
        if t == "":
            rows.append(-1)
            continue
        k = normalise(t, case)
        if k not in ref:
            ref[k] = len(first)
            first.append(i)
        rows.append(ref[k])
    assert g.first.tolist() == first
    assert g.row.tolist() == rows
    assert g.counts.tolist() == [rows.count(r) for r in range(len(first))]
    for r in range(len(first)):
        assert g.lines[g.offsets[r]:g.offsets[r + 1]].tolist() == \
            [i for i, x in enumerate(rows) if x == r]
    assert g.summary() == {"lines": len(texts), "empty": rows.count(-1), "unique": len(first),
                           "duplicates": len(texts) - rows.count(-1) - len(first)}


def test_a_shared_64_bit_key_with_another_check_is_never_merged():
    key = np.array([7, 7, 7, 3], dtype=np.uint64)
    check = np.array([1, 2, 1, 5], dtype=np.uint64)
    g = group_lines(key, check, np.zeros(4, dtype=bool))
    assert g.row.tolist() == [0, 1, 0, 2] and g.counts.tolist() == [2, 1, 1]


def _write(path, rows):
    path.write_text("".join(f"{i}\t{t}\n" for i, t in rows), encoding="utf-8")
    return path


def test_dedup_corpus_keeps_first_ids_and_texts_and_reuses_its_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    corpus = _write(tmp_path / "c.tsv", [("a", "Hello  world"), ("b", ""), ("c", "x y"),
                                         ("d", "Hello world "), ("e", ""), ("f", "x\u3000y"),
                                         ("g", "z\tw")])
    sm = dedup_corpus(corpus, tmp_path / "d", "source")
    assert (tmp_path / "d" / "source.unique.tsv").read_text(encoding="utf-8") == \
        "a\tHello  world\nc\tx y\ng\tz\tw\n"
    assert sm.counts.tolist() == [2, 2, 1]
    assert [sm.ids_of(r) for r in range(3)] == [["a", "d"], ["c", "f"], ["g"]]
    assert sm.stats == {"lines": 7, "empty": 2, "unique": 3, "duplicates": 2}
    again = dedup_corpus(corpus, tmp_path / "d", "source")  # the key holds: files reused
    assert again.counts.tolist() == [2, 2, 1] and again.stats == sm.stats
    (tmp_path / "d" / "source.lines.npy").write_bytes(b"damaged")
    assert dedup_corpus(corpus, tmp_path / "d", "source").lines.tolist() == \
        sm.lines.tolist()  # a damaged map is grouped again
    plain = tmp_path / "p.txt"
    plain.write_text("one\n\none\ntwo\n", encoding="utf-8")
    sm = dedup_corpus(plain, tmp_path / "d", "target")
    assert [sm.ids_of(r) for r in range(2)] == [["1", "3"], ["4"]]
    empty = tmp_path / "e.txt"
    empty.write_text("\n \n", encoding="utf-8")
    with pytest.raises(InputError, match="empty source file"):
        dedup_corpus(empty, tmp_path / "d", "source")


# -- the job on unique texts ------------------------------------------------------------------


@pytest.fixture()
def job(tiny_model_dir, tmp_path, monkeypatch, cipher_combination):
    """``run_job(src, tgt, out) -> summary``: the mining job with the tiny model (cipher
    embeddings, a test combination), through triemine.api.run."""
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    from triemine.api import MineOptions, run

    comb = cipher_combination
    # the job alone (no deduplication of its own): what mine_unique wraps
    opts = MineOptions.of("combined", encoder="cipher", combination=str(comb), min_margin=0.0,
                          dedup=False)
    return lambda s, t, o: run(opts, tiny_model_dir, s, t, o).summary


def _corpora(tmp_path):
    pairs = PAIRS[:12]
    src = [(f"s{i}", s) for i, (s, _) in enumerate(pairs)]
    tgt = [(f"t{i}", t) for i, t in enumerate(OTHER[:10] + [t for _, t in pairs])]
    return src, tgt


def _same_rows(a, b):
    assert (a.src_ids, a.tgt_ids, a.src, a.tgt) == (b.src_ids, b.tgt_ids, b.src, b.tgt)
    for c in b.numeric:
        np.testing.assert_allclose(a.col(c), b.col(c), rtol=1e-6, atol=1e-6)


def test_duplicates_on_either_side_give_the_unique_corpus_pairs(job, tmp_path):
    src, tgt = _corpora(tmp_path)
    plain_src, plain_tgt = _write(tmp_path / "s.tsv", src), _write(tmp_path / "t.tsv", tgt)
    job(str(plain_src), str(plain_tgt), str(tmp_path / "plain.tsv"))
    plain = read_mined(tmp_path / "plain.tsv")
    assert len(plain) > 0

    # a wholly unique corpus: the job's TSV plus the two columns, all 1
    summary = mine_unique(job, plain_src, plain_tgt, tmp_path / "u.tsv")
    u = read_mined(tmp_path / "u.tsv")
    _same_rows(u, plain)
    assert u.columns == column_order(list(plain.numeric) + list(DUP_COLUMNS))
    assert all((u.col(c) == 1).all() for c in DUP_COLUMNS)
    assert summary["dedup"]["source"] == {"lines": 12, "empty": 0, "unique": 12, "duplicates": 0}

    # every source twice (a spacing variant under a new id), three targets three times, blanks
    dup_src = src + [("", "")] + [(f"x{i}", s.replace(" ", "  ") + " ") for i, s in src]
    dup_tgt = [tgt[0], ("", "")] + tgt[1:] + [(f"y{i}", t) for i, t in tgt[-3:]] + \
        [(f"z{i}", f"\u3000{t}") for i, t in tgt[-3:]]
    ds, dt = _write(tmp_path / "ds.tsv", dup_src), _write(tmp_path / "dt.tsv", dup_tgt)
    summary = mine_unique(job, ds, dt, tmp_path / "d.tsv")
    d = read_mined(tmp_path / "d.tsv")
    _same_rows(d, plain)  # the same pairs under the first ids, the first lines' texts
    dups = dict(zip(tgt[-3:], [3] * 3))
    assert d.col("src_dups").tolist() == [2.0] * len(d)
    assert d.col("tgt_dups").tolist() == [float(dups.get((i, t), 1))
                                          for i, t in zip(d.tgt_ids, d.tgt)]
    want = {"source": {"lines": 25, "empty": 1, "unique": 12, "duplicates": 12},
            "target": {"lines": 29, "empty": 1, "unique": 22, "duplicates": 6}}
    for side in ("source", "target"):
        assert summary["dedup"][side] == want[side] == d.meta["dedup"][side]
    assert summary["rows"] == len(d) and d.meta["rows"] == len(d)
    assert d.meta["source"] == str(ds.resolve()) and d.meta["target"] == str(dt.resolve())
    assert summary["targets"] == 22  # the job mined the unique texts

    # the selection and the evaluation read the output
    from triemine.filtering.selection import choose
    kept = choose(d, given={"combined": -1e9}).keep(d)
    assert len(kept) > 0

    # every pair: each row once per (source id, target id) of its groups, source-major
    mine_unique(job, ds, dt, tmp_path / "e.tsv", every_pair=True)
    e = read_mined(tmp_path / "e.tsv")
    ids = {**{i: [i, f"x{i}"] for i, _ in src}}
    tids = {i: [i] + ([f"y{i}", f"z{i}"] if (i, t) in dups else []) for i, t in tgt}
    want_rows = [(s, t) for j in range(len(d)) for s in ids[d.src_ids[j]]
                 for t in tids[d.tgt_ids[j]]]
    assert list(zip(e.src_ids, e.tgt_ids)) == want_rows
    assert e.meta["rows"] == len(e) and e.meta["dedup"]["every_pair"] is True

    # the kept rows of the selection on unique texts, listed with every id pair
    kept_rows = expand_rows(d.take(kept), *side_maps(tmp_path / "d.tsv"), every_pair=True)
    assert list(zip(kept_rows.src_ids, kept_rows.tgt_ids)) == \
        [(s, t) for j in kept.tolist() for s in ids[d.src_ids[j]] for t in tids[d.tgt_ids[j]]]
    assert kept_rows.col("tgt_dups").tolist() == \
        [float(len(tids[d.tgt_ids[j]])) for j in kept.tolist() for _ in ids[d.src_ids[j]]
         for _ in tids[d.tgt_ids[j]]]


def test_a_resumed_run_reuses_the_unique_corpora_and_the_jobs_work(job, tmp_path):
    src, tgt = _corpora(tmp_path)
    ds = _write(tmp_path / "ds.tsv", src + [(f"r{i}", t) for i, t in src[:3]])
    dt = _write(tmp_path / "dt.tsv", tgt)
    out = tmp_path / "o.tsv"
    mine_unique(job, ds, dt, out)
    first = out.read_bytes()
    stamp = (tmp_path / "o.tsv.dedup" / "source.unique.tsv").stat().st_mtime_ns
    mine_unique(job, ds, dt, out)
    assert out.read_bytes() == first
    assert (tmp_path / "o.tsv.dedup" / "source.unique.tsv").stat().st_mtime_ns == stamp
    meta = json.loads((tmp_path / "o.tsv.meta.json").read_text(encoding="utf-8"))
    assert meta["dedup"]["source"]["duplicates"] == 3


def test_the_web_benchs_side_repeats_each_line_and_adds_the_shares_it_says():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from web_bench import BOILER_SHARE, OTHER_SHARE, web_side

    texts = [f"English sentence number {i} ." for i in range(200)]
    lines, counts = web_side([str(i) for i in range(200)], texts, seed=3)
    assert (lines, counts) == web_side([str(i) for i in range(200)], texts, seed=3)
    assert counts["lines"] == len(lines) == len({x.split("\t")[0] for x in lines})
    body = [x.split("\t", 1)[1] for x in lines]
    seen = {t: sum(normalise(b) == normalise(t) for b in body) for t in texts}
    assert set(seen.values()) <= {1, 2, 3} and sum(seen.values()) == counts["english"]
    assert abs(counts["other_language"] / len(lines) - OTHER_SHARE) < 0.01
    assert abs(counts["boilerplate_and_markup"] / len(lines) - BOILER_SHARE) < 0.01


def test_the_api_deduplicates_by_default_and_every_pair_lists_the_kept_ids(
        tiny_model_dir, tmp_path, monkeypatch, cipher_combination):
    """triemine.mine: each distinct text mined once, the TSV under first ids with the counts;
    every_pair=True gives the kept pairs once per (source id, target id); dedup=False mines the
    copies as lines of their own."""
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    import triemine

    comb = cipher_combination
    pairs = PAIRS[:10]
    sources = [s for s, _ in pairs]
    targets = OTHER[:10] + [t for _, t in pairs] + [t for _, t in pairs[:4]]  # 4 copies
    kw = dict(model=tiny_model_dir, config="combined", encoder="cipher", combination=str(comb),
              min_margin=0.0, threshold={"combined": -1e9})
    res = triemine.mine(sources, targets, output=tmp_path / "d.tsv", **kw)
    m = read_mined(tmp_path / "d.tsv")
    assert res.summary["dedup"]["target"]["duplicates"] == 4 and "src_dups" in m.columns
    assert sorted(set(m.tgt_ids)) == sorted(set(m.tgt_ids) - {str(i) for i in range(25, 29)})
    copies = {p.tgt_id for p in res.pairs if p.tgt in {t for _, t in pairs[:4]}}
    assert copies and all(int(i) <= 24 for i in copies)  # first ids only
    every = triemine.mine(sources, targets, output=tmp_path / "e.tsv", every_pair=True, **kw)
    assert len(every.pairs) == len(res.pairs) + len(copies)
    assert {(p.src_id, p.tgt_id) for p in res.pairs} < {(p.src_id, p.tgt_id) for p in every.pairs}
    plain = triemine.mine(sources, targets, output=tmp_path / "p.tsv", dedup=False, **kw)
    assert "dedup" not in plain.summary and "src_dups" not in read_mined(tmp_path / "p.tsv").columns
    with pytest.raises(triemine.InputError, match="need deduplication"):
        triemine.mine(sources, targets, dedup=False, every_pair=True, **kw)
