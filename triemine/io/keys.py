"""What a file holds and what an output depends on: content digests of files and the version of
every key (stages' shard manifests, the trie search's progress file, the job's work folder, the
caches keyed by a stage's key).

A file's content digest (:func:`content_sha256`) is read whole once per version of the file
(:func:`file_stamp`) and remembered under ``$TRIEMINE_CACHE/digests/`` as sealed JSON.

A key records what an output depends on (:func:`triemine.distributed.stage.stage_key`: the task
class, the content digests of the inputs, the settings node without its transient fields,
:func:`triemine.config.settings.key_of`).  :data:`KEY_VERSION` is raised when what a key holds or
how it
is derived changes; a folder or file written under another version is named in a warning and
computed again, once (:func:`older_key`), never resumed with other bits and never refused.

Every key takes the digests of the files it depends on from here (:func:`input_digest`,
:func:`input_digests`), not from the hash itself: a stage names its inputs
(:class:`triemine.distributed.stage.Stage`'s ``inputs``) and the runner digests them.
"""
from __future__ import annotations

import hashlib
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from triemine.errors import DamagedFile
from triemine.io.checksum import dumps_sealed, read_sealed
from triemine.io.outfile import atomic_write
from triemine.io.paths import cache_name, cache_root

logger = logging.getLogger(__name__)

KEY_VERSION = 2


def older_key(key: Optional[Mapping[str, Any]], where, what: str) -> bool:
    """Whether ``key`` (read from an existing folder or file ``where``; None: there is none)
    was written under another :data:`KEY_VERSION` (a key without one: version 1); if so a
    warning names ``where`` and says that ``what`` is computed again."""
    if not isinstance(key, Mapping) or key.get("key_version") == KEY_VERSION:
        return False
    warnings.warn(f"{where}: {what} of an older triemine (key version "
                  f"{key.get('key_version', 1)}, now {KEY_VERSION}); computing it again",
                  stacklevel=3)
    return True


def input_digest(path) -> str:
    """The SHA-256 (64 hex characters) of the content of the file ``path``, as a key holds an
    input: read whole once per version of the file (:func:`content_sha256`).
    Raises :class:`OSError` when ``path`` cannot be read."""
    return content_sha256(path)


def input_digests(inputs: Mapping[str, Any]) -> Dict[str, str]:
    """``{name: input_digest(path)}`` for each ``name: path`` of ``inputs``, in order."""
    return {name: input_digest(path) for name, path in dict(inputs).items()}


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
