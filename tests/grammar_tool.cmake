# llm-grammar end to end (examples/tools/llm_grammar.cpp), and llm-run --grammar-file:
#  - --check prints one {"accepted": ...} line per string, in order, exit 0 (--root picks the start rule);
#  - a grammar that cannot be used (syntax, undefined rule) exits 2 with the reason on stderr, as does
#    --json-schema (not supported yet);
#  - llm-run --grammar-file on stories260K ends in text of the grammar.
# Inputs: GRAMMAR (the tool), RUN (llm-run), MODEL (stories260K.gguf), WORK_DIR.
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/tool_checks.cmake)

file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/list.gbnf "root ::= item (\",\" ws item)*\nitem ::= [a-z]+ | num\nnum ::= [0-9]{1,3}  # short numbers\nws ::= \" \"?\n")
file(WRITE ${WORK_DIR}/strings.json "[\"abc\", \"abc, 12\", \"abc,\", \"1234\", \"\", \"x,y, z\", \"é\"]")
run_tool(out ${GRAMMAR} --gbnf ${WORK_DIR}/list.gbnf --check ${WORK_DIR}/strings.json)
json_lines(lines "${out}" 7 "llm-grammar --check")
set(want ON ON OFF OFF OFF ON OFF)  # string(JSON) reads booleans as ON/OFF
foreach(i RANGE 6)
  list(GET lines ${i} line)
  list(GET want ${i} w)
  string(JSON got GET "${line}" accepted)
  if(NOT got STREQUAL w)
    message(FATAL_ERROR "string ${i}: accepted ${got}, expected ${w}:\n${out}")
  endif()
endforeach()
file(WRITE ${WORK_DIR}/num.json "[\"12\", \"ab\"]")
run_tool(out ${GRAMMAR} --gbnf ${WORK_DIR}/list.gbnf --root num --check ${WORK_DIR}/num.json)
if(NOT out STREQUAL "{\"accepted\": true}\n{\"accepted\": false}\n")
  message(FATAL_ERROR "--root num: ${out}")
endif()

function(expect_refusal what pattern)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: exit ${rc} (expected 2), stderr '${err}' (expected /${pattern}/)")
  endif()
endfunction()
file(WRITE ${WORK_DIR}/bad.gbnf "root ::= \"a\" | [b-\n")
expect_refusal("syntax error" "line 2, column 1: expected ']'" ${GRAMMAR} --gbnf ${WORK_DIR}/bad.gbnf --check ${WORK_DIR}/num.json)
file(WRITE ${WORK_DIR}/undef.gbnf "root ::= thing\n")
expect_refusal("undefined rule" "rule 'thing' is used but not defined" ${GRAMMAR} --gbnf ${WORK_DIR}/undef.gbnf --check ${WORK_DIR}/num.json)
expect_refusal("missing root" "no rule named 'nope'" ${GRAMMAR} --gbnf ${WORK_DIR}/list.gbnf --root nope --check ${WORK_DIR}/num.json)
file(WRITE ${WORK_DIR}/schema.json "{\"type\": \"object\"}")
expect_refusal("json schema" "not supported yet" ${GRAMMAR} --json-schema ${WORK_DIR}/schema.json --check ${WORK_DIR}/num.json)

file(WRITE ${WORK_DIR}/words.gbnf "root ::= (\"Lily\" | \"Tom\") \" \" (\"ran\" | \"was happy\") \".\"\n")
run_tool(out ${RUN} -m ${MODEL} -p "Once upon a time" -n 40 --temp 1 --seed 3 --grammar-file ${WORK_DIR}/words.gbnf --json)
string(JSON text GET "${out}" text)
if(NOT text MATCHES "^(Lily|Tom) (ran|was happy)\\.$")
  message(FATAL_ERROR "llm-run --grammar-file: text '${text}'")
endif()
require_key("${out}" stats)
string(JSON gt GET "${out}" stats grammar_tokens)
if(gt LESS 1)
  message(FATAL_ERROR "llm-run --grammar-file: grammar_tokens ${gt} in the stats")
endif()
