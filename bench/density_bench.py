#!/usr/bin/env python3
"""Density benchmark: precision where almost nothing is parallel (issue 58, part 1).

The mining job of one named configuration (``--config``, default the package's: ``judge``) through
:func:`triemine.api.run` (one-to-one selection at the configuration's shipped cut), on mixes of
gold pairs diluted with Chinese sentences whose translation is absent.  Parts (``--parts``):

* ``comparable``: the transfer set (``devsets/zh-en/zh-en.dev.*``).  Its 2,700 sources without
  a pair (WMT news, Tatoeba and TICO-19 sentences of ``parallel/zh-en``, whose English is in
  its ``train.en``: :func:`triemine.evaluation.splits.zh_en_references`) dilute a seeded subset
  of its 1,000 gold pairs, against all of its 14,000 English lines (whose de-en distractors are
  WMT news of the same years, other translations of some of the same stories, and Tatoeba
  English: other renderings of some of the same short sentences).  Densities (gold sources over
  all sources) 27 % (every gold pair: the transfer set itself), 10 %, 3 %, 1 %: gold pairs =
  ``round(D * d / (1 - d))`` for ``D`` diluting sources.  The English of a dropped gold pair
  stays, as English that translates nothing.
* ``unrelated``: the same gold subsets and the same 14,000 English lines, diluted instead with
  ``--unrelated-sources`` (default 2,700, a seeded draw) of the BUCC sample's 8,367 Chinese
  sentences without a gold pair (Wikipedia), at 10 %, 3 %, 1 %.  The default dilutes with as
  many sources as the comparable mixes, so the two kinds hold the same gold pairs at each
  density and differ only in the kind of their dilution (and the bench stays under an hour on
  two cores); ``--unrelated-sources 8367`` uses all of them (more gold pairs per density).
* ``pairs``: two pairs of unrelated corpora, every kept pair shown: ``clean_bench`` (the BUCC
  sample's first 3,000 sources without a pair against
  :func:`~triemine.evaluation.splits.clean_bench_draw`'s 14,000 de-en English lines, the inputs
  of ``bench/clean_bench.py``'s unrelated part) and ``transfer_unpaired`` (the transfer set's
  2,700 sources without a pair against
  :func:`~triemine.evaluation.splits.density_bench_draw`'s de-en English, which no fit has seen).
* ``margin`` (no model work; needs the mixes' TSVs, so it runs with ``comparable`` or
  ``unrelated``): for a pre-exact cut on the encoder's ratio margin (``use_margin`` <
  :data:`MARGIN_CUTS`), per mix, the share of the candidates it spares from exact scoring, the
  gold candidates it drops and the kept gold pairs it would lose (recall lost, at most: the
  one-to-one selection of what is left may pick another pair).

Counting (:func:`classify`): a kept pair is ``gold``; else ``accidental`` when its English is
(nearly) the source's own reference (the zh-en reference of a transfer-set source; the gold
English of a gold source): equal after folding case, punctuation and white space
(:func:`fold`), or a character-trigram Dice similarity >= :data:`NEAR_DUPLICATE` of the folded
texts; else ``read`` when :data:`READINGS` (``bench/density_readings.tsv``: pairs of these
mixes that a person read, each marked ``translation`` when the English renders the whole meaning
of the Chinese and nothing else, else ``not``) marks the pair a translation (another correct
rendering in the distractors: "他终于达到了自己的目标。" -> "Finally, he attained his goal."
where the reference says "reached"); else ``wrong``.  An accidental or read translation is
neither gold nor an error: precision is ``gold / (gold + wrong)`` (``P_auto``: the automatic
rule alone, read translations counted wrong; ``P_strict``: ``gold / kept``, BUCC's);
``unread`` counts the wrong pairs nobody has read (add them to the readings to count them).
A wrong pair whose English has Dice >= :data:`SAME_STORY` with the source's reference is
counted apart as ``wrong_near_ref`` (a partial rendering or paraphrase of the same sentence,
the comparable dilution's threat; the BUCC sources have no reference, so none of theirs is
accidental nor near).  Per mix: precision,
recall, F1, kept, wrong pairs per 10,000 sources, wrong pairs among the diluting sources (% of
them), wall time of the job (``resumed``: stages of an earlier run in ``--work`` were reused;
the wall time is then not the job's), and every wrong and accidental pair at the lowest density.
When the configuration's TSV has a ``prob`` column (a learned judge), each mix is also counted
at ``prob >= 0.5`` (after the configuration's one-to-one rule).

``--second-look``: every job with the second look (:mod:`triemine.mining.second_look`; the
configuration must list its stage), in ``<work>/<config>+look`` (so that runs with and without
it never share a folder); the report says ``second_look`` (true or false), each mix and pair
adds the job's ``second_look`` counts and ``kept_by_generator``, each shown pair names the
``generators`` that proposed it, and each unrelated pair counts the kept pairs the look added
(``look_added``: those ``mt_knn`` proposed; a kept pair of the first pass is never one).

``--precision``: the jobs' arithmetic (``trie-mine --precision``; default the configuration's,
named in the report with the CPU's flags); each mix's expected precision (the mean ``prob`` of
its kept pairs, the run's summary) is reported beside ``P_read``, the share of its kept pairs
that are translations (gold, accidental or read), as ``expected_gap``, and a simulated reader of
the reading sheet (``reader``: 100 kept pairs a sheet, 100 seeds, 20 with ``--quick``; the
share of seeds whose 95 % interval holds ``P_read``).

``--quick`` (< 1 min after the model loads): 100 diluting sources, 40 gold pairs and 600
English lines; densities 27 % and 3 %; unrelated pairs of 100 sources against 600 lines.
``--work DIR`` keeps every mix's inputs and job folders: a rerun resumes finished stages.  Last
line: one JSON object.
"""
from __future__ import annotations

import functools
import os
import sys
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("OMP_NUM_THREADS", "2")

import benchlib  # noqa: E402  (this checkout first on sys.path)
import triemine  # noqa: E402,F401  before torch: it sets the OpenMP wait policy
from triemine.config.configurations import DEFAULT  # noqa: E402
from benchlib import machine, shared_model  # noqa: E402

import numpy as np  # noqa: E402

PARTS = ("comparable", "unrelated", "pairs", "margin")
SEED = 58
COMPARABLE = (None, 0.10, 0.03, 0.01)  # None: every gold pair (the transfer set's 27 %)
UNRELATED = (0.10, 0.03, 0.01)
QUICK = {"comparable": (None, 0.03), "unrelated": (0.03,), "diluting": 100, "gold": 40,
         "english": 600, "pair_sources": 100, "pair_targets": 600}
NEAR_DUPLICATE = 0.9  # trigram Dice of folded texts: the same sentence (accidental)
READINGS = benchlib.REPO / "bench" / "density_readings.tsv"  # pairs read by a person (docstring)
SAME_STORY = 0.5      # trigram Dice: a wrong pair close to the source's own English
MARGIN_CUTS = (1.05, 1.1, 1.15, 1.2, 1.25)
LOOK_GENERATOR = "mt_knn"  # the second look's generator (triemine.mining.second_look)
Row = Tuple[str, str]  # (id, text)


# --- pure logic: mixes and counting ------------------------------------------------------------

def gold_count(diluting: int, density: Optional[float], available: int) -> int:
    """Gold pairs that make ``density`` (gold sources over all sources) with ``diluting``
    diluting sources: ``round(diluting * d / (1 - d))``, at most ``available``; ``None``: all
    ``available``."""
    if density is None:
        return available
    if not 0 < density < 1:
        raise ValueError(f"density {density} is not in (0, 1)")
    return min(available, int(round(diluting * density / (1 - density))))


@dataclass
class Mix:
    """One mining input: ``sources`` and ``targets`` (``(id, text)``, ids unique per side),
    ``gold`` (source id -> target id), ``diluting`` (the source ids without a pair) and
    ``references`` (source id -> its own English, where known)."""

    name: str
    sources: List[Row]
    targets: List[Row]
    gold: Dict[str, str]
    diluting: frozenset
    references: Dict[str, str] = field(default_factory=dict)

    @property
    def density(self) -> float:
        return len(self.gold) / max(1, len(self.sources))


def build_mix(name: str, gold_pairs: Sequence[Tuple[Row, Row]], diluting: Sequence[Row],
              targets: Sequence[Row], density: Optional[float], seed: int = SEED,
              references: Optional[Dict[str, str]] = None) -> Mix:
    """The mix of ``diluting`` sources with a seeded subset of ``gold_pairs``
    (``((src id, zh), (tgt id, en))``) making ``density`` (:func:`gold_count`), against every
    line of ``targets`` (which must hold each gold pair's English; dropped pairs' English
    stays).  The subset at a lower density is drawn from the same permutation, so it is a subset
    of every higher density's; sources are shuffled (seeded) so that gold and diluting sources
    interleave.  ``references``: source text -> its own English; a gold source's reference is
    its gold English.  Raises ValueError when a gold English is not among ``targets`` or ids
    repeat."""
    tgt_ids = {i for i, _ in targets}
    if len(tgt_ids) != len(targets):
        raise ValueError(f"{name}: repeated target ids")
    missing = [t for _, (t, _) in gold_pairs if t not in tgt_ids]
    if missing:
        raise ValueError(f"{name}: gold English {missing[0]} is not among the targets")
    n = gold_count(len(diluting), density, len(gold_pairs))
    perm = np.random.default_rng(seed).permutation(len(gold_pairs))
    chosen = [gold_pairs[i] for i in np.sort(perm[:n])]
    sources = [s for s, _ in chosen] + list(diluting)
    if len({i for i, _ in sources}) != len(sources):
        raise ValueError(f"{name}: repeated source ids")
    order = np.random.default_rng(seed + 1).permutation(len(sources))
    refs = {i: references[t] for i, t in diluting if references and t in references}
    refs.update({s[0]: t[1] for s, t in chosen})
    return Mix(name, [sources[i] for i in order], list(targets),
               {s[0]: t[0] for s, t in chosen}, frozenset(i for i, _ in diluting), refs)


def fold(text: str) -> str:
    """``text`` with case folded, punctuation and symbols removed and white space collapsed."""
    kept = "".join(" " if unicodedata.category(c)[0] in "PSZ" else c
                   for c in unicodedata.normalize("NFKC", text).casefold())
    return " ".join(kept.split())


def dice(a: str, b: str, n: int = 3) -> float:
    """Dice similarity of the character ``n``-gram multisets of :func:`fold` ``a`` and ``b``
    (1.0 for equal folded texts, 0.0 when either is shorter than ``n``)."""
    from collections import Counter

    fa, fb = fold(a), fold(b)
    if fa == fb:
        return 1.0
    ga = Counter(fa[i:i + n] for i in range(len(fa) - n + 1))
    gb = Counter(fb[i:i + n] for i in range(len(fb) - n + 1))
    total = sum(ga.values()) + sum(gb.values())
    return 2 * sum((ga & gb).values()) / total if total else 0.0


def load_readings(path: Path = READINGS) -> Dict[Tuple[str, str], bool]:
    """``(zh, en) -> is a translation`` of the readings file (module docstring: a header
    ``verdict, src, tgt``, then one read pair a line, verdict ``translation`` or ``not``).
    A ValueError naming the line for another verdict, a line without three fields or a pair
    read twice."""
    out: Dict[Tuple[str, str], bool] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for no, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        if len(parts) != 3 or parts[0] not in ("translation", "not"):
            raise ValueError(f"{path}:{no}: not 'translation|not<TAB>zh<TAB>en'")
        if (parts[1], parts[2]) in out:
            raise ValueError(f"{path}:{no}: the pair is read twice")
        out[parts[1], parts[2]] = parts[0] == "translation"
    return out


def classify(mix: Mix, src_ids: Sequence[str], tgt_ids: Sequence[str],
             tgt_texts: Sequence[str], readings: Optional[Dict[Tuple[str, str], bool]] = None
             ) -> List[str]:
    """``gold``, ``accidental``, ``read`` (a person read it as a translation: ``readings``,
    :func:`load_readings`) or ``wrong`` for each kept pair (module docstring)."""
    readings = readings or {}
    src_text = dict(mix.sources)
    out = []
    for s, t, text in zip(src_ids, tgt_ids, tgt_texts):
        if mix.gold.get(s) == t:
            out.append("gold")
        elif s in mix.references and dice(text, mix.references[s]) >= NEAR_DUPLICATE:
            out.append("accidental")
        elif readings.get((src_text.get(s), text)):
            out.append("read")
        else:
            out.append("wrong")
    return out


def count(mix: Mix, src_ids: Sequence[str], labels: Sequence[str],
          read: Optional[Sequence[bool]] = None) -> dict:
    """Precision (accidental and read translations left out), precision by the automatic rule
    alone, strict precision, the share of the kept pairs that are translations (``P_read``:
    gold, accidental and read ones), recall, F1, the counts (``unread``: wrong pairs whose ``read``
    is false; every wrong pair without ``read``), wrong pairs per 10,000 sources and the wrong
    pairs among the diluting sources (% of them)."""
    lab = np.asarray(labels, dtype=object)
    g, w, a, rd = (int((lab == k).sum()) for k in ("gold", "wrong", "accidental", "read"))
    wrong_dil = sum(1 for s, k in zip(src_ids, labels) if k == "wrong" and s in mix.diluting)
    p = g / (g + w) if g + w else 1.0
    r = g / len(mix.gold) if mix.gold else 0.0
    read = [False] * len(lab) if read is None else list(read)
    unread = sum(1 for k, was in zip(labels, read) if k == "wrong" and not was)
    return {"P": round(p, 4), "R": round(r, 4), "F1": round(2 * p * r / (p + r), 4) if p + r
            else 0.0, "P_auto": round(g / (g + w + rd), 4) if g + w + rd else 1.0,
            "P_read": round((g + a + rd) / len(lab), 4) if len(lab) else 1.0,
            "P_strict": round(g / len(lab), 4) if len(lab) else 1.0,
            "kept": len(lab), "gold_kept": g, "wrong": w, "accidental": a, "read": rd,
            "unread": unread,
            "wrong_per_10k_sources": round(1e4 * w / max(1, len(mix.sources)), 2),
            "wrong_diluting": wrong_dil,
            "wrong_diluting_pct": round(100 * wrong_dil / max(1, len(mix.diluting)), 3)}


def margin_cut(margin: np.ndarray, is_gold: np.ndarray, kept_gold: np.ndarray,
               n_gold: int, cuts: Sequence[float] = MARGIN_CUTS) -> Dict[str, dict]:
    """Per cut ``c``: the share of candidates with ``margin < c`` (spared from exact scoring),
    the gold candidates among them and the kept gold pairs among them (``recall_lost``: over
    ``n_gold``).  ``margin``, ``is_gold``, ``kept_gold``: one entry per candidate."""
    out = {}
    for c in cuts:
        below = margin < c
        lost = int((below & kept_gold).sum())
        out[f"{c:g}"] = {"spared": round(float(below.mean()) if len(below) else 0.0, 4),
                         "gold_candidates_dropped": int((below & is_gold).sum()),
                         "kept_gold_lost": lost,
                         "recall_lost": round(lost / n_gold, 4) if n_gold else 0.0}
    return out


def work_folder(root: Path, config: str, look: bool) -> Path:
    """The folder of configuration ``config``'s jobs under ``root``: ``<root>/<config>``, or
    ``<root>/<config>+look`` with the second look (runs with and without it never share one)."""
    return root / (f"{config}+look" if look else config)


def look_added(pairs: Sequence[dict]) -> dict:
    """Of the shown kept ``pairs`` (``kind`` and ``generators`` each), those the second look
    added (:data:`LOOK_GENERATOR` among their ``generators``): how many, and how many of them are
    ``wrong`` and ``accidental``."""
    added = [p for p in pairs if LOOK_GENERATOR in p.get("generators", ())]
    return {"kept": len(added), **{k: sum(1 for p in added if p["kind"] == k)
                                   for k in ("wrong", "accidental")}}


# --- the shared data ---------------------------------------------------------------------------

def _rows(*parts) -> List[Row]:
    from triemine.io.paths import shared_path

    lines = shared_path(*parts).read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t", 1)) for line in lines]


def transfer_set(quick: bool):
    """``(gold pairs, unpaired sources, English, references by text)`` of the transfer set;
    with ``quick``, a tiny slice (module docstring)."""
    from triemine.evaluation.splits import zh_en_references
    from triemine.io import DEVSET_ZH_EN

    zh = dict(_rows(*DEVSET_ZH_EN, "zh-en.dev.zh"))
    en = _rows(*DEVSET_ZH_EN, "zh-en.dev.en")
    gold = _rows(*DEVSET_ZH_EN, "zh-en.dev.gold")
    en_of = dict(en)
    pairs = [((s, zh[s]), (t, en_of[t])) for s, t in gold]
    paired = {s for s, _ in gold}
    unpaired = [(i, t) for i, t in zh.items() if i not in paired]
    if quick:
        pairs, unpaired = pairs[:QUICK["gold"]], unpaired[:QUICK["diluting"]]
        keep = {t for _, (t, _) in pairs}
        rng = np.random.default_rng(SEED)
        others = [r for r in en if r[0] not in keep]
        pick = set(rng.choice(len(others), QUICK["english"] - len(keep), replace=False).tolist())
        en = [r for r in en if r[0] in keep] + [r for j, r in enumerate(others) if j in pick]
    return pairs, unpaired, en, zh_en_references()


def _bucc_dilution(n: int) -> List[Row]:
    """A seeded draw of ``n`` of the BUCC sample's sources without a pair, ids prefixed
    ``bucc-`` (the transfer set's ids look alike)."""
    rows = benchlib.bucc_unpaired_sources()
    pick = np.sort(np.random.default_rng(SEED).permutation(len(rows))[:n])
    return [(f"bucc-{rows[i][0]}", rows[i][1]) for i in pick]


def mixes(parts, args) -> List[Tuple[str, Mix]]:
    """``[(kind, mix)]`` of the ``comparable`` and ``unrelated`` parts, densest first."""
    pairs, unpaired, en, refs = transfer_set(args.quick)
    out = []
    if "comparable" in parts:
        for d in (QUICK["comparable"] if args.quick else COMPARABLE):
            name = "comparable_" + ("all" if d is None else f"{100 * d:g}pct")
            out.append(("comparable", build_mix(name, pairs, unpaired, en, d, references=refs)))
    if "unrelated" in parts:
        n = QUICK["diluting"] if args.quick else args.unrelated_sources
        dil = _bucc_dilution(n)
        for d in (QUICK["unrelated"] if args.quick else UNRELATED):
            out.append(("unrelated", build_mix(f"unrelated_{100 * d:g}pct", pairs, dil, en, d,
                                               references=refs)))
    return out


# --- running and measuring -----------------------------------------------------------------------

def _generators(origin: int) -> List[str]:
    from triemine.mining.generators import REGISTRY

    return [name for name, g in REGISTRY.items() if origin & g.bit]


def _pair_rows(m, rows, labels, mix: Mix) -> List[dict]:
    out = []
    origin = m.col("origin") if "origin" in m.numeric else None
    for i, lab in zip(rows, labels):
        s = m.src_ids[i]
        ref = mix.references.get(s)
        out.append({"kind": lab, "src_id": s, "tgt_id": m.tgt_ids[i], "src": m.src[i],
                    "tgt": m.tgt[i], "reference": ref,
                    "ref_dice": None if ref is None else round(dice(m.tgt[i], ref), 3),
                    **{c: round(float(m.col(c)[i]), 4) for c in ("combined", "prob", "use_margin")
                       if c in m.numeric},
                    **({} if origin is None else {"generators": _generators(int(origin[i]))})})
    return out


@functools.lru_cache(maxsize=1)
def _readings() -> Dict[Tuple[str, str], bool]:
    return load_readings()


def measure(m, rows: np.ndarray, mix: Mix, show: bool) -> dict:
    """The counts of the kept ``rows`` of mining TSV ``m`` (:func:`count`), the wrong pairs near
    their reference, and, with ``show``, every wrong and accidental pair."""
    src, texts = [m.src_ids[i] for i in rows], [m.tgt[i] for i in rows]
    readings = _readings()
    labels = classify(mix, src, [m.tgt_ids[i] for i in rows], texts, readings)
    zh = dict(mix.sources)  # the readings' key, as classify reads it
    res = count(mix, src, labels, [(zh.get(s), t) in readings for s, t in zip(src, texts)])
    shown = _pair_rows(m, rows, labels, mix)
    res["wrong_near_ref"] = sum(1 for p in shown if p["kind"] == "wrong"
                                and (p["ref_dice"] or 0) >= SAME_STORY)
    if show:
        res["pairs"] = [p for p in shown if p["kind"] != "gold"]
    return res


def reader(tsv: Path, mix: Mix, true_precision: float, seeds: int) -> dict:
    """The simulated reader of ``trie-mine-review`` (:func:`benchlib.simulated_reader`, 100
    pairs a sheet) on the kept pairs of the mix's TSV, a pair true unless :func:`classify`
    calls it ``wrong``."""
    from triemine.evaluation.review import read_run

    run = read_run(tsv)
    rows = run.kept.tolist()
    labels = classify(mix, [run.src_ids[i] for i in rows], [run.tgt_ids[i] for i in rows],
                      [run.tgt[i] for i in rows], _readings())
    true = {(run.src_ids[i], run.tgt_ids[i]) for i, lab in zip(rows, labels) if lab != "wrong"}
    return benchlib.simulated_reader(run, true.__contains__, true_precision, 100, seeds)


def run_mix(model, config: str, kind: str, mix: Mix, work: Path, show: bool,
            look: bool = False, precision: Optional[str] = None, seeds: int = 100) -> dict:
    """Mine ``mix`` in ``work/<mix name>`` (with the second look when ``look``) and measure it
    at the shipped cut (and at ``prob >= 0.5`` when the TSV has ``prob``); the margin table of
    its candidates."""
    from triemine.filtering import registry

    d = work / mix.name
    d.mkdir(parents=True, exist_ok=True)
    benchlib.write_corpus(d / "src.zh", mix.sources)
    benchlib.write_corpus(d / "tgt.en", mix.targets)
    print(f"density_bench: {mix.name}: {len(mix.sources)} sources ({len(mix.gold)} gold) x "
          f"{len(mix.targets)} targets", file=sys.stderr, flush=True)
    result, wall, resumed = benchlib.mine_corpora(model, config, d / "src.zh", d / "tgt.en",
                                                  d / "mined.tsv",
                                                  second_look=True if look else None,
                                                  precision=precision)
    m, sel = result.candidates, result.selection
    out = {"kind": kind, "sources": len(mix.sources), "diluting": len(mix.diluting),
           "gold": len(mix.gold), "density": round(mix.density, 4), "targets": len(mix.targets),
           "candidates": len(m), "wall_s": wall, "resumed": resumed,
           "stage_s": result.summary.get("stage_s"), "selection": sel.text(),
           "shipped": measure(m, result.kept, mix, show),
           "expected": result.summary.get("expected")}
    out.update({k: result.summary[k] for k in ("second_look", "kept_by_generator")
                if k in result.summary})
    if "prob" in m.numeric and len(result.kept):
        out["reader"] = reader(d / "mined.tsv", mix, out["shipped"]["P_read"], seeds)
    if "prob" in m.numeric:
        rows = registry.apply_rule(m, sel.rule, sel.rank_by) if sel.rule != "none" \
            else np.arange(len(m))
        out["prob_0_5"] = measure(m, rows[m.col("prob")[rows] >= 0.5], mix, show)
    if "use_margin" in m.numeric:
        is_gold = np.array([mix.gold.get(s) == t for s, t in zip(m.src_ids, m.tgt_ids)])
        kept = np.zeros(len(m), dtype=bool)
        kept[result.kept] = True
        out["margin"] = margin_cut(m.col("use_margin"), is_gold, kept & is_gold, len(mix.gold))
    return out


def pair_mixes(quick: bool) -> List[Mix]:
    """The two unrelated pairs as mixes without gold (module docstring)."""
    from triemine.evaluation.splits import clean_bench_draw, density_bench_draw, DRAW

    n_src, n_tgt = (QUICK["pair_sources"], QUICK["pair_targets"]) if quick else (3000, DRAW)
    _, unpaired, _, refs = transfer_set(quick=False)
    inputs = {"clean_bench": (benchlib.bucc_unpaired_sources()[:n_src],
                              benchlib.de_en_rows(clean_bench_draw(n_tgt).tolist())),
              "transfer_unpaired": (unpaired[:n_src] if quick else unpaired,
                                    benchlib.de_en_rows(density_bench_draw()[:n_tgt].tolist()))}
    return [Mix(name, src, tgt, {}, frozenset(i for i, _ in src),
                {i: refs[t] for i, t in src if t in refs}) for name, (src, tgt) in inputs.items()]


def pairs_part(model, config: str, args, work: Path) -> dict:
    """The two unrelated pairs, every kept pair shown (module docstring)."""
    out = {}
    for mix in pair_mixes(args.quick):
        name = mix.name
        res = run_mix(model, config, "pair", mix, work, show=True, look=args.second_look,
                      precision=args.precision, seeds=20 if args.quick else 100)
        res.pop("margin", None)
        for key in ("shipped", "prob_0_5"):
            if key in res:
                c = res[key]
                res[key] = {"kept": c["kept"], "wrong": c["wrong"], "accidental": c["accidental"],
                            "read": c["read"], "unread": c["unread"],
                            "wrong_pct_of_sources": c["wrong_diluting_pct"],
                            "wrong_near_ref": c["wrong_near_ref"], "pairs": c["pairs"],
                            **({"look_added": look_added(c["pairs"])} if args.second_look
                               else {})}
        out[name] = res
    return out


def summary(runs: Dict[str, dict]) -> dict:
    """One line a mix: density, P (and by the automatic rule alone), R, F1, wrong, accidental
    and read translations, wrong per 10k, wrong diluting %, wall time; and the run's expected
    precision (the mean ``prob`` of its kept pairs, :mod:`triemine.judging.quality`) less the
    share of its kept pairs that are translations (``expected_gap``: ``P_read``), where the
    run's ``prob`` is calibrated."""
    out = {}
    for name, r in runs.items():
        out[name] = {"density": r["density"], **{k: r["shipped"][k] for k in (
            "P", "P_auto", "P_read", "R", "F1", "wrong", "accidental", "read", "unread",
            "wrong_per_10k_sources", "wrong_diluting_pct")}, "wall_s": r["wall_s"]}
        exp = (r.get("expected") or {}).get("expected_precision")
        if exp is not None:
            out[name]["expected_precision"] = round(exp, 4)
            out[name]["expected_gap"] = round(exp - r["shipped"]["P_read"], 4)
        if "reader" in r:
            out[name]["reader_coverage"] = r["reader"]["reader_coverage"]
    return out


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="tiny mixes (< 1 min after the model loads)",
                         model=True)
    ap.add_argument("--config", default=DEFAULT, help="named configuration to measure "
                    "(default %(default)s, the package's)")
    ap.add_argument("--work", default=None, help="keep the mixes and the jobs' folders here "
                    "(a rerun resumes finished stages)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    ap.add_argument("--unrelated-sources", type=int, default=2700,
                    help="unrelated: BUCC sources without a pair that dilute (at most 8367)")
    ap.add_argument("--precision", default=None, choices=("auto", "fp32", "bf16"),
                    help="the jobs' arithmetic (default the configuration's); another than the "
                    "default mines in <work>/<config>/precision-<it>")
    ap.add_argument("--second-look", action="store_true",
                    help="every job with the second look (the configuration must list it), in "
                    "<work>/<config>+look")
    args = ap.parse_args(argv)
    parts = ap.names(args.parts, PARTS, "part")
    from triemine.config.configurations import NAMES, configuration

    if args.config not in NAMES:
        ap.error(f"unknown configuration {args.config} (one of {', '.join(NAMES)})")
    if args.second_look and "second_look" not in configuration(args.config).stages:
        ap.error(f"configuration {args.config} does not list the second look")
    run = benchlib.start("density_bench", args)
    model = shared_model(args.model, "density_bench")
    import torch

    work = work_folder(benchlib.work_dir(args.work, "density-bench-"), args.config,
                       args.second_look)
    if args.precision is not None:
        work = work / f"precision-{args.precision}"
    work.mkdir(parents=True, exist_ok=True)
    from triemine.mining.options import MineOptions

    precision = MineOptions.of(args.config, precision=args.precision).precision
    report = {"bench": "density_bench", "quick": bool(args.quick), "config": args.config,
              "second_look": bool(args.second_look), "precision": precision,
              "cpu_flags": benchlib.cpu_flags(),
              "machine": machine(), "threads": torch.get_num_threads(),
              "date": time.strftime("%Y-%m-%d"), "seed": SEED,
              "rules": {"near_duplicate_dice": NEAR_DUPLICATE, "same_story_dice": SAME_STORY}}
    runs = {}
    all_mixes = mixes(parts, args)
    lowest = {}
    for kind, mix in all_mixes:
        lowest[kind] = mix.name  # densest first: the last of a kind is its lowest density
    for kind, mix in all_mixes:
        runs[mix.name] = run_mix(model, args.config, kind, mix, work,
                                 show=lowest[kind] == mix.name, look=args.second_look,
                                 precision=args.precision, seeds=20 if args.quick else 100)
    if runs:
        report["summary"] = summary(runs)
        margins = {name: r.pop("margin") for name, r in runs.items() if "margin" in r}
        if "margin" in parts and margins:
            report["margin"] = {"cuts": list(MARGIN_CUTS), "mixes": margins}
        report["mixes"] = runs
    if "pairs" in parts:
        report["pairs"] = pairs_part(model, args.config, args, work)
    return run.finish(report)


if __name__ == "__main__":
    sys.exit(main())
