cmake_policy(SET CMP0054 NEW)
# Saved sessions across processes (llm-run): one process generates, saves and exits; another loads the
# file and continues with -p ""; together they give the tokens of one uninterrupted run with the same
# seed, sampled (temperature 0.9) and greedy, in each residency mode, also when the saving and the
# loading process use different modes.
# run(OUT PROMPT flags...): PROMPT is passed as one argument even when empty (-p "").
function(run out_var prompt)
  execute_process(COMMAND ${RUN} -m ${MODEL} -t 2 --json -p "${prompt}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llm-run ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  string(JSON n LENGTH "${out}" tokens)
  set(ids "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON t GET "${out}" tokens ${i})
      list(APPEND ids ${t})
    endforeach()
  endif()
  set(${out_var} "${ids}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY ${WORK_DIR})
set(state ${WORK_DIR}/resume.llmstate)
foreach(temp 0.9 0)
  set(sampling --temp ${temp} --seed 42 --repeat-penalty 1.1 --ignore-eos)
  run(whole "Once upon a time" -n 40 ${sampling})
  foreach(modes "resident;resident" "streamed;streamed" "streamed;resident" "resident;streamed")
    list(GET modes 0 save_mode)
    list(GET modes 1 load_mode)
    file(REMOVE ${state})
    run(first "Once upon a time" -n 15 ${sampling} --residency ${save_mode} --save-state ${state})
    if(NOT EXISTS ${state})
      message(FATAL_ERROR "--save-state wrote no file")
    endif()
    run(second "" --load-state ${state} -n 25 ${sampling} --residency ${load_mode})
    set(resumed ${first} ${second})
    if(NOT resumed STREQUAL whole)
      message(FATAL_ERROR "temperature ${temp}, saved ${save_mode}, loaded ${load_mode}: resumed run differs\n"
                          "uninterrupted: ${whole}\nresumed:       ${resumed}")
    endif()
  endforeach()
endforeach()

# A state of another model is refused with a clear message and a non-zero exit.
execute_process(COMMAND ${RUN} -m ${OTHER} --load-state ${state} -p "" -n 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "another model")
  message(FATAL_ERROR "loading a state into another model: exit ${rc}\n${err}")
endif()
