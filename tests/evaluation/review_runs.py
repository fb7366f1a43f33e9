"""Synthetic runs for the reading sheet's tests (trie-mine-review): a mining TSV of the judge
configuration written with ``triemine.io``'s writer, and a scores TSV as trie-mine-score writes
it. Imported by tests/evaluation/test_review*.py."""
from dataclasses import asdict

import numpy as np

from triemine.io import Mined, write_mined
from triemine.judging.shipped import shipped

# a source line that would run script if it were ever put on the page as markup
INJECTED = "</script><img src=x onerror=\"document.title='pwned'\">"
CHINESE = [("我们明天早上八点在火车站见面。",
            "We will meet at the railway station at eight tomorrow."),
           ("这座城市的人口在过去十年里翻了一番。",
            "The population of the city has doubled over the past ten years."),
           ("请把窗户关上，外面太冷了。", "Please close the window, it is too cold outside."),
           ("他的新书将于下个月出版。", "His new book will be published next month."),
           ("会议因天气原因推迟到周五。",
            "The meeting was postponed to Friday because of the weather.")]
# the texts of source i and target i (1-based); later ones are made up from i
TEXTS = [(INJECTED, "An image tag: <img src=x onerror=alert(1)>"),
         ("a & b < c > d \u2028 line\u2029 <b>bold</b>",
          "</script><script>document.title='pwned'</script>"),
         ("<script>alert(1)</script>", "&lt;not an entity&gt; &amp;")] + CHINESE


def text(i: int, side: int) -> str:
    """Source (``side`` 0) or target (1) ``i``'s text."""
    return TEXTS[i - 1][side] if i <= len(TEXTS) else (f"源句 {i}", f"target {i}")[side]


def judge_meta() -> dict:
    """A mining-job sidecar of the judge configuration: its selection (one-to-one by prob,
    prob >= 0.5) is the run's own."""
    return {"model": "m", "mode": "knn", "beam": 5, "pipeline": {"candidates": ["knn"]},
            "combination": asdict(shipped("judge"))}


def mining_run(path, sources: int = 40, seed: int = 3) -> str:
    """A mining TSV of ``sources`` sources ``s1..``: source ``i`` has its own target ``ti`` at a
    prob spread over (0, 1) (about 60 % of them >= 0.5, kept), and every third one also a rival
    ``t{i+1}`` at a lower prob (lost to the one-to-one rule or below the cut). The first
    sources (all kept) carry :data:`TEXTS`: markup, script, then Chinese."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1, sources + 1):
        p = float(np.round(rng.uniform(0.55, 0.999) if i <= 12 else rng.uniform(0.05, 0.99), 6))
        rows.append((f"s{i}", f"t{i}", p))
        if i % 3 == 0:
            rows.append((f"s{i}", f"t{i % sources + 1}", float(np.round(p * 0.6, 6))))
    src = [text(int(s[1:]), 0) for s, _, _ in rows]
    tgt = [text(int(t[1:]), 1) for _, t, _ in rows]
    prob = np.array([p for _, _, p in rows])
    judge = np.log(prob / (1 - prob))
    numeric = {"score": -10 * (1 - prob), "ce_word": 2 * (1 - prob), "ce_token": 1 - prob,
               "combined": judge / 3, "judge": judge, "prob": prob}
    mined = Mined.from_columns([r[0] for r in rows], [r[1] for r in rows], src, tgt, numeric,
                               meta=judge_meta(), path=str(path))
    mined.columns = ["src_id", "tgt_id", "score", "ce_word", "ce_token", "combined", "judge",
                     "prob", "src", "tgt"]
    write_mined(mined, path)
    return str(path)


def scores_run(path, probs, kept, texts=None) -> str:
    """A scores TSV of trie-mine-score (``line id src tgt status ... prob kept``): row ``i`` of
    prob ``probs[i]`` (NaN: not scored, status ``empty side``) kept when ``kept[i]``."""
    lines = ["line\tid\tsrc\ttgt\tstatus\tce_word\tcombined\tjudge\tprob\tkept"]
    for i, (p, k) in enumerate(zip(probs, kept)):
        s, t = texts[i] if texts else (f"源 {i}", f"target {i}")
        status = "scored" if p == p else "empty side"
        cell = "nan" if p != p else f"{p:.6f}"
        lines.append(f"{i + 1}\tp{i + 1}\t{s}\t{t}\t{status}\t1.000000\t0.500000\t0.100000\t"
                     f"{cell}\t{int(bool(k))}.000000")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)
