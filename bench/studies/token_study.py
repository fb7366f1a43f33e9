#!/usr/bin/env python3
"""Issue 58: does a per-token worst case tell a one-word substitution from a translation?

Step ``tokens`` scores every distinct (source, target) pair of the given TSVs by teacher
forcing, token by token: log P(y_t | x, y_<t) and the prior log P(y_t | empty, y_<t) (EOS
included), and saves them (``--out/part<i>.pkl``, the ``--part i/K`` share of the pairs).
Step ``regrets`` saves each pair's per-token regrets (the token's logit minus the best logit
at its position; ``--out/regret<i>.pkl``).  Step ``eval`` derives per-token features from
them, adds them to the judge's ten features of before (:data:`BASE`), and compares the judges
fitted with and without them on the training rows only (5-fold cross-fitting and the density
draws of ``judge_kinds_study``) and, fitted on every training row, on the ``judge`` job's TSVs
of the BUCC sets and the density bench's mixes (counted as the bench counts them).  Every
row's ``number_match`` is computed from its texts in the form ``--number-form`` names
(:func:`number_column`: the shipped share, "every number found" or the count not found), with
``--number-words`` from the target's English number words too.
Last line: one JSON object.

    python bench/studies/token_study.py tokens --out DIR --part 0/2 TSV...
    python bench/studies/token_study.py regrets --out DIR --part 0/2 TSV...
    python bench/studies/token_study.py eval --out DIR --work TRAIN_WORK \\
        --bucc sample=TSV:GOLD --density DENSITY_WORK/judge
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import pickle
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "scripts")]


def read_pairs(path: Path):
    """The (source, target) texts of every row of a TSV with ``src`` and ``tgt`` columns."""
    with open(path, encoding="utf-8", newline="") as f:
        return [(r["src"], r["tgt"]) for r in csv.DictReader(f, delimiter="\t",
                                                              quoting=csv.QUOTE_NONE)]


def _part(pair, k: int) -> int:
    return int(hashlib.sha1("\t".join(pair).encode()).hexdigest()[:8], 16) % k


def _regret_scorer():
    """A :class:`~triemine.scoring.forced.ForcedScorer` whose per-token values are regrets:
    each target token's logit minus the best logit at its position (log P(y_t) - max_v
    log P(v); 0 where the model's first choice is the target's token)."""
    from triemine.scoring.forced import ForcedScorer

    class RegretScorer(ForcedScorer):
        def _gold_logprobs(self, feats, gold):
            logits = self.output_layer(feats).float()
            return logits.gather(1, gold[:, None]).squeeze(1) - logits.amax(1)
    return RegretScorer


def _part_pairs(args, scorer_class=None):
    """``(i, pairs, scorer, srcs, tgts, src_idx, tgt_idx)`` of part ``args.part`` (``i/K``):
    its distinct (source, target) pairs, sorted; a scorer (``scorer_class``, default
    :class:`~triemine.scoring.forced.ForcedScorer`) of the shared model on one thread; the
    encoded distinct sources and targets and each pair's index into them."""
    import torch

    from triemine.io.paths import cache_root
    from triemine.models.model_dir import load_model_dir
    from triemine.scoring.forced import ForcedScorer

    torch.set_num_threads(1)
    i, k = (int(v) for v in args.part.split("/"))
    pairs = sorted({p for t in args.tsv for p in read_pairs(Path(t)) if _part(p, k) == i})
    model = load_model_dir(cache_root() / "models" / "opus-mt-zh-en")
    srcs, tgts = sorted({s for s, _ in pairs}), sorted({t for _, t in pairs})
    s_of = {s: j for j, s in enumerate(srcs)}
    t_of = {t: j for j, t in enumerate(tgts)}
    print(f"part {i}/{k}: {len(pairs)} pairs, {len(tgts)} targets", flush=True)
    return (i, pairs, (scorer_class or ForcedScorer)(model),
            [model.encode_source(s) for s in srcs], [model.encode_target(t) for t in tgts],
            np.array([s_of[s] for s, _ in pairs]), np.array([t_of[t] for _, t in pairs]))


def _save(args, name: str, obj) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / name, "wb") as f:
        pickle.dump(obj, f)


def regrets(args) -> int:
    """Step ``regrets``: every distinct pair's per-token regrets (``--out/regret<i>.pkl``)."""
    i, pairs, sc, src_t, tgt_t, si, ti = _part_pairs(args, _regret_scorer())
    _, reg = sc.score_pairs(src_t, tgt_t, si, ti, progress=True, per_token=True)
    _save(args, f"regret{i}.pkl", {p: reg[j] for j, p in enumerate(pairs)})
    return 0


def tokens(args) -> int:
    """Step ``tokens``: every distinct pair's per-token log-probabilities and every target's
    per-token prior (``--out/part<i>.pkl``)."""
    i, pairs, sc, src_t, tgt_t, si, ti = _part_pairs(args)
    _, prior = sc.prior(tgt_t, progress=True, per_token=True)
    _, lp = sc.score_pairs(src_t, tgt_t, si, ti, progress=True, per_token=True)
    tgts = sorted({t for _, t in pairs})
    _save(args, f"part{i}.pkl", {"pairs": {p: lp[j] for j, p in enumerate(pairs)},
                                 "prior": {t: prior[j] for j, t in enumerate(tgts)}})
    return 0


# the judge's features before this study (the shipped list less the two it added)
BASE = ("use_margin", "use_cos", "ce_token", "ce_word", "pmi", "prior", "numerals", "uncovered",
        "len_ratio", "number_match")
TOKEN_FEATURES = ("tok_min_pmi", "tok_min_lp", "tok_low_pmi", "eos_lp", "tok_min_regret",
                  "tok_low_regret")
VARIANTS = {"today": (), "min_lp": ("tok_min_lp",), "min_pmi": ("tok_min_pmi",),
            "min_pmi_lp": ("tok_min_pmi", "tok_min_lp"), "all": TOKEN_FEATURES,
            "eos": ("eos_lp",), "eos_min_lp": ("eos_lp", "tok_min_lp"),
            "eos_min_pmi": ("eos_lp", "tok_min_pmi"), "eos_low_pmi": ("eos_lp", "tok_low_pmi"),
            "low_pmi": ("tok_low_pmi",),
            "eos_min_lp_regret": ("eos_lp", "tok_min_lp", "tok_min_regret"),
            "eos_min_lp_low_regret": ("eos_lp", "tok_min_lp", "tok_low_regret"),
            "eos_regret": ("eos_lp", "tok_min_regret")}


def load_tokens(out: Path):
    """``(pairs, prior)``: the per-token log-probabilities of every part in ``out``."""
    pairs, prior = {}, {"regret": {}}
    for path in sorted(out.glob("part*.pkl")):
        with open(path, "rb") as f:
            d = pickle.load(f)
        pairs.update(d["pairs"])
        prior.update(d["prior"])
    for path in sorted(out.glob("regret*.pkl")):  # step regrets, kept beside the priors
        with open(path, "rb") as f:
            prior["regret"].update(pickle.load(f))
    return pairs, prior


def token_columns(src, tgt, pairs, prior) -> dict:
    """:data:`TOKEN_FEATURES` of each pair: the least PMI and log P(y_t | x) of a target token
    (EOS left out), the share of tokens with PMI under -2, EOS's log P, and (where step
    ``regrets`` ran) the least regret of a token and the share of tokens with regret under
    -5 (EOS left out)."""
    out = {f: np.full(len(src), np.nan) for f in TOKEN_FEATURES}
    for i, key in enumerate(zip(src, tgt)):
        lp, pr = pairs[key], prior[key[1]]
        body, pmi = lp[:-1], (lp - pr)[:-1]
        if len(body):
            out["tok_min_pmi"][i] = float(pmi.min())
            out["tok_min_lp"][i] = float(body.min())
            out["tok_low_pmi"][i] = float((pmi < -2).mean())
        else:
            out["tok_min_pmi"][i] = out["tok_min_lp"][i] = out["tok_low_pmi"][i] = 0.0
        out["eos_lp"][i] = float(lp[-1])
        reg = prior["regret"].get(key)
        if reg is not None:
            out["tok_min_regret"][i] = float(reg[:-1].min()) if len(reg) > 1 else 0.0
            out["tok_low_regret"][i] = float((reg[:-1] < -5).mean()) if len(reg) > 1 else 0.0
    return out


_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_WORD_VALUE = {**{w: i for i, w in enumerate(_ONES)}, **{w: 10 * i for i, w in enumerate(_TENS, 2)}}
_SCALE = {"hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_WORDS = re.compile(r"\b(?:(" + "|".join(_TENS) + r")(?:[- ](" + "|".join(_ONES[1:10])
                    + r"))?|(" + "|".join(_ONES) + r"))(?:\s+(" + "|".join(_SCALE) + r"))?\b",
                    re.IGNORECASE)


def word_numbers(tgt: str) -> list:
    """The numbers ``tgt`` writes in English words (``seven``, ``twenty-five``, ``two hundred``;
    a bare ``one`` or ``zero`` is not read), each as a one-value tuple."""
    out = []
    for m in _WORDS.finditer(tgt):
        tens, unit, word, scale = (g.lower() if g else g for g in m.groups())
        v = _WORD_VALUE[word] if word else _WORD_VALUE[tens] + (_WORD_VALUE[unit] if unit else 0)
        if scale:
            v *= _SCALE[scale]
        elif v < 2:
            continue
        out.append((float(v),))
    return out


# the forms of the number check a judge may read as its number_match column
NUMBER_FORMS = ("share", "all", "misses")


def number_column(src, tgt, form: str = "share", words: bool = False) -> np.ndarray:
    """Each pair's number check in ``form``: ``share`` (the shipped ``number_match``: the share
    of the target's numbers a source value stands for, 1 without numbers), ``all`` (1 when every
    one does, else 0) or ``misses`` (how many do not); with ``words`` the target's numbers in
    English words count too (:func:`word_numbers`; a source's 俩 or 双 stands for 2)."""
    from triemine.judging.numbers import _close, source_values, target_numbers

    out = np.empty(len(src))
    for i, (s, t) in enumerate(zip(src, tgt)):
        nums = target_numbers(t) + (word_numbers(t) if words else [])
        have = source_values(s) if nums else set()
        if words and any(c in s for c in "俩倆双雙"):
            have.add(2.0)
        miss = sum(not any(_close(v, have) for v in vals) for vals in nums)
        out[i] = {"share": 1 - miss / len(nums) if nums else 1.0, "all": float(miss == 0),
                  "misses": float(miss)}[form]
    return out


def evaluate(args) -> int:
    import decoy_calibration as dc
    import judge_kinds_study as jk

    from triemine.judging.train import fit, mined_columns

    pairs, prior = load_tokens(args.out)
    cols, y, is_mined, kind, mined = jk.training_rows(args.work)
    nsrc = read_pairs(args.work / "noise.tsv")
    head = (args.work / "noise.tsv").read_text(encoding="utf-8").split("\n", 1)[0].split("\t")
    rows = (args.work / "noise.tsv").read_text(encoding="utf-8").splitlines()[1:]
    ok = [r.split("\t")[head.index("status")] == "scored" for r in rows]
    noise = [p for p, good in zip(nsrc, ok) if good]
    src = list(mined.src) + [s for s, _ in noise]
    tgt = list(mined.tgt) + [t for _, t in noise]
    cols = {**cols, **token_columns(src, tgt, pairs, prior)}
    # every row's number check read here in one form (--number-form, --number-words)
    cols["number_match"] = number_column(src, tgt, args.number_form, args.number_words)
    train_prior = float(y.mean())
    fold = np.random.default_rng(0).integers(0, 5, len(y))
    report = {}
    judges = {}
    for name, extra in VARIANTS.items():
        if args.variants and name not in args.variants.split(","):
            continue
        feats = BASE + extra
        z = np.zeros(len(y))
        for f in range(5):
            tr = fold != f
            j = fit({c: v[tr] for c, v in cols.items()}, y[tr], feats)
            z[~tr] = j.logit({c: v[~tr] for c, v in cols.items()})
        ym, zm = y[is_mined], z[is_mined]
        clean = z[kind == "clean"]
        row = {"mined_auc": jk._auc(zm[ym == 1], zm[ym == 0]),
               "noise_auc": {n: jk._auc(clean, z[kind == n])
                             for n in ("partial", "number", "neighbour")},
               "draws": {d: v["0.5"] for d, v in
                         jk.draws(zm, ym, mined, train_prior, args.draws).items()}}
        judges[name] = fit(cols, y, feats)
        report[name] = row
        print(name, json.dumps(row), flush=True)

    def columns(m):
        c = mined_columns(m)
        c.update(token_columns(list(m.src), list(m.tgt), pairs, prior))
        c["number_match"] = number_column(m.src, m.tgt, args.number_form, args.number_words)
        return c

    report.update(dc.shipped_on_sets(judges, args.bucc, args.density, columns))
    print(json.dumps(report))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    t = sub.add_parser("tokens")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--part", default="0/1")
    t.add_argument("tsv", nargs="+")
    e = sub.add_parser("eval")
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--work", type=Path, required=True)
    e.add_argument("--draws", type=int, default=20)
    e.add_argument("--bucc", action="append", default=[], help="NAME=TSV:GOLD")
    e.add_argument("--density", type=Path)
    e.add_argument("--variants", default="", help="comma-separated names of VARIANTS")
    e.add_argument("--number-form", choices=NUMBER_FORMS, default="share",
                   help="the number check the judges read as number_match (number_column)")
    e.add_argument("--number-words", action="store_true",
                   help="the number check reads English number words too")
    r = sub.add_parser("regrets")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--part", default="0/1")
    r.add_argument("tsv", nargs="+")
    args = ap.parse_args()
    return {"tokens": tokens, "regrets": regrets, "eval": evaluate}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
