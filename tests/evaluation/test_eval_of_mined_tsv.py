"""End to end on the tiny synthetic model: trie-mine output -> trie-mine-eval / trie-mine-filter.

The tiny model (tests/conftest.py) translates a word-substitution cipher. Half of the sources
have their translation in the target corpus (gold), the other half do not, so pre-expansion
still forces them onto some target sentence, with a worse per-word cross-entropy: the CE filter
must drop those and keep the gold pairs.
"""
from __future__ import annotations

import random

from triemine.cli import eval_main, filter_main, mine_main
from triemine.testing.tiny_model import synthetic_pairs
from triemine.evaluation.bucc import read_bucc
from triemine.io.tsv import read_mined
from triemine.evaluation.pipeline import Direction, evaluate


def _bucc(tmp_path):
    pairs = synthetic_pairs(60, seed=11, min_len=3, max_len=6)
    seen, uniq = set(), []
    for s, t in pairs:
        if s not in seen and t not in seen:
            seen.update((s, t))
            uniq.append((s, t))
    gold_pairs, nogold = uniq[:12], uniq[12:24]
    distract = [t for _, t in uniq[24:44]]
    targets = [t for _, t in gold_pairs] + distract
    random.Random(3).shuffle(targets)
    d = tmp_path / "bucc"
    d.mkdir()
    srcs = [s for s, _ in gold_pairs] + [s for s, _ in nogold]
    (d / "xx-yy.t.xx").write_text("".join(f"x{i}\t{s}\n" for i, s in enumerate(srcs)),
                                  encoding="utf-8")
    (d / "xx-yy.t.yy").write_text("".join(f"y{i}\t{t}\n" for i, t in enumerate(targets)),
                                  encoding="utf-8")
    tid = {t: f"y{i}" for i, t in enumerate(targets)}
    (d / "xx-yy.t.gold").write_text(
        "".join(f"x{i}\t{tid[t]}\n" for i, (_, t) in enumerate(gold_pairs)), encoding="utf-8"
    )
    return d


def test_mined_tsv_evaluates_and_ce_filter_removes_forced_matches(tmp_path, tiny_model_dir, capsys):
    d = _bucc(tmp_path)
    out = tmp_path / "mined.tsv"
    assert mine_main(["--candidates", "trie", "--pre-expansion", "--model", str(tiny_model_dir),
                      "--source", str(d / "xx-yy.t.xx"),
                      "--target", str(d / "xx-yy.t.yy"), "-o", str(out), "--beam", "4", "-q"]) == 0
    b = read_bucc(d / "xx-yy.t.gold")
    mined = read_mined(out)
    assert len(set(mined.src_ids)) == 24  # pre-expansion matches every source
    none = evaluate([Direction(mined)], b, "none")
    ce = evaluate([Direction(mined)], b, "ce")
    assert none.strict.recall == 1.0 and none.strict.precision == 0.5
    assert ce.strict.f1 == 1.0, ce.signature()
    assert "mode=pre|beam=4" in ce.signature()  # from trie-mine's run settings
    # the CLI on the same file, thresholds saved, then used by trie-mine-filter
    th = tmp_path / "th.json"
    assert eval_main([str(out), "--gold", str(d / "xx-yy.t.gold"), "--filter", "ce",
                      "--save-thresholds", str(th)]) == 0
    text = capsys.readouterr().out
    assert "match=strict|P=1.0000|R=1.0000|F1=1.0000" in text
    kept = tmp_path / "kept.tsv"
    assert filter_main([str(out), "--thresholds", str(th), "-o", str(kept)]) == 0
    assert set(zip(read_mined(kept).src_ids, read_mined(kept).tgt_ids)) >= set(b.gold)
