"""Writing a file whole or not at all: the one rule every writer of the jobs' files follows
(shard files and manifests, merged embeddings, line indexes).

The bytes go to ``<path>.tmp<pid>``, are flushed and synced, and the file is renamed over
``path``; a failed write (a full disk, a quota) removes the partial file and raises
:class:`~triemine.errors.OutputError` naming ``path`` and the reason, so a reader sees the old
file or the new one, and a rerun with ``--resume`` goes on from the finished work.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Union

from triemine.errors import OutputError


@contextmanager
def atomic_open(path: Path, what: str = "file"):
    """A binary file (``with atomic_open(path) as f``) whose bytes replace ``path`` atomically
    when the body ends: for writers that need a file object (the candidates' column files,
    which write their header last), with the rules of
    :func:`atomic_write`; a body that raises leaves ``path`` as it was."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(path, exc, what) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, chunks: Union[bytes, Iterable[bytes]], what: str = "file") -> None:
    """Write ``chunks`` (bytes, or an iterable of bytes written one after the other) to
    ``path`` atomically."""
    with atomic_open(path, what) as f:
        for chunk in ([chunks] if isinstance(chunks, (bytes, bytearray, memoryview))
                      else chunks):
            f.write(chunk)


def npy_bytes(arr) -> bytes:
    """``arr`` as the bytes of a ``.npy`` file (for :func:`atomic_write`)."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def npy_header(dtype, shape) -> bytes:
    """The header of a C-order ``.npy`` file of ``shape`` and ``dtype``: what a writer that
    streams the rows after it (merged shards, neighbour lists, column files) writes first."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
        "shape": tuple(shape)})
    return buf.getvalue()
