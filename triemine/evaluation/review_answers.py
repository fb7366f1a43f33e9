"""The answers a reader gave on a sheet (:mod:`triemine.evaluation.review`): their file, the
precision they measure, and the gold file of the pairs read as translations.

The answers file (the page exports it, :func:`header` writes its first two lines)::

    # trie-mine-review answers<TAB>fingerprint=F<TAB>n=100<TAB>seed=0<TAB>below=10<TAB>run=NAME
    src_id<TAB>tgt_id<TAB>answer
    s17<TAB>t4<TAB>y

one row per answered pair, ``answer`` one of :data:`ANSWERS`: ``y`` a translation, ``n`` not
one, ``p`` a partial translation (counted as not a translation), ``s`` skipped (left out).  The
first line names the sheet: its fingerprint and the drawing parameters that draw it again from
the run (:func:`triemine.evaluation.review.draw`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from triemine.errors import InputError
from triemine.evaluation.quality import stratified_precision
from triemine.judging.quality import expected_quality
from triemine.evaluation.review import BELOW_STRATUM, Run, Sheet, draw, kept_rows, read_run
from triemine.io import clean_cell, read_text, write_text

ANSWERS = {"y": "translation", "n": "not a translation", "p": "partial", "s": "skipped"}
MAGIC = "# trie-mine-review answers"
COLUMNS = ("src_id", "tgt_id", "answer")
PARAMS = ("n", "seed", "below")
SHOWN = 3  # bad lines named in an error


def header(sheet: Sheet) -> str:
    """The answers file's first two lines (each ending in a newline) for ``sheet``."""
    fields = [MAGIC, f"fingerprint={sheet.fingerprint}"]
    fields += [f"{k}={v}" for k, v in sheet.params().items()]
    fields.append(f"run={clean_cell(sheet.run)}")
    return "\t".join(fields) + "\n" + "\t".join(COLUMNS) + "\n"


@dataclass
class Answers:
    """An answers file read: the sheet it names and every answered key's ``(answer, line)``."""

    path: str
    fingerprint: str
    params: Dict[str, int]
    rows: Dict[Tuple[str, str], Tuple[str, int]] = field(default_factory=dict)


def _first_line(line: str, path: str) -> Tuple[str, Dict[str, int]]:
    """The fingerprint and the drawing parameters of the answers file's first line."""
    fields = line.split("\t")
    if fields[0] != MAGIC:
        raise InputError(f"not an answers file of trie-mine-review (its first line starts "
                         f"{MAGIC!r})", path, 1)
    values = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
    missing = [k for k in ("fingerprint",) + PARAMS if not values.get(k)]
    if missing:
        raise InputError(f"the first line lacks {', '.join(k + '=' for k in missing)}", path, 1)
    try:
        params = {k: int(values[k]) for k in PARAMS}
    except ValueError:
        raise InputError(f"the first line's {'/'.join(PARAMS)} are not whole numbers", path,
                         1) from None
    return values["fingerprint"], params


def read_answers(path) -> Answers:
    """The answers file ``path`` (module docstring). :class:`InputError` (one line naming the
    file and the first bad line) for a file of another kind, or bad lines: the wrong number of
    columns, an answer not in :data:`ANSWERS`, a pair answered twice (the count of bad lines and
    the first :data:`SHOWN` named)."""
    path = os.fspath(path)
    lines = read_text(path, "answers file").split("\n")
    fp, params = _first_line(lines[0].rstrip("\r"), path)
    if len(lines) < 2 or lines[1].rstrip("\r") != "\t".join(COLUMNS):
        raise InputError(f"expected the column line {' '.join(COLUMNS)} (tab-separated)", path, 2)
    out = Answers(path, fp, params)
    bad: List[Tuple[int, str]] = []
    for no, line in enumerate(lines[2:], 3):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(COLUMNS) or not cells[0] or not cells[1]:
            bad.append((no, f"expected src_id, tgt_id and answer, tab-separated ({len(cells)} "
                            "column(s))"))
        elif cells[2] not in ANSWERS:
            bad.append((no, f"answer {cells[2]!r} is not one of {' '.join(ANSWERS)}"))
        elif (cells[0], cells[1]) in out.rows:
            bad.append((no, f"pair answered twice (first on line "
                            f"{out.rows[cells[0], cells[1]][1]})"))
        else:
            out.rows[cells[0], cells[1]] = (cells[2], no)
    if bad:
        more = f"; also line(s) {', '.join(str(n) for n, _ in bad[1:SHOWN + 1])}" \
            + (" ..." if len(bad) > SHOWN + 1 else "") if len(bad) > 1 else ""
        raise InputError(f"{len(bad)} bad line(s), the first: {bad[0][1]}{more}", path, bad[0][0])
    return out


def check_answers(answers: Answers, sheet: Sheet) -> None:
    """Refuse answers of another sheet (another fingerprint) or naming pairs not in ``sheet``."""
    if answers.fingerprint != sheet.fingerprint:
        params = " ".join(f"--{k} {v}" for k, v in sheet.params().items())
        raise InputError(f"these answers belong to another run (fingerprint "
                         f"{answers.fingerprint}); {sheet.run} with {params} draws the sheet "
                         f"{sheet.fingerprint} (another run, or this one changed since)",
                         answers.path, 1)
    keys = sheet.keys()
    strangers = [(k, no) for k, (_, no) in answers.rows.items() if k not in keys]
    if strangers:
        (s, t), no = strangers[0]
        raise InputError(f"{len(strangers)} answer(s) name pairs not in the sheet, the first: "
                         f"{s} {t}", answers.path, no)


def _counts(pairs: List[dict], answers: Answers) -> Dict[str, int]:
    """How many of ``pairs`` got each answer, and how many none (``unanswered``)."""
    out = {a: 0 for a in ANSWERS}
    out["unanswered"] = 0
    for p in pairs:
        got = answers.rows.get((p["src_id"], p["tgt_id"]))
        out[got[0] if got else "unanswered"] += 1
    return out


def summarize(run: Run, sheet: Sheet, answers: Answers) -> Dict[str, object]:
    """What the answers measure (answers checked against ``sheet``, :func:`check_answers`).

    ``precision``, ``low``, ``high``: the kept set's precision weighted back from the strata
    (:func:`~triemine.evaluation.quality.stratified_precision`: ``y`` true, ``n`` and ``p``
    false, ``s`` and unanswered pairs left out), its interval at ``level``; ``partial_share``:
    the share of ``p`` among the answered kept pairs (not weighted); ``expected_precision``
    (and, for a mining TSV, ``expected_recall``): what the kept pairs' ``prob`` promise
    (:func:`~triemine.evaluation.quality.expected_quality`, over every kept pair); ``strata``:
    each kept stratum's size, prob range and answer counts; ``below``: the answer counts of the
    pairs below the cut (not weighted, not in the precision)."""
    check_answers(answers, sheet)
    strata = []
    for st in sheet.strata:
        counts = _counts([p for p in sheet.pairs if p["stratum"] == st["stratum"]], answers)
        strata.append(dict(st, **counts))
    est = stratified_precision([s["size"] for s in strata],
                               [s["y"] + s["n"] + s["p"] for s in strata],
                               [s["y"] for s in strata])
    kept_counts = {a: sum(s[a] for s in strata) for a in list(ANSWERS) + ["unanswered"]}
    answered = kept_counts["y"] + kept_counts["n"] + kept_counts["p"]
    expected = expected_quality(run.prob[kept_rows(run)], run.best_prob_per_source())
    below = _counts([p for p in sheet.pairs if p["stratum"] == BELOW_STRATUM], answers)
    below["drawn"] = sum(below.values())
    return {"run": run.path, "fingerprint": sheet.fingerprint, "kept": sheet.kept,
            "drawn": sum(s["drawn"] for s in strata), **kept_counts,
            "precision": est["precision"], "low": est["low"], "high": est["high"],
            "level": est["level"], "n_eff": est["n_eff"],
            "interval": "Korn-Graubard: Clopper-Pearson on the effective sample size",
            "unanswered_share": est["unanswered_share"],
            "partial_share": kept_counts["p"] / answered if answered else None,
            "expected_precision": expected["expected_precision"],
            "expected_recall": expected.get("expected_recall"),
            "strata": strata, "below": below}


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def report_lines(summary: Dict[str, object]) -> List[str]:
    """The summary as lines a person reads."""
    s = summary
    lines = [f"{os.path.basename(str(s['run']))}: {s['y'] + s['n'] + s['p']} of {s['drawn']} "
             f"drawn kept pairs answered ({s['s']} skipped, {s['unanswered']} unanswered), "
             f"{len(s['strata'])} strata weighted back to {s['kept']} kept pairs"]
    if s["precision"] is None:
        lines.append("precision: no kept pair answered y, n or p")
    else:
        lines.append(f"precision {_pct(s['precision'])} ({round(100 * s['level'])}% interval "
                     f"{_pct(s['low'])} to {_pct(s['high'])}, effective sample size "
                     f"{s['n_eff']:.0f}); partials ({_pct(s['partial_share'])} of the "
                     "answered kept pairs) count as not translations")
    if s["unanswered_share"]:
        lines.append(f"warning: strata without answers ({_pct(s['unanswered_share'])} of the "
                     "kept pairs) are left out of the precision")
    exp = f"expected precision (mean prob of the kept pairs) {_pct(s['expected_precision'])}"
    if s.get("expected_recall") is not None:
        exp += f", expected recall of the candidates {_pct(s['expected_recall'])}"
    lines.append(exp)
    b = s["below"]
    if b["drawn"]:
        lines.append(f"below the cut (not in the precision): {b['y']} of "
                     f"{b['y'] + b['n'] + b['p']} answered read as translations ({b['p']} "
                     f"partial, {b['s']} skipped, {b['unanswered']} unanswered)")
    if "gold_pairs" in s:
        lines.append(f"wrote {s['gold']}: {s['gold_pairs']} pairs answered y" if s["gold"]
                     else "no pair answered y: no gold file written")
    return lines


def write_gold(path, sheet: Sheet, answers: Answers) -> int:
    """A BUCC-style gold file (``src_id<TAB>tgt_id`` lines, sheet order) of the pairs answered
    ``y``, kept or below the cut, written atomically; how many. Nothing is written (0) when no
    pair is answered ``y`` (a gold file holds at least one pair)."""
    gold = [(p["src_id"], p["tgt_id"]) for p in sheet.pairs
            if answers.rows.get((p["src_id"], p["tgt_id"]), ("",))[0] == "y"]
    if gold:
        write_text(path, "".join(f"{s}\t{t}\n" for s, t in gold), "gold file", hint="")
    return len(gold)


def label_run(run_path, answers_path, gold_out=None, given: Optional[Dict[str, int]] = None
              ) -> Dict[str, object]:
    """``trie-mine-review RUN --labels ANSWERS``: the run read, its sheet drawn again with the
    answers' own parameters (``given`` ones, e.g. ``{"n": 100}``, must agree with them), the
    answers checked and summarized (:func:`summarize`); with ``gold_out`` (a mining TSV only)
    the gold file written (:func:`write_gold`; ``gold``: its path or None when no pair is
    answered ``y``, ``gold_pairs``). :class:`InputError` for answers of another sheet, or
    parameters or a run that do not fit them."""
    answers = read_answers(answers_path)
    clash = {k: v for k, v in (given or {}).items() if answers.params.get(k) != v}
    if clash:
        drawn = " ".join(f"--{k} {answers.params[k]}" for k in clash)
        raise InputError(f"the answers' sheet was drawn with {drawn} (leave these flags out "
                         "with --labels)", answers.path, 1)
    run = read_run(run_path)
    if gold_out and run.kind != "mining":
        raise InputError("--gold-out writes the src_id/tgt_id pairs of a mining TSV (what "
                         "trie-mine-train-judge reads); this is a scores TSV", run.path)
    sheet = draw(run, **answers.params)
    summary = summarize(run, sheet, answers)
    if gold_out:
        pairs = write_gold(gold_out, sheet, answers)
        summary.update(gold=gold_out if pairs else None, gold_pairs=pairs)
    return summary
