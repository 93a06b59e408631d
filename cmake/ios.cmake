# iOS toolchain (arm64 device or simulator) — UNTESTED HERE: no Xcode / iOS SDK on the build machine.
# What is proven is the AArch64 Linux cross build run under qemu (cmake/toolchain-aarch64.cmake).
# Needs macOS with Xcode and CMake >= 3.25 (CMake's own iOS support, CMAKE_SYSTEM_NAME=iOS):
#
#   device:    cmake -S . -B build-ios -G Xcode -DCMAKE_TOOLCHAIN_FILE=cmake/ios.cmake \
#                    -DLLM_DEPS_PREFIX=/path/to/ios-deps -DLLM_BUILD_TESTS=OFF -DLLM_BUILD_EXAMPLES=OFF
#   simulator: add -DLLM_IOS_SIMULATOR=ON (arm64 simulator on Apple silicon)
#   cmake --build build-ios --config Release
#
# Builds the static libllm.a (LLM_BUILD_SHARED is forced OFF): an Xcode project links it together
# with the static dependencies and calls llm.h directly (Swift: a bridging header or module map).
# Combine device and simulator builds with
#   xcodebuild -create-xcframework -library build-ios/lib/Release-iphoneos/libllm.a -headers include \
#              -library build-ios-sim/lib/Release-iphonesimulator/libllm.a -headers include -output llm.xcframework
# A dynamic llm.framework is not provided: lib/CMakeLists.txt links the shared library with a GNU
# ld version script (cmake/llm.map), which Apple's linker does not take (it would need an
# -exported_symbols_list instead).
#
# Dependencies for the target (spdlog + fmt, nlohmann/json, PCRE2) are built once with this same
# toolchain file as static libraries and installed into LLM_DEPS_PREFIX (commands as in
# cmake/android.cmake, with -DCMAKE_TOOLCHAIN_FILE=cmake/ios.cmake). PCRE2's JIT is not allowed
# on iOS (no writable+executable pages): configure it with -DPCRE2_SUPPORT_JIT=OFF; libllm then
# runs the BPE pre-tokenizer regexes interpreted (same results, slower tokenization).
set(CMAKE_SYSTEM_NAME iOS)
set(CMAKE_OSX_ARCHITECTURES arm64 CACHE STRING "")
set(CMAKE_OSX_DEPLOYMENT_TARGET 15.0 CACHE STRING "Oldest iOS version")
option(LLM_IOS_SIMULATOR "Build for the iOS simulator instead of devices" OFF)
if(LLM_IOS_SIMULATOR)
  set(CMAKE_OSX_SYSROOT iphonesimulator CACHE STRING "")
else()
  set(CMAKE_OSX_SYSROOT iphoneos CACHE STRING "")
endif()

set(LLM_BUILD_SHARED OFF CACHE BOOL "libllm.a: iOS apps link it statically" FORCE)

if(LLM_DEPS_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH ${LLM_DEPS_PREFIX})
  list(APPEND CMAKE_PREFIX_PATH ${LLM_DEPS_PREFIX})
  set(ENV{PKG_CONFIG_LIBDIR} ${LLM_DEPS_PREFIX}/lib/pkgconfig)
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
