"""trie-mine-review without a browser: which pairs a sheet draws (stratified by prob, some just
below the cut), its fingerprint, the page's data (corpus text as escaped JSON), reading the
answers back (refusals), the precision they measure and the gold file they write."""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from review_runs import INJECTED, judge_meta, mining_run, scores_run
from triemine.cli import review_main, train_judge_main
from triemine.evaluation.bucc import read_gold
from triemine.evaluation.quality import stratified_precision
from triemine.evaluation.review import (BELOW_STRATUM, MIN_PER_STRATUM, STRATA, allocate, draw,
                                        read_run)
from triemine.evaluation.review_answers import header
from triemine.evaluation.review_page import (HERE, LAYOUT, SCRIPT, STYLE, embedded_json,
                                             page_data, sheet_html)
from triemine.filtering.selection import choose
from triemine.io import Mined, read_mined, write_mined


@pytest.fixture
def run(tmp_path):
    return mining_run(tmp_path / "run.tsv", sources=60)


def _answers(path, sheet, answer_of) -> str:
    """An answers file for ``sheet``: ``answer_of(pair)`` (None: not answered)."""
    rows = [f"{p['src_id']}\t{p['tgt_id']}\t{answer_of(p)}\n" for p in sheet.pairs
            if answer_of(p) is not None]
    Path(path).write_text(header(sheet) + "".join(rows), encoding="utf-8")
    return str(path)


# -- the draw -------------------------------------------------------------------------------------

def test_the_kept_pairs_are_the_runs_own_selection(run):
    r = read_run(run)
    mined = read_mined(run)
    assert r.kind == "mining"
    assert r.kept.tolist() == choose(mined).keep(mined).tolist()
    assert len(r.kept) and np.all(r.prob[r.kept] >= 0.5)  # the judge's cut, one-to-one


def test_a_sheet_draws_every_stratum_in_proportion_and_the_pairs_below_the_cut(run):
    r = read_run(run)
    sheet = draw(r, n=20, seed=1, below=5)
    strata = sheet.strata
    assert len(strata) == STRATA and sum(s["size"] for s in strata) == sheet.kept == len(r.kept)
    assert sum(s["drawn"] for s in strata) == 20
    assert all(s["drawn"] >= MIN_PER_STRATUM for s in strata)
    assert all(a["high"] <= b["low"] for a, b in zip(strata, strata[1:]))  # prob-ordered
    for p in sheet.pairs:
        if p["stratum"] != BELOW_STRATUM:
            st = strata[p["stratum"] - 1]
            assert st["low"] <= p["prob"] <= st["high"]
    keys = [(p["src_id"], p["tgt_id"]) for p in sheet.pairs]
    assert len(set(keys)) == len(keys) == 25
    below = [p for p in sheet.pairs if p["stratum"] == BELOW_STRATUM]
    kept_rows = set(r.kept.tolist())
    used = {r.src_ids[i] for i in kept_rows} | {r.tgt_ids[i] for i in kept_rows}
    free = sorted((r.prob[i] for i in range(len(r.prob)) if i not in kept_rows
                   and r.src_ids[i] not in used and r.tgt_ids[i] not in used), reverse=True)
    assert sorted((p["prob"] for p in below), reverse=True) == free[:5]
    assert all(p["src_id"] not in used and p["tgt_id"] not in used for p in below)
    # the same arguments, the same sheet; another seed, another one
    assert draw(r, n=20, seed=1, below=5) == sheet
    other = draw(r, n=20, seed=2, below=5)
    assert other.fingerprint != sheet.fingerprint and other.pairs != sheet.pairs


def test_a_sheet_of_every_kept_pair_is_still_shuffled(run):
    r = read_run(run)
    a, b = draw(r, n=10 ** 6, seed=0, below=0), draw(r, n=10 ** 6, seed=1, below=0)
    assert len(a.pairs) == len(b.pairs) == len(r.kept)
    assert sorted(map(str, a.pairs)) == sorted(map(str, b.pairs)) and a.pairs != b.pairs


@pytest.mark.parametrize("sizes,total", [([10, 10, 10], 7), ([100, 5, 1], 20), ([3, 3], 6),
                                         ([50, 50, 50, 50, 50], 100), ([1000, 1], 4)])
def test_allocation_is_proportional_with_a_floor_and_fills_the_total(sizes, total):
    take = allocate(sizes, total)
    assert sum(take) == total
    assert all(min(2, s) <= t <= s for s, t in zip(sizes, take))
    quota = [total * s / sum(sizes) for s in sizes]
    assert all(abs(t - q) < 2 + 1e-9 for t, q in zip(take, quota))


def test_the_fingerprint_follows_the_run_not_its_file_name(run, tmp_path):
    base = draw(read_run(run)).fingerprint
    moved = tmp_path / "elsewhere.tsv"
    shutil.copy(run, moved)
    shutil.copy(run + ".meta.json", str(moved) + ".meta.json")
    assert draw(read_run(moved)).fingerprint == base
    mined = read_mined(run)
    write_mined(Mined(mined.path, mined.columns, mined.src_ids, mined.tgt_ids, mined.src,
                      mined.tgt, mined.numeric, mined.lines,
                      dict(mined.meta, bitext={"path": "/x", "format": "tsv", "pairs": 1})), moved)
    assert draw(read_run(moved)).fingerprint == base  # a bitext written later: the same run
    shown = {p["src"] for p in draw(read_run(run)).pairs}
    changed = [s + "!" if s in shown else s for s in mined.src]
    write_mined(Mined(mined.path, mined.columns, mined.src_ids, mined.tgt_ids, changed,
                      mined.tgt, mined.numeric, mined.lines, mined.meta), moved)
    assert draw(read_run(moved)).fingerprint != base
    write_mined(Mined(mined.path, mined.columns, mined.src_ids, mined.tgt_ids, mined.src,
                      mined.tgt, mined.numeric, mined.lines, dict(mined.meta, model="other")),
                moved)
    assert draw(read_run(moved)).fingerprint != base


def test_a_scores_tsv_is_kept_where_kept_is_1_and_unscored_pairs_never_drawn(tmp_path):
    probs = [0.9, 0.8, float("nan"), 0.4, 0.3, 0.7, 0.2]
    kept = [1, 1, 0, 0, 0, 1, 0]
    path = scores_run(tmp_path / "scores.tsv", probs, kept)
    r = read_run(path)
    assert r.kind == "scores" and r.kept.tolist() == [0, 1, 5]
    assert r.key(0) == ("1", "p1") and r.best_prob_per_source() is None
    sheet = draw(r, n=10, below=3)
    assert sheet.kept == 3
    below = [p for p in sheet.pairs if p["stratum"] == BELOW_STRATUM]
    assert sorted(p["prob"] for p in below) == [0.2, 0.3, 0.4]
    # a pair of texts on two lines is one pair of the bitext: drawn once, counted once
    texts = [("同一句", "the same")] * 2 + [(f"源 {i}", f"t {i}") for i in range(5)]
    r = read_run(scores_run(tmp_path / "twice.tsv", probs, kept, texts))
    sheet = draw(r, n=10, below=0)
    assert len(r.kept) == 3 and sheet.kept == 2 and len(sheet.pairs) == 2


def test_a_run_without_prob_or_of_another_kind_is_refused_in_one_line(tmp_path, capsys):
    no_prob = tmp_path / "noprob.tsv"
    write_mined(Mined.from_columns(["s1"], ["t1"], ["a"], ["b"],
                                   {"score": [-1.0], "ce_word": [1.0], "ce_token": [1.0]},
                                   meta=judge_meta()), no_prob)
    other = tmp_path / "other.tsv"
    other.write_text("a\tb\n1\t2\n", encoding="utf-8")
    bad_scores = tmp_path / "scores.tsv"
    scores_run(bad_scores, [0.5], [1])
    bad_scores.write_text(bad_scores.read_text().replace("0.500000\t1.000000", "0.500000\t2.0"))
    for path, problem in [(no_prob, f"{no_prob}:1: has no prob column"),
                          (other, f"{other}:1: neither a mining TSV"),
                          (bad_scores, f"{bad_scores}:2: column kept: expected 0 or 1")]:
        assert review_main([str(path), "-o", str(tmp_path / "s.html")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"trie-mine-review: error: {problem}") and "\n" not in err
    assert not (tmp_path / "s.html").exists()


# -- the page -------------------------------------------------------------------------------------

def test_corpus_text_travels_as_escaped_json_the_page_parses_back(run):
    sheet = draw(read_run(run), n=10 ** 6)
    assert any(p["src"] == INJECTED for p in sheet.pairs)
    page = sheet_html(sheet)
    assert page.count("</script>") == 2 and page.count("<script") == 2
    assert "<img" not in page and "\u2028" not in page and "\u2029" not in page
    data = re.search(r'<script id="sheet-data" type="application/json">(.*?)</script>', page,
                     re.S).group(1)
    assert not set("<>&") & set(data)
    assert json.loads(data) == page_data(sheet)
    assert json.loads(embedded_json({"a": "</script>&\u2028"})) == {"a": "</script>&\u2028"}


def test_the_page_fetches_nothing_and_allows_only_its_own_script_and_style(run):
    import base64
    import hashlib

    page = sheet_html(draw(read_run(run)))
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert "default-src 'none'" in csp
    for name, kind in ((SCRIPT, "script-src"), (STYLE, "style-src")):
        text = (HERE / name).read_text(encoding="utf-8")
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"{kind} 'sha256-{digest}'" in csp and text in page
    for name in (LAYOUT, SCRIPT, STYLE):
        text = (HERE / name).read_text(encoding="utf-8")
        assert not re.search(r"https?:|@import|url\(|innerHTML|outerHTML|insertAdjacentHTML|"
                             r"document\.write|\beval\(|@font-face", text), name
    css = (HERE / STYLE).read_text(encoding="utf-8")
    assert '"Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "PingFang SC"' in css


# -- the answers ----------------------------------------------------------------------------------

def test_labels_weigh_the_answers_back_to_the_strata(run, tmp_path, capsys):
    assert review_main([run, "-o", str(tmp_path / "s.html"), "--n", "20", "--seed", "4"]) == 0
    made = json.loads(capsys.readouterr().out)
    sheet = draw(read_run(run), n=20, seed=4)
    assert made["fingerprint"] == sheet.fingerprint and made["pairs"] == len(sheet.pairs)
    cycle = {0: "y", 1: "y", 2: "n", 3: "p", 4: "s", 5: None}
    answer_of = {(p["src_id"], p["tgt_id"]): cycle[i % 6] for i, p in enumerate(sheet.pairs)}
    path = _answers(tmp_path / "answers.tsv", sheet, lambda p: answer_of[p["src_id"],
                                                                         p["tgt_id"]])
    gold = tmp_path / "gold.tsv"
    assert review_main([run, "--labels", path, "--gold-out", str(gold)]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    count = {h: {a: 0 for a in "ynps"} for h in [s["stratum"] for s in sheet.strata]}
    for p in sheet.pairs:
        a = answer_of[p["src_id"], p["tgt_id"]]
        if p["stratum"] != BELOW_STRATUM and a:
            count[p["stratum"]][a] += 1
    want = stratified_precision([s["size"] for s in sheet.strata],
                                [c["y"] + c["n"] + c["p"] for c in count.values()],
                                [c["y"] for c in count.values()])
    assert out["precision"] == pytest.approx(want["precision"])
    assert (out["low"], out["high"]) == pytest.approx((want["low"], want["high"]))
    assert out["s"] == sum(c["s"] for c in count.values())
    assert out["partial_share"] == pytest.approx(
        sum(c["p"] for c in count.values()) / sum(c["y"] + c["n"] + c["p"]
                                                 for c in count.values()))
    r = read_run(run)
    assert out["expected_precision"] == pytest.approx(float(r.prob[r.kept].mean()))
    assert 0 < out["expected_recall"] <= 1
    below = [p for p in sheet.pairs if p["stratum"] == BELOW_STRATUM]
    assert out["below"]["drawn"] == len(below) == 10
    assert out["below"]["y"] == sum(answer_of[p["src_id"], p["tgt_id"]] == "y" for p in below)
    ys = {k for k, a in answer_of.items() if a == "y"}
    assert set(read_gold(gold)) == ys and out["gold_pairs"] == len(ys)
    assert "precision" in cap.err and "expected precision (mean prob of the kept pairs)" \
        in cap.err and "below the cut" in cap.err


def test_answers_of_another_run_strangers_and_bad_lines_are_refused(run, tmp_path, capsys):
    sheet = draw(read_run(run))
    good = _answers(tmp_path / "a.tsv", sheet, lambda p: "y")
    text = Path(good).read_text(encoding="utf-8")
    cases = {
        "other.tsv": (text.replace(sheet.fingerprint, "0" * 16),
                      ":1: these answers belong to another run"),
        "stranger.tsv": (text + "s999\tt999\ty\n", "answer(s) name pairs not in the sheet, the "
                         "first: s999 t999"),
        "bad.tsv": (text.replace("\ty\n", "\tq\n", 1) + "x\n",
                    ":3: 2 bad line(s), the first: answer 'q' is not one of y n p s; also "
                    f"line(s) {len(sheet.pairs) + 3}"),
        "twice.tsv": (text + text.splitlines(True)[2], "pair answered twice (first on line 3)"),
        "foreign.tsv": ("src_id\ttgt_id\n", ":1: not an answers file of trie-mine-review"),
    }
    for name, (body, problem) in cases.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
        assert review_main([run, "--labels", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert problem in err and "\n" not in err, (name, err)
    assert review_main([run, "--labels", good, "--n", "50"]) == 2
    assert "drawn with --n 100" in capsys.readouterr().err
    assert review_main([run, "--labels", good, "--n", "100"]) == 0  # the same n: fine
    capsys.readouterr()


def test_usage_errors(run, tmp_path, capsys):
    for argv in ([run], [run, "-o", "x.html", "--labels", "a.tsv"],
                 [run, "-o", "x.html", "--gold-out", "g"], [run, "-o", "x.html", "--n", "0"]):
        with pytest.raises(SystemExit) as exc:
            review_main(argv)
        assert exc.value.code == 2
    assert review_main([run, "-o", run]) == 2
    assert "must not be an input" in capsys.readouterr().err
    scores = scores_run(tmp_path / "scores.tsv", [0.9, 0.2], [1, 0])
    sheet = draw(read_run(scores))
    answers = _answers(tmp_path / "a.tsv", sheet, lambda p: "y")
    assert review_main([scores, "--labels", answers]) == 0
    assert review_main([scores, "--labels", answers, "--gold-out", str(tmp_path / "g")]) == 2
    assert "--gold-out writes the src_id/tgt_id pairs of a mining TSV" in capsys.readouterr().err


@pytest.mark.integration
def test_the_gold_file_trains_a_judge(run, tmp_path, capsys):
    sheet = draw(read_run(run), n=10 ** 6, below=10)
    truth = {(p["src_id"], p["tgt_id"]): "y" if p["prob"] >= 0.7 else "n" for p in sheet.pairs}
    answers = _answers(tmp_path / "a.tsv", sheet, lambda p: truth[p["src_id"], p["tgt_id"]])
    gold = tmp_path / "gold.tsv"
    assert review_main([run, "--labels", answers, "--n", str(10 ** 6), "--gold-out",
                        str(gold)]) == 0
    capsys.readouterr()
    assert train_judge_main([run, "--gold", str(gold), "-o", str(tmp_path / "judge.json"),
                             "--features", "ce_token,ce_word", "--kind", "logistic"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["positives"] == sum(a == "y" for a in truth.values())
