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
# The guest's loader and libc must come from one glibc build. Once Debian's arm64 libc6 is installed
# (multiarch, for the packages above) the host's ld.so.cache lists its libc, so the guest must also
# use its loader (-L /): the cross toolchain's loader with multiarch's libc hangs every thread start.
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(LLM_QEMU_SYSROOT / CACHE PATH "qemu-aarch64 -L: where the guest's /lib/ld-linux-aarch64.so.1 is")
else()
  set(LLM_QEMU_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "qemu-aarch64 -L: where the guest's /lib/ld-linux-aarch64.so.1 is")
endif()
if(LLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LLM_QEMU_AARCH64} -cpu ${LLM_QEMU_CPU} -L ${LLM_QEMU_SYSROOT})
endif()
