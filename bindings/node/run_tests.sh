#!/bin/sh
# ctest "bindings_node": the Node binding's tests (node --test) against this build's libllm.so.
# Env: LLM_LIBRARY (path of libllm.so), LLM_SHARED_DIR (test data), LLM_BINDINGS_WORK (scratch dir in
# the build tree, where koffi is installed from npm). Exit 77 (skip) without node >= 18 or npm, or
# when koffi cannot be installed (no registry access).
NODE=$(command -v node) || { echo "node not found: skipping"; exit 77; }
NPM=$(command -v npm) || { echo "npm not found: skipping"; exit 77; }
major=$("$NODE" -p 'process.versions.node.split(".")[0]') || exit 1
[ "$major" -ge 18 ] || { echo "node $major is older than 18 (no node --test): skipping"; exit 77; }
# A ChatML instruct copy of stories260K for the two-turn chat tests (bindings/chat_fixture.py); the
# tests needing it skip when it cannot be written (no python3).
if [ -z "$LLM_CHAT_MODEL" ] && command -v python3 >/dev/null 2>&1; then
  LLM_CHAT_MODEL="${LLM_BINDINGS_WORK:-${TMPDIR:-/tmp}}/chat-node.gguf"
  mkdir -p "$(dirname "$LLM_CHAT_MODEL")" &&
    python3 "$(dirname "$0")/../chat_fixture.py" \
      "${LLM_SHARED_DIR:-$(dirname "$0")/../../../shared}/models/stories260K.gguf" "$LLM_CHAT_MODEL" >/dev/null &&
    export LLM_CHAT_MODEL || unset LLM_CHAT_MODEL
fi
HERE=$(cd "$(dirname "$0")" && pwd) || exit 1
WORK=${LLM_BINDINGS_WORK:-$HERE/../../build/bindings}/node
mkdir -p "$WORK" || exit 1
# Dependencies live in the build tree, never beside the sources; reinstall when package.json changes.
if ! cmp -s "$HERE/package.json" "$WORK/package.json" || [ ! -d "$WORK/node_modules/koffi" ]; then
  cp "$HERE/package.json" "$WORK/package.json" || exit 1
  (cd "$WORK" && "$NPM" install --no-audit --no-fund --omit=dev --no-package-lock --ignore-scripts) || {
    rm -f "$WORK/package.json"
    echo "npm install koffi failed (offline?): skipping"
    exit 77
  }
fi
export NODE_PATH="$WORK/node_modules"
cd "$HERE" || exit 1
exec "$NODE" --expose-gc --test test/
