# libllm holds no test support: `nm -C` of the library shows no GGUF writer and no synthetic-model
# symbol (tests/support is an archive of its own). The same pattern must match the support archive
# itself, and the library must still list its internal llm:: symbols, so the check cannot pass just
# because the pattern went stale or the symbol table was stripped.
set(pattern "[Gg][Gg][Uu][Ff]_?[Ww][Rr][Ii][Tt][Ee][Rr]|[Ss][Yy][Nn][Tt][Hh]")
foreach(f LIB SUPPORT)
  execute_process(COMMAND nm -C ${${f}} OUTPUT_VARIABLE out_${f} ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm -C ${${f}} failed (${rc}): ${err}")
  endif()
endforeach()

string(REGEX MATCHALL "[^\n]*(${pattern})[^\n]*" support_hits "${out_SUPPORT}")
if(NOT support_hits)
  message(FATAL_ERROR "the pattern finds nothing in ${SUPPORT}: update it to the writer's and synth_model's names")
endif()
if(NOT out_LIB MATCHES "llm::")
  message(FATAL_ERROR "nm -C ${LIB} lists no internal llm:: symbols (stripped?): nothing to check")
endif()
string(REGEX MATCHALL "[^\n]*(${pattern})[^\n]*" lib_hits "${out_LIB}")
if(lib_hits)
  list(JOIN lib_hits "\n" shown)
  message(FATAL_ERROR "${LIB} contains test support (tests/support) symbols:\n${shown}")
endif()
list(LENGTH support_hits n)
message(STATUS "libllm has none of the ${n} GGUF writer / synth symbols of the support archive")
