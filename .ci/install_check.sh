#!/usr/bin/env bash
# CI stage "install like a user" (issue 32): from the release build tree already built by .ci/run
# (nothing of the library is compiled again here), make the Debian packages with cpack, install them
# with apt, then build and run one small program per ecosystem OUTSIDE the checkout with no LLM_*
# variables: examples/hosts/hello.c with pkg-config (shared and llm-static), with find_package(llm),
# and llm-run from llm-tools; a fresh venv + pip install ./bindings/python;
# a fresh npm project installing the packed tarball (app.mjs and app.cjs); a fresh cargo project
# depending on the crate by path (--offline); a Go module using the binding through pkg-config.
# Each must print the stories260K greedy text. The packages are purged before and after.
# Usage: .ci/install_check.sh BUILD_DIR SHARED_DIR [BUILD_ARM64_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
MODEL=$2/models/stories260K.gguf
ARM64_LIB=""
if [ -n "${3:-}" ] && [ -e "$3/lib/libllm.so.0" ]; then ARM64_LIB=$(cd "$3" && pwd)/lib/libllm.so.0; fi
STORY=", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
unset LLM_LIBRARY LLM_LIB_DIR LLM_SHARED_DIR LLM_CHAT_MODEL PKG_CONFIG_PATH
WORK=$(mktemp -d /tmp/llm-install-check.XXXXXX)
purge() { $SUDO apt-get purge -y -qq libllm0 libllm-dev llm-tools >/dev/null 2>&1 || true; }
trap 'purge; rm -rf "$WORK"' EXIT
t0=$(date +%s)
step() { echo "-- [$(( $(date +%s) - t0 )) s] $*"; }
# The greedy story must be on one of the program's output lines.
expect() {
  local name=$1 out=$2
  echo "$out"
  grep -qF -- "$STORY" <<<"$out" || { echo "FAIL: $name did not print the stories260K greedy text"; exit 1; }
  echo "ok: $name"
}

purge
step "cpack -G DEB ($BUILD)"
rm -f "$BUILD"/*.deb
(cd "$BUILD" && cpack -G DEB >/dev/null)
ls "$BUILD"/*.deb
step "apt install ./libllm0 ./libllm-dev ./llm-tools"
$SUDO apt-get install -y -qq "$BUILD"/libllm0_*.deb "$BUILD"/libllm-dev_*.deb "$BUILD"/llm-tools_*.deb >/dev/null

step "C: hello.c with pkg-config, and llm-run from llm-tools"
cd "$WORK"
cc "$ROOT/examples/hosts/hello.c" $(pkg-config --cflags --libs llm) -o hello
expect "hello.c (pkg-config)" "$(./hello "$MODEL" "Once upon a time" 32)"
cc "$ROOT/examples/hosts/hello.c" $(pkg-config --cflags --libs llm-static) -o hello-static
if ldd hello-static | grep -q libllm; then echo "FAIL: hello-static loads libllm.so"; exit 1; fi
expect "hello.c (pkg-config llm-static: libllm.a)" "$(./hello-static "$MODEL" "Once upon a time" 32)"
# The CMake package from libllm-dev: find_package(llm) with no prefix hints (tests/install_consumer).
cmake -S "$ROOT/tests/install_consumer" -B "$WORK/cmake-consumer" -DHOSTS_DIR="$ROOT/examples/hosts" >/dev/null
cmake --build "$WORK/cmake-consumer" >/dev/null
expect "hello.c (find_package(llm))" "$("$WORK/cmake-consumer/hello" "$MODEL" "Once upon a time" 32)"
expect "llm-run (llm-tools)" "$(llm-run -m "$MODEL" -p "Once upon a time" -n 32 --temp 0 2>/dev/null)"

step "Python: fresh venv, pip install ./bindings/python (LLM_USE_INSTALLED=1: the libllm0 just installed)"
# Debian's setuptools and wheel (no package index here): a venv that sees the system's site-packages.
# LLM_USE_INSTALLED=1: pip's own CMake build of the core (the default) takes about 4 min on 2 cores,
# too much for this stage; it is the same CMake build as build/, so the packaged library stands in.
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv"
(cd "$ROOT" && LLM_USE_INSTALLED=1 "$WORK/venv/bin/pip" install -q --no-build-isolation --no-index ./bindings/python)
rm -rf "$ROOT/bindings/python/build" "$ROOT"/bindings/python/*.egg-info
cat > app.py <<'PY'
import sys
import libllm_runtime as llm
with llm.Model(sys.argv[1]) as model, llm.Session(model, temperature=0) as s:
    print("".join(piece for _, piece in s.tokens("Once upon a time", max_tokens=32)))
PY
expect "python (venv)" "$("$WORK/venv/bin/python" app.py "$MODEL")"

if command -v npm >/dev/null; then
  step "Node: npm pack, then a fresh project installs the tarball (app.mjs, app.cjs)"
  # (env: an assignment that comes out of an expansion is a word, not an assignment, for the shell.)
  (cd "$ROOT/bindings/node" && env LLM_LIB_DIR="$BUILD/lib" ${ARM64_LIB:+LLM_PREBUILD_LINUX_ARM64="$ARM64_LIB"} \
    npm pack --silent --pack-destination "$WORK" >/dev/null)
  mkdir "$WORK/node-app" && cd "$WORK/node-app"
  npm init -y >/dev/null
  npm install --silent --no-audit --no-fund "$WORK"/libllm-runtime-*.tgz
  cat > app.mjs <<'JS'
import llm from 'libllm-runtime';
const model = await llm.loadModel(process.argv[2]);
const session = model.createSession({ temperature: 0 });
let text = '';
for await (const piece of session.generate('Once upon a time', { maxTokens: 32 })) text += piece.text;
console.log(text);
session.free();
model.free();
JS
  cat > app.cjs <<'JS'
const { loadModelSync } = require('libllm-runtime');
const model = loadModelSync(process.argv[2]);
const session = model.createSession({ temperature: 0 });
session.complete('Once upon a time', { maxTokens: 32 }).then((text) => {
    console.log(text);
    session.free();
    model.free();
});
JS
  expect "node app.mjs" "$(node app.mjs "$MODEL")"
  expect "node app.cjs" "$(node app.cjs "$MODEL")"
  ls node_modules/libllm-runtime/prebuilds
  cd "$WORK"
else
  echo "SKIPPED: node (npm absent)"
fi

CARGO=$(command -v cargo || { [ -x "${HOME:-/root}/.cargo/bin/cargo" ] && echo "${HOME:-/root}/.cargo/bin/cargo"; } || true)
if [ -n "$CARGO" ]; then
  step "Rust: a fresh cargo project depending on the crate by path (--offline; build.rs: pkg-config)"
  mkdir -p "$WORK/rs-app/src" && cd "$WORK/rs-app"
  printf '[package]\nname = "rs-app"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nlibllm-runtime = { path = "%s" }\n' \
    "$ROOT/bindings/rust" > Cargo.toml
  cat > src/main.rs <<'RS'
use libllm_runtime as llm;

fn main() -> Result<(), llm::Error> {
    let model = llm::Model::load(std::env::args().nth(1).expect("MODEL"), &llm::ModelParams::default())?;
    let mut params = llm::SessionParams::default();
    params.temperature = 0.0;
    let mut session = llm::Session::new(&model, &params)?;
    session.generate("Once upon a time", 32, |_, piece| { print!("{}", String::from_utf8_lossy(piece)); true })?;
    println!();
    Ok(())
}
RS
  CARGO_TARGET_DIR="$WORK/rs-target" "$CARGO" build --offline -q
  expect "rust (cargo, path dependency)" "$("$WORK/rs-target/debug/rs-app" "$MODEL")"
  cd "$WORK"
else
  echo "SKIPPED: rust (cargo absent)"
fi

if command -v go >/dev/null; then
  step "Go: a module outside the checkout, the binding through #cgo pkg-config: llm"
  mkdir "$WORK/go-app" && cd "$WORK/go-app"
  printf 'module goapp\n\ngo 1.19\n\nrequire libllm/llm v0.0.0\n\nreplace libllm/llm => %s\n' "$ROOT/bindings/go" > go.mod
  cat > main.go <<'GO'
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"libllm/llm"
)

func main() {
	m, err := llm.LoadModel(os.Args[1], nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	p := llm.DefaultSessionParams()
	p.Temperature = 0
	s, err := m.NewSession(&p)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err = s.Generate(context.Background(), "Once upon a time", 32, func(_ int, piece []byte) bool {
		os.Stdout.Write(piece)
		return true
	}); err != nil {
		log.Fatal(err)
	}
	fmt.Println()
}
GO
  GOCACHE="$WORK/go-cache" GOPATH="$WORK/go-path" GOPROXY=off go build -o go-app .
  expect "go (pkg-config)" "$(./go-app "$MODEL")"
  cd "$WORK"
else
  echo "SKIPPED: go (absent)"
fi
step "install check done"
