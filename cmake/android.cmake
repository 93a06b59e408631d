# Android (NDK) toolchain wrapper — UNTESTED HERE: no NDK is installed on the build machine. What is
# proven is the AArch64 Linux cross build run under qemu (cmake/toolchain-aarch64.cmake, .ci/run).
#
#   cmake -S . -B build-android -DCMAKE_TOOLCHAIN_FILE=cmake/android.cmake \
#         -DANDROID_NDK=$ANDROID_NDK [-DANDROID_ABI=arm64-v8a] [-DANDROID_PLATFORM=android-26] \
#         -DLLM_DEPS_PREFIX=/path/to/arm64-deps -DLLM_BUILD_TESTS=OFF -DLLM_BUILD_EXAMPLES=OFF
#   cmake --build build-android -j
#
# Result: build-android/lib/libllm.so for arm64-v8a (only llm_* exported), to put in an app's
# jniLibs/arm64-v8a/ (Gradle: externalNativeBuild or a prebuilt), together with libc++_shared.so
# when ANDROID_STL is c++_shared.
#
# Dependencies for the target: spdlog (+ fmt), nlohmann/json and PCRE2 must be found for Android
# arm64. nlohmann/json is header-only; spdlog works header-only. Build them once with this same
# toolchain file and install into one prefix, then pass it as LLM_DEPS_PREFIX:
#   spdlog:  cmake -S spdlog -B b -DCMAKE_TOOLCHAIN_FILE=<this file> -DANDROID_NDK=... \
#              -DSPDLOG_BUILD_EXAMPLE=OFF -DCMAKE_INSTALL_PREFIX=$DEPS && cmake --build b --target install
#   json:    cmake -S json -B b ... -DJSON_BuildTests=OFF -DCMAKE_INSTALL_PREFIX=$DEPS (install only)
#   pcre2:   cmake -S pcre2 -B b ... -DPCRE2_SUPPORT_JIT=ON -DPCRE2_BUILD_PCRE2GREP=OFF \
#              -DPCRE2_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
#              -DCMAKE_INSTALL_PREFIX=$DEPS   (installs lib/pkgconfig/libpcre2-8.pc, used by lib/)
# Static PCRE2 and spdlog end up inside libllm.so, which keeps them private (cmake/llm.map).
if(NOT ANDROID_NDK)
  if(DEFINED ENV{ANDROID_NDK})
    set(ANDROID_NDK $ENV{ANDROID_NDK})
  elseif(DEFINED ENV{ANDROID_NDK_HOME})
    set(ANDROID_NDK $ENV{ANDROID_NDK_HOME})
  else()
    message(FATAL_ERROR "cmake/android.cmake: set ANDROID_NDK (the NDK's root directory)")
  endif()
endif()
set(ANDROID_NDK ${ANDROID_NDK} CACHE PATH "Android NDK root")

# 64-bit ARM with NEON; API 26 (Android 8.0) is the oldest with everything libllm uses
# (posix_fadvise, pread64 on large files, getauxval for the dotprod check).
if(NOT ANDROID_ABI)
  set(ANDROID_ABI arm64-v8a)
endif()
if(NOT ANDROID_PLATFORM)
  set(ANDROID_PLATFORM android-26)
endif()
# One C++ runtime per app: c++_shared if the app has other C++ libraries, else c++_static.
if(NOT ANDROID_STL)
  set(ANDROID_STL c++_shared)
endif()

include(${ANDROID_NDK}/build/cmake/android.toolchain.cmake)

# Where the target's spdlog / fmt / nlohmann_json / PCRE2 were installed (see above).
if(LLM_DEPS_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH ${LLM_DEPS_PREFIX})
  list(APPEND CMAKE_PREFIX_PATH ${LLM_DEPS_PREFIX})
  set(ENV{PKG_CONFIG_LIBDIR} ${LLM_DEPS_PREFIX}/lib/pkgconfig:${LLM_DEPS_PREFIX}/share/pkgconfig)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
endif()
