#!/usr/bin/env python3
"""Train a classic Bicleaner (0.17.4) zh-en model from the shared zh-en training split.

Run with the tool environment built by ``scripts/bicleaner_setup.sh``::

    .venv-bicleaner/bin/python scripts/bicleaner_train.py            # -> <cache>/bicleaner/zh-en/

Steps (all local; nothing is downloaded):

1. read ``<shared>/data/devsets/zh-en/train.{zh,en}`` (through ``triemine.io.paths``): the zh-en
   parallel data minus the transfer set's pairs, so that no score the filter gives on the transfer
   set was learnt from its own pairs; drop empty, identical and duplicate pairs;
2. tokenise and lowercase: Chinese with jieba (``scripts/bicleaner_zh_tokenize.py``, which is
   also the model's source tokenizer command), English with the Moses tokenizer (sacremoses);
3. word frequency lists (gzipped ``count word``) for both sides;
4. word alignments with eflomal in both directions; the union of the links gives counts
   c(zh, en) and the probabilistic dictionaries p(en|zh) and p(zh|en) (entries below
   ``--min-prob`` are dropped), in Bicleaner's ``tgt src prob`` gzipped format;
5. ``bicleaner-train`` (extra-trees classifier, synthetic negatives) with language
   identification disabled and no LM fluency filter (as in Chen et al. 2020) and no porn filter.

The model directory holds ``zh-en.yaml`` (the file ``bicleaner-classify`` needs), the
classifier, dictionaries and frequency lists. It lives outside git under ``cache_root()``.
"""
from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from triemine.io.paths import DEVSET_ZH_EN, cache_root, shared_path  # noqa: E402


def log(msg: str) -> None:
    print(f"[bicleaner-train {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def read_pairs(src: Path, tgt: Path, limit: int | None):
    with open(src, encoding="utf-8") as fs, open(tgt, encoding="utf-8") as ft:
        a = fs.read().split("\n")
        b = ft.read().split("\n")
    if a and a[-1] == "":
        a.pop()
    if b and b[-1] == "":
        b.pop()
    if len(a) != len(b):
        sys.exit(f"bicleaner_train: {src} has {len(a)} lines but {tgt} has {len(b)}")
    seen = set()
    pairs = []
    for s, t in zip(a, b):
        s, t = s.strip().replace("\t", " "), t.strip().replace("\t", " ")
        if not s or not t or s == t or (s, t) in seen:
            continue
        seen.add((s, t))
        pairs.append((s, t))
        if limit and len(pairs) >= limit:
            break
    return pairs


def write_freqs(token_lines, path: Path) -> None:
    counts = Counter(tok for line in token_lines for tok in line)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for w, c in counts.most_common():
            fh.write(f"{c}\t{w}\n")


def read_links(path: Path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield [tuple(map(int, p.split("-"))) for p in line.split()]


def build_dictionaries(zh_tok, en_tok, work: Path, out_dir: Path, min_prob: float,
                       min_count: int) -> None:
    from eflomal import Aligner

    zh_txt, en_txt = work / "tok.zh", work / "tok.en"
    zh_txt.write_text("".join(" ".join(t) + "\n" for t in zh_tok), encoding="utf-8")
    en_txt.write_text("".join(" ".join(t) + "\n" for t in en_tok), encoding="utf-8")
    fwd, rev = work / "links.fwd", work / "links.rev"
    with open(zh_txt, encoding="utf-8") as s, open(en_txt, encoding="utf-8") as t:
        Aligner().align(s, t, links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
    pair_counts: Counter = Counter()
    for zs, es, lf, lr in zip(zh_tok, en_tok, read_links(fwd), read_links(rev)):
        for i, j in set(lf) | set(lr):
            if i < len(zs) and j < len(es):
                pair_counts[(zs[i], es[j])] += 1
    zh_counts: Counter = Counter()
    en_counts: Counter = Counter()
    for (z, e), c in pair_counts.items():
        zh_counts[z] += c
        en_counts[e] += c
    n_lr = n_rl = 0
    # Bicleaner's ProbabilisticDictionary reads lines "word_l2 word_l1 prob" into d[l1][l2].
    with gzip.open(out_dir / "dict-zh-en.gz", "wt", encoding="utf-8") as lr, \
            gzip.open(out_dir / "dict-en-zh.gz", "wt", encoding="utf-8") as rl:
        for (z, e), c in sorted(pair_counts.items()):
            if c < min_count:
                continue
            p_e_z, p_z_e = c / zh_counts[z], c / en_counts[e]
            if p_e_z >= min_prob:
                lr.write(f"{e} {z} {p_e_z:.6f}\n")
                n_lr += 1
            if p_z_e >= min_prob:
                rl.write(f"{z} {e} {p_z_e:.6f}\n")
                n_rl += 1
    log(
        f"dictionaries: {n_lr} zh->en and {n_rl} en->zh entries from {len(pair_counts)} aligned "
        "pairs"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-dir", default=None,
                    help="folder with train.zh and train.en (default: shared data/devsets/zh-en)")
    ap.add_argument("--out", default=None, help="model dir (default: <cache>/bicleaner/zh-en)")
    ap.add_argument("--limit", type=int, default=None,
                    help="use at most this many pairs (>= 10000)")
    ap.add_argument("--min-prob", type=float, default=0.01)
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="retrain even when the model exists")
    args = ap.parse_args(argv)

    corpus = Path(args.corpus_dir) if args.corpus_dir else shared_path(*DEVSET_ZH_EN)
    out = Path(args.out) if args.out else cache_root() / "bicleaner" / "zh-en"
    yaml_path = out / "zh-en.yaml"
    if yaml_path.is_file() and not args.force:
        log(f"model exists: {yaml_path} (use --force to retrain)")
        print(yaml_path)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    t0 = time.time()

    pairs = read_pairs(corpus / "train.zh", corpus / "train.en", args.limit)
    if len(pairs) < 10000:
        sys.exit(
            f"bicleaner_train: Bicleaner needs at least 10000 pairs, {corpus} gives {len(pairs)}"
        )
    log(f"{len(pairs)} pairs from {corpus}")

    import jieba
    import logging
    from sacremoses import MosesTokenizer
    jieba.setLogLevel(logging.WARNING)
    mt = MosesTokenizer(lang="en")
    zh_tok = [[t.lower() for t in jieba.lcut(s) if t.strip()] for s, _ in pairs]
    en_tok = [[t.lower() for t in mt.tokenize(e, escape=False)] for _, e in pairs]
    keep = [i for i in range(len(pairs)) if zh_tok[i] and en_tok[i]]
    pairs = [pairs[i] for i in keep]
    zh_tok = [zh_tok[i] for i in keep]
    en_tok = [en_tok[i] for i in keep]
    log(f"tokenised ({time.time() - t0:.0f}s)")
    write_freqs(zh_tok, out / "freq-zh.gz")
    write_freqs(en_tok, out / "freq-en.gz")
    build_dictionaries(zh_tok, en_tok, work, out, args.min_prob, args.min_count)
    log(f"aligned with eflomal ({time.time() - t0:.0f}s)")

    train_tsv = work / "train.tsv"
    train_tsv.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    bindir = Path(sys.executable).parent
    zh_cmd = f"{sys.executable} {REPO / 'scripts' / 'bicleaner_zh_tokenize.py'}"
    cmd = [str(bindir / "bicleaner-train"), str(train_tsv),
           "-m", str(yaml_path), "-c", str(out / "zh-en.classifier"),
           "-s", "zh", "-t", "en",
           "-d", str(out / "dict-zh-en.gz"), "-D", str(out / "dict-en-zh.gz"),
           "-f", str(out / "freq-zh.gz"), "-F", str(out / "freq-en.gz"),
           "-S", zh_cmd, "--disable_lang_ident", "--classifier_type", "extra_trees",
           "-p", str(args.processes), "--seed", str(args.seed), "-q"]
    log("running bicleaner-train (language id off, no LM fluency filter, no porn filter)")
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    subprocess.run(cmd, check=True, env=env, cwd=str(out))
    log(f"model written to {yaml_path} in {time.time() - t0:.0f}s")
    print(yaml_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
