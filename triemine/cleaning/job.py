"""``trie-mine-score``'s job: every given pair with every feature, the combined score and ``prob``.

    pairs file(s) -> distinct pairs -> side files of distinct texts (work/src.txt, work/tgt.txt)
      -> exact features, encoder cosine and margin, language flags, Bicleaner (optional)
      -> combined (the configuration's fixed combination) -> judge and prob (its judge of given
         pairs: the learned judge, or the record's ``pairs_judge``, a ``zsum`` file whose score
         is the column ``judge``; :mod:`triemine.judging.shipped`)
      -> OUT.tsv: one row per input pair, in input order; kept pairs as a bitext

A pair is scored once however often it occurs (its rows share its values).  A pair with an empty
side or a side over the model's length limits is not scored: its features, ``combined`` and
``prob`` are NaN (``status`` says why) and it is never kept.  The stages keep their shards in
``OUT.tsv.work/`` under a sealed settings file, so ``resume=True`` goes on where a killed run
stopped (other settings, pairs or model: refused); the TSV is written atomically at the end.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from triemine.io import (atomic_write, clean_cell, dumps_sealed, input_digest, output_file,
                         read_sealed)
from triemine.cleaning.judge import (EXACT_COLUMNS, encoder_features, exact_features,
                                     language_flags, rule_flags)
from triemine.config.configurations import DEFAULT
from triemine.judging.features import text_features
from triemine.judging.calibration import Calibration
from triemine.judging.combination import Combination
from triemine.judging.model import CUT, judge_path, load_judge
from triemine.judging.shipped import judge_record, learned, shipped_calibration, shipped
from triemine.judging.quality import expected_quality
from triemine.cleaning.pairs import Bitext
from triemine.decoding import lengths
from triemine.models.fingerprint import model_fingerprint
from triemine.decoding.model_spec import inline_model_pool
from triemine.errors import DamagedFile, InputError
from triemine.filtering import formats
from triemine.filtering.bicleaner import score_bicleaner
from triemine.mining.settings import ScoreSettings
from triemine.scoring import forced_scoring
from triemine.config.settings import declared

logger = logging.getLogger(__name__)
TEXT_COLUMNS = ("line", "id", "src", "tgt", "status")
DEFAULT_MIN_PROB = CUT  # trie-mine-score's shipped cut: a pair more likely a translation than not


@dataclass
class ScoreOptions:
    """What ``trie-mine-score`` computes and keeps: ``config`` (its combination and its judge of
    given pairs; ``combination``, a combination file, and ``calibration``, a
    :class:`~triemine.judging.calibration.Calibration`'s fields, override the first and the last),
    the encoder and its ``k``, language codes for the language flags
    (None: none), Bicleaner (its model: None for the default), the cut: ``min_prob`` or
    ``threshold`` (``combined >=``; neither: ``prob >= 0.5``), and the arithmetic of the exact
    scores (``precision``, as ``trie-mine --precision``; None: the configuration's, else
    ``auto``, resolved by :func:`triemine.cleaning.check_options`).  A configuration with a
    learned judge (``judge``: another judge file) gives ``judge`` and ``prob`` by the judge
    (:mod:`triemine.judging`), its probability shifted to ``density`` (None: the share of
    translations estimated from the pairs, :func:`triemine.judging.prior.estimate_prior`)."""

    config: str = DEFAULT
    combination: Optional[str] = declared(ScoreSettings, "combination")
    calibration: Optional[dict] = None
    encoder: str = "use"
    k: int = 4
    langs: Optional[Tuple[str, str]] = None
    bicleaner: bool = False
    bicleaner_model: Optional[str] = None
    min_prob: Optional[float] = None
    threshold: Optional[float] = None
    precision: Optional[str] = None
    judge: Optional[str] = declared(ScoreSettings, "judge")
    density: Optional[float] = declared(ScoreSettings, "density")

    def cut(self, calibration=None, judge=None) -> Tuple[str, float]:
        """``(column, value)``: a pair is kept when its column is >= value: ``combined >=
        threshold`` when given, else ``prob >= min_prob`` (default :data:`DEFAULT_MIN_PROB`,
        the learned judges' cut): with a learned ``judge``, a cut of its column (``prob``),
        else of the ``calibration``'s score (its curve is monotone)."""
        if self.threshold is not None:
            return "combined", float(self.threshold)
        prob = DEFAULT_MIN_PROB if self.min_prob is None else self.min_prob
        if judge is not None:
            return judge.column, prob
        return calibration.score, calibration.threshold(prob)

    def features(self) -> Tuple[str, ...]:
        """The feature columns :func:`score_bitext` computes with these options (what a
        combination may use)."""
        return (EXACT_COLUMNS + (f"{self.encoder}_cos", f"{self.encoder}_margin", "src_chars",
                                 "tgt_chars", "len_ratio", "number_match")
                + (("src_lang_ok", "tgt_lang_ok", "src_rules_ok", "tgt_rules_ok")
                   if self.langs else ()) + (("bicleaner",) if self.bicleaner else ()))


@dataclass
class Scored:
    """The job's result: the input's pairs (``bitext``), every column by name (one value per
    input pair, input order), the kept mask, the cut and the summary."""

    bitext: Bitext
    columns: Dict[str, np.ndarray]
    status: List[str]
    kept: np.ndarray
    cut: Tuple[str, float]
    summary: Dict[str, object] = field(default_factory=dict)

    def pairs(self, distinct: bool = True) -> formats.Pairs:
        """The kept pairs with every numeric column (each distinct pair once), for
        :func:`triemine.filtering.formats.write`."""
        rows = np.flatnonzero(self.kept)
        if distinct:
            seen, keep = set(), []
            for r in rows.tolist():
                key = (self.bitext.src[r], self.bitext.tgt[r])
                if key not in seen:
                    seen.add(key)
                    keep.append(r)
            rows = np.asarray(keep, dtype=np.int64)
        names = list(self.columns)
        b = self.bitext

        def it():
            for r in rows.tolist():
                yield (b.ids[r], b.ids[r], b.src[r], b.tgt[r], None,
                       tuple(float(self.columns[c][r]) for c in names))
        return formats.Pairs(names, it)


def _distinct(texts: Sequence[str]) -> Tuple[List[str], np.ndarray]:
    """The distinct cleaned texts in first-seen order and each text's position there."""
    pos: Dict[str, int] = {}
    idx = np.fromiter((pos.setdefault(clean_cell(t), len(pos)) for t in texts), dtype=np.int64,
                      count=len(texts))
    return list(pos), idx


def _settings(model, bitext: Bitext, opts: ScoreOptions, side_files) -> dict:
    return {"model": model_fingerprint(model), "encoder": opts.encoder,
            "k": opts.k, "sides": [input_digest(p) for p in side_files],
            **({"precision": opts.precision,
                "arithmetic": forced_scoring().arithmetic("cpu", opts.precision)}
               if opts.precision != "fp32" else {})}


def _prepare_work(work: Path, settings: dict, resume: bool) -> None:
    """``work`` for a run of ``settings``: kept when resuming the same settings, else emptied."""
    path = work / "settings.json"
    old = None
    if path.is_file():
        try:
            old = read_sealed(path, "job settings")
        except DamagedFile:
            old = None
    if resume and old is not None and old != settings:
        raise InputError("cannot resume: the job used other settings, model or pairs (run "
                         "without --resume to start over)", path)
    if old != settings or not resume:
        keep = {"src.txt", "tgt.txt"}
        for p in work.iterdir():
            if p.name not in keep:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    atomic_write(path, dumps_sealed(settings), "job settings")


def _side_files(work: Path, srcs: List[str], tgts: List[str]) -> Tuple[Path, Path]:
    work.mkdir(parents=True, exist_ok=True)
    out = []
    for name, texts in (("src.txt", srcs), ("tgt.txt", tgts)):
        path = work / name
        data = "".join(t + "\n" for t in texts).encode("utf-8")
        if not path.is_file() or path.read_bytes() != data:
            atomic_write(path, data, "side file")
        out.append(path)
    return out[0], out[1]


def score_bitext(model, bitext: Bitext, out_path, opts: ScoreOptions, *, pool=None,
                 resume: bool = False, progress: bool = False) -> Scored:
    """Score every pair of ``bitext`` with ``model`` (module docstring) and write ``out_path``
    (TSV: :data:`TEXT_COLUMNS`, every feature, ``combined``, ``prob``, ``kept``); ``pool``
    (:func:`triemine.distributed.make_pool`) runs the exact scores' shards (None: this
    process).  Returns the :class:`Scored` result."""
    out_path = Path(out_path)
    comb = Combination.load(opts.combination) if opts.combination else shipped(opts.config)
    judge = load_judge(opts.judge) if learned(opts.config) and \
        opts.calibration is None else None
    cal = (Calibration.of(opts.calibration, "calibration") if opts.calibration is not None
           else None if judge is not None else shipped_calibration(opts.config, "pairs"))
    cut = opts.cut(cal, judge)
    keys: Dict[Tuple[str, str], int] = {}
    pair_of = np.fromiter((keys.setdefault((s, t), len(keys)) for s, t in
                           zip(bitext.src, bitext.tgt)), dtype=np.int64, count=len(bitext))
    srcs, s_idx = _distinct([s for s, _ in keys])
    tgts, t_idx = _distinct([t for _, t in keys])
    work = Path(str(out_path) + ".work")
    files = _side_files(work, srcs, tgts)
    _prepare_work(work, _settings(model, bitext, opts, files), resume)
    lim = lengths.LengthLimits.of(model)
    long_s = lengths.too_long(model, srcs, "source", lim)
    long_t = lengths.too_long(model, tgts, "target", lim)
    empty_s = np.array([not t.strip() for t in srcs], dtype=bool)
    empty_t = np.array([not t.strip() for t in tgts], dtype=bool)
    status = np.where(empty_s[s_idx] | empty_t[t_idx], "empty side",
                      np.where(long_s[s_idx] | long_t[t_idx], "too long", "scored"))
    ok = np.flatnonzero(status == "scored")
    cols: Dict[str, np.ndarray] = {}

    def put(name, vals):
        cols.setdefault(name, np.full(len(keys), np.nan))[ok] = vals
    model_pool = pool if pool is not None else inline_model_pool(model)
    t0 = time.perf_counter()
    for c, v in exact_features(model, files[0], files[1], srcs, tgts, s_idx[ok], t_idx[ok],
                               work, model_pool, progress=progress, resume=True,
                               precision=opts.precision).items():
        put(c, v)
    t1 = time.perf_counter()
    for c, v in encoder_features(opts.encoder, files[0], files[1], len(srcs), len(tgts),
                                 s_idx[ok], t_idx[ok], work, pool, k=opts.k,
                                 skip_src=long_s | empty_s, skip_tgt=long_t | empty_t,
                                 progress=progress).items():
        put(c, v)
    seconds = {"exact": round(t1 - t0, 3), "encoder": round(time.perf_counter() - t1, 3)}
    ok_src, ok_tgt = [srcs[i] for i in s_idx[ok]], [tgts[i] for i in t_idx[ok]]
    for c, v in text_features(ok_src, ok_tgt).items():
        put(c, v)
    if opts.langs:
        put("src_lang_ok", language_flags(srcs, s_idx[ok], opts.langs[0]))
        put("tgt_lang_ok", language_flags(tgts, t_idx[ok], opts.langs[1]))
        put("src_rules_ok", rule_flags(srcs, s_idx[ok], opts.langs[0]))
        put("tgt_rules_ok", rule_flags(tgts, t_idx[ok], opts.langs[1]))
    if opts.bicleaner:
        put("bicleaner", score_bicleaner(ok_src, ok_tgt, opts.bicleaner_model,
                                         progress=progress))
    cols["combined"] = np.full(len(keys), np.nan)
    cols["combined"][ok] = comb({c: v[ok] for c, v in cols.items()})
    if judge is not None:
        cols["judge"] = np.full(len(keys), np.nan)
        cols["judge"][ok] = judge.logit({c: v[ok] for c, v in cols.items()})
        cols["prob"] = judge.prob(cols["judge"], "estimate" if opts.density is None
                                  else opts.density)
    elif cal.combination is not None:  # the curve's own score of the features (a regression)
        reg = Combination.of(cal.combination, f"configuration {opts.config} calibration")
        cols[cal.score] = np.full(len(keys), np.nan)
        cols[cal.score][ok] = reg({c: v[ok] for c, v in cols.items()})
    if judge is None:
        cols["prob"] = cal(cols[cal.score])
    per_row = {c: v[pair_of] for c, v in cols.items()}
    with np.errstate(invalid="ignore"):
        kept = per_row[cut[0]] >= cut[1]
    per_row["kept"] = kept.astype(np.float64)
    rows_status = status[pair_of].tolist()
    write_scores(out_path, bitext, per_row, rows_status)
    summary = {
        "pairs": len(bitext),
        "distinct": len(keys),
        "scored": int(len(ok)),
        "not_scored": {k: int((status == k).sum()) for k in ("empty side", "too long")},
        "skipped_bad": bitext.skipped,
        "kept": int(kept.sum()),
        "expected": {"calibrated": True, **expected_quality(per_row["prob"][kept]),
                     "assumes": "prob calibrated"},
        "cut": f"{cut[0]}>={cut[1]:.4f}"
        + ("" if opts.threshold is not None else f" (prob>={opts.min_prob or DEFAULT_MIN_PROB:g})"),
        "stage_s": seconds,
        "precision": opts.precision,
        "judge": ({"fingerprint": judge.fingerprint(), "path": judge_path(opts.judge)}
                  if judge is not None else None if opts.calibration is not None
                  else judge_record(opts.config, "pairs")),
        "output": str(out_path),
    }
    return Scored(bitext, per_row, rows_status, kept, cut, summary)


def _cell(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.6f}"


def _flag(v: float) -> str:
    return "1" if v else "0"


def write_scores(path: Path, bitext: Bitext, cols: Dict[str, np.ndarray],
                 status: List[str]) -> None:
    """The scores TSV: a header, then one row per input pair in input order; written
    atomically, compressed when ``path`` is named so (:func:`triemine.io.output_file`)."""
    names = list(cols)
    vals = [cols[c].tolist() for c in names]
    cells = [_flag if c == "kept" else _cell for c in names]  # the cut's flag: 1 or 0

    def chunks():
        yield ("\t".join(TEXT_COLUMNS + tuple(names)) + "\n").encode("utf-8")
        for a in range(0, len(bitext), 4096):
            out = []
            for r in range(a, min(a + 4096, len(bitext))):
                out.append("\t".join([str(bitext.lines[r]), clean_cell(bitext.ids[r]),
                                      clean_cell(bitext.src[r]), clean_cell(bitext.tgt[r]),
                                      status[r]]
                                     + [cell(v[r]) for cell, v in zip(cells, vals)]) + "\n")
            yield "".join(out).encode("utf-8")
    os.makedirs(path.parent, exist_ok=True) if str(path.parent) else None
    with output_file(path, "scores TSV") as f:
        for chunk in chunks():
            f.write(chunk)
