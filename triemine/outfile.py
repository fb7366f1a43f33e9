"""Writing a file whole or not at all: the one rule every writer of the jobs' files follows
(shard files and manifests, merged embeddings, line indexes).

The bytes go to ``<path>.tmp<pid>``, are flushed and synced, and the file is renamed over
``path``; a failed write (a full disk, a quota) removes the partial file and raises
:class:`~triemine.errors.OutputError` naming ``path`` and the reason, so a reader sees the old
file or the new one, and a rerun with ``--resume`` goes on from the finished work.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Union

from triemine.errors import OutputError


def atomic_write(path: Path, chunks: Union[bytes, Iterable[bytes]], what: str = "file") -> None:
    """Write ``chunks`` (bytes, or an iterable of bytes written one after the other) to
    ``path`` atomically."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            for chunk in ([chunks] if isinstance(chunks, (bytes, bytearray, memoryview))
                          else chunks):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(path, exc, what) from None


def npy_bytes(arr) -> bytes:
    """``arr`` as the bytes of a ``.npy`` file (for :func:`atomic_write`)."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()
