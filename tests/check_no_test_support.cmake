# libllm holds no test support: `nm -C` of the library shows no GGUF writer and no synthetic-model
# symbol (tests/support is an archive of its own). The same pattern must match the support archive
# itself, and the library must still list its internal llm:: symbols, so the check cannot pass just
# because the pattern went stale or the symbol table was stripped.
# The support code's own names: a bare "synth" would also match the standard library's
# __synth3way, which debug builds keep out of line.
set(pattern "[Gg][Gg][Uu][Ff]_?[Ww][Rr][Ii][Tt][Ee][Rr]|tools::[A-Za-z_]*synth|synth_model")
# grep filters nm's output (a debug build's symbol table is tens of MB: a CMake regex over it takes
# minutes). grep exits 1 when nothing matches, which is an answer here, not a failure.
foreach(f LIB SUPPORT)
  execute_process(COMMAND nm -C ${${f}} COMMAND grep -E "${pattern}|llm::" OUTPUT_VARIABLE out_${f}
                  RESULTS_VARIABLE rcs ERROR_VARIABLE err)
  list(GET rcs 0 rc)
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
