# Debian packages from an existing build tree: `cpack -G DEB` (run in the build directory) installs
# each component into a staging tree under /usr and writes
#   libllm0     the versioned libllm.so.X.Y.Z and its soname link
#   libllm-dev  llm.h, the libllm.so namelink, libllm.a, the CMake package (find_package(llm)), llm.pc
#               and llm-static.pc (libllm.a with its dependencies)
#   llm-tools   llm-run, llm-chat, llm-embed, llm-tokenize, llm-template, llm-bench
# `apt install ./libllm0_*.deb ./libllm-dev_*.deb` then needs no variables: the library lands in a
# directory of ld.so's default path and libllm0 triggers ldconfig, which refreshes ld.so.cache.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME libllm)
set(CPACK_PACKAGE_VENDOR "libllm")
set(CPACK_PACKAGE_CONTACT "libllm maintainers <libllm@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Run LLM decoders from GGUF files in little memory (C API)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
# dpkg-shlibdeps computes each package's Depends from the ELF files (libspdlog, libpcre2, libstdc++...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# llm-tools' programs need libllm.so.0, which is in this build tree, not yet on the system: the
# dependency on libllm0 is written below instead.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libllm${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# A shlibs file (so packages built against libllm depend on libllm0 >= this version; only libllm0
# holds a shared library) and the ldconfig trigger (CPack also writes postinst/postrm calling ldconfig
# for a library under /usr/lib).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
file(WRITE ${PROJECT_BINARY_DIR}/cpack-runtime/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/cpack-runtime/triggers)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libllm-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The header and llm.pc are useless without the library of the same version; static links need the
# private dependencies' development files (pkg-config --libs llm-static).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libllm${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION}), pkg-config")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libspdlog-dev, libpcre2-dev")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME llm-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "libllm${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION})")

include(CPack)
