#!/bin/sh
# ctest "bindings_python": the Python binding's unittest suite against this build's libllm.so.
# Env: LLM_LIBRARY (path of libllm.so), LLM_SHARED_DIR (test data). Exit 77 (skip) without python3.
PY=$(command -v python3) || { echo "python3 not found: skipping"; exit 77; }
cd "$(dirname "$0")" || exit 1
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" -m unittest discover -s tests -t . -v
