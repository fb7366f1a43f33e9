"""The one place that knows where shared data and caches live.

* Shared data (models, BUCC, parallel corpora): ``$TRIEMINE_SHARED``, default ``../shared``
  relative to the repository root (the directory holding ``setup.cfg``), falling back to
  ``../shared`` relative to the working directory for installed copies.
* Caches (imported models, tries, trained filters): ``$TRIEMINE_CACHE``, default ``.cache`` in the
  repository root, else ``~/.cache/triemine``.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from triemine.io.checksum import dumps_sealed, read_sealed
from triemine.errors import DamagedFile
from triemine.io.outfile import atomic_write

logger = logging.getLogger(__name__)

_PKG_DIR = Path(__file__).resolve().parents[1]  # triemine/


def repo_root() -> Path | None:
    """The source checkout this package runs from, or None for a non-editable install."""
    root = _PKG_DIR.parent
    return root if (root / "setup.cfg").is_file() else None


def shared_root() -> Path:
    env = os.environ.get("TRIEMINE_SHARED")
    if env:
        return Path(env).expanduser().resolve()
    root = repo_root()
    base = root if root is not None else Path.cwd()
    return (base / ".." / "shared").resolve()


def shared_path(*parts: str, must_exist: bool = True) -> Path:
    """A path under the shared root; a clear error when it is missing."""
    path = shared_root().joinpath(*parts)
    if must_exist and not path.exists():
        raise FileNotFoundError(
            f"shared data not found: {path} (set TRIEMINE_SHARED to the folder holding "
            f"data/ and models/; default is ../shared next to the repository)"
        )
    return path


def cache_root() -> Path:
    env = os.environ.get("TRIEMINE_CACHE")
    if env:
        path = Path(env).expanduser()
    else:
        root = repo_root()
        path = root / ".cache" if root is not None else Path.home() / ".cache" / "triemine"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def file_sha256(path: os.PathLike | str) -> str:
    """Hex SHA-256 of a file's content, read in 1 MiB chunks (provenance; cache and resume keys
    use :func:`content_sha256`, which reads an unchanged file once)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_stamp(path: os.PathLike | str) -> dict:
    """What identifies one version of a file without reading it: its real path, size, mtime,
    ctime, inode and device.  Every write changes the ctime (restoring the mtime with ``utime``
    changes it too) and a file replaced by a rename has another inode, so a stamp that still
    holds means the same bytes; a cache of a file's digest keyed by its stamp is read again
    after any change (short of a raw write to the device or a clock set back)."""
    p = os.path.realpath(path)
    st = os.stat(p)
    return {"path": p, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns, "inode": st.st_ino, "device": st.st_dev}


def cache_name(path: os.PathLike | str, suffix: str) -> str:
    """The name of a cache file about the file at ``path`` (line indexes, digests): its real
    path's base name, a digest of the whole real path (two files of one name stay apart), then
    ``suffix``."""
    real = os.path.realpath(path)
    tag = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{Path(real).name}.{tag}.{suffix}"


def _digest_path(real: str) -> Path:
    return cache_root() / "digests" / cache_name(real, "json")


def content_sha256(path: os.PathLike | str) -> str:
    """:func:`file_sha256` of ``path``, read whole only once per version of the file: the digest
    is kept in ``$TRIEMINE_CACHE/digests/`` with the file's :func:`file_stamp` and read from
    there while the stamp holds (what cache and resume keys use: at 10^8 sentences a side the
    corpora and their embeddings are hundreds of GB, and every stage and every ``--resume``
    asks for their keys).  Every resume and cache key derives from this digest of the whole
    content, never from the stamp alone: the stamp only says when the digest must be computed
    again.  The digest file is sealed JSON (:mod:`triemine.io.checksum`): one whose stamp is not
    the file's is written again; one that is damaged (does not parse, checksum mismatch) is named
    in a warning and written again."""
    stamp = file_stamp(path)
    where = _digest_path(stamp["path"])
    try:
        saved = read_sealed(where, "file digest")
        if not (isinstance(saved, dict) and isinstance(saved.get("sha256"), str)):
            raise DamagedFile(where, "not a digest record", "file digest")
        if saved.get("stamp") == stamp:
            return saved["sha256"]
    except OSError:
        pass
    except DamagedFile as exc:
        logger.warning("%s; computing the digest again", exc)
    digest = file_sha256(stamp["path"])
    if file_stamp(path) == stamp:  # not changed while it was read: the digest is this version's
        remember_sha256(path, digest, stamp)
    return digest


def remember_sha256(path: os.PathLike | str, digest: str, stamp: dict | None = None) -> None:
    """Record ``digest`` as the content SHA-256 of ``path`` as it is now (a writer that hashed
    the bytes it wrote calls this, so that :func:`content_sha256` never reads the file back)."""
    stamp = stamp or file_stamp(path)
    where = _digest_path(stamp["path"])
    where.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(where, dumps_sealed({"stamp": stamp, "sha256": digest}), "file digest")


# Well-known shared resources (relative to shared_root()).
BUCC_ZH_EN = ("data", "bucc2018", "zh-en")
OPUS_MT_ZH_EN_CT2 = ("models", "opus-mt-zh-en-ct2")
PARALLEL_ZH_EN = ("data", "parallel", "zh-en")
PARALLEL_DE_EN = ("data", "parallel", "de-en")
# the transfer set (BUCC layout) and the zh-en pairs left for anything that learns
DEVSET_ZH_EN = ("data", "devsets", "zh-en")
