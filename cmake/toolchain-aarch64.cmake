# Cross-compile for 64-bit ARM Linux with Debian's toolchain
# (apt-get install g++-aarch64-linux-gnu libc6-dev-arm64-cross; run with qemu-user:
#  qemu-aarch64 -L /usr/aarch64-linux-gnu ./prog).
# The library's own dependencies for the target come from Debian multiarch, installed beside the
# amd64 ones:
#   dpkg --add-architecture arm64 && apt-get update &&
#   apt-get install libspdlog-dev:arm64 libfmt-dev:arm64 libpcre2-dev:arm64
# (Catch2 v2 and nlohmann/json are header-only and come from the host's packages.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# /usr/aarch64-linux-gnu: the cross libc; /: multiarch packages (/usr/lib/aarch64-linux-gnu, headers
# in /usr/include, header-only packages' CMake files in /usr/share and /usr/lib/cmake).
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config (PCRE2) must read the arm64 .pc files, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# ctest runs the target's programs through qemu-user. LLM_QEMU_CPU picks the emulated CPU: "max"
# (default) has the dot-product extension, so the library runs its dotprod kernels; "cortex-a53"
# exercises the baseline NEON path.
find_program(LLM_QEMU_AARCH64 qemu-aarch64)
set(LLM_QEMU_CPU max CACHE STRING "CPU that qemu-aarch64 emulates for ctest (max: NEON + dotprod)")
if(LLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LLM_QEMU_AARCH64} -cpu ${LLM_QEMU_CPU} -L /usr/aarch64-linux-gnu)
endif()
