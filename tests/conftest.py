"""Shared fixtures: a tiny fairseq transformer trained on synthetic data (once per test run), the
tiny pair's corpora, the environment of a job; the test tiers (``unit``, ``integration``,
``cluster``, see :mod:`tiers`). Plain helpers are in ``tests/helpers.py``."""
import os

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Plots use matplotlib's bundled fonts only: its first import on a machine without a font cache
# would otherwise list the system's fonts with ``fc-list`` (a subprocess, which the unit tier
# refuses) and make the figures depend on the machine's fonts. The font cache it builds (of the
# bundled fonts) goes to a folder of the tests', never the user's.
os.environ["MPL_IGNORE_SYSTEM_FONTS"] = "1"
os.environ["MPLCONFIGDIR"] = os.path.join(
    __import__("tempfile").gettempdir(), f"triemine-tests-mpl-{os.getuid()}")

import pytest  # noqa: E402

import tiers  # noqa: E402
import helpers  # noqa: E402,F401  (registers the tiny pair's encoder, "cipher")
from helpers import OTHER, PAIRS  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Model directory (checkpoint, dicts, source/target spm, triemine-model.json), ~10 s."""
    import torch

    from triemine.testing.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    from triemine.models.model_dir import load_model_dir

    return load_model_dir(tiny_model_dir)


@pytest.fixture()
def cipher_combination(tmp_path):
    """A combination file of the tiny pair's features (``cipher_margin`` - ``ce_token``, no
    normalisation), for jobs with the tiny model and the cipher encoder."""
    from triemine.judging.combination import Combination

    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    return comb


@pytest.fixture
def corpora(tmp_path):
    pairs = PAIRS[:16]
    src = tmp_path / "src.txt"
    tgt = tmp_path / "tgt.txt"
    src.write_text("".join(s + "\n" for s, _ in pairs) + "\n" + "saa sab sac\n", encoding="utf-8")
    targets = OTHER[:24] + [t for _, t in pairs[:12]]
    tgt.write_text("".join(t + "\n" for t in targets), encoding="utf-8")
    return src, tgt, pairs, targets


@pytest.fixture
def pair(tmp_path):
    """Plain-text sources and targets of the tiny pair, and a combination its encoder feeds."""
    from triemine.judging.combination import Combination

    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(s + "\n" for s, _ in PAIRS[:10]), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for t in OTHER[:10] + [t for _, t in PAIRS[:10]]),
                   encoding="utf-8")
    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    return src, tgt, str(comb)


@pytest.fixture
def one_thread(monkeypatch):
    """One thread per process (``OMP_NUM_THREADS=1``), whatever the caller's environment."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch, one_thread):
    """One thread, and a cache (``TRIEMINE_CACHE``) of this test's own."""
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))


# -- the tiers (tests/tiers.py) -------------------------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    tiers.assign(items)


@pytest.fixture(autouse=True)
def _tier_guard(request, monkeypatch):
    """A unit test starts no process and loads no model, an integration test starts no process
    (:func:`tiers.guard`)."""
    tiers.guard(monkeypatch, tiers.tier_of(request.node))
