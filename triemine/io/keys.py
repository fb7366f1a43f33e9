"""The version of every key: stages' shard manifests, the trie search's progress file, the job's
work folder, the caches keyed by a stage's key.

A key records what an output depends on (:func:`triemine.distributed.stage.stage_key`: the task
class, the content digests of the inputs, the settings node without its transient fields,
:func:`triemine.config.settings.key_of`).  :data:`KEY_VERSION` is raised when what a key holds or how it
is derived changes; a folder or file written under another version is named in a warning and
computed again, once (:func:`older_key`), never resumed with other bits and never refused.

Every key takes the digests of the files it depends on from here (:func:`input_digest`,
:func:`input_digests`), not from the hash itself: a stage names its inputs
(:class:`triemine.distributed.stage.Stage`'s ``inputs``) and the runner digests them.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Mapping, Optional

from triemine.io.paths import content_sha256

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
    input: read whole once per version of the file (:func:`triemine.io.paths.content_sha256`).
    Raises :class:`OSError` when ``path`` cannot be read."""
    return content_sha256(path)


def input_digests(inputs: Mapping[str, Any]) -> Dict[str, str]:
    """``{name: input_digest(path)}`` for each ``name: path`` of ``inputs``, in order."""
    return {name: input_digest(path) for name, path in dict(inputs).items()}
