#!/usr/bin/env bash
# Installs the LibTorch of parla's second build: LibTorch 2.x with CUDA, as it comes inside the PyTorch wheel from
# PyPI (pinned to the version on the project's GPU machine), into the project-local virtual environment
# .venv-torch2. Prints the CMake prefix to stdout. Idempotent: a venv that already holds the pinned torch is kept.
#
# Two ways, chosen by what the machine has (docs/BENCHMARKS.md measures both):
#   lean (default when the CUDA 13 toolkit's libraries are on the loader's path, as on the project's machines):
#     the torch wheel without its dependencies, plus the three CUDA libraries the toolkit lacks (cuSPARSELt,
#     NVSHMEM, cuFile) and the small pure-Python packages `import torch` needs;
#   full (PARLA_TORCH2_FULL=1, or no CUDA 13 toolkit): the wheel with every nvidia-* dependency, as pip gives it.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION=2.11.0
VENV=${PARLA_TORCH2_VENV:-.venv-torch2}
PY="$VENV/bin/python"

log() { echo "setup-libtorch2: $*" >&2; }

if [ -x "$PY" ] && "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" \
     2>/dev/null; then
  log "torch $TORCH_VERSION already in $VENV"
else
  # Debian's python3 runs `-m venv --help` without python3-venv, but cannot create a venv: ensurepip is the test.
  # Everything below writes to stderr: stdout carries only the prefix.
  if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get install -y -q --no-install-recommends python3-venv >&2
  fi
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  pip_install() { "$VENV/bin/pip" install -q --disable-pip-version-check "$@" >&2; }
  start=$(date +%s)
  if [ "${PARLA_TORCH2_FULL:-0}" != 1 ] && ldconfig -p | grep -q 'libcudart\.so\.13' && ldconfig -p | grep -q 'libcudnn\.so\.9'; then
    log "lean install: torch $TORCH_VERSION without dependencies, against the installed CUDA 13 toolkit"
    pip_install --no-deps "torch==$TORCH_VERSION" nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 \
      "nvidia-cufile==1.15.1.6.*" filelock "typing-extensions>=4.10.0" "setuptools<82" "sympy>=1.13.3" mpmath \
      "networkx>=2.5.1" jinja2 markupsafe "fsspec>=0.8.5"
    missing=$(ldd "$("$PY" -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))')" \
              | grep "not found" || true)
    if [ -n "$missing" ]; then
      log "the toolkit lacks: $missing; installing the wheel's own CUDA libraries instead"
      pip_install "torch==$TORCH_VERSION"
    fi
  else
    log "full install: torch $TORCH_VERSION with its nvidia-* dependencies"
    pip_install "torch==$TORCH_VERSION"
  fi
  log "installed in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1) in $VENV"
fi
# The Python peers that tests compare with (they skip themselves where these are missing), pinned: safetensors,
# the reference implementation of parla's checkpoint format (tests/models/test_checkpoint_formats.cpp), whose
# writer needs numpy; transformers and sentencepiece, which build the MarianMT models that parla-convert imports
# (tests/convert); ctranslate2, which runs what parla exports (tools/export-ctranslate2.py).
PEERS=(safetensors==0.8.0 numpy==2.4.6 transformers==5.24.0 sentencepiece==0.2.3 ctranslate2==4.8.5)
if ! "$PY" - "${PEERS[@]}" <<'PYEOF' 2>/dev/null; then
import sys
from importlib.metadata import version
sys.exit(0 if all(version(p.split("==")[0]) == p.split("==")[1] for p in sys.argv[1:]) else 1)
PYEOF
  start=$(date +%s)
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PEERS[@]}" >&2
  log "installed ${PEERS[*]} in $(( $(date +%s) - start )) s"
fi
# TorchConfig's find_library would otherwise find Debian's libtorch.so first (cmake/LibTorchFlavour.cmake).
"$PY" -W ignore -c 'import os, torch; print(torch.utils.cmake_prefix_path + ";" + os.path.dirname(torch.__file__))' 2>/dev/null
