"""The wheel holds every module and data file; installed, it mines a slice from outside the
checkout.

Tiny synthetic model (tests/conftest.py) except where marked ``shared_model``.
"""
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("one_thread")]


# -- the wheel ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """``pip wheel .`` of this checkout (no dependencies, this environment's build tools)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(REPO)], check=True, cwd=out)
    wheels = list(out.glob("trie_mine-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_holds_every_module_and_data_file(wheel):
    tracked = subprocess.run(["git", "ls-files", "triemine"], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()
    wanted = {p for p in tracked if p.endswith((".py", ".pyx", ".pxd", ".json"))}
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(wanted - names)
    assert not missing, f"the wheel lacks {missing}"
    assert any(n.startswith("triemine/trie/_trie.") and n.endswith(".so") for n in names)
    for folder in {os.path.dirname(p) for p in wanted if p.endswith(".py")}:
        assert f"{folder}/__init__.py" in names, f"{folder} is no package"


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A separate environment with the wheel installed non-editable; its dependencies are read
    from this environment's site-packages (a path entry, so the editable finder there is not
    run: ``triemine`` can only come from the wheel)."""
    env = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    py = env / "bin" / "python"
    site = subprocess.run([str(py), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "triemine-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # without PYTHONPATH: a checkout on it with a trie_mine.egg-info (a worktree set up with
    # PYTHONPATH) would count as trie-mine installed, and pip would skip the wheel
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, env=clean)
    return env


@pytest.mark.shared_model
def test_installed_wheel_mines_a_slice_from_outside_the_checkout(installed, tmp_path):
    from triemine.io.paths import BUCC_ZH_EN, cache_root, shared_path

    model = cache_root() / "models" / "opus-mt-zh-en"
    base = shared_path(*BUCC_ZH_EN) / "zh-en.sample"
    zh = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.zh", encoding="utf-8"))
    en = dict(ln.rstrip("\n").split("\t", 1) for ln in open(f"{base}.en", encoding="utf-8"))
    gold = [ln.split() for ln in open(f"{base}.gold", encoding="utf-8")][:12]
    others = [i for i in en if i not in {e for _, e in gold}][:40]
    src, tgt = tmp_path / "s.zh", tmp_path / "t.en"
    src.write_text("".join(f"{z}\t{zh[z]}\n" for z, _ in gold), encoding="utf-8")
    tgt.write_text("".join(f"{e}\t{en[e]}\n" for e in [e for _, e in gold] + others),
                   encoding="utf-8")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRIEMINE_CACHE"] = str(tmp_path / "cache")
    where = subprocess.run([str(installed / "bin" / "python"), "-c",
                            "import triemine, triemine.scoring.forced, triemine.api; "
                            "print(triemine.__file__)"], cwd=work, env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(installed)), where
    r = subprocess.run([str(installed / "bin" / "trie-mine"), "--model", str(model), "--source",
                        str(src), "--target", str(tgt), "-o", "m.tsv", "--bitext", "m.txt", "-q"],
                       cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pairs = [ln.split("\t") for ln in (work / "m.txt").read_text(encoding="utf-8").splitlines()]
    truth = {(zh[z], en[e]) for z, e in gold}
    correct = sum((a, b) in truth for a, b in pairs)
    assert correct >= 10 and correct >= len(pairs) - 1, (correct, len(pairs))
    assert "pairs kept of" in r.stderr and "shipped default for judge" in r.stderr
