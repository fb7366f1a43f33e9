"""A Ray address with nothing behind it fails fast with one line; one that is no address is
refused.

Tiny synthetic model (tests/conftest.py).
"""
import subprocess
import sys
import time
import socket

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


# -- Ray: an address with nothing behind it
# ---------------------------------------------------------

def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.cluster
def test_ray_address_with_nothing_listening_fails_fast_with_one_line(tiny_model_dir, tmp_path):
    src = tmp_path / "s.txt"
    src.write_text("saa sab\n", encoding="utf-8")
    port = _free_loopback_port()
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", "import sys; from triemine.cli import mine_main; "
                        "sys.exit(mine_main(sys.argv[1:]))", "--ray", f"127.0.0.1:{port}",
                        "--model", str(tiny_model_dir), "--source", str(src), "--target",
                        str(src), "-o", str(tmp_path / "o.tsv"), "-q"],
                       capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 30
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "no Ray cluster" in lines[0]
    assert not (tmp_path / "o.tsv").exists()


def test_ray_address_that_is_no_address_is_refused():
    from triemine.distributed.ray_connect import RayUnavailable, split_address

    assert split_address("ray://127.0.0.1:10001") == ("127.0.0.1", 10001)
    assert split_address("[::1]:6379") == ("::1", 6379)
    for bad in ("127.0.0.1", "127.0.0.1:x", ":6379", "127.0.0.1:0"):
        with pytest.raises(RayUnavailable, match="not a Ray address"):
            split_address(bad)
