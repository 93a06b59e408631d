# Cross-compile for 64-bit ARM Linux with Debian's toolchain
# (apt-get install g++-aarch64-linux-gnu libc6-dev-arm64-cross; run with qemu-user:
#  qemu-aarch64 -L /usr/aarch64-linux-gnu ./prog).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(LLM_QEMU_AARCH64 qemu-aarch64)
if(LLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LLM_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
