"""--device is checked before the model loads.

Tiny synthetic model (tests/conftest.py); the CLI is called in this process (``*_main``), the
lock across two processes.
"""

import pytest

import triemine
from triemine.cli import mine_main

from helpers import mine_args, run_main

pytestmark = pytest.mark.usefixtures("tmp_cache")


# -- 6. --device -----------------------------------------------------------------------------------

def test_a_device_this_machine_lacks_is_refused_before_the_model_loads(tiny_model_dir, pair,
                                                                       tmp_path, capsys):
    import torch

    src, tgt, comb = pair
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = ["tpu", "garbage", "cuda:99", "cuda:x", "cpu:x"] + ([] if gpus else ["cuda"])
    broken = tmp_path / "model"  # a model that cannot load: the refusal comes first
    broken.mkdir()
    for device in devices:
        rc, err = run_main(capsys, mine_main, mine_args(broken, src, tgt, comb, "-o",
                                               str(tmp_path / "o.tsv"), "--device", device))
        assert rc == 2 and f"--device {device}" in err and "available" in err, err
        assert "cpu" in err.split("available")[1] and "Traceback" not in err
        with pytest.raises(triemine.InputError, match="available"):
            triemine.mine(["a"], ["b"], model=broken, device=device)
    assert not (tmp_path / "o.tsv").exists()
