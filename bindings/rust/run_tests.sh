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
cd "$(dirname "$0")" || exit 1
if [ -n "$LLM_BINDINGS_WORK" ]; then
  CARGO_TARGET_DIR="$LLM_BINDINGS_WORK/rust-target"
  export CARGO_TARGET_DIR
fi
exec "$CARGO" test --offline -- --test-threads=2
