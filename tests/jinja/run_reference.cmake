# ctest jinja_reference: python3-jinja2 renders extra reference cases (tests/jinja/reference.py), then
# llm_tests "[.jinja-reference]" must agree with every one. Without python3-jinja2 3.1 it prints
# JINJA_REFERENCE_SKIPPED, which the test's SKIP_REGULAR_EXPRESSION turns into "skipped".
# Variables: PYTHON, SCRIPT, SHARED, OUT, TESTS (the llm_tests binary).
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${SHARED} ${OUT} RESULT_VARIABLE rc)
if(rc EQUAL 77)
  message("JINJA_REFERENCE_SKIPPED: python3-jinja2 3.1 is not installed")
  return()
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "reference.py failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LLM_JINJA_REFERENCE=${OUT} ${TESTS} "[.jinja-reference]"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "llm_tests [.jinja-reference] failed (${rc})")
endif()
