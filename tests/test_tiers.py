"""The test tiers (tests/tiers.py): every test has exactly one, the unit tier holds at least half
of the tests, and a test cannot do what its tier excludes."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tiers

TESTS = Path(__file__).resolve().parent


def test_every_collected_test_has_exactly_one_tier(request):
    items = request.session.items
    assert items and request.node in items
    wrong = [(item.nodeid, tiers.explicit_tiers(item)) for item in items
             if len(tiers.explicit_tiers(item)) != 1]
    assert wrong == []


def test_a_model_fixture_makes_a_test_integration_and_the_nearest_mark_wins(request):
    class Item:
        def __init__(self, fixturenames, marks):
            self.fixturenames, self.marks = fixturenames, [getattr(pytest.mark,
                                                                   m).mark for m in marks]

        def iter_markers(self):
            return iter(self.marks)

        def get_closest_marker(self, name):
            return next((m for m in self.marks if m.name == name), None)

    assert tiers.tier_of(Item(["tmp_path"], [])) == "unit"
    assert tiers.tier_of(Item(["tmp_path", "tiny_model_dir"], [])) == "integration"
    assert tiers.tier_of(Item(["tmp_path"], ["shared_model"])) == "integration"
    assert tiers.tier_of(Item(["tiny_model"], ["cluster", "unit"])) == "cluster"
    assert tiers.explicit_tiers(Item([], ["cluster", "parametrize", "unit", "cluster"])) == \
        ["cluster", "unit"]
    assert tiers.tier_of(request.node) == "unit"


def test_a_unit_test_can_start_no_process_and_load_no_model(tmp_path):
    import multiprocessing

    import torch

    with pytest.raises(tiers.TierError, match="unit test started a subprocess"):
        subprocess.run([sys.executable, "-c", "pass"])
    with pytest.raises(tiers.TierError, match="unit test started a process"):
        multiprocessing.get_context("spawn").Process(target=print).start()
    with pytest.raises(tiers.TierError, match=r"unit test loaded a model \(torch.load\)"):
        torch.load(tmp_path / "model.pt")


def test_an_integration_test_can_start_no_process(tiny_model_dir):
    with pytest.raises(tiers.TierError, match="an integration test started a subprocess"):
        subprocess.run([sys.executable, "-c", "pass"])
    assert (tiny_model_dir / "checkpoint.pt").is_file()  # what the tier is for


@pytest.mark.cluster
def test_the_unit_tier_holds_at_least_half_of_all_tests():
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "unit",
                          str(TESTS)], capture_output=True, text=True, cwd=TESTS.parent,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    m = re.search(r"^(\d+)/(\d+) tests collected \((\d+) deselected\)", res.stdout, re.M)
    assert m, res.stdout[-2000:]
    unit, total = int(m.group(1)), int(m.group(2))
    assert unit + int(m.group(3)) == total and 2 * unit >= total, (unit, total)


@pytest.mark.cluster
def test_the_unit_tier_plots_on_a_fresh_machine(tmp_path):
    """The unit tests that draw plots pass under an empty HOME, temporary folder and matplotlib
    configuration, with pip's cache off: matplotlib's first import builds its font cache
    without starting ``fc-list`` (which the unit tier would refuse)."""
    import os

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(), tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLCONFIGDIR", "MPL_IGNORE_SYSTEM_FONTS", "XDG_CACHE_HOME",
                        "XDG_CONFIG_HOME")}
    env.update(HOME=str(home), TMPDIR=str(tmp), PIP_NO_CACHE_DIR="1")
    plotting = ["tests/evaluation/test_report.py", "tests/cleaning/test_cleaning.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-m", "unit", *plotting], cwd=TESTS.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", done.stdout) and " failed" not in done.stdout
    assert list(tmp.glob("triemine-tests-mpl-*/fontlist-*.json"))  # built here, not in HOME
    assert not (home / ".cache" / "matplotlib").exists()
