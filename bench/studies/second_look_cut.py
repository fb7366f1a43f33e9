"""Issue 59: the cosine floor of the second look, chosen on devsets/zh-en/train only.

The model's translations (beam 1) of ``--n`` training sources, embedded by the encoder with their
reference English: the cosines of the true pairs (hypothesis, reference) and of each hypothesis's
best other reference.  Printed: quantiles of both; the last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from triemine.decoding.model_spec import inline_model_pool
from triemine.distributed.local import InlinePool
from triemine.embedding.embed_shards import embed_corpora
from triemine.mining.stages import cache_dir
from triemine.mining.translate_shards import cached_translations
from triemine.models.model_dir import load_model_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zh", required=True)
    ap.add_argument("--en", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=59)
    args = ap.parse_args()
    zh = Path(args.zh).read_text(encoding="utf-8").splitlines()
    en = Path(args.en).read_text(encoding="utf-8").splitlines()
    pick = np.sort(np.random.default_rng(args.seed).choice(len(zh), args.n, replace=False))
    work = Path(tempfile.mkdtemp(prefix="second_look_cut."))
    files = {}
    for name, lines in (("zh", [zh[i] for i in pick]), ("en", [en[i] for i in pick])):
        files[name] = work / f"train.{name}"
        files[name].write_text("".join(f"{name}{i}\t{t}\n" for i, t in enumerate(lines)),
                               encoding="utf-8")
    model = load_model_dir(args.model)
    hyps, _ = cached_translations(model, files["zh"], cache_dir("translations"),
                                  inline_model_pool(model, "cpu"), beam=1)
    files["hyp"] = work / "hyp.en"
    files["hyp"].write_text("".join(f"h{i}\t{t}\n" for i, t in enumerate(hyps)), encoding="utf-8")
    he, re_ = embed_corpora("use", [(files["hyp"], len(hyps), work / "hyp.npy"),
                                    (files["en"], len(hyps), work / "en.npy")], InlinePool())
    sims = np.asarray(he) @ np.asarray(re_).T
    true = np.diag(sims).copy()
    np.fill_diagonal(sims, -1)
    other = sims.max(axis=1)
    qs = [0.01, 0.02, 0.05, 0.1, 0.5]
    out = {"n": args.n, "seed": args.seed,
           "true_cos_quantiles": {q: round(float(np.quantile(true, q)), 4) for q in qs},
           "best_other_cos_quantiles": {q: round(float(np.quantile(other, 1 - q)), 4)
                                        for q in qs}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
