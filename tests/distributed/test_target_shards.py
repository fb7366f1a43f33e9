"""--target-shards beyond a tiny corpus are clamped with a warning (no search per line).

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
hang guard in a subprocess.
"""
import os
import subprocess
import sys
import time

import pytest

from helpers import OTHER, PAIRS, paper_job

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- many target shards on a tiny corpus
# -------------------------------------------------------------

@pytest.mark.cluster
def test_target_shards_beyond_a_tiny_corpus_are_clamped_with_a_warning(
        tiny_model_dir, tmp_path):
    """Hang guard only (the timeout is no speed goal): --target-shards 100000 on 40 target lines
    searches 2 ranges of at least 16 lines, said once, and finishes."""
    from triemine.decoding.trie_cache import MIN_TARGET_SHARD_LINES, shard_count

    assert shard_count(240, 240) == 240 // MIN_TARGET_SHARD_LINES and shard_count(5, 3) == 1
    assert shard_count(2, 48) == 2
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(s + "\n" for s, _ in PAIRS[:4]), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in PAIRS[:20]) + "".join(
        t + "\n" for t in OTHER[:20]), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
         "sys.exit(mine_main(sys.argv[1:]))", *paper_job(tiny_model_dir, src, tgt, "-o",
                                                       str(tmp_path / "o.tsv"),
                                                       "--target-shards", "100000")],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("--target-shards 100000") == 1
    assert "searching 2 range(s)" in proc.stderr, proc.stderr[-1000:]
    assert time.monotonic() - t0 < 600
