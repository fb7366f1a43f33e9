"""Bicleaner (classic, 0.17.4) scores for mined pairs, run from its own tool environment.

Bicleaner's pins clash with the main environment, so it lives in ``.venv-bicleaner`` (built by
``scripts/bicleaner_setup.sh``) and is run as a subprocess: pairs go in as ``src<TAB>tgt`` TSV
batches, one score per line comes back (``--score_only``). The zh-en model is trained locally by
``scripts/bicleaner_train.py`` into ``<cache>/bicleaner/zh-en/zh-en.yaml``. Language
identification, the LM fluency filter and the porn filter are off; Bicleaner's hard rules stay on
(they give 0 to e.g. empty or wildly mismatched pairs).

Environment overrides: ``TRIEMINE_BICLEANER_VENV`` (tool environment folder) and
``TRIEMINE_BICLEANER_MODEL`` (model yaml or its folder).
"""
from __future__ import annotations

import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from triemine.errors import TrieMineError
from triemine.io import cache_root, repo_root

SETUP_HINT = ("build it with: bash scripts/bicleaner_setup.sh && "
              ".venv-bicleaner/bin/python scripts/bicleaner_train.py")


class BicleanerUnavailable(TrieMineError):
    """The Bicleaner tool environment or model is missing or broken."""


def tool_env() -> Path:
    env = os.environ.get("TRIEMINE_BICLEANER_VENV")
    if env:
        return Path(env).expanduser()
    root = repo_root() or Path.cwd()
    return root / ".venv-bicleaner"


def default_model() -> Path:
    env = os.environ.get("TRIEMINE_BICLEANER_MODEL")
    if env:
        return Path(env).expanduser()
    return cache_root() / "bicleaner" / "zh-en" / "zh-en.yaml"


def _resolve_model(model: Optional[os.PathLike | str]) -> Path:
    path = Path(model) if model else default_model()
    if path.is_dir():
        yamls = sorted(path.glob("*.yaml"))
        if len(yamls) != 1:
            raise BicleanerUnavailable(f"{path}: expected one Bicleaner model .yaml there, found "
                                       f"{len(yamls)}; {SETUP_HINT}")
        path = yamls[0]
    if not path.is_file():
        raise BicleanerUnavailable(f"Bicleaner model not found: {path}; {SETUP_HINT}")
    return path


def check_model(model: Optional[os.PathLike | str]) -> Path:
    """The Bicleaner model ``.yaml`` that ``model`` names (a file or its folder; None: the
    default), checked before any work: :class:`BicleanerUnavailable` when there is none."""
    return _resolve_model(model)


def _clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def score_bicleaner(src: Sequence[str], tgt: Sequence[str],
                    model: Optional[os.PathLike | str] = None,
                    batch_size: int = 5000, progress: bool = True,
                    processes: int = 1) -> np.ndarray:
    """Bicleaner score in [0, 1] (higher = more likely parallel) for every (src, tgt) pair."""
    if len(src) != len(tgt):
        raise ValueError(f"{len(src)} sources but {len(tgt)} targets")
    exe = tool_env() / "bin" / "bicleaner-classify"
    if not exe.is_file():
        raise BicleanerUnavailable(
            f"Bicleaner tool environment not found ({exe} is missing); {SETUP_HINT}"
        )
    yaml_path = _resolve_model(model)
    out = np.empty(len(src), dtype=np.float64)
    if len(src) == 0:
        return out
    from tqdm import tqdm

    bar = tqdm(total=len(src), desc="bicleaner", unit="pair", disable=not progress)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    with tempfile.TemporaryDirectory(prefix="triemine-bicleaner-") as tmp:
        inp, res = os.path.join(tmp, "in.tsv"), os.path.join(tmp, "out.txt")
        for start in range(0, len(src), batch_size):
            stop = min(start + batch_size, len(src))
            with open(inp, "w", encoding="utf-8") as fh:
                for i in range(start, stop):
                    fh.write(f"{_clean(src[i])}\t{_clean(tgt[i])}\n")
            cmd = [str(exe), "--scol", "1", "--tcol", "2", "--score_only", "--disable_lm_filter",
                   "--disable_porn_removal", "-p", str(processes), "-q", "--tmp_dir", tmp,
                   inp, res, str(yaml_path)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                  cwd=str(yaml_path.parent))
            if proc.returncode != 0:
                tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
                raise BicleanerUnavailable(
                    f"bicleaner-classify failed (exit {proc.returncode}): {tail}"
                )
            with open(res, encoding="utf-8") as fh:
                vals = [line.rstrip("\n").split("\t")[-1] for line in fh]
            if len(vals) != stop - start:
                raise BicleanerUnavailable(f"bicleaner-classify returned {len(vals)} scores for "
                                           f"{stop - start} pairs")
            try:
                out[start:stop] = [float(v) for v in vals]
            except ValueError as exc:
                raise BicleanerUnavailable(
                    f"bicleaner-classify printed a non-number: {exc}"
                ) from None
            if not all(math.isfinite(v) for v in out[start:stop]):
                raise BicleanerUnavailable("bicleaner-classify returned a non-finite score")
            bar.update(stop - start)
    bar.close()
    return out
