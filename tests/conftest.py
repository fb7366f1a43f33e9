"""Shared fixtures: a tiny fairseq transformer trained on synthetic data (once per test run)."""
import os

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Model directory (checkpoint, dicts, source/target spm, triemine-model.json), ~10 s."""
    import torch

    from triemine.testing.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir):
    from triemine.decoding.model_dir import load_model_dir

    return load_model_dir(tiny_model_dir)


@pytest.fixture()
def cipher_combination(tmp_path):
    """A combination file of the tiny pair's features (``cipher_margin`` - ``ce_token``, no
    normalisation), for jobs with the tiny model and the cipher encoder (test_mining)."""
    from triemine.mining.combine import Combination

    comb = tmp_path / "comb.json"
    Combination("test", ["cipher_margin", "ce_token"], [1.0, -1.0], [0.0, 0.0], [1.0, 1.0],
                "test").save(comb)
    return comb
