"""Results a person can look at: threshold plots and a self-contained HTML report.

The entry points take plain data (:class:`ReportData`: the score column, its direction, the
candidate pairs with their ids, texts, score values and gold flags, the chosen threshold and the
signature line), so they do not depend on how the evaluation pipeline computed them.

* :func:`write_plots` writes ``threshold_curve.png`` (precision, recall and F1 of every threshold
  on the score, the chosen one marked) and ``score_histogram.png`` (the score's distribution over
  gold and non-gold candidates, the threshold marked).
* :func:`reliability_png` (with ``ReportData.prob``): the reliability diagram of the calibrated
  probability ``prob``: the share of gold pairs (y) against the mean ``prob`` (x) per bin, the
  bins' pair counts written beside their points.
* :func:`expected_png` (with ``ReportData.prob``): the expected precision and recall that
  ``prob`` promises against its cut, beside the gold's, the cut and the run's density marked.
* :func:`write_report` writes one HTML page with the plots embedded as ``data:`` URIs, the
  signature, and the candidate pairs just above and just below the threshold side by side, so a
  reader can judge the threshold by reading pairs. Nothing on the page is fetched from elsewhere
  (no external CSS, scripts, fonts or images).

Plots use matplotlib's object-oriented API with the Agg canvas (no pyplot, no global backend).
"""
from __future__ import annotations

import base64
import html
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from triemine.judging.calibration import ece, reliability
from triemine.filtering.rules import threshold_curve
from triemine.io import atomic_write, write_output

CURVE_PNG = "threshold_curve.png"
HISTOGRAM_PNG = "score_histogram.png"


@dataclass
class Candidate:
    """One candidate pair as the evaluation saw it."""
    src_id: str
    tgt_id: str
    src: str
    tgt: str
    scores: Dict[str, float]
    gold: bool


@dataclass
class ReportData:
    """Everything a report shows. ``score`` names the column ``threshold`` applies to (None: no
    threshold, e.g. filter ``none``); ``n_gold`` is the size of the gold set (recall's
    denominator); ``summary`` lines (P/R/F1 ...) are shown as given."""
    score: str
    higher_is_better: bool
    candidates: List[Candidate]
    threshold: Optional[float]
    signature: str
    n_gold: int
    title: str = "trie-mine evaluation"
    summary: List[str] = field(default_factory=list)
    # the calibrated probability of each candidate (NaN: none), for the reliability diagram
    # and the expected precision and recall; the share of translations the run estimated
    prob: Optional[np.ndarray] = None
    density: Optional[float] = None

    def values(self) -> np.ndarray:
        return np.array([c.scores[self.score] for c in self.candidates], dtype=np.float64)

    def gold(self) -> np.ndarray:
        return np.array([c.gold for c in self.candidates], dtype=bool)

    def kept(self) -> np.ndarray:
        v = self.values()
        if self.threshold is None:
            return np.ones(len(v), dtype=bool)
        return v >= self.threshold if self.higher_is_better else v <= self.threshold

    def direction(self) -> str:
        return ">=" if self.higher_is_better else "<="


def _figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _mark_threshold(ax, data: ReportData) -> None:
    if data.threshold is not None and math.isfinite(data.threshold):
        ax.axvline(data.threshold, color="black", linestyle="--", linewidth=1.2,
                   label=f"threshold {data.score} {data.direction()} {data.threshold:.4g}")


def threshold_curve_png(data: ReportData) -> bytes:
    """P, R and F1 (y) of keeping candidates at each threshold on ``data.score`` (x)."""
    thr, p, r, f1 = threshold_curve(data.values(), data.gold(), data.n_gold,
                                    data.higher_is_better)
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(thr, p, label="precision", color="#1f77b4", drawstyle="steps-post")
    ax.plot(thr, r, label="recall", color="#2ca02c", drawstyle="steps-post")
    ax.plot(thr, f1, label="F1", color="#d62728", linewidth=2, drawstyle="steps-post")
    _mark_threshold(ax, data)
    keep = "kept: value and better" if len(thr) else "no candidates"
    ax.set_xlabel(f"threshold on {data.score} ({'higher' if data.higher_is_better else 'lower'}"
                  f" is better; {keep})")
    ax.set_ylabel("score against the gold pairs")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Precision / recall / F1 against the {data.score} threshold")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def histogram_png(data: ReportData) -> bytes:
    """Distribution of ``data.score`` over gold and non-gold candidates."""
    values, gold = data.values(), data.gold()
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    finite = values[np.isfinite(values)]
    bins = np.histogram_bin_edges(finite, bins=40) if len(finite) else 10
    ax.hist(values[~gold & np.isfinite(values)], bins=bins, alpha=0.6, color="#7f7f7f",
            label=f"not gold ({int((~gold).sum())})")
    ax.hist(values[gold & np.isfinite(values)], bins=bins, alpha=0.7, color="#2ca02c",
            label=f"gold ({int(gold.sum())})")
    _mark_threshold(ax, data)
    ax.set_xlabel(data.score)
    ax.set_ylabel("candidates")
    ax.set_title(f"{data.score} of gold and non-gold candidates")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def write_plots(data: ReportData, out_dir) -> List[Path]:
    """Write the two PNGs into ``out_dir`` (created); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / CURVE_PNG, out / HISTOGRAM_PNG]
    atomic_write(paths[0], threshold_curve_png(data), "plot", hint="")
    atomic_write(paths[1], histogram_png(data), "plot", hint="")
    return paths


def near_threshold(data: ReportData, k: int = 12) -> tuple[List[Candidate], List[Candidate]]:
    """The ``k`` kept candidates closest to the threshold (worst kept first) and the ``k``
    dropped ones closest to it (best dropped first)."""
    values, kept = data.values(), data.kept()
    bad = -values if data.higher_is_better else values  # larger is worse
    above = [i for i in np.argsort(-bad, kind="stable") if kept[i]][:k]
    below = [i for i in np.argsort(bad, kind="stable") if not kept[i]][:k]
    return [data.candidates[i] for i in above], [data.candidates[i] for i in below]


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def _pair_rows(rows: Sequence[Candidate], score: str) -> str:
    if not rows:
        return '<p class="empty">none</p>'
    out = ['<table><thead><tr><th>gold pair?</th><th>source / target</th><th>scores</th></tr>'
           '</thead><tbody>']
    for c in rows:
        mark = '<span class="yes">gold</span>' if c.gold else '<span class="no">not gold</span>'
        scores = "<br>".join(
            f'<span class="{"key" if name == score else ""}">{html.escape(name)} '
            f'{value:.4f}</span>' for name, value in c.scores.items())
        out.append(
            f'<tr class="{"gold" if c.gold else "other"}"><td>{mark}</td>'
            f'<td><div class="ids">{html.escape(c.src_id)} &rarr; {html.escape(c.tgt_id)}</div>'
            f'<div class="src">{html.escape(c.src)}</div>'
            f'<div class="tgt">{html.escape(c.tgt)}</div></td>'
            f'<td class="num">{scores}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


_CSS = """
body{font-family:sans-serif,"Noto Sans CJK SC","WenQuanYi Zen Hei";margin:1.5em;color:#222;
     max-width:1400px}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.4em}
pre{background:#f4f4f4;padding:.6em;white-space:pre-wrap;word-break:break-all}
.plots{display:flex;flex-wrap:wrap;gap:1em}
.plots img{width:calc(50% - .6em);min-width:420px;box-sizing:border-box;border:1px solid #ddd}
.side{display:flex;gap:1.2em;align-items:flex-start} .side>div{flex:1 1 0;min-width:0}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid #ddd;padding:.35em;vertical-align:top;text-align:left}
td:first-child{white-space:nowrap} tr.gold{background:#eef8ee} .ids{color:#777;font-size:.85em}
.tgt{color:#124;margin-top:.2em}
.num{white-space:nowrap;font-family:monospace} .key{font-weight:bold}
.yes{color:#1a7f1a;font-weight:bold} .no{color:#999} .empty{color:#999}
"""


def render_report(data: ReportData, k: int = 12) -> str:
    """The report page as one HTML string (see :func:`write_report`)."""
    above, below = near_threshold(data, k)
    kept, gold = data.kept(), data.gold()
    if data.threshold is None:
        rule = f"no threshold: every candidate is kept (ranked by {data.score})"
    else:
        rule = f"keep {data.score} {data.direction()} {data.threshold:.4f}"
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in data.summary)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(data.title)}</title>
<style>{_CSS}</style></head>
<body>
<h1>{html.escape(data.title)}</h1>
<pre class="signature">{html.escape(data.signature)}</pre>
<p>{html.escape(rule)} &mdash; {int(kept.sum())} of {len(kept)} candidates kept,
{int((kept & gold).sum())} of them gold; {data.n_gold} gold pairs in all.</p>
<ul>{summary}</ul>
<h2>Plots</h2>
<div class="plots">
{_img(threshold_curve_png(data), "precision, recall and F1 against the threshold")}
{_img(histogram_png(data), "score histogram of gold and non-gold candidates")}
{_reliability_img(data)}</div>
<h2>Pairs at the threshold</h2>
<div class="side">
<div><h3>Kept: just above the threshold (worst kept first)</h3>{_pair_rows(above, data.score)}</div>
<div><h3>Dropped: just below the threshold (best dropped first)</h3>
{_pair_rows(below, data.score)}</div>
</div>
</body></html>
"""


def write_report(data: ReportData, path, k: int = 12) -> Path:
    """Write the self-contained HTML report to ``path`` (compressed when its name ends in
    ``.gz``/``.xz``/``.zst``); returns it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_output(path, render_report(data, k).encode("utf-8"), "report", hint="")
    return path


def reliability_png(data: ReportData) -> bytes:
    """The reliability diagram of ``data.prob`` against the gold flags
    (:func:`triemine.judging.calibration.reliability`), its expected calibration error in the
    title."""
    pts = reliability(data.prob, data.gold())
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], color="#bbbbbb", linestyle="--", label="perfect calibration")
    ax.plot([q["mean_prob"] for q in pts], [q["share_true"] for q in pts], marker="o",
            color="#1f77b4", label="candidates by prob bin")
    for q in pts:
        ax.annotate(str(q["n"]), (q["mean_prob"], q["share_true"]), fontsize=7,
                    textcoords="offset points", xytext=(4, -10))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean calibrated probability (prob) in the bin")
    ax.set_ylabel("share of gold pairs in the bin")
    e = ece(data.prob, data.gold())
    ax.set_title("Reliability of prob" + ("" if e is None else f" (ECE {e:.3f})"))
    ax.legend(loc="upper left")
    return _png(fig)


def expected_curve(prob, gold, n_gold: int) -> Dict[str, np.ndarray]:
    """At each cut ``prob >= cut[i]`` of the candidates with a finite ``prob`` (``cut``: their
    ``prob`` in falling order): ``expected_precision`` (the kept ones' mean ``prob``),
    ``expected_recall`` (their ``prob`` over every candidate's), ``precision`` and ``recall``
    by the ``gold`` flags (recall over ``n_gold``).  Float64 arrays of one value a candidate."""
    p = np.asarray(prob, dtype=np.float64)
    ok = np.isfinite(p)
    p, g = p[ok], np.asarray(gold, dtype=np.float64)[ok]
    order = np.argsort(-p, kind="stable")
    p, g = p[order], g[order]
    kept = np.arange(1, len(p) + 1)
    return {"cut": p, "expected_precision": np.cumsum(p) / kept,
            "expected_recall": np.cumsum(p) / max(float(p.sum()), 1e-12),
            "precision": np.cumsum(g) / kept, "recall": np.cumsum(g) / max(n_gold, 1)}


def expected_png(data: ReportData) -> bytes:
    """What ``data.prob`` promises at each cut ``prob >= x`` of the candidates (x): the
    expected precision (their mean ``prob``) and recall (their ``prob`` over every candidate's:
    each candidate one source's best, as one-to-one rows are), beside the precision and recall
    the gold gives (dashed); the report's cut marked when it is on ``prob``, the density the run
    estimated in the title."""
    c = expected_curve(data.prob, data.gold(), data.n_gold)
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    if len(c["cut"]):
        for key, color, style, label in (
                ("expected_precision", "#1f77b4", "-", "expected precision"),
                ("expected_recall", "#2ca02c", "-", "expected recall (of the candidates)"),
                ("precision", "#1f77b4", ":", "precision (gold)"),
                ("recall", "#2ca02c", ":", "recall (gold)")):
            ax.plot(c["cut"], c[key], color=color, linestyle=style, label=label)
    if data.score == "prob":
        _mark_threshold(ax, data)
    ax.set_xlabel("cut: keep prob >= x")
    ax.set_xlim(1.02, -0.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("What prob promises, and what the gold says"
                 + ("" if data.density is None else
                    f" (the run's estimated share of translations: {data.density:.3f})"),
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def _reliability_img(data: ReportData) -> str:
    """The reliability diagram's ``<img>``, or ``""`` without probabilities."""
    if data.prob is None or not np.isfinite(np.asarray(data.prob, dtype=np.float64)).any():
        return ""
    return (_img(reliability_png(data), "reliability diagram of the calibrated probability")
            + _img(expected_png(data), "expected precision and recall against the prob cut"))
