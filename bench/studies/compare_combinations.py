#!/usr/bin/env python3
"""Compare feature sets for the combined score on mining-job TSVs
(docs/decisions.md#feature-set-of-the-combined-score).

Each feature set's normalisation is fitted without gold on the sample TSV's candidates
(``Combination.fit``, as ``scripts/fit_combination.py`` does), then evaluated one-to-one: tuned
and 2-fold held-out on the BUCC sample, and with the sample's threshold on the transfer set.
A feature set with a chosen weight (``numerals``, from ``GRID``) is chosen on the sample's gold,
and again inside each training fold for its held-out number (``evaluate_combination``).
Choose on the sample's columns only; the transfer column is for the record::

    python bench/studies/compare_combinations.py WORK/combined.zh-en.sample.tsv
    WORK/combined.zh-en.dev.tsv --space use
    python bench/studies/compare_combinations.py WORK/mt-only.zh-en.sample.tsv
    WORK/mt-only.zh-en.dev.tsv --space ret

One JSON object per feature set.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from triemine.evaluation.bucc import read_bucc  # noqa: E402
from triemine.evaluation.pipeline import Direction, evaluate, evaluate_combination  # noqa: E402
from triemine.mining.combine import Combination  # noqa: E402
from triemine.io.paths import BUCC_ZH_EN, DEVSET_ZH_EN, shared_path  # noqa: E402
from triemine.io.tsv import read_mined  # noqa: E402


GRID = [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5]


def feature_sets(space: str) -> dict:
    """name -> (features, weights); a weight of ``None`` is chosen from ``GRID``."""
    m, c = f"{space}_margin", f"{space}_cos"
    return {m: ([m], [1]), "pmi": (["pmi"], [1]), "-ce_token": (["ce_token"], [-1]),
            "pmi-ce_token": (["pmi", "ce_token"], [1, -1]), f"{m}+pmi": ([m, "pmi"], [1, 1]),
            f"{m}-ce_token+pmi": ([m, "ce_token", "pmi"], [1, -1, 1]),
            f"{m}+{c}-ce_token+pmi": ([m, c, "ce_token", "pmi"], [1, 1, -1, 1]),
            f"{m}-ce_token+pmi+w*numerals": ([m, "ce_token", "pmi", "numerals"], [1, -1, 1, None])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sample_tsv", help="mining-job TSV of the BUCC zh-en sample")
    ap.add_argument("transfer_tsv", nargs="?", help="mining-job TSV of the transfer set")
    ap.add_argument("--space", default="use", help="the candidates' space: use, e5 or ret")
    args = ap.parse_args(argv)
    sample = read_mined(args.sample_tsv)
    transfer = read_mined(args.transfer_tsv) if args.transfer_tsv else None
    sb = read_bucc(shared_path(*BUCC_ZH_EN, "zh-en.sample.gold"))
    tb = read_bucc(shared_path(*DEVSET_ZH_EN, "zh-en.dev.gold"))
    for name, (feats, weights) in feature_sets(args.space).items():
        choices = {f: GRID for f, w in zip(feats, weights) if w is None}
        comb = Combination(name, feats, [float(w or 0) for w in weights], choices=choices).fit(
            {f: sample.col(f) for f in feats}, Path(args.sample_tsv).name)
        o = evaluate_combination(sample, comb, sb, folds=2)
        comb = comb.variants()[o.chosen]
        row = {"features": name, "sample_tuned_f1": round(o.strict.f1, 4),
               "sample_heldout_f1": round(o.heldout_strict.f1, 4)}
        if choices:
            row.update(chosen=o.chosen, fold_chosen=o.fold_chosen)
        if transfer is not None:
            mt = transfer.with_column("combined", comb({f: transfer.col(f) for f in feats}))
            t = evaluate([Direction(mt)], tb, "combined", "combined",
                         thresholds={"zh-en": next(iter(o.thresholds.values()))},
                         thresholds_source="fixed:sample", rule="one-to-one")
            row["transfer_f1"] = round(t.strict.f1, 4)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
