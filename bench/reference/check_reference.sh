#!/usr/bin/env bash
# CPU checks of the PyTorch reference (see check_reference.py's docstring). PYTHON picks the interpreter;
# python sentencepiece is needed only for the checkpoint-equivalence check (found on PYTHONPATH, e.g.
# pip install --target /tmp/spm-pkgs sentencepiece).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-/work/main/.venv-torch2/bin/python}"
[ -d /tmp/spm-pkgs ] && export PYTHONPATH="/tmp/spm-pkgs${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -W ignore "$here/check_reference.py" "$@"
