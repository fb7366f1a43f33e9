"""Issue 37's rule, in small (bench/reliability_bench.py --only damage runs it on every file):
a damaged cache or work file (changed in place keeping its size, truncated, emptied) is rebuilt
or computed again under ``--resume`` with a warning naming it, and the output is byte-identical
to the undamaged run's."""
import logging
import random
import shutil
import sys
import warnings
from pathlib import Path

import pytest

from triemine.cli import mine_main
from triemine.testing.tiny_model import synthetic_pairs
from triemine.distributed.shards import LOG, MANIFEST

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from reliability_jobs import _as_logged, _damage  # noqa: E402  the bench's own damage

HOW = ("same-size", "truncated", "emptied")


@pytest.mark.parametrize("config", ["mt-only", "paper"])
def test_damaged_caches_and_work_files_are_rebuilt_with_a_warning_output_unchanged(
        tiny_model_dir, tmp_path, monkeypatch, caplog, config):
    pairs = synthetic_pairs(16, seed=37, min_len=3)
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(b + "\n" for _, b in pairs[::2]), encoding="utf-8")
    live, snap = tmp_path / "live", tmp_path / "snap"
    live.mkdir()
    monkeypatch.setenv("TRIEMINE_CACHE", str(live / "cache"))
    out = live / "o.tsv"
    argv = ["--config", config, "--batch-size", "4", "--model", str(tiny_model_dir),
            "--source", str(src), "--target", str(tgt), "-o", str(out), "-q"]
    if config == "paper":
        argv += ["--pre-expansion", "--beam", "4"]
    assert mine_main(argv) == 0
    want = out.read_bytes()
    shutil.copytree(live, snap)
    # (files, how the run after the damage reads them): "fresh" (no --resume: the caches are
    # read), "resume", "early" (--resume from before the united candidates: every stage's
    # state is read)
    pick = ([("cache/priors/*.npy", "fresh"), ("cache/lengths/*.npy", "fresh"),
             ("cache/lines/*.idx", "fresh"), ("cache/translations/*.txt", "fresh"),
             ("cache/digests/s.txt.*.json", "fresh"), ("o.tsv.work/settings.json", "resume"),
             ("o.tsv.work/candidates.cols/score.npy", "resume"),
             ("o.tsv.work/candidates.cols/columns.json", "resume"),
             ("o.tsv.work/retrieval.cols/tgt.npy", "early"),
             ("o.tsv.work/scores.shards/shard-*", "early"),
             ("o.tsv.work/scores.shards/" + MANIFEST, "early"),
             ("o.tsv.work/scores.shards/" + LOG, "early")]
            if config == "mt-only" else
            [("cache/tries/*.trie", "fresh"), ("cache/lines/*.idx", "fresh"),
             ("cache/digests/t.txt.*.json", "fresh"), ("o.tsv.progress", "resume"),
             ("o.tsv", "resume")])
    rng = random.Random(37)
    cases = 0
    for k, (pattern, mode) in enumerate(pick):
        logged = pattern.endswith(LOG)
        files = sorted(snap.glob(pattern.replace(LOG, MANIFEST) if logged else pattern))
        assert files, pattern
        rel = files[0].relative_to(snap)
        for how in (HOW if k % 2 == 0 else HOW[:1]):  # every kind changed in place, half of
            shutil.rmtree(live)                        # them cut short and emptied too
            shutil.copytree(snap, live)
            path = live / rel
            if logged:
                assert _as_logged(path.parent) == 1
                path = path.parent / LOG
            if mode == "early":
                shutil.rmtree(live / "o.tsv.work" / "candidates.cols")
            assert _damage(path, how, rng)
            caplog.clear()
            with warnings.catch_warnings(record=True) as caught, \
                    caplog.at_level(logging.WARNING):
                warnings.simplefilter("always")
                assert mine_main(argv + (["--resume"] if mode != "fresh" else [])) == 0, \
                    (rel, how)
            said = caplog.text + "\n".join(str(w.message) for w in caught)
            assert out.read_bytes() == want, (rel, how)
            assert path.name in said, (rel, how, said)
            cases += 1
    assert cases == len(pick) + 2 * len(pick[::2])
