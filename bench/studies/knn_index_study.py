#!/usr/bin/env python3
"""How well a graph index (faiss HNSW-Flat) finds the exact neighbours of a mining run's sources.

A study, not part of the job: it reads the embeddings and the exact forward kNN lists that a
default-configuration run left in its work directory (``OUT.work/emb.use.{src,tgt}.npy`` and
``knn.use.fwd.shards``; e.g. ``bench/haystack_bench.py --targets 1000000 --work W`` then
``--work-dir W/workers2.tsv.work``), builds an HNSW index over the targets and prints one JSON
line per ``efSearch``: recall@4 against the exact lists, the build and search seconds.  It is
the measurement behind docs/scale.md's comparison of IVF and HNSW.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", required=True, help="a default-configuration run's OUT.work")
    ap.add_argument("--m", type=int, default=32, help="HNSW links per node (M)")
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--ef", default="32,64,128,256,512,1024", help="efSearch values")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    import faiss

    from triemine.embedding.knn_shards import knn_sharded
    from triemine.distributed.local import InlinePool

    work = Path(args.work_dir)
    faiss.omp_set_num_threads(args.threads)
    db = np.load(work / "emb.use.tgt.npy", mmap_mode="r")
    queries = np.ascontiguousarray(np.load(work / "emb.use.src.npy"), dtype=np.float32)
    _, exact = knn_sharded(work / "emb.use.src.npy", work / "emb.use.tgt.npy", 4, work,
                           InlinePool(), name="knn.use.fwd", index="exact")  # the run's shards
    index = faiss.IndexHNSWFlat(db.shape[1], args.m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = args.ef_construction
    t0 = time.perf_counter()
    for a in range(0, db.shape[0], 100_000):
        index.add(np.ascontiguousarray(db[a:a + 100_000], dtype=np.float32))
    build_s = time.perf_counter() - t0
    for ef in (int(x) for x in args.ef.split(",")):
        index.hnsw.efSearch = ef
        t0 = time.perf_counter()
        _, found = index.search(queries, 4)
        search_s = time.perf_counter() - t0
        recall = np.mean([len(set(a) & set(b)) / 4 for a, b in zip(found.tolist(),
                                                                    exact.tolist())])
        print(json.dumps({"index": "HNSW-Flat", "M": args.m,
                          "efConstruction": args.ef_construction, "efSearch": ef,
                          "database": int(db.shape[0]), "queries": len(queries),
                          "threads": args.threads, "build_s": round(build_s, 1),
                          "search_s": round(search_s, 2), "recall_at_4": round(float(recall), 4)}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
