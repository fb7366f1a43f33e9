"""The reliability bench's judge family (issue 68): every surface of the learned judge given
hostile but realistic input, each case counted as ``ok``, ``silent_wrong``, ``traceback`` or
``late`` (a refusal that came after a model was loaded: every judge input is checked before).

* judge files (missing, empty, truncated, NaN, a string, a configuration record, random
  bytes, a folder, a kind without one of its parameters, an unknown kind, a judge reading its
  own outputs or a column the job does not write), each given to ``trie-mine --config judge``,
  ``trie-mine-score --config judge``, ``triemine.mine`` and ``triemine.score``;
* settings only a judge reads (``--judge``, ``--density``) without one, ``--density`` out of
  range, ``--second-look`` where the configuration has none, API arguments of the wrong type;
* ``trie-mine-train-judge``: its output onto each of its inputs (a link too), ``--c`` 0 and
  negative, empty and own-output ``--features``, a gold file with its columns swapped;
* the cut: ``trie-mine-eval`` tunes a judge's TSV by its ``prob``, ``trie-mine-filter
  --min-prob P`` keeps what ``--threshold prob=P`` keeps;
* full mode only (jobs on the tiny model): ``--min-prob`` in ``trie-mine --config judge`` keeps
  what ``--threshold prob=P`` keeps, the run record names the judge by fingerprint and
  resolved path, ``triemine.mine`` takes the judge as a ``Path``, a scores TSV's ``kept`` is
  ``1``/``0``.

:func:`bench_judge` returns the counts (``judge_cases``, ``judge_ok``, ``judge_silent_wrong``,
``judge_traceback``, ``judge_late``, ``judge_inputs_overwritten``) and the first examples.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
from pathlib import Path

import benchlib


@contextlib.contextmanager
def _loads():
    """Counts the model loads of the mining job and of trie-mine-score while the body runs."""
    import triemine.cleaning as cleaning
    import triemine.mining.job as job

    seen = []
    real = {m: m.load_model_dir for m in (cleaning, job)}
    for mod, fn in real.items():
        mod.load_model_dir = lambda *a, _fn=fn, **k: (seen.append(1), _fn(*a, **k))[1]
    try:
        yield seen
    finally:
        for mod, fn in real.items():
            mod.load_model_dir = fn


def _case(name, call, refuse: bool, ok=lambda err: True):
    """``(name, kind, text)`` of one call: :func:`benchlib.outcome`, ``late`` for a refusal
    after a model load."""
    with _loads() as seen:
        kind, text = benchlib.outcome(call, refuse, ok)
    if refuse and kind == "ok" and seen:
        kind = "late"
    return name, kind, text


def _bad_judges(d: Path, rng: random.Random) -> dict:
    """Judge files that are not judges (or read what they cannot), by name."""
    from triemine.judging.model import SHIPPED

    text = SHIPPED.read_text(encoding="utf-8")
    data = json.loads(text)
    files = {}

    def put(name, body):
        path = d / f"judge-{name}.json"
        path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
        files[name] = path
    put("empty", "")
    put("truncated", text[:len(text) // 2])
    put("nan", text.replace('"bias": ', '"bias": NaN, "was": ', 1))
    put("string", '"judge"')
    put("configuration record", (Path(SHIPPED).parent.parent / "config" / "records" /
                                 "judge.json").read_text(encoding="utf-8"))
    put("random bytes", bytes(rng.randrange(256) for _ in range(300)))
    put("no bias", json.dumps({k: v for k, v in data.items() if k != "bias"}))
    put("no forest", json.dumps({k: v for k, v in data.items() if k != "forest"}))
    put("unknown kind", json.dumps(dict(data, kind="forest")))
    put("reads its prob", json.dumps(dict(data, features=data["features"][:-1] + ["prob"])))
    put("reads bicleaner", json.dumps(dict(data, features=["bicleaner"] + data["features"][1:])))
    files["missing"] = d / "judge-none.json"
    (d / "judge-folder").mkdir()
    files["folder"] = d / "judge-folder"
    return files


def _tools(model, src, tgt, pairs, d):
    """The four ways a judge is given: ``{name: f(extra flags) -> call}``."""
    import triemine
    from triemine.cli import mine_main, score_main

    def cli_mine(*extra):
        return lambda: mine_main(["--model", str(model), "--source", str(src), "--target",
                                  str(tgt), "-o", str(d / "m.tsv"), "-q", *extra])

    def cli_score(*extra):
        return lambda: score_main([str(pairs), "--model", str(model), "-o", str(d / "s.tsv"),
                                   "-q", *extra])

    def kwargs(extra):
        out, it = {}, iter(extra)
        for flag in it:
            key = flag.lstrip("-").replace("-", "_")
            out[key] = True if key == "second_look" else next(it)
        if "density" in out:
            out["density"] = float(out["density"])
        return out

    def api_mine(*extra):
        return lambda: triemine.mine(str(src), str(tgt), model=str(model),
                                     output=str(d / "a.tsv"), **kwargs(extra))

    def api_score(*extra):
        return lambda: triemine.score(str(pairs), model=str(model), output=str(d / "b.tsv"),
                                      **kwargs(extra))
    return {"trie-mine": cli_mine, "trie-mine-score": cli_score, "mine()": api_mine,
            "score()": api_score}


def _named(path):
    return lambda err: os.path.basename(str(path)) in err


def _settings_cases(tools):
    """Settings only a judge (or a second look) reads, out of range or of the wrong type."""
    from triemine.judging.model import SHIPPED

    cases = []
    for tool, call in tools.items():
        cases += [
            (f"{tool} --judge without a judge", call("--config", "combined", "--judge",
                                                     str(SHIPPED)), True,
             lambda e: "--judge applies to a configuration with a learned judge" in e),
            (f"{tool} --density without a judge", call("--config", "combined", "--density",
                                                       "0.3"), True,
             lambda e: "--density applies" in e),
            (f"{tool} --density 1e-9", call("--config", "judge", "--density", "1e-9"), True,
             lambda e: ">= 1e-06" in e),
            (f"{tool} --density 1.5", call("--config", "judge", "--density", "1.5"), True,
             lambda e: "<= 0.999999" in e)]
    cases.append(("trie-mine --second-look --config mt-only",
                  tools["trie-mine"]("--config", "mt-only", "--second-look"), True,
                  lambda e: "has no second look" in e))
    cases.append(("mine() second_look with mt-only",
                  tools["mine()"]("--config", "mt-only", "--second-look"), True,
                  lambda e: "has no second look" in e))
    for tool in ("mine()", "score()"):
        cases.append((f"{tool} judge=123", lambda tool=tool: _api_judge(tools, tool, 123), True,
                      lambda e: "expected a file path" in e))
    return cases


def _api_judge(tools, tool, judge):
    import triemine

    kw = {"config": "judge", "judge": judge}
    if tool == "mine()":
        return triemine.mine(["你好"], ["hello"], model="/no/such/model", **kw)
    return triemine.score([("你好", "hello")], model="/no/such/model", output="/tmp/x.tsv", **kw)


def _labelled(d: Path):
    """A small mining TSV with a sidecar and its gold (the training command's input)."""
    from triemine.io.tsv import write_rows

    n = 40
    y = [i % 4 == 0 for i in range(n)]
    cells = {"src_id": [str(i) for i in range(n)], "tgt_id": [f"e{i}" for i in range(n)],
             "score": [-1.0] * n, "ce_word": [1.0] * n, "ce_token": [1.0] * n,
             "a": [float(i % 7) + 3 * v for i, v in enumerate(y)],
             "b": [float(i % 5) for i in range(n)], "src": ["甲"] * n, "tgt": ["x"] * n}
    mined = d / "labelled.tsv"
    write_rows(mined, list(cells), cells, meta={"pipeline": {}})
    gold = d / "labelled.gold"
    gold.write_text("".join(f"{i}\te{i}\n" for i in range(n) if y[i]))
    swapped = d / "swapped.gold"
    swapped.write_text("".join(f"e{i}\t{i}\n" for i in range(n) if y[i]))
    (d / "labelled-link.tsv").symlink_to(mined)
    return mined, gold, swapped


def _train_cases(d: Path):
    from triemine.cli import train_judge_main

    mined, gold, swapped = _labelled(d)
    meta = Path(str(mined) + ".meta.json")

    def train(*extra, out=d / "trained.json", g=gold):
        return lambda: train_judge_main([str(mined), "--gold", str(g), "-o", str(out),
                                         "--kind", "logistic", "--features", "a,b", *extra])
    cases = [(f"train-judge -o onto {name}", train(out=path), True,
              lambda e: "must not be an input" in e)
             for name, path in (("MINED", mined), ("its sidecar", meta), ("the gold", gold),
                                ("a link to MINED", d / "labelled-link.tsv"))]
    cases += [("train-judge --c 0", train("--c", "0"), True, lambda e: "--c must be" in e),
              ("train-judge --c -1", train("--c", "-1"), True, lambda e: "--c must be" in e),
              ("train-judge --features ,", train("--features", ","), True,
               lambda e: "no column named" in e),
              ("train-judge --features use_margin,prob,judge",
               train("--features", "a,prob,judge"), True, lambda e: "own output" in e),
              ("train-judge gold columns swapped", train(g=swapped), True,
               lambda e: "columns swapped" in e),
              ("train-judge fits", train(), False)]
    before = {p: p.read_bytes() for p in (mined, meta, gold)}
    return cases, before


def _judge_tsv(d: Path) -> Path:
    """A judge's TSV whose combined column would keep other pairs than its prob."""
    from triemine.config.configurations import configuration
    from triemine.io.tsv import write_rows

    cells = {"src_id": ["1", "1", "2", "2"], "tgt_id": ["1", "2", "2", "1"],
             "score": [-1.0] * 4, "ce_word": [1.0] * 4, "ce_token": [1.0] * 4,
             "combined": [1.0, 9.0, 1.0, 9.0], "judge": [3.0, -3.0, 2.0, -2.0],
             "prob": [0.95, 0.05, 0.9, 0.1], "src": ["a", "a", "b", "b"],
             "tgt": ["c", "e", "e", "c"]}
    path = d / "zh-en.j.tsv"
    write_rows(path, list(cells), cells, meta={"pipeline": {"config": "judge"},
                                               "combination": configuration("judge").combination})
    (d / "zh-en.j.gold").write_text("1\t1\n2\t2\n")
    for name in ("zh-en.j.zh", "zh-en.j.en"):
        (d / name).write_text("1\ta\n2\tb\n")
    return path


def _printed(call) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        call()
    return out.getvalue()


def _cut_cases(d: Path):
    """trie-mine-eval and trie-mine-filter on a judge's TSV: its prob is the cut."""
    from triemine.cli import eval_main, filter_main

    tsv = _judge_tsv(d)
    gold = d / "zh-en.j.gold"

    def evaluated():
        text = _printed(lambda: eval_main([str(tsv), "--gold", str(gold)]))
        return 0 if "filter=prob" in text and "filter=combined" not in text else 1

    def kept(*flags) -> str:
        text = _printed(lambda: filter_main([str(tsv), "-o", str(d / "k.tsv"), *flags]))
        return text.split("kept ")[1].split(" ")[0] if "kept " in text else "?"

    def same_cut():
        return 0 if kept("--min-prob", "0.92") == kept("--threshold", "prob=0.92") == "1" \
            else 1
    return [("eval tunes a judge TSV by prob", evaluated, False),
            ("filter --min-prob is the prob cut", same_cut, False)]


def _job_cases(model, src, tgt, pairs, d: Path):
    """Full mode: jobs on the tiny model."""
    import triemine
    from triemine.cli import mine_main
    from triemine.io import read_mined
    from triemine.judging.model import SHIPPED, load_judge

    def bitext(out, *flags):
        assert mine_main(["--model", str(model), "--source", str(src), "--target", str(tgt),
                          "-o", str(d / f"{out}.tsv"), "-q", "--config", "judge", "--bitext",
                          str(d / f"{out}.txt"), *flags]) == 0
        return (d / f"{out}.txt").read_bytes()

    def min_prob():
        return 0 if bitext("mp", "--min-prob", "0.5") == bitext("tp", "--threshold",
                                                                  "prob=0.5") else 1

    def record():
        res = triemine.mine(str(src), str(tgt), model=str(model), config="judge",
                            judge=Path(SHIPPED), output=str(d / "rec.tsv"))
        meta = read_mined(str(d / "rec.tsv")).meta
        want = {"fingerprint": load_judge().fingerprint(), "path": str(SHIPPED)}
        return 0 if meta.get("judge") == want and res.summary["kept"] >= 0 else 1

    def kept_flag():
        triemine.score(str(pairs), model=str(model), output=str(d / "kf.tsv"), config="judge")
        rows = (d / "kf.tsv").read_text(encoding="utf-8").splitlines()
        col = rows[0].split("\t").index("kept")
        return 0 if {r.split("\t")[col] for r in rows[1:]} <= {"0", "1"} else 1
    return [("trie-mine --min-prob is --threshold prob", min_prob, False),
            ("the record names the judge", record, False),
            ("scores TSV kept is 1/0", kept_flag, False)]


def bench_judge(model_dir, work: Path, quick: bool = False, seed: int = 68) -> dict:
    """The judge family (module docstring) on the tiny model ``model_dir`` in ``work``."""
    from triemine.testing.tiny_model import synthetic_pairs

    d = work / "judge"
    d.mkdir()
    rng = random.Random(seed)
    rows = synthetic_pairs(60, seed=5)
    src, tgt, pairs = d / "src.txt", d / "tgt.txt", d / "pairs.tsv"
    src.write_text("".join(s + "\n" for s, _ in rows[:20]), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in rows), encoding="utf-8")
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in rows[:20]), encoding="utf-8")
    tools = _tools(model_dir, src, tgt, pairs, d)
    cases = []
    for name, path in _bad_judges(d, rng).items():
        for tool, call in tools.items():
            cases.append((f"{tool} judge {name}", call("--config", "judge", "--judge",
                                                       str(path)), True, _named(path)))
    cases += _settings_cases(tools)
    train, before = _train_cases(d)
    cases += train + _cut_cases(d)
    if not quick:
        cases += _job_cases(model_dir, src, tgt, pairs, d)
    res, examples = {}, []
    old_cache = os.environ.get("TRIEMINE_CACHE")
    os.environ["TRIEMINE_CACHE"] = str(d / "cache")
    try:
        outcomes = [_case(name, call, refuse, *ok) for name, call, refuse, *ok in cases]
    finally:
        if old_cache is None:
            os.environ.pop("TRIEMINE_CACHE", None)
        else:
            os.environ["TRIEMINE_CACHE"] = old_cache
    benchlib.tally(res, "judge", outcomes, before, examples)
    for kind in ("ok", "silent_wrong", "traceback", "late"):
        res.setdefault(f"judge_{kind}", 0)
    res["judge_examples"] = examples
    return res
