"""scripts/cli_docs.py: docs/cli.md rendered from the console scripts' parsers."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster  # runs scripts and commands in subprocesses

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cli_docs.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_the_committed_page_is_the_parsers_help():
    res = _run("--check")
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_console_script_and_flag_is_on_the_page_and_a_hand_edit_fails_check(tmp_path):
    page = tmp_path / "cli.md"
    assert _run("--write", "--page", str(page)).returncode == 0
    text = page.read_text(encoding="utf-8")
    scripts = [line.split("=")[0].strip() for line in
               (REPO / "setup.cfg").read_text(encoding="utf-8").split("console_scripts =")[1]
               .strip().splitlines()]
    assert len(scripts) == 10
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == scripts
    for flag in ("--bitext-format", "--min-prob", "--target-shards", "--save-thresholds",
                 "--estimation-text", "--bicleaner-model"):
        assert flag in text
    page.write_text(text.replace("no progress bar", "no bar", 1), encoding="utf-8")
    res = _run("--check", "--page", str(page))
    assert res.returncode == 1
    assert "-  -q, --quiet           no bar" in res.stdout and "is stale" in res.stderr
    page.unlink()
    assert _run("--check", "--page", str(page)).returncode == 1  # no page: stale
