#!/usr/bin/env bash
# CPU checks of the PyTorch reference (see check_reference.py's docstring). PYTHON picks the interpreter (default:
# the LibTorch 2 build's .venv-torch2, made by tools/setup-libtorch2.sh); python sentencepiece is needed only for
# the checkpoint-equivalence check, found on PYTHONPATH (e.g. pip install --target DIR sentencepiece, then
# PYTHONPATH=DIR).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-$here/../../.venv-torch2/bin/python}"
exec "$PYTHON" -W ignore "$here/check_reference.py" "$@"
