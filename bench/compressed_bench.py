"""Compressed corpora: what reading a .gz/.xz/.zst corpus through its decompressed copy costs.

For a synthetic corpus of 10^6 lines (``--quick``: 10^5) in each format: the compressed size,
the first ``triemine.io.compression.plain_copy`` (content digest, streaming decompression into the
cache, digest of the copy), its decompression speed in plain MB/s, a second call (the copy
reused), the line index build on the copy, random line reads through the memory map, and
the estimated cost of one random line from a seekable format (checkpoints every 1 MiB;
xz compressed at preset 1 to keep the run short: its decompression speed hardly depends on it)
(docs/decisions.md, "Compressed corpora: a decompressed cache").
"""
from __future__ import annotations

import gzip
import lzma
import os
import random
import sys
import tempfile
from pathlib import Path

import benchlib  # (bench/ is on sys.path when run as a script)

WORDS = ("the of and river city 北京 上海 的 是 在 年 music station 1998 2024 school team 公司 "
         "发展 国家 people history first new village church north south").split()


SPACING = 1 << 20


def corpus(n: int) -> bytes:
    rng = random.Random(3)
    return "".join(f"{i}\t" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 20)))
                   + "\n" for i in range(n)).encode("utf-8")


def compressors():
    import zstandard

    return {".gz": lambda b: gzip.compress(b, 6, mtime=0),
            ".xz": lambda b: lzma.compress(b, preset=1),
            ".zst": lambda b: zstandard.ZstdCompressor(level=3).compress(b)}


def measure(path: Path, plain: int, reads: int) -> dict:
    from triemine.io.compression import plain_copy
    from triemine.io.corpus import open_corpus

    with benchlib.timer() as first:
        copy = plain_copy(path)
    with benchlib.timer() as again:
        plain_copy(path)
    with benchlib.timer() as index:
        corp = open_corpus(path)
    rng = random.Random(5)
    picks = [rng.randrange(len(corp)) for _ in range(reads)]
    with benchlib.timer() as rand:
        for i in picks:
            corp.texts[i]
    return {"bytes": path.stat().st_size, "ratio": round(plain / path.stat().st_size, 2),
            "first_s": round(first.s, 3), "plain_mb_s": round(plain / first.s / 1e6, 1),
            "reuse_s": round(again.s, 4), "index_s": round(index.s, 3),
            "random_line_us": round(rand.s / reads * 1e6, 1),
            "cache_bytes": os.path.getsize(copy),
            # what one random line would cost from a seekable format with a checkpoint every
            # SPACING bytes (indexed gzip's default): half a spacing decompressed on average
            "seekable_line_ms_est": round(SPACING / 2 / (plain / first.s) * 1e3, 2)}


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="10^5 lines")
    ap.add_argument("--lines", type=int, default=None, help="lines of the corpus (default 10^6)")
    args = ap.parse_args(argv)
    n = args.lines or (100_000 if args.quick else 1_000_000)
    run = benchlib.start("compressed_bench", args)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TRIEMINE_CACHE"] = str(Path(tmp) / "cache")
        data = corpus(n)
        out = {"lines": n, "plain_bytes": len(data), "machine": benchlib.machine(),
               "loadavg": benchlib.loadavg(), "formats": {}}
        plain = Path(tmp) / "c.tsv"
        plain.write_bytes(data)
        out["plain"] = measure(plain, len(data), 10_000)
        for suffix, compress in compressors().items():
            with benchlib.timer() as t:
                packed = compress(data)
            p = Path(tmp) / f"c.tsv{suffix}"
            p.write_bytes(packed)
            out["formats"][suffix] = dict(measure(p, len(data), 10_000),
                                          compress_s=round(t.s, 2))
    return run.finish(out)


if __name__ == "__main__":
    sys.exit(main())
