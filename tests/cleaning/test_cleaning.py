"""trie-mine-score (triemine.cleaning): reading given pairs, bad input, the job, the
calibrated probability and the noise kinds."""
import gzip
import json

import numpy as np
import pytest

from triemine.judging.calibration import Calibration, ece, reliability
from triemine.cleaning import given_pairs, score
from triemine.cleaning.noise import KINDS, change_number, half, noisy_set
from triemine.cleaning.pairs import read_pairs
from triemine.cli import score_main
from triemine.errors import InputError

PAIRS = [("你好。", "Hello."), ("再见！", "Bye!"), ("谢谢", "Thanks")]


def _write_all_formats(d):
    """The same three pairs as TSV (2 and 3 columns), Moses, TMX, JSONL, and gzip TSV."""
    files = {}
    files["tsv"] = d / "p.tsv"
    files["tsv"].write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    files["tsv3"] = d / "p3.tsv"
    files["tsv3"].write_text("".join(f"id{i}\t{s}\t{t}\n" for i, (s, t) in enumerate(PAIRS)),
                             encoding="utf-8")
    (d / "p.zh").write_text("".join(s + "\n" for s, _ in PAIRS), encoding="utf-8")
    (d / "p.en").write_text("".join(t + "\n" for _, t in PAIRS), encoding="utf-8")
    files["moses"] = (str(d / "p.zh"), str(d / "p.en"))
    files["tmx"] = d / "p.tmx"
    tus = "".join(f'<tu><tuv xml:lang="en"><seg>{t}</seg></tuv><tuv xml:lang="zh"><seg>{s}'
                  f'<ph>x</ph></seg></tuv></tu>\n' for s, t in PAIRS)
    files["tmx"].write_text(f'<?xml version="1.0"?>\n<tmx version="1.4"><header srclang="zh"/>'
                            f'<body>\n{tus}</body></tmx>\n', encoding="utf-8")
    files["jsonl"] = d / "p.jsonl"
    files["jsonl"].write_text("".join(json.dumps({"src": s, "tgt": t}, ensure_ascii=False) + "\n"
                                      for s, t in PAIRS[:2]) +
                              json.dumps({"translation": {"zh": PAIRS[2][0], "en": PAIRS[2][1]}},
                                         ensure_ascii=False) + "\n", encoding="utf-8")
    files["gz"] = d / "p.tsv.gz"
    files["gz"].write_bytes(gzip.compress(files["tsv"].read_bytes()))
    return files


def test_every_format_reads_the_same_pairs_in_order(tmp_path):
    for name, path in _write_all_formats(tmp_path).items():
        bt = read_pairs(list(path) if isinstance(path, tuple) else path)
        assert list(zip(bt.src, bt.tgt)) == PAIRS, name
        assert bt.skipped == 0
    assert read_pairs(tmp_path / "p3.tsv").ids == ["id0", "id1", "id2"]
    tmx = read_pairs(tmp_path / "p.tmx")
    assert tmx.lines == [3, 4, 5]  # the line each <tu> opens on


def test_one_bad_line_is_skipped_and_counted_with_its_line(tmp_path):
    p = tmp_path / "p.tsv"
    p.write_text("a\tA\nonly one column\nb\tB\nc\tC\n", encoding="utf-8")
    bt = read_pairs(p)
    assert bt.src == ["a", "b", "c"] and bt.lines == [1, 3, 4]
    assert bt.skipped == 1 and bt.problems[0][1] == 2 and "1 column" in bt.problems[0][2]


BAD = {
    "not_xml.tmx": ('<tmx><body><tu><tuv xml:lang="zh"><seg>a</seg></tuv>\n</body></tmx>\n',
                    "not_xml.tmx:2: not XML"),
    "one_col.tsv": ("just text\nmore text\n", "one_col.tsv:1: 1 column"),
    "fields.jsonl": ('{"text": "a"}\n', "fields.jsonl:1: no src and tgt fields"),
    "empty.tsv": ("", "empty.tsv: no pairs"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_naming_file_line_and_problem_exit_2(tmp_path, capsys, name):
    text, want = BAD[name]
    (tmp_path / name).write_text(text, encoding="utf-8")
    rc = score_main([str(tmp_path / name), "--model", str(tmp_path / "no-model"),
                     "-o", str(tmp_path / "out.tsv")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and want in err, err
    assert "Traceback" not in err and not (tmp_path / "out.tsv").exists()


def test_a_moses_pair_of_unequal_length_is_refused_naming_the_short_file(tmp_path, capsys):
    (tmp_path / "a.zh").write_text("一\n二\n三\n", encoding="utf-8")
    (tmp_path / "a.en").write_text("one\ntwo\n", encoding="utf-8")
    rc = score_main([str(tmp_path / "a.zh"), str(tmp_path / "a.en"), "--model",
                     str(tmp_path / "m"), "-o", str(tmp_path / "out.tsv")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "a.en:3: Moses pair of unequal length" in err and "a.zh has 3" in err


def test_given_pairs_from_python_lists_name_the_bad_item():
    assert given_pairs([("a", "b")]).src == ["a"]
    with pytest.raises(InputError, match=r"pairs\[1\]"):
        given_pairs([("a", "b"), ("c",)])


def test_calibration_fit_recovers_a_known_curve_and_inverts():
    rng = np.random.default_rng(0)
    x = rng.normal(size=20000) * 3
    y = (rng.random(20000) < 1 / (1 + np.exp(-(1.5 * x - 2.0)))).astype(int)
    cal = Calibration.fit(x, y, "synthetic")
    assert abs(cal.a - 1.5) < 0.1 and abs(cal.b + 2.0) < 0.1
    assert abs(cal(cal.threshold(0.8)) - 0.8) < 1e-9
    assert ece(cal(x), y) < 0.02
    pts = reliability(cal(x), y)
    assert sum(p["n"] for p in pts) == len(x) and all(0 <= p["share_true"] <= 1 for p in pts)
    assert ece(np.full(1000, 0.9), np.zeros(1000)) == pytest.approx(0.9)


def test_noise_kinds_are_what_they_say():
    src = [f"源{i}" for i in range(20)]
    tgt = [f"word{i} and {i + 1} more words here" for i in range(20)]
    ns = noisy_set(src, tgt, ["Ein Satz."], per_kind=5)
    assert ns.label.sum() == 20 and len(ns) == 20 + 5 * len(KINDS)
    for s, t, k in zip(ns.src, ns.tgt, ns.kind):
        i = src.index(s)
        if k == "partial":
            assert t == half(tgt[i]) and tgt[i].startswith(t)
        elif k == "neighbour":
            assert t == tgt[i + 1]
        elif k == "copy":
            assert t == s
        elif k == "other_lang":
            assert t == "Ein Satz."
        elif k == "number":
            assert t != tgt[i] and len(t) == len(tgt[i])
        elif k == "misaligned":
            assert t in tgt and t != tgt[i]
    assert change_number("no digits", np.random.default_rng(0)) is None


@pytest.fixture()
def tiny_pairs(tmp_path):
    from triemine.testing.tiny_model import synthetic_pairs

    good = synthetic_pairs(12, seed=3)
    rows = good + [(good[0][0], good[5][1]), good[1], ("", good[3][1]), (good[2][0], good[2][0])]
    p = tmp_path / "pairs.tsv"
    p.write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    return p, rows


def _opts(cipher_combination):
    return dict(encoder="cipher", combination=str(cipher_combination),
                calibration={"a": 1.0, "b": 0.0, "fitted_on": "test"}, threshold=0.0)


def test_score_writes_one_row_per_input_pair_in_order_and_resumes_to_the_same_bytes(
        tmp_path, tiny_model, tiny_pairs, cipher_combination):
    path, rows = tiny_pairs
    out = tmp_path / "scored.tsv"
    res = score(path, model=tiny_model, output=out, bitext=str(tmp_path / "kept.jsonl"),
                bitext_format="jsonl", **_opts(cipher_combination))
    lines = out.read_text(encoding="utf-8").splitlines()
    head = lines[0].split("\t")
    assert head[:5] == ["line", "id", "src", "tgt", "status"]
    for c in ("score", "prior", "pmi", "ce_word", "ce_token", "numerals",
              "uncovered", "number_match",
              "cipher_cos", "cipher_margin", "combined", "prob", "kept"):
        assert c in head
    body = [ln.split("\t") for ln in lines[1:]]
    assert len(body) == len(rows) and [r[2] for r in body] == [s for s, _ in rows]
    col = {c: [r[head.index(c)] for r in body] for c in head}
    assert col["status"][14] == "empty side" and col["combined"][14] == "nan"
    uncovered = np.array([float(v) for v in col["uncovered"][:12]])
    assert np.all((uncovered >= 0) & (uncovered <= 1)) and col["uncovered"][14] == "nan"
    assert col["score"][13] == col["score"][1]  # a repeated pair: the same values
    comb = np.array([float(v) for v in col["combined"][:12]])
    prob = np.array([float(v) for v in col["prob"][:12]])
    assert np.allclose(prob, 1 / (1 + np.exp(-comb)), atol=2e-6)
    # translations beat the misaligned pair and the copy
    assert float(col["combined"][12]) < comb.min() and float(col["combined"][15]) < comb.min()
    kept = [json.loads(x) for x in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert len(kept) == res.summary["kept"] - 1  # the repeated pair once
    first = out.read_bytes()
    score(path, model=tiny_model, output=out, resume=True, **_opts(cipher_combination))
    assert out.read_bytes() == first


def test_langs_add_the_language_and_prepare_rule_flags_of_each_side(tmp_path, tiny_model,
                                                                   cipher_combination):
    from triemine.testing.tiny_model import synthetic_pairs

    rows = synthetic_pairs(4, seed=5)  # Latin letters both sides
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    res = score(path, model=tiny_model, output=tmp_path / "s.tsv", langs=("zh", "en"),
                **_opts(cipher_combination))
    assert res.columns["src_rules_ok"].tolist() == [0.0] * 4  # no Han: the script rule drops it
    # the target's letters are Latin and its length fine: only the language rule can drop it
    lang_ok = res.columns["tgt_lang_ok"].tolist()
    assert res.columns["tgt_rules_ok"].tolist() == lang_ok and set(lang_ok) <= {0.0, 1.0}


@pytest.mark.cluster
def test_score_on_two_workers_gives_the_same_bytes_and_no_library_chatter(
        tmp_path, tiny_model_dir, tiny_model, tiny_pairs, cipher_combination, capfd):
    path, _ = tiny_pairs
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    score(path, model=tiny_model, output=one, **_opts(cipher_combination))
    capfd.readouterr()
    score(path, model=str(tiny_model_dir), output=two, workers=2, **_opts(cipher_combination))
    assert one.read_bytes() == two.read_bytes()
    err = capfd.readouterr().err  # the workers' own stderr: no library chatter
    assert "INFO" not in err and "DEBUG" not in err and "UserWarning" not in err, err


def test_min_prob_is_the_calibrations_combined_cut_and_refused_without_one():
    from triemine.config.configurations import configuration
    from triemine.filtering.selection import mined_calibration, min_prob_threshold

    from triemine.judging.shipped import shipped_combination_fields

    comb = shipped_combination_fields("combined")
    meta = {"combination": comb}
    cal = mined_calibration(meta)
    assert cal is not None and cal.fitted_on
    name, value = min_prob_threshold(meta, 0.5)
    assert name == "combined" and abs(cal(value) - 0.5) < 1e-9
    other = dict(comb, weights=[1.0, -1.0, 1.0, 0.0])  # not the shipped combination
    assert mined_calibration({"combination": other}) is None
    with pytest.raises(InputError, match="--min-prob"):
        min_prob_threshold({"combination": other}, 0.5, "x.tsv")
    # a judge's TSV: its prob is the judge's, cut as --threshold prob=P
    judged = {"combination": configuration("judge").combination, "pipeline": {}}
    assert min_prob_threshold(judged, 0.9, "j.tsv") == ("prob", 0.9)


def test_the_report_draws_a_reliability_diagram_when_it_has_probabilities():
    from triemine.evaluation.report import Candidate, ReportData, render_report

    cands = [Candidate(f"s{i}", f"t{i}", "a", "b", {"combined": float(i)}, i > 5)
             for i in range(10)]
    data = ReportData("combined", True, cands, 5.0, "sig", 4)
    assert "reliability diagram" not in render_report(data)
    data.prob = np.linspace(0.05, 0.95, 10)
    assert "reliability diagram" in render_report(data)


def test_every_shipped_calibration_reads_and_rises_with_the_score():
    from triemine.judging.shipped import shipped_calibration

    for use in ("mined", "pairs"):
        cal = shipped_calibration("combined", use)
        assert cal.a > 0 and cal(10.0) > cal(0.0) and cal.fitted_on


def test_trie_mine_min_prob_chooses_the_bitext_and_is_refused_without_it(tmp_path, capsys):
    from triemine.cli import mine_main
    from triemine.cli.arguments import min_prob_cut

    with pytest.raises(SystemExit) as exc:
        mine_main(["--model", str(tmp_path), "--source", "s", "--target", "t", "-o",
                   str(tmp_path / "o.tsv"), "--min-prob", "0.5"])
    assert exc.value.code == 2 and "--min-prob" in capsys.readouterr().err
    import argparse
    name, value = min_prob_cut(argparse.ArgumentParser(), "combined", "combined", 0.5)
    from triemine.judging.shipped import shipped_calibration
    assert name == "combined" and abs(shipped_calibration("combined", "mined")(value) - 0.5) < 1e-9
    # a configuration with a judge: --min-prob is its prob's cut, as --threshold prob=P
    assert min_prob_cut(argparse.ArgumentParser(), "judge", "judge", 0.9) == ("prob", 0.9)
