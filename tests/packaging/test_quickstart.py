"""docs/quickstart.md: every command on the page runs, in order, in a scratch folder laid out
like a checkout (``.venv``, ``.cache`` with the imported model, ``../shared``); the ``make``
lines are what ``make demo`` runs."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from triemine.io.paths import cache_root, shared_root

pytestmark = pytest.mark.cluster  # runs scripts and commands in subprocesses

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "quickstart.md"
RUN_BY_DEMO = {"make demo", "make setup", "make model"}  # demo: $(STAMP) $(OPUS_MODEL)


def _commands():
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    lines = [line for block in blocks for line in block.splitlines() if line.strip()]
    make = [line for line in lines if line.startswith("make ")]
    return make, [line for line in lines if not line.startswith("make ")]


def test_the_make_lines_are_make_demo_and_its_prerequisites():
    make, shell = _commands()
    assert make == ["make demo"] and set(make) <= RUN_BY_DEMO
    assert re.search(r"^demo: \$\(STAMP\) \$\(OPUS_MODEL\)$",
                     (REPO / "Makefile").read_text(encoding="utf-8"), re.M)
    for script in ("trie-mine ", "trie-mine-eval ", "trie-mine-filter ", "trie-mine-score "):
        assert any(line.startswith(script) for line in shell), script


@pytest.mark.shared_model
def test_every_command_of_the_quickstart_runs(tmp_path):
    work = tmp_path / "checkout"
    work.mkdir()
    (tmp_path / "shared").symlink_to(shared_root())
    (work / ".venv").symlink_to(Path(sys.prefix))
    (work / ".cache").symlink_to(cache_root())
    _, shell = _commands()
    script = "set -euo pipefail\n" + "\n".join(shell) + "\n"
    res = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True, text=True,
                         timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    kept = (work / "kept.tsv").read_text(encoding="utf-8").splitlines()
    assert 25 <= len(kept) <= 35 and all(len(line.split("\t")) == 2 for line in kept)
    f1 = re.search(r"strict .*F1=([0-9.]+)", res.stdout)
    assert f1 and float(f1.group(1)) >= 0.9, res.stdout
    sure = (work / "sure.tsv").read_text(encoding="utf-8").splitlines()
    assert 0 < len(sure) <= len(kept) and set(sure) <= set(kept)
    scores = (work / "kept.scores.tsv").read_text(encoding="utf-8").splitlines()
    assert len(scores) == len(kept) + 1 and "combined" in scores[0].split("\t")
