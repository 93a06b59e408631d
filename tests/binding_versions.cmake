# ctest "binding_versions": every binding's declared version is the library's (project VERSION), so a
# release bumps them together. -DVERSION=<project version> -DSOURCE_DIR=<checkout>.
set(checks
  "bindings/node/package.json|\"version\": *\"([^\"]+)\""
  "bindings/rust/Cargo.toml|\nversion *= *\"([^\"]+)\""
  "bindings/python/pyproject.toml|\nversion *= *\"([^\"]+)\""
  "bindings/python/libllm_runtime/__init__.py|\n__version__ = \"([^\"]+)\""
  "bindings/go/llm.go|const BindingVersion = \"([^\"]+)\""
  "bindings/dart/pubspec.yaml|\nversion: *([^ \n]+)")
set(bad "")
foreach(check IN LISTS checks)
  string(REPLACE "|" ";" parts "${check}")
  list(GET parts 0 file)
  list(GET parts 1 pattern)
  file(READ "${SOURCE_DIR}/${file}" text)
  if(NOT text MATCHES "${pattern}")
    string(APPEND bad "\n  ${file}: no version found")
  elseif(NOT CMAKE_MATCH_1 STREQUAL VERSION)
    string(APPEND bad "\n  ${file}: ${CMAKE_MATCH_1}")
  else()
    message(STATUS "${file}: ${CMAKE_MATCH_1}")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "binding versions differ from the library's ${VERSION}:${bad}")
endif()
