"""Plots and the HTML report of trie-mine-eval (triemine.evaluation.report).

The page is parsed: both plots must be embedded PNGs (data: URIs), the signature and the pairs
just above and below the threshold must be on it, in the right column, and nothing may be
fetched from elsewhere (no external src/href, no stylesheet links, no scripts).
"""
from __future__ import annotations

import base64
import json
import struct
from html.parser import HTMLParser

import numpy as np
import pytest

from triemine.cli import eval_main
from triemine.evaluation import report
from triemine.filtering.rules import optimize_threshold, threshold_curve

PNG = b"\x89PNG\r\n\x1a\n"
N = 60


@pytest.fixture
def mined_case(tmp_path):
    """A BUCC-layout set of N zh/en sentences, half with a gold pair, and a mining TSV whose
    ce_word is lower for gold pairs on average (overlapping, so the threshold matters)."""
    rng = np.random.default_rng(0)
    d = tmp_path / "bucc"
    d.mkdir()
    zh = [f"zh-{i}\t源句 {i} <b>&</b>" for i in range(N)]
    en = [f"en-{i}\ttarget sentence {i} <script>alert({i})</script>" for i in range(N)]
    (d / "zh-en.t.zh").write_text("\n".join(zh) + "\n", encoding="utf-8")
    (d / "zh-en.t.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    gold = [i for i in range(N) if i % 2 == 0]
    (d / "zh-en.t.gold").write_text("".join(f"zh-{i}\ten-{i}\n" for i in gold))
    rows = ["src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt"]
    ce = {}
    for i in range(N):
        ce[i] = float(rng.normal(1.0 if i % 2 == 0 else 2.0, 0.5))
        rows.append(f"zh-{i}\ten-{i}\t{-3 * ce[i]:.4f}\t{ce[i]:.4f}\t{ce[i]:.4f}\t"
                    f"源句 {i} <b>&</b>\ttarget sentence {i} <script>alert({i})</script>")
    tsv = tmp_path / "mined.tsv"
    tsv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return tsv, d / "zh-en.t.gold", ce, set(gold)


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.links, self.tags, self.stack, self.texts = [], [], [], [], []
        self.section = None
        self.columns = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        for key in ("src", "href", "data", "poster", "action"):
            if key in a:
                self.links.append(a[key])
        if tag == "img":
            self.imgs.append(a.get("src", ""))

    def handle_data(self, data):
        if data.startswith("Kept: just above"):
            self.section = "above"
        elif data.startswith("Dropped: just below"):
            self.section = "below"
        if self.section and data.strip():
            self.columns.setdefault(self.section, []).append(data.strip())
        self.texts.append(data)


def _png_size(data: bytes):
    assert data.startswith(PNG)
    return struct.unpack(">II", data[16:24])


def test_eval_writes_plots_and_a_self_contained_report(mined_case, tmp_path, capsys):
    tsv, gold_file, ce, gold = mined_case
    plots, page, th_file = tmp_path / "plots", tmp_path / "r" / "report.html", tmp_path / "t.json"
    assert eval_main([str(tsv), "--gold", str(gold_file), "--filter", "ce", "--plot", str(plots),
                      "--report", str(page), "--save-thresholds", str(th_file)]) == 0
    out = capsys.readouterr().out
    signature = [ln for ln in out.splitlines() if ln.startswith("model=")][0]
    for name in (report.CURVE_PNG, report.HISTOGRAM_PNG):
        w, h = _png_size((plots / name).read_bytes())
        assert w > 300 and h > 200
    threshold = json.loads(th_file.read_text())["thresholds"]
    threshold = list(threshold.values())[0]["ce_word"]

    text = page.read_text(encoding="utf-8")
    p = _Page()
    p.feed(text)
    # plots embedded, nothing fetched from elsewhere
    assert len(p.imgs) == 2
    for src in p.imgs:
        assert src.startswith("data:image/png;base64,")
        _png_size(base64.b64decode(src.split(",", 1)[1]))
    assert all(link.startswith("data:") for link in p.links), p.links
    assert "script" not in p.tags and "link" not in p.tags and "iframe" not in p.tags
    assert "http://" not in text and "https://" not in text and "url(" not in text
    # texts are escaped: the corpus's <script> is shown, not run
    assert "<script>alert(" not in text and "&lt;script&gt;alert(" in text
    assert signature in "".join(p.texts)
    # the pairs closest to the threshold, on their side of it
    kept = sorted((i for i in range(N) if ce[i] <= threshold), key=lambda i: -ce[i])[:12]
    dropped = sorted((i for i in range(N) if ce[i] > threshold), key=lambda i: ce[i])[:12]
    above, below = " ".join(p.columns["above"]), " ".join(p.columns["below"])
    for i in kept:
        assert f"zh-{i} → en-{i}" in above and f"ce_word {ce[i]:.4f}" in above
    for i in dropped:
        assert f"zh-{i} → en-{i}" in below and f"ce_word {ce[i]:.4f}" in below
    far = max(range(N), key=lambda i: ce[i])  # the worst pair is neither just above nor below
    assert far in dropped or f"zh-{far} → en-{far}" not in above + below
    n_gold_shown = sum(1 for s in p.columns["above"] + p.columns["below"] if s == "gold")
    assert n_gold_shown == sum(i in gold for i in kept + dropped)


def test_threshold_curve_peaks_where_the_threshold_is_tuned():
    rng = np.random.default_rng(3)
    correct = rng.random(200) < 0.4
    values = rng.normal(np.where(correct, 1.0, 2.0), 0.6)
    thr, p, r, f1 = threshold_curve(values, correct, n_gold=100, higher_is_better=False)
    best, prf = optimize_threshold(values, correct, 100, higher_is_better=False)
    assert f1.max() == pytest.approx(prf.f1)
    k = int(np.argmax(f1))
    assert thr[k] <= best < (thr[k + 1] if k + 1 < len(thr) else np.inf)
    assert np.all(np.diff(thr) > 0) and np.all(np.diff(r) >= 0)  # lower is better: ascending
    assert r[-1] == pytest.approx(correct.sum() / 100) and p[-1] == pytest.approx(correct.mean())


def test_near_threshold_and_no_threshold():
    cands = [report.Candidate(f"s{i}", f"t{i}", "a", "b", {"bicleaner": v}, i % 2 == 0)
             for i, v in enumerate([0.9, 0.2, 0.55, 0.45, 0.7, 0.1])]
    data = report.ReportData("bicleaner", True, cands, 0.5, "sig", n_gold=3)
    above, below = report.near_threshold(data, k=2)
    assert [c.src_id for c in above] == ["s2", "s4"] and [c.src_id for c in below] == ["s3", "s1"]
    data.threshold = None
    above, below = report.near_threshold(data, k=10)
    assert len(above) == 6 and below == []
    html_text = report.render_report(data)
    assert "no threshold" in html_text and html_text.count("data:image/png;base64,") == 2


def test_the_report_plots_what_prob_promises_beside_what_the_gold_says():
    from triemine.evaluation.report import (Candidate, ReportData, expected_curve,
                                            render_report)

    c = expected_curve([0.2, 0.9, np.nan, 0.5], [False, True, True, True], n_gold=4)
    np.testing.assert_allclose(c["cut"], [0.9, 0.5, 0.2])
    np.testing.assert_allclose(c["expected_precision"], [0.9, 0.7, 1.6 / 3])
    np.testing.assert_allclose(c["expected_recall"], [0.9 / 1.6, 1.4 / 1.6, 1.0])
    np.testing.assert_allclose(c["precision"], [1.0, 1.0, 2 / 3])
    np.testing.assert_allclose(c["recall"], [0.25, 0.5, 0.5])
    cands = [Candidate(f"s{i}", f"t{i}", "a", "b", {"prob": i / 10}, i > 5) for i in range(10)]
    data = ReportData("prob", True, cands, 0.5, "sig", 4, prob=np.arange(10) / 10,
                      density=0.2)
    page = render_report(data)
    assert "expected precision and recall against the prob cut" in page
