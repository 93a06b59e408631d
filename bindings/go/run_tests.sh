#!/bin/sh
# ctest "bindings_go": `go test` against this build's libllm.so, offline (no external modules).
# Env: LLM_LIB_DIR (directory of libllm.so), LLM_SHARED_DIR (test data), LLM_BINDINGS_WORK (scratch
# dir for GOCACHE/GOPATH). Exit 77 (skip) when go is absent.
GO=$(command -v go 2>/dev/null)
[ -n "$GO" ] || { echo "go not found: skipping"; exit 77; }
# A ChatML instruct copy of stories260K for the two-turn chat tests (bindings/chat_fixture.py); the
# tests needing it skip when it cannot be written (no python3).
if [ -z "$LLM_CHAT_MODEL" ] && command -v python3 >/dev/null 2>&1; then
  LLM_CHAT_MODEL="${LLM_BINDINGS_WORK:-${TMPDIR:-/tmp}}/chat-go.gguf"
  mkdir -p "$(dirname "$LLM_CHAT_MODEL")" &&
    python3 "$(dirname "$0")/../chat_fixture.py" \
      "${LLM_SHARED_DIR:-$(dirname "$0")/../../../shared}/models/stories260K.gguf" "$LLM_CHAT_MODEL" >/dev/null &&
    export LLM_CHAT_MODEL || unset LLM_CHAT_MODEL
fi
cd "$(dirname "$0")" || exit 1
WORK=${LLM_BINDINGS_WORK:-$(pwd)/.work}
GOCACHE="$WORK/go-cache"
GOPATH="$WORK/go-path"
GOFLAGS=-mod=mod
GOPROXY=off
GO111MODULE=on
CGO_ENABLED=1
export GOCACHE GOPATH GOFLAGS GOPROXY GO111MODULE CGO_ENABLED
# cgo finds libllm through pkg-config (llm.go: #cgo pkg-config: llm). For a build tree, an llm.pc
# in the scratch dir names this checkout's header and LLM_LIB_DIR (ahead of an installed llm.pc),
# and an rpath lets the test binary load that libllm.so.
if [ -n "$LLM_LIB_DIR" ]; then
  mkdir -p "$WORK/pkgconfig" || exit 1
  cat > "$WORK/pkgconfig/llm.pc" <<EOF
Name: llm
Description: libllm of a build tree (bindings/go/run_tests.sh)
Version: 0
Libs: -L$LLM_LIB_DIR -lllm
Cflags: -I$(cd ../../include && pwd)
EOF
  PKG_CONFIG_PATH="$WORK/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  CGO_LDFLAGS="-Wl,-rpath,$LLM_LIB_DIR${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
  export PKG_CONFIG_PATH CGO_LDFLAGS
fi
exec "$GO" test -count=1 -v ./...
