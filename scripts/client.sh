#!/usr/bin/env bash
# Python with the project's client packages (tritonclient, numpy, onnx: requirements.txt), for
# the README's client examples: `scripts/client.sh example.py` or `scripts/client.sh -c '...'`.
# It is the project's .venv/bin/python3; Debian's python3 has no tritonclient and refuses
# `pip install` outside a venv (PEP 668). ./scripts/deps.sh (run by run.sh/test.sh) creates it.
set -euo pipefail
PY="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python3"
if [ ! -x "$PY" ]; then
  echo "client.sh: $PY not found: run ./scripts/deps.sh first (it installs requirements.txt into .venv)" >&2
  exit 1
fi
exec "$PY" "$@"
