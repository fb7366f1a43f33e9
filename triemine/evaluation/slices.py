"""Slices of a BUCC set for demos and CPU-affordable experiments.

A slice keeps a chosen subset of the l1 (source) sentences, the full l2 side (or, for quick
benchmarks, the gold targets plus a number of others), and the gold pairs of the kept sources,
written in the BUCC layout (``<l1>-<l2>.slice.{l1,l2,gold}``) so that every
reader and ``trie-mine-eval`` treat it like any BUCC split.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Tuple

from triemine.evaluation.bucc import read_bucc


def write_bucc_slice(gold_path: os.PathLike | str, out_dir: os.PathLike | str, *,
                     n_gold: Optional[int] = None, n_other: Optional[int] = None,
                     first: Optional[int] = None, split: str = "slice",
                     n_other_targets: Optional[int] = None) -> Tuple[Path, int]:
    """Write a slice of the BUCC set named by ``gold_path`` into ``out_dir``.

    * ``n_gold``/``n_other``: the first ``n_gold`` sources that have a gold pair and the first
      ``n_other`` that have none, in file order (a gold-enriched slice: precision is higher
      than on the full set, recall is not affected);
    * otherwise the first ``first`` sources (all when None).

    The l2 side is linked (or copied where links are impossible), so the trie holds every target
    sentence; with ``n_other_targets`` it keeps the kept sources' gold targets and the first
    ``n_other_targets`` other target lines instead (in file order; a small, quick set).
    Returns ``(slice gold path, number of sources kept)``.
    """
    bucc = read_bucc(gold_path)
    l1, l2 = bucc.l1, bucc.l2
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gold_src = {s for s, _ in bucc.gold}
    n = len(bucc.src.ids)
    if n_gold is None and n_other is None:
        keep = list(range(n))[: first]
    else:
        with_gold = [i for i in range(n) if bucc.src.ids[i] in gold_src][: n_gold or 0]
        without = [i for i in range(n) if bucc.src.ids[i] not in gold_src][: n_other or 0]
        keep = sorted(with_gold + without)
    kept_ids = {bucc.src.ids[i] for i in keep}
    stem = out / f"{l1}-{l2}.{split}"
    Path(f"{stem}.{l1}").write_text(
        "".join(f"{bucc.src.ids[i]}\t{bucc.src.texts[i]}\n" for i in keep), encoding="utf-8")
    tgt_link = Path(f"{stem}.{l2}")
    tgt_link.unlink(missing_ok=True)
    if n_other_targets is not None:
        gold_tgt = {t for s, t in bucc.gold if s in kept_ids}
        others = [i for i, t in enumerate(bucc.tgt.ids) if t not in gold_tgt][:n_other_targets]
        keep_t = sorted(set(others) | {i for i, t in enumerate(bucc.tgt.ids) if t in gold_tgt})
        tgt_link.write_text("".join(f"{bucc.tgt.ids[i]}\t{bucc.tgt.texts[i]}\n" for i in keep_t),
                            encoding="utf-8")
    else:
        try:
            os.symlink(os.path.abspath(bucc.tgt.path), tgt_link)
        except OSError:
            tgt_link.write_bytes(Path(bucc.tgt.path).read_bytes())
    gold_out = Path(f"{stem}.gold")
    gold_out.write_text("".join(f"{s}\t{t}\n" for s, t in bucc.gold if s in kept_ids),
                        encoding="utf-8")
    return gold_out, len(keep)

