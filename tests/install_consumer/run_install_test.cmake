# The "install" test: `cmake --install` the build tree into a scratch prefix, then build the hosts of
# examples/hosts (hello.c, chat.c) against the installed tree twice -- with find_package(llm) (the
# project beside this file) and with pkg-config -- and run each build of both on stories260K (which
# has no chat template: chat.c answers the raw line, greedily, so it tells hello's story too).
# Then run the installed llm-run from the prefix, with no library path set, on the same prompt.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DMODEL=... -DCC=... -DSHARED=ON|OFF
#         [-DEXTRA_FLAGS="-fsanitize=..."] [-DEXTRA_LINK_FLAGS=...] [-DEXAMPLES=ON|OFF] -P run_install_test.cmake
cmake_minimum_required(VERSION 3.16)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

set(story ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw")
function(expect_story exe)
  run(${exe} ${MODEL} "Once upon a time" 32)
  string(FIND "${run_out}" "${story}" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "${exe} printed:\n${run_out}\nexpected it to start with:\n${story}")
  endif()
  message(STATUS "${exe}: ${run_out}")
endfunction()

# chat reads its turns from stdin until end of input; one turn here.
function(expect_chat_story exe)
  file(WRITE ${WORK_DIR}/chat-turns.txt "Once upon a time\n")
  execute_process(COMMAND ${exe} ${MODEL} 32 INPUT_FILE ${WORK_DIR}/chat-turns.txt RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${out}" "${story}" at)
  if(NOT rc EQUAL 0 OR NOT at EQUAL 0)
    message(FATAL_ERROR "${exe} (${rc}) printed:\n${out}\n${err}\nexpected it to start with:\n${story}")
  endif()
  message(STATUS "${exe}: ${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# The installed tree: header, library (with its SONAME link), CMake package, pkg-config file.
file(GLOB_RECURSE pcs ${prefix}/*/llm.pc)
file(GLOB_RECURSE configs ${prefix}/*/llmConfig.cmake)
if(NOT EXISTS ${prefix}/include/llm.h OR NOT pcs OR NOT configs)
  message(FATAL_ERROR "install tree incomplete: llm.h, llm.pc or llmConfig.cmake missing under ${prefix}")
endif()
get_filename_component(pcdir ${pcs} DIRECTORY)
get_filename_component(libdir ${pcdir} DIRECTORY)
if(SHARED)
  if(NOT EXISTS ${libdir}/libllm.so.0 OR NOT IS_SYMLINK ${libdir}/libllm.so)
    message(FATAL_ERROR "libllm.so -> libllm.so.0 missing in ${libdir}")
  endif()
  # The shared library keeps spdlog, fmt and PCRE2 private: neither the CMake targets nor llm.pc
  # may ask a host to link them.
  file(GLOB target_files ${libdir}/cmake/llm/llmTargets*.cmake)
  foreach(f ${target_files} ${pcs})
    file(READ ${f} text)
    if(text MATCHES "spdlog|fmt::|pcre2|PCRE2|nlohmann")
      message(FATAL_ERROR "${f} leaks a private dependency of the shared libllm:\n${text}")
    endif()
  endforeach()
elseif(NOT EXISTS ${libdir}/libllm.a)
  message(FATAL_ERROR "libllm.a missing in ${libdir}")
endif()

# 1. find_package(llm) from a separate CMake project.
set(flags "")
if(EXTRA_FLAGS)
  set(flags "-DCMAKE_C_FLAGS=${EXTRA_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXTRA_FLAGS} ${EXTRA_LINK_FLAGS}")
endif()
run(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK_DIR}/consumer -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${CC} -DHOSTS_DIR=${SOURCE_DIR}/examples/hosts ${flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
expect_story(${WORK_DIR}/consumer/hello)
expect_chat_story(${WORK_DIR}/consumer/chat)

# 2. pkg-config, as a Makefile or a non-CMake build system would use it.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${pcdir})
set(pc_args --cflags --libs)
if(NOT SHARED)
  set(pc_args --static --cflags --libs)
endif()
run(${PKG_CONFIG} ${pc_args} llm)
string(STRIP "${run_out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
message(STATUS "pkg-config ${pc_args} llm: ${pc_flags}")
separate_arguments(extra UNIX_COMMAND "${EXTRA_FLAGS} ${EXTRA_LINK_FLAGS}")
foreach(host hello chat)
  run(${CC} -std=c99 -Wall -Wextra -pedantic -Werror ${extra} ${SOURCE_DIR}/examples/hosts/${host}.c ${pc_flags}
      -Wl,-rpath,${libdir} -o ${WORK_DIR}/${host}-pkgconfig)
endforeach()
expect_story(${WORK_DIR}/hello-pkgconfig)
expect_chat_story(${WORK_DIR}/chat-pkgconfig)

# 3. The installed tools: bin/llm-run must find lib*/libllm.so.0 through its RUNPATH ($ORIGIN/../lib),
#    not through the build tree or LD_LIBRARY_PATH.
if(EXAMPLES)
  set(tool ${prefix}/bin/llm-run)
  if(NOT EXISTS ${tool})
    message(FATAL_ERROR "${tool} was not installed")
  endif()
  unset(ENV{LD_LIBRARY_PATH})
  run(${tool} --help)
  if(SHARED)
    execute_process(COMMAND ldd ${tool} OUTPUT_VARIABLE ldd_out RESULT_VARIABLE rc)
    string(REGEX MATCH "libllm\\.so\\.0 => ([^ \n]+)" found "${ldd_out}")
    set(loaded "${CMAKE_MATCH_1}")
    if(loaded)
      get_filename_component(loaded ${loaded} REALPATH)
    endif()
    get_filename_component(installed ${libdir}/libllm.so.0 REALPATH)
    if(NOT rc EQUAL 0 OR NOT loaded STREQUAL installed)
      message(FATAL_ERROR "${tool} does not load the installed ${installed}:\n${ldd_out}")
    endif()
  endif()
  run(${tool} -m ${MODEL} -p "Once upon a time" -n 32 --temp 0)
  string(FIND "${run_out}" "${story}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "installed llm-run printed:\n${run_out}\nexpected:\n${story}")
  endif()
  message(STATUS "installed llm-run: ${run_out}")
endif()
file(REMOVE_RECURSE ${prefix})
