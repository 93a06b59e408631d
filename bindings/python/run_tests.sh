#!/bin/sh
# ctest "bindings_python": the Python binding's unittest suite against this build's libllm.so.
# Env: LLM_LIBRARY (path of libllm.so), LLM_SHARED_DIR (test data). Exit 77 (skip) without python3.
PY=$(command -v python3) || { echo "python3 not found: skipping"; exit 77; }
# A ChatML instruct copy of stories260K for the two-turn chat tests (bindings/chat_fixture.py); the
# tests needing it skip when it cannot be written (no python3).
if [ -z "$LLM_CHAT_MODEL" ] && command -v python3 >/dev/null 2>&1; then
  LLM_CHAT_MODEL="${LLM_BINDINGS_WORK:-${TMPDIR:-/tmp}}/chat-python.gguf"
  mkdir -p "$(dirname "$LLM_CHAT_MODEL")" &&
    python3 "$(dirname "$0")/../chat_fixture.py" \
      "${LLM_SHARED_DIR:-$(dirname "$0")/../../../shared}/models/stories260K.gguf" "$LLM_CHAT_MODEL" >/dev/null &&
    export LLM_CHAT_MODEL || unset LLM_CHAT_MODEL
fi
cd "$(dirname "$0")" || exit 1
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" -m unittest discover -s tests -t . -v
