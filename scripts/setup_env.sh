#!/usr/bin/env bash
# Create or refresh the project environment in .venv (idempotent).
# Everything CI and a newcomer need is installed from here; nothing is assumed on the machine
# beyond python3 (3.10+) with venv, a C compiler and the Python headers.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# torch==2.13.0 (CPU) and friends: the constraint reaches isolated build environments too,
# so no dependency can drag in a CUDA build of torch.
export PIP_CONSTRAINT="$root/constraints.txt"
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
echo "[setup] installing dependencies (constrained by constraints.txt)"
# Build requirements first: the package is installed without build isolation so that its Cython
# extension is compiled against exactly the numpy of this environment.
# Order matters on a machine with an empty pip cache: fairseq-fixed is an sdist whose setup.py
# imports torch, numpy and Cython, and it is built without isolation (below), so all three must
# be installed before pip resolves it. Nothing here may rely on a wheel cached by an earlier run.
.venv/bin/python -m pip install -q --upgrade "setuptools>=64" wheel "Cython>=3.0" "numpy<2"
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q --no-build-isolation "fairseq-fixed==0.12.3.1"
.venv/bin/python -m pip install -q -e ".[test,ray]" --no-build-isolation
.venv/bin/python -c "import torch, fairseq, triemine.trie; assert torch.__version__.startswith('2.13.0'), torch.__version__" \
    || { echo "[setup] environment check failed" >&2; exit 1; }
touch .venv/.installed
echo "[setup] done"
