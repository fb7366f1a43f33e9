"""The one place that knows where shared data and caches live.

* Shared data (models, BUCC, parallel corpora): ``$TRIEMINE_SHARED``, default ``../shared``
  relative to the repository root (the directory holding ``setup.cfg``), falling back to
  ``../shared`` relative to the working directory for installed copies.
* Caches (imported models, tries, trained filters): ``$TRIEMINE_CACHE``, default ``.cache`` in the
  repository root, else ``~/.cache/triemine``.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

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


def cache_name(path: os.PathLike | str, suffix: str) -> str:
    """The name of a cache file about the file at ``path`` (line indexes, digests): its real
    path's base name, a digest of the whole real path (two files of one name stay apart), then
    ``suffix``."""
    real = os.path.realpath(path)
    tag = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{Path(real).name}.{tag}.{suffix}"


# Well-known shared resources (relative to shared_root()).
BUCC_ZH_EN = ("data", "bucc2018", "zh-en")
OPUS_MT_ZH_EN_CT2 = ("models", "opus-mt-zh-en-ct2")
PARALLEL_ZH_EN = ("data", "parallel", "zh-en")
PARALLEL_DE_EN = ("data", "parallel", "de-en")
# the transfer set (BUCC layout) and the zh-en pairs left for anything that learns
DEVSET_ZH_EN = ("data", "devsets", "zh-en")
