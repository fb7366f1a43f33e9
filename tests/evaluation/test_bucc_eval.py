"""BUCC evaluation: readers, P/R/F1, LASER-style threshold search, lenient matching, folds, CLI."""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from triemine.cli import eval_main
from triemine.errors import InputError
from triemine.evaluation.bucc import bucc_files, read_bucc, read_gold
from triemine.io.tsv import read_mined, write_mined
from triemine.evaluation.metrics import fold_of, same_text_ids, score_pairs, score_pairs_lenient
from triemine.mining.dedup import normalise
from triemine.evaluation.pipeline import Direction, evaluate, evaluate_choosing, save_thresholds
from triemine.filtering.rules import PRF, best_per_source, optimize_threshold
from triemine.filtering.selection import load_thresholds
from triemine.io.paths import BUCC_ZH_EN, shared_path

HEADER = "src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt\n"


def write_tsv(path, rows, header=HEADER, meta=None):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header)
        for r in rows:
            fh.write("\t".join(str(x) for x in r) + "\n")
    if meta is not None:
        with open(str(path) + ".meta.json", "w") as fh:
            json.dump(meta, fh)
    return str(path)


@pytest.fixture
def tiny_bucc(tmp_path):
    """A hand-made BUCC set: zh s3 repeats s1's text, en e4 repeats e1's text."""
    d = tmp_path / "bucc"
    d.mkdir()
    (d / "zh-en.tiny.zh").write_text("zh-1\t你好\nzh-2\t谢谢\nzh-3\t你好\nzh-4\t再见\nzh-5\t猫\n",
                                     encoding="utf-8")
    (d / "zh-en.tiny.en").write_text(
        "en-1\thello\nen-2\tthanks\nen-3\tbye\nen-4\thello\nen-5\tdog\n", encoding="utf-8"
    )
    (d / "zh-en.tiny.gold").write_text("zh-1\ten-1\nzh-2\ten-2\nzh-4\ten-3\n", encoding="utf-8")
    return read_bucc(d / "zh-en.tiny.gold")


def row(s, t, ce, bucc, score=-1.0):
    return (s, t, score, ce, ce, bucc.src.text_of(s), bucc.tgt.text_of(t))


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------

def test_prf_arithmetic():
    s = PRF(correct=3, predicted=4, gold=6)
    assert s.precision == 0.75 and s.recall == 0.5
    assert math.isclose(s.f1, 2 * 0.75 * 0.5 / 1.25)
    assert PRF(0, 0, 5).f1 == 0.0 and PRF(0, 0, 5).precision == 0.0


def test_score_pairs_strict_dedups_predictions():
    gold = [("a", "1"), ("b", "2")]
    s = score_pairs([("a", "1"), ("a", "1"), ("c", "3")], gold)
    assert (s.correct, s.predicted, s.gold) == (1, 2, 2)


def test_optimize_threshold_finds_known_best_cut():
    # lower is better (cross-entropy). Best F1 keeps the first three values (2 correct of 2 gold
    # plus one wrong one between them): P=2/3, R=1 -> F1=0.8; keeping only the first gives 0.667.
    values = np.array([0.1, 0.5, 0.3, 0.9, 0.7])
    correct = np.array([True, False, True, False, False])
    thr, s = optimize_threshold(values, correct, n_gold=2, higher_is_better=False)
    assert math.isclose(thr, 0.4)  # midpoint between 0.3 (kept) and 0.5 (dropped)
    assert (s.correct, s.predicted) == (2, 2)
    assert s.f1 == 1.0
    # same data, higher is better: values negated give the same cut, threshold -0.4
    thr2, s2 = optimize_threshold(-values, correct, 2, higher_is_better=True)
    assert math.isclose(thr2, -0.4) and s2 == s


def test_optimize_threshold_keeps_ties_together_and_reproduces_scores():
    values = np.array([1.0, 1.0, 2.0, 3.0])
    correct = np.array([True, False, True, True])
    thr, s = optimize_threshold(values, correct, n_gold=3, higher_is_better=False)
    keep = values <= thr
    assert score_pairs([(str(i), "x") for i in np.flatnonzero(keep)],
                       [(str(i), "x") for i in np.flatnonzero(correct)]) == s
    assert keep.sum() in (2, 3, 4)  # never splits the tie at 1.0


def test_optimize_threshold_brute_force_agreement():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        values = rng.integers(0, 8, n).astype(float)
        correct = rng.random(n) < 0.4
        n_gold = int(correct.sum()) + int(rng.integers(0, 3))
        thr, s = optimize_threshold(values, correct, max(n_gold, 1), higher_is_better=True)
        best = max(PRF(int((correct & (values >= t)).sum()), int((values >= t).sum()),
                       max(n_gold, 1)).f1
                   for t in np.append(np.unique(values), np.inf))
        assert math.isclose(s.f1, best)
        kept = values >= thr
        assert PRF(int((correct & kept).sum()), int(kept.sum()), max(n_gold, 1)) == s


def test_best_per_source_picks_best_and_earliest_tie():
    ids = ["a", "b", "a", "b", "c"]
    ce = np.array([2.0, 1.0, 1.0, 1.0, 5.0])
    assert best_per_source(ids, ce, higher_is_better=False).tolist() == [1, 2, 4]
    assert best_per_source(ids, ce, higher_is_better=True).tolist() == [0, 1, 4]


def test_lenient_counts_textual_duplicates(tiny_bucc):
    b = tiny_bucc
    # zh-3 has the same text as zh-1 and en-4 the same as en-1: (zh-3, en-4) is textually gold
    pred = [("zh-3", "en-4"), ("zh-2", "en-2"), ("zh-5", "en-5")]
    strict = score_pairs(pred, b.gold)
    lenient = score_pairs_lenient(pred, b.gold, b.src.text_of, b.tgt.text_of)
    assert (strict.correct, lenient.correct) == (1, 2)
    # one-to-one: two textual copies of one gold pair validate only one prediction
    pred2 = [("zh-1", "en-1"), ("zh-3", "en-4")]
    assert score_pairs_lenient(pred2, b.gold, b.src.text_of, b.tgt.text_of).correct == 1


def test_same_text_ids_matches_a_dict_reference():
    rng = np.random.default_rng(59)
    pool = ["你好", "你好 ", "ｈｅｌｌｏ", "hello", "Hello", "a  b", "a b", "", "x", "y"]
    for case in (False, True):
        for _ in range(20):
            texts = [pool[i] for i in rng.integers(0, len(pool), size=12)]
            ids = [f"id-{i}" for i in range(len(texts))]
            first, ref = {}, {}
            for i, t in zip(ids, texts):
                if not t:
                    continue
                key = normalise(t, case=case)
                if key in first:
                    ref[i] = first[key]
                else:
                    first[key] = i
            assert same_text_ids(ids, texts, case=case) == ref


def _dup_bucc(tmp_path, gold):
    d = tmp_path / "dup"
    d.mkdir()
    (d / "zh-en.dup.zh").write_text("zh-1\t出去的时候把门关上。\nzh-2\t你好\n"
                                    "zh-3\t出去的时候把门关上。\n", encoding="utf-8")
    (d / "zh-en.dup.en").write_text("en-1\tClose the door on your way out.\nen-2\thello\n"
                                    "en-3\tHello\n", encoding="utf-8")
    (d / "zh-en.dup.gold").write_text(gold, encoding="utf-8")
    return read_bucc(d / "zh-en.dup.gold")


def test_strict_counts_a_gold_pair_of_a_later_copy(tmp_path):
    # the job mines each distinct text once, under its first line's id (docs/dedup.md): the
    # gold names the second copy of the source, the TSV its first; a twin keeps the pair
    b = _dup_bucc(tmp_path, "zh-3\ten-1\nzh-2\ten-3\n")
    path = write_tsv(tmp_path / "m.tsv", [row("zh-1", "en-1", 0.5, b), row("zh-2", "en-2", 0.6, b)])
    out = evaluate([Direction(read_mined(path))], b, filt="none", rank_by="ce_word",
                   rule="one-to-one")
    assert (out.strict.correct, out.strict.predicted, out.strict.gold) == (1, 2, 2)
    # "hello" and "Hello" are one line only under a rule that ignores case, as the job's was
    meta = {"dedup": {"rule": {"case": True, "punct": False}}}
    path = write_tsv(tmp_path / "c.tsv", [row("zh-1", "en-1", 0.5, b), row("zh-2", "en-2", 0.6, b)],
                     meta=meta)
    out = evaluate([Direction(read_mined(path))], b, filt="none", rank_by="ce_word",
                   rule="one-to-one")
    assert (out.strict.correct, out.strict.predicted, out.strict.gold) == (2, 2, 2)
    # both copies of one text pair kept (every id pair) are one prediction, not one wrong
    path = write_tsv(tmp_path / "e.tsv", [row("zh-1", "en-1", 0.5, b), row("zh-3", "en-1", 0.5, b)])
    out = evaluate([Direction(read_mined(path))], b, filt="none", rank_by="ce_word")
    assert (out.strict.correct, out.strict.predicted) == (1, 1)


# --------------------------------------------------------------------------------------------
# readers and errors
# --------------------------------------------------------------------------------------------

def test_shared_bucc_sample_reads():
    gold = shared_path(*BUCC_ZH_EN, "zh-en.sample.gold")
    l1, l2, split, p1, p2 = bucc_files(gold)
    assert (l1, l2, split) == ("zh", "en", "sample") and p1.endswith(".zh") and p2.endswith(".en")
    b = read_bucc(gold)
    assert len(b.src.ids) == 8624 and len(b.tgt.ids) == 13589 and len(b.gold) == 257
    assert b.gold[0] == ("zh-000000057", "en-000008530")


def test_perfect_prediction_on_shared_gold_scores_one(tmp_path):
    b = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    rows = [row(s, t, 0.5, b) for s, t in b.gold]
    # a worse second candidate for every gold source must not hurt (one per source)
    rows += [row(s, b.tgt.ids[0], 3.0, b) for s, _ in b.gold if b.tgt.ids[0] != _]
    path = write_tsv(tmp_path / "m.tsv", rows)
    out = evaluate([Direction(read_mined(path))], b, "none")
    assert (out.strict.precision, out.strict.recall, out.strict.f1) == (1.0, 1.0, 1.0)
    assert out.lenient.f1 == 1.0


def test_mined_tsv_errors(tmp_path, tiny_bucc):
    b = tiny_bucc
    good = row("zh-1", "en-1", 0.5, b)
    p = write_tsv(tmp_path / "a.tsv", [good[:5]])
    with pytest.raises(InputError, match=r"a\.tsv:2: expected 7 tab-separated columns"):
        read_mined(p)
    p = write_tsv(tmp_path / "b.tsv", [good], header="src_id\ttgt_id\tscore\tsrc\ttgt\n")
    with pytest.raises(InputError, match=r"b\.tsv:1: header lacks column\(s\) ce_word, ce_token"):
        read_mined(p)
    p = write_tsv(tmp_path / "c.tsv", [good, ("zh-2", "en-2", "nan", 1, 1, "x", "y")])
    with pytest.raises(InputError, match=r"c\.tsv:3: column score: nan is not a finite number"):
        read_mined(p)
    p = write_tsv(tmp_path / "d.tsv", [("zh-2", "en-2", -1, "abc", 1, "x", "y")])
    with pytest.raises(InputError, match=r"d\.tsv:2: column ce_word: not a number"):
        read_mined(p)
    p = write_tsv(tmp_path / "e.tsv", [good], header="")
    with pytest.raises(InputError, match=r"e\.tsv:1: missing header"):
        read_mined(p)
    p = write_tsv(tmp_path / "f.tsv", [good, ("zh-9", "en-2", -1, 1, 1, "x", "y")])
    with pytest.raises(InputError, match=r"f\.tsv:3: source id 'zh-9' is not in"):
        evaluate([Direction(read_mined(p))], b)
    p = write_tsv(tmp_path / "g.tsv", [("zh-2", "en-77", -1, 1, 1, "x", "y")])
    with pytest.raises(InputError, match=r"g\.tsv:2: target id 'en-77' is not in"):
        evaluate([Direction(read_mined(p))], b)


def test_gold_errors(tmp_path, tiny_bucc):
    g = tmp_path / "x.gold"
    g.write_text("zh-1\ten-1\nzh-2 en-2\n")
    with pytest.raises(InputError, match=r"x\.gold:2: expected 'src-id<TAB>tgt-id'"):
        read_gold(g)
    d = os.path.dirname(tiny_bucc.gold_path)
    bad = os.path.join(d, "zh-en.bad.gold")
    for ext in ("zh", "en"):
        os.link(os.path.join(d, f"zh-en.tiny.{ext}"), os.path.join(d, f"zh-en.bad.{ext}"))
    with open(bad, "w") as fh:
        fh.write("zh-1\ten-1\nzh-2\ten-99\n")
    with pytest.raises(InputError, match=r"zh-en\.bad\.gold:2: target id 'en-99' is not in"):
        read_bucc(bad)


def test_write_mined_round_trip(tmp_path, tiny_bucc):
    b = tiny_bucc
    p = write_tsv(tmp_path / "m.tsv", [row("zh-1", "en-1", 0.123456789, b),
                                       row("zh-2", "en-3", 2.5, b)],
                  meta={"model": "m", "mode": "pre", "beam": 5})
    m = read_mined(p).with_column("bicleaner", np.array([0.9, 0.1]))
    write_mined(m, tmp_path / "out.tsv")
    m2 = read_mined(tmp_path / "out.tsv")
    assert m2.columns[-1] == "bicleaner" and m2.col("bicleaner").tolist() == [0.9, 0.1]
    assert m2.col("ce_word").tolist() == [0.123456789, 2.5] and m2.src == m.src
    assert m2.meta["beam"] == 5


# --------------------------------------------------------------------------------------------
# pipeline: tuning, fixed thresholds, folds, directions
# --------------------------------------------------------------------------------------------

def test_tuned_ce_threshold_and_transfer(tmp_path, tiny_bucc):
    b = tiny_bucc
    rows = [row("zh-1", "en-1", 0.2, b), row("zh-1", "en-2", 0.9, b),  # second candidate ignored
            row("zh-2", "en-2", 0.4, b), row("zh-4", "en-5", 0.6, b), row("zh-5", "en-5", 1.5, b)]
    path = write_tsv(tmp_path / "m.tsv", rows,
                     meta={"model": "/x/opus-mt-zh-en", "mode": "pre", "beam": 4,
                                                     "source": "zh-en.tiny.zh",
                                                     "target": "zh-en.tiny.en"})
    out = evaluate([Direction(read_mined(path))], b, "ce")
    assert math.isclose(out.thresholds["zh-en"]["ce_word"], 0.5)
    assert (out.strict.correct, out.strict.predicted, out.strict.gold) == (2, 2, 3)
    sig = out.signature()
    assert sig.startswith(
        "model=opus-mt-zh-en|dir=zh-en|mode=pre|beam=4|rule=best-per-source|rank=ce_word|filter=ce|"
        "threshold=ce_word<=0.5000(tuned-on:zh-en.tiny.gold)|match=strict|"
    )
    assert sig.endswith("P=1.0000|R=0.6667|F1=0.8000")
    save_thresholds(out, tmp_path / "th.json")
    saved = load_thresholds(tmp_path / "th.json")
    assert saved.filter == "ce" and math.isclose(saved.thresholds["zh-en"]["ce_word"], 0.5)
    assert (saved.rule, saved.rank_by) == ("best-per-source", "ce_word")
    # a stricter fixed threshold applied elsewhere gives different, reproducible numbers
    fixed = evaluate([Direction(read_mined(path))], b, "ce", thresholds={"zh-en": {"ce_word": 0.3}},
                     thresholds_source="fixed:th.json")
    assert (fixed.strict.correct, fixed.strict.predicted) == (1, 1)
    assert "threshold=ce_word<=0.3000(fixed:th.json)" in fixed.signature()


def test_folds_tune_on_other_folds(tmp_path):
    b = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    rng = np.random.default_rng(3)
    rows = [row(s, t, float(rng.uniform(0, 1)), b) for s, t in b.gold]
    rows += [row(s, b.tgt.ids[k], float(rng.uniform(0.8, 2)), b)
             for k, s in enumerate(b.src.ids[:400])
             if (s, b.tgt.ids[k]) not in set(b.gold) and s not in {g[0] for g in b.gold}]
    path = write_tsv(tmp_path / "m.tsv", rows)
    out = evaluate([Direction(read_mined(path))], b, "ce", folds=2)
    assert len(out.folds) == 2
    assert out.heldout_strict.gold == 257
    # each fold's thresholds differ from the all-data tuning in general and the pooled numbers
    # add up from the folds
    assert sum(f[2].correct for f in out.folds) == out.heldout_strict.correct
    assert out.heldout_strict.f1 <= out.strict.f1 + 1e-9


def test_a_chosen_variant_is_chosen_again_inside_each_training_fold(tmp_path):
    """Two variants of a score, each good on one fold's gold pairs only: the held-out estimate
    must pick, for each fold, the variant that is good on the *other* fold (the one it trains on),
    so it scores badly, as choosing on unseen data would."""
    b = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    assign = fold_of([], b.src.ids, 2, 1234)
    rng = np.random.default_rng(5)
    gold_src = {s for s, _ in b.gold}
    others = [(s, b.tgt.ids[k]) for k, s in enumerate(b.src.ids[:600]) if s not in gold_src]
    variants = {}
    for good in (0, 1):
        rows = [row(s, t, 0.1 if assign[s] == good else float(rng.uniform(0.5, 2)), b)
                for s, t in b.gold]
        rows += [row(s, t, float(rng.uniform(0.5, 2)), b) for s, t in others]
        variants[f"good-on-{good}"] = [
            Direction(read_mined(write_tsv(tmp_path / f"v{good}.tsv", rows)))
        ]
    out = evaluate_choosing(variants, b, "ce", "ce_word", folds=2)
    assert out.fold_chosen == ["good-on-1", "good-on-0"]
    assert out.chosen in variants
    plain = {k: evaluate(v, b, "ce", folds=2) for k, v in variants.items()}
    # each fold's held-out scores are those of the variant chosen for it, pooled
    for f, k in enumerate(out.fold_chosen):
        assert out.folds[f][2] == plain[k].folds[f][2]
    assert out.heldout_strict.correct == sum(
        plain[k].folds[f][2].correct for f, k in enumerate(out.fold_chosen)
    )
    # choosing on the scored fold would have been far better: the estimate is not optimistic
    oracle = sum(max(p.folds[f][2].f1 for p in plain.values()) for f in range(2)) / 2
    assert out.heldout_strict.f1 < oracle - 0.2
    assert out.strict == plain[out.chosen].strict
    with pytest.raises(InputError, match="folds"):
        evaluate_choosing(variants, b, "ce", "ce_word", folds=0)


def test_union_of_directions(tmp_path, tiny_bucc):
    b = tiny_bucc
    fwd = write_tsv(tmp_path / "zh-en.tsv",
                    [row("zh-1", "en-1", 0.2, b), row("zh-5", "en-5", 0.3, b)])
    # reverse direction: sources are en ids
    bwd = write_tsv(tmp_path / "en-zh.tsv", [("en-2", "zh-2", -1, 0.2, 0.2, "thanks", "谢谢"),
                                              ("en-1", "zh-1", -1, 0.1, 0.1, "hello", "你好")])
    one = evaluate([Direction(read_mined(fwd))], b, "none")
    both = evaluate([Direction(read_mined(fwd)), Direction(read_mined(bwd), reverse=True)], b,
                    "none")
    assert (one.strict.correct, one.strict.predicted) == (1, 2)
    assert (both.strict.correct, both.strict.predicted) == (2, 3)  # (zh-1,en-1) counted once
    assert "dir=zh-en+en-zh" in both.signature()


def test_cli_eval_prints_signature_and_saves(tmp_path, tiny_bucc, capsys):
    b = tiny_bucc
    path = write_tsv(tmp_path / "m.tsv", [row("zh-1", "en-1", 0.2, b), row("zh-5", "en-5", 0.9, b)])
    th = tmp_path / "th.json"
    assert eval_main([path, "--gold", b.gold_path, "--filter", "ce", "--save-thresholds",
                      str(th)]) == 0
    out = capsys.readouterr().out
    assert "thresholds: tuned for best strict F1" in out
    assert "|filter=ce|threshold=ce_word<=" in out and "match=lenient" in out
    assert eval_main([path, "--gold", b.gold_path, "--filter", "ce", "--thresholds", str(th)]) == 0
    assert "thresholds: fixed, read from" in capsys.readouterr().out
    # thresholds for another filter are refused clearly
    assert eval_main([path, "--gold", b.gold_path, "--filter", "bicleaner", "--thresholds",
                      str(th)]) == 2
    assert "thresholds are for filter ce" in capsys.readouterr().err


def test_cli_eval_bad_input_is_one_line(tmp_path, tiny_bucc, capsys):
    p = write_tsv(tmp_path / "m.tsv", [("zh-1", "en-1", "-inf", 1, 1, "a", "b")])
    assert eval_main([p, "--gold", tiny_bucc.gold_path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trie-mine-eval: error: ") and "m.tsv:2: column score" in err
    assert "Traceback" not in err


def test_mining_job_tsv_is_evaluated_and_filtered_as_it_was_tuned(tmp_path, tiny_bucc, capsys):
    """A TSV of the mining job (its sidecar names the pipeline) is selected one-to-one by
    'combined' and filtered by 'combined' unless told otherwise; a thresholds file carries its
    rule, ranking and filter to trie-mine-eval and trie-mine-filter, so the pairs a user keeps
    are the ones the thresholds were measured on."""
    from triemine.cli import filter_main

    b = tiny_bucc
    # en-2 is the best target of both zh-1 and zh-2: one-to-one gives it to zh-2 (higher combined)
    rows = [row("zh-1", "en-1", 0.5, b) + (1.0,), row("zh-1", "en-2", 0.5, b) + (2.0,),
            row("zh-2", "en-2", 0.5, b) + (3.0,), row("zh-4", "en-3", 0.5, b) + (0.5,),
            row("zh-5", "en-5", 0.5, b) + (-2.0,)]
    path = write_tsv(tmp_path / "job.tsv", rows, header=HEADER.rstrip("\n") + "\tcombined\n",
                     meta={"model": "m", "mode": "knn", "pipeline": {"candidates": ["knn"]}})
    th = tmp_path / "th.json"
    assert eval_main([path, "--gold", b.gold_path, "--save-thresholds", str(th)]) == 0
    out = capsys.readouterr().out
    assert "candidates (one-to-one, ranked by combined): 4" in out
    assert "P=1.0000 R=1.0000 F1=1.0000" in out  # zh-1 keeps en-1 once en-2 went to zh-2
    saved = load_thresholds(th)
    assert (saved.rule, saved.rank_by, saved.filter) == ("one-to-one", "combined", "combined")
    assert -2.0 < saved.thresholds["zh-en"]["combined"] <= 0.5  # keeps zh-4, drops zh-5
    # applied unchanged: the file's rule and filter, no flags needed
    assert eval_main([path, "--gold", b.gold_path, "--thresholds", str(th)]) == 0
    assert "thresholds: fixed" in capsys.readouterr().out
    kept = tmp_path / "kept.tsv"
    assert filter_main([path, "--thresholds", str(th), "-o", str(kept)]) == 0
    k = read_mined(kept)
    assert sorted(zip(k.src_ids, k.tgt_ids)) == [("zh-1", "en-1"), ("zh-2", "en-2"),
                                                 ("zh-4", "en-3")]
    # a plain trie-search TSV keeps the paper's defaults
    plain = write_tsv(tmp_path / "plain.tsv", [r[:7] for r in rows], meta={"model": "m",
                                                                           "mode": "pre"})
    assert eval_main([plain, "--gold", b.gold_path]) == 0
    assert "candidates (best-per-source, ranked by ce_word): 4" in capsys.readouterr().out
