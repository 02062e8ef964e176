#!/bin/sh
# Installs recon-spec, with its test tools, into the current Python environment.
#
# EXTRAS (default: test) names the optional dependencies: EXTRAS=test,examples adds
# transformers, which examples/train_causal_lm.py and its tests need (CI installs it).
#
# torch: an installed torch (>= 2.4) is kept as it is. Where none is installed, the CPU
# build of torch 2.13.0 is installed first, so that pip never resolves `torch>=2.4` to a
# multi-GB CUDA build: `torch==2.13.0+cpu` from pip's own indexes, else (PyPI has no +cpu
# wheel, and its Linux torch is the CUDA build) torch 2.13.0 from PyTorch's CPU index. Set
# TORCH_INDEX_URL to take torch 2.13.0 from another index instead.
set -eu
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python}
EXTRAS=${EXTRAS:-test}
CPU_INDEX=https://download.pytorch.org/whl/cpu

if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        "$PYTHON" -m pip install --index-url "$TORCH_INDEX_URL" "torch==2.13.0"
    elif ! "$PYTHON" -m pip install "torch==2.13.0+cpu"; then
        echo "install.sh: no torch 2.13.0+cpu on pip's indexes; taking it from $CPU_INDEX" >&2
        "$PYTHON" -m pip install --index-url "$CPU_INDEX" "torch==2.13.0"
    fi
fi
"$PYTHON" -m pip install --quiet -e ".[$EXTRAS]"

# pyenv only sees new console scripts (recon-spec) after a rehash.
if command -v pyenv >/dev/null 2>&1; then
    pyenv rehash
fi
