#!/usr/bin/env python
"""Write a small randomly initialised Hugging Face MarianMTModel directory (de->en layout).

Its sentencepiece models are trained on the first 3000 lines of the shared de-en text, so it has
an OPUS-MT download's files (config.json, model.safetensors, source.spm, target.spm, vocab.json,
tokenizer_config.json, generation_config.json); its weights are random, so its translations are
nonsense. It stands in for a real OPUS-MT download in docs/usage.md and in
the tests. Needs ``transformers`` (installed with the package's ``test`` extra).

    python scripts/make_hf_marian_test_model.py OUT_DIR [--seed N]
"""
from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from triemine.io.corpus import read_corpus
    from triemine.testing.tiny_hf_marian import build_tiny_hf_marian
    from triemine.io.paths import PARALLEL_DE_EN, shared_path

    de, en = (read_corpus(shared_path(*PARALLEL_DE_EN, f"train.{lang}"), format="plain").texts
              for lang in ("de", "en"))
    out = build_tiny_hf_marian(args.out_dir, [t for t in de[:3000] if t.strip()],
                               [t for t in en[:3000] if t.strip()], seed=args.seed)
    print(f"wrote {out}: " + " ".join(sorted(p.name for p in out.iterdir())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
