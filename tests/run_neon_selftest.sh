#!/bin/sh
# Cross-builds tests/kernels_selftest for AArch64 and runs it under qemu: once on a CPU without the
# dot-product extension (cortex-a53: baseline NEON path) and once on qemu's "max" CPU (dotprod path).
# Exit 77 (ctest SKIP_RETURN_CODE) when the cross toolchain or qemu is not installed.
# usage: run_neon_selftest.sh <source root> <build dir>
set -eu
SRC=$1
BIN=$2
for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipping: $tool not found (apt-get install g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
        exit 77
    fi
done
cmake -S "$SRC/tests/kernels_selftest" -B "$BIN" -DCMAKE_TOOLCHAIN_FILE="$SRC/cmake/toolchain-aarch64.cmake" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BIN" -j2 >/dev/null
# The guest loader must match the libc it finds: with Debian's multiarch arm64 libc installed the
# host's ld.so.cache points at it, so use its loader (see cmake/toolchain-aarch64.cmake).
SYSROOT=/usr/aarch64-linux-gnu
if [ -e /lib/ld-linux-aarch64.so.1 ]; then SYSROOT=/; fi
for cpu in cortex-a53 max; do
    echo "== qemu-aarch64 -cpu $cpu -L $SYSROOT"
    qemu-aarch64 -cpu "$cpu" -L "$SYSROOT" "$BIN/kernels_selftest"
done
