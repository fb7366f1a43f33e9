"""The reliability bench's file families: damaged trie files and text inputs, the digests' cost.

* ``tries`` (:func:`bench_tries`): byte flips, truncations, random headers, random bytes
  (:func:`mutate`) and a valid file of another format version, written as files and loaded as
  ``trie-mine --trie`` loads them (``triemine.decoding.task.load_trie_for_dict``), then
  queried.  ``trie_crashes`` counts every outcome other than a clean load or an ``InputError``
  (what the CLI turns into exit 2).  Half of the damaged files keep valid checksums (the
  payload is damaged and both checksums recomputed), so that the structural checks, not the
  CRC, must catch them.
* ``text`` (:func:`bench_text`): mining TSVs, gold files, corpora and thresholds files mutated
  the same way and given to ``trie-mine-eval`` / ``trie-mine-filter`` in-process.
  ``text_tracebacks`` counts exceptions that escaped the CLI (a traceback for the user); exit
  codes must be 0 or 2.
* ``digest`` (issue 37, :func:`bench_digest`): SHA-256 GB/s on a synthetic file, extrapolated
  to 10^8 lines a side; the sample's corpora hashed uncached and cached.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np

import benchlib


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One random damage: byte flips, a truncation, a random header, or random bytes."""
    kind = rng.randrange(5)
    b = bytearray(data)
    if kind == 0 and b:  # flip 1-8 bytes
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= rng.randint(1, 255)
    elif kind == 1:  # truncate
        b = b[:rng.randrange(max(len(b), 1))]
    elif kind == 2:  # random header bytes
        n = min(len(b), rng.randint(8, 96))
        b[:n] = bytes(rng.randrange(256) for _ in range(n))
    elif kind == 3:  # insert or delete a run of bytes
        i = rng.randrange(max(len(b), 1))
        if rng.random() < 0.5:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            del b[i:i + rng.randint(1, 16)]
    else:  # random bytes of a random length
        b = bytearray(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    return bytes(b)


def bench_tries(model, work: Path, n: int, rng: random.Random) -> dict:
    import struct
    import zlib

    from triemine.decoding.task import load_trie_for_dict
    from triemine.errors import InputError
    from triemine.trie import Trie
    from triemine.trie.fileformat import _HEADER

    seqs = [model.encode_target(t).tolist() for t in ("ta tb", "ta tc td", "te", "tf tg th ti")]
    good = work / "good.trie"
    Trie.build(seqs, eos=model.tgt_dict.eos(), metadata={
        "dict_size": len(model.tgt_dict)}).save(good)
    data = good.read_bytes()
    fields = list(_HEADER.unpack(data[:_HEADER.size]))
    fields[1] += 1  # a valid file of another format version
    head = _HEADER.pack(*fields)
    other_version = head[:-4] + struct.pack("<I", zlib.crc32(head[:-4])) + data[_HEADER.size:]
    def with_checksums(content: bytes) -> bytes:
        """Damage the payload only and recompute both checksums: what a buggy or hostile
        writer produces, which only the structural checks can catch."""
        body = bytearray(mutate(content[_HEADER.size:],
                                rng) if rng.random() < 0.5 else content[_HEADER.size:])
        if body:
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
        f = list(_HEADER.unpack(content[:_HEADER.size]))
        f[9] = zlib.crc32(bytes(body))
        h = _HEADER.pack(*f)
        return h[:-4] + struct.pack("<I", zlib.crc32(h[:-4])) + bytes(body)

    path = work / "bad.trie"
    outcome = {"clean_error": 0, "loaded": 0, "crashes": 0}
    examples = []
    for i in range(n):
        content = (other_version if i == 0 else
                   with_checksums(data) if i % 2 else mutate(data, rng))
        path.write_bytes(content)
        try:
            trie = load_trie_for_dict(path, model.tgt_dict)
            nodes = np.arange(trie.n_nodes)
            trie.children_many(nodes)
            trie.step_many(nodes, np.full(trie.n_nodes, seqs[0][0]))
            list(trie)
            outcome["loaded"] += 1
        except InputError:
            outcome["clean_error"] += 1
        except Exception as exc:  # noqa: BLE001 - what we count
            outcome["crashes"] += 1
            if len(examples) < 5:
                examples.append(f"{type(exc).__name__}: {exc}")
    return {"trie_files": n, "trie_crashes": outcome["crashes"], "trie_clean_errors":
            outcome["clean_error"], "trie_loaded": outcome["loaded"],
            "trie_crash_examples": examples}


def bench_text(work: Path, n: int, rng: random.Random) -> dict:
    import contextlib
    import io

    from triemine.cli import eval_main, filter_main

    d = work / "bucc"
    d.mkdir(exist_ok=True)
    zh = "".join(f"zh-{i}\t中文句子{i}。\n" for i in range(1, 9))
    en = "".join(f"en-{i}\tEnglish sentence {i}.\n" for i in range(1, 9))
    gold = "zh-1\ten-1\nzh-2\ten-2\nzh-3\ten-3\n"
    header = "src_id\ttgt_id\tscore\tce_word\tce_token\tsrc\ttgt\tpmi\n"
    rows = "".join(f"zh-{i}\ten-{j}\t{-i - j:.3f}\t{(i + j) / 4:.3f}\t{(i + j) / 5:.3f}\t"
                   f"中文句子{i}。\tEnglish sentence {j}.\t{2.0 - (i != j):.2f}\n"
                   for i in range(1, 9) for j in (i, i % 8 + 1))
    thresholds = json.dumps({"version": 1, "filter": "ce", "rule": "best-per-source",
                             "rank_by": "ce_word", "thresholds": {"zh-en": {"ce_word": 2.5}}})
    originals = {"zh-en.t.zh": zh, "zh-en.t.en": en, "zh-en.t.gold": gold, "m.tsv": header + rows,
                 "th.json": thresholds}

    def write_all(skip=None):
        for name, text in originals.items():
            if name != skip:
                (d / name).write_bytes(text.encode("utf-8"))

    def calls():
        g, m, th = str(d / "zh-en.t.gold"), str(d / "m.tsv"), str(d / "th.json")
        return [lambda: eval_main([m, "--gold", g, "--filter", "ce", "--folds", "2"]),
                lambda: eval_main([m, "--gold", g, "--filter", "ce", "--thresholds", th]),
                lambda: eval_main([m, "--gold", g, "--filter", "pmi", "--rule", "one-to-one",
                                   "--rank-by", "pmi"]),
                lambda: filter_main([m, "--thresholds", th, "-o", str(d / "out.tsv")])]

    tracebacks, bad_codes, codes = 0, 0, {}
    examples = []
    names = list(originals)
    for i in range(n):
        target = names[i % len(names)]
        write_all()
        (d / target).write_bytes(mutate(originals[target].encode("utf-8"), rng))
        for call in calls():
            out = io.StringIO()
            try:
                with contextlib.redirect_stderr(out), contextlib.redirect_stdout(io.StringIO()):
                    code = call()
            except SystemExit as exc:  # argparse errors: exit 2 with a message
                code = exc.code
            except Exception as exc:  # noqa: BLE001 - a traceback for the user
                tracebacks += 1
                if len(examples) < 5:
                    examples.append(f"{target}: {type(exc).__name__}: {exc}")
                continue
            codes[code] = codes.get(code, 0) + 1
            if code not in (0, 2):
                bad_codes += 1
    return {"text_files": n, "text_calls": sum(codes.values()) + tracebacks,
            "text_tracebacks": tracebacks, "text_bad_exit_codes": bad_codes,
            "text_exit_codes": {str(k): v for k, v in sorted(codes.items(), key=str)},
            "text_traceback_examples": examples}



def bench_digest(work: Path, size_mb: int = 1024) -> dict:
    """The content digest's cost (issue 37): SHA-256 GB/s of one thread over a ``size_mb`` MiB
    synthetic file (page-cached after its first read), extrapolated to 10^8 lines a side (the
    BUCC sample's mean line length), and the sample's two corpora hashed uncached then cached
    (``content_sha256`` read against the file's stamp)."""
    from triemine.io import keys, paths

    big = work / "digest.bin"
    with open(big, "wb") as f:
        block = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
        for _ in range(size_mb // 64):
            f.write(block)
    keys.file_sha256(big)  # into the page cache
    with benchlib.timer() as t:
        keys.file_sha256(big)
    gbs = big.stat().st_size / t.s / 1e9
    big.unlink()
    sample = [paths.shared_path(*paths.BUCC_ZH_EN, f"zh-en.sample.{s}") for s in ("zh", "en")]
    per_line = sum(p.stat().st_size for p in sample) / sum(
        p.read_bytes().count(b"\n") for p in sample)
    cache = work / "digest-cache"
    try:
        with benchlib.env_var("TRIEMINE_CACHE", cache):
            with benchlib.timer() as cold:
                for p in sample:
                    keys.content_sha256(p)
            with benchlib.timer() as warm:
                for p in sample:
                    keys.content_sha256(p)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"digest": "sha256", "digest_threads": 1, "digest_file_mb": size_mb,
            "digest_gb_s": round(gbs, 2), "digest_bytes_per_line": round(per_line, 1),
            "digest_1e8_lines_a_side_s": round(2e8 * per_line / 1e9 / gbs, 1),
            "digest_sample_cold_s": round(cold.s, 4), "digest_sample_cached_s": round(warm.s, 5)}
