# Helpers shared by the cmake scripts that drive the tools (bench_smoke, multi_pass_tools).

# Runs a command; out_var gets its stdout. Any failure is fatal and shows both streams.
function(run_tool out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "${cmd} failed (${rc}):\n${out}\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The JSON lines of a tool's output as a list in out_var; fatal unless there are exactly n of them.
function(json_lines out_var text n what)
  string(STRIP "${text}" text)
  string(REPLACE "\n" ";" lines "${text}")
  list(LENGTH lines got)
  if(NOT got EQUAL n)
    message(FATAL_ERROR "${what}: expected ${n} JSON lines, got ${got}:\n${text}")
  endif()
  set(${out_var} "${lines}" PARENT_SCOPE)
endfunction()

# Fatal unless json has key.
function(require_key json key)
  string(JSON v ERROR_VARIABLE e GET "${json}" ${key})
  if(e)
    message(FATAL_ERROR "'${key}' missing in ${json}")
  endif()
endfunction()
