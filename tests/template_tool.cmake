# llm-template with tools (examples/tools/llm_template.cpp), as the acceptance checks drive it:
#  - --tools / --documents render with tool definitions; messages carry tool_calls and role tool;
#  - --parse RAW --params P [--partial] prints one JSON line {content, reasoning_content, tool_calls};
#  - a template of no known format gives the text as content with "parsed": false;
#  - params that are not an object of the right fields exit 1 with the reason on stderr.
# Inputs: TEMPLATE (the tool), SHARED (the test data), WORK_DIR.
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/tool_checks.cmake)

file(MAKE_DIRECTORY ${WORK_DIR})
set(qwen ${SHARED}/chat/templates/Qwen3.5-4B.jinja)
file(WRITE ${WORK_DIR}/messages.json [=[[{"role": "user", "content": "Weather in Paris?"},
 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
  "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
 {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "12C"}]]=])
file(WRITE ${WORK_DIR}/tools.json [=[[{"type": "function", "function": {"name": "get_weather",
 "description": "Weather now.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
 "required": ["city"]}}}]]=])
run_tool(out ${TEMPLATE} --template ${qwen} --bos "<|endoftext|>" --eos "<|im_end|>" --messages ${WORK_DIR}/messages.json
         --tools ${WORK_DIR}/tools.json --add-assistant --now 0)
foreach(want "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""
             "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>"
             "<tool_response>\n12C\n</tool_response>" "<|im_start|>assistant\n<think>\n")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "--tools: '${want}' not in the rendering:\n${out}")
  endif()
endforeach()
file(WRITE ${WORK_DIR}/ask.json [=[[{"role": "user", "content": "Where is Paris?"}]]=])
file(WRITE ${WORK_DIR}/docs.json [=[[{"title": "Doc A", "text": "Paris is in France."}]]=])
run_tool(out ${TEMPLATE} --template ${SHARED}/chat/templates/ibm-granite-granite-3.3-2B-Instruct.jinja --bos "<|start_of_role|>"
         --eos "<|end_of_text|>" --messages ${WORK_DIR}/ask.json --tools ${WORK_DIR}/tools.json
         --documents ${WORK_DIR}/docs.json --add-assistant --now 0)
string(FIND "${out}" "Paris is in France." at)
if(at EQUAL -1)
  message(FATAL_ERROR "--documents: the document is not in the rendering:\n${out}")
endif()

file(WRITE ${WORK_DIR}/raw.txt "I should look.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>")
file(WRITE ${WORK_DIR}/params.json [=[{"reasoning_format": "auto", "enable_thinking": true,
 "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": ]=])
file(READ ${WORK_DIR}/tools.json tools)
file(APPEND ${WORK_DIR}/params.json "${tools}}")
run_tool(out ${TEMPLATE} --template ${qwen} --parse ${WORK_DIR}/raw.txt --params ${WORK_DIR}/params.json)
json_lines(lines "${out}" 1 "--parse")
string(JSON reasoning GET "${out}" reasoning_content)
string(JSON name GET "${out}" tool_calls 0 name)
string(JSON args GET "${out}" tool_calls 0 arguments)
string(JSON format GET "${out}" format)
if(NOT reasoning STREQUAL "I should look." OR NOT name STREQUAL "get_weather" OR NOT args STREQUAL "{\"city\":\"Paris\"}"
   OR NOT format STREQUAL "qwen3_coder")
  message(FATAL_ERROR "--parse: ${out}")
endif()
file(WRITE ${WORK_DIR}/cut.txt "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar")
run_tool(out ${TEMPLATE} --template ${qwen} --parse ${WORK_DIR}/cut.txt --params ${WORK_DIR}/params.json --partial)
string(JSON name GET "${out}" tool_calls 0 name)
if(NOT name STREQUAL "get_weather")
  message(FATAL_ERROR "--partial: ${out}")
endif()
run_tool(out ${TEMPLATE} --template ${SHARED}/chat/templates/google-gemma-2-2b-it.jinja --parse ${WORK_DIR}/raw.txt)
string(JSON parsed GET "${out}" parsed)
string(JSON n LENGTH "${out}" tool_calls)
if(parsed OR NOT n EQUAL 0)
  message(FATAL_ERROR "unknown format: ${out}")
endif()
file(WRITE ${WORK_DIR}/bad.json "{\"tools\": 3}")
execute_process(COMMAND ${TEMPLATE} --template ${qwen} --parse ${WORK_DIR}/raw.txt --params ${WORK_DIR}/bad.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "\"tools\" must be an array")
  message(FATAL_ERROR "bad params: exit ${rc}, stderr '${err}'")
endif()
