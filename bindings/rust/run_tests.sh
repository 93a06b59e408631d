#!/bin/sh
# ctest "bindings_rust": `cargo test --offline` against this build's libllm.so.
# Env: LLM_LIB_DIR (directory of libllm.so), LLM_SHARED_DIR (test data), LLM_BINDINGS_WORK (scratch
# dir for CARGO_TARGET_DIR). Exit 77 (skip) when cargo is absent.
CARGO=$(command -v cargo 2>/dev/null)
if [ -z "$CARGO" ] && [ -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  CARGO="${HOME:-/root}/.cargo/bin/cargo"
  PATH="${HOME:-/root}/.cargo/bin:$PATH"
  export PATH
fi
[ -n "$CARGO" ] || { echo "cargo not found (PATH, \$HOME/.cargo/bin): skipping"; exit 77; }
# A ChatML instruct copy of stories260K for the two-turn chat tests (bindings/chat_fixture.py); the
# tests needing it skip when it cannot be written (no python3).
if [ -z "$LLM_CHAT_MODEL" ] && command -v python3 >/dev/null 2>&1; then
  LLM_CHAT_MODEL="${LLM_BINDINGS_WORK:-${TMPDIR:-/tmp}}/chat-rust.gguf"
  mkdir -p "$(dirname "$LLM_CHAT_MODEL")" &&
    python3 "$(dirname "$0")/../chat_fixture.py" \
      "${LLM_SHARED_DIR:-$(dirname "$0")/../../../shared}/models/stories260K.gguf" "$LLM_CHAT_MODEL" >/dev/null &&
    export LLM_CHAT_MODEL || unset LLM_CHAT_MODEL
fi
cd "$(dirname "$0")" || exit 1
if [ -n "$LLM_BINDINGS_WORK" ]; then
  CARGO_TARGET_DIR="$LLM_BINDINGS_WORK/rust-target"
  export CARGO_TARGET_DIR
fi
# --show-output: the "SKIPPED: <reason>" lines of tests that return early (the harness has no
# runtime skip) appear in the log instead of passing silently.
exec "$CARGO" test --offline -- --test-threads=2 --show-output
