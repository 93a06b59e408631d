# llm-embed end to end (examples/tools/llm_embed.cpp) on the qwen3 fixture:
#  - -f FILE (the four golden prompts) in one call gives the same vectors, printed digit for digit,
#    as one call per text (--batch 1): batching never changes a result;
#  - the JSON has "embeddings" (one vector of n_dim per text, in order), "pooling", "n_tokens",
#    "texts_per_second"; the file's own pooling (none for this file) gives one row per token;
#  - --tokens embeds ids as given; an unknown --pooling and rank without a classifier head fail.
# Inputs: EMBED (the tool), MODEL (qwen3.f32.gguf), PROMPTS (embeddings/prompts.txt).
cmake_policy(SET CMP0054 NEW)

include(${CMAKE_CURRENT_LIST_DIR}/tool_checks.cmake)

set(common -m ${MODEL} --ctx 256 --kv-type f32 -t 1 --json)

run_tool(all ${EMBED} ${common} --pooling mean --normalize -f ${PROMPTS})
foreach(key embeddings pooling n_dim n_tokens texts_per_second tokens_per_second seconds)
  require_key("${all}" ${key})
endforeach()
string(JSON pooling GET "${all}" pooling)
string(JSON n GET "${all}" n_inputs)
string(JSON n_vec LENGTH "${all}" embeddings)
string(JSON dim LENGTH "${all}" embeddings 0)
if(NOT pooling STREQUAL "mean" OR NOT n EQUAL 4 OR NOT n_vec EQUAL 4 OR NOT dim EQUAL 256)
  message(FATAL_ERROR "llm-embed -f: pooling ${pooling}, ${n} inputs, ${n_vec} vectors of ${dim}: ${all}")
endif()
string(JSON ntok GET "${all}" n_tokens 3)
if(NOT ntok EQUAL 164)
  message(FATAL_ERROR "the fourth prompt has ${ntok} tokens, not 164 (llama.cpp's count)")
endif()

run_tool(one ${EMBED} ${common} --pooling mean --normalize -f ${PROMPTS} --batch 1)
string(JSON a GET "${all}" embeddings)
string(JSON b GET "${one}" embeddings)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "llm-embed: four texts in one call differ from one call each")
endif()

# The file has no pooling_type: none, one row per token (BOS + the text's tokens).
run_tool(none ${EMBED} ${common} -p "Hello")
string(JSON pooling GET "${none}" pooling)
string(JSON rows LENGTH "${none}" embeddings 0)
string(JSON ntok GET "${none}" n_tokens 0)
if(NOT pooling STREQUAL "none" OR NOT rows EQUAL ntok)
  message(FATAL_ERROR "default pooling: ${pooling}, ${rows} rows for ${ntok} tokens")
endif()

run_tool(toks ${EMBED} ${common} --pooling last --tokens 1,20,30 --tokens 1,5)
string(JSON n_vec LENGTH "${toks}" embeddings)
string(JSON n0 GET "${toks}" n_tokens 0)
string(JSON n1 GET "${toks}" n_tokens 1)
if(NOT n_vec EQUAL 2 OR NOT n0 EQUAL 3 OR NOT n1 EQUAL 2)
  message(FATAL_ERROR "--tokens: ${toks}")
endif()

foreach(bad "--pooling;median" "--pooling;rank")
  execute_process(COMMAND ${EMBED} ${common} ${bad} -p "Hello" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "llm-embed ${bad} succeeded")
  endif()
endforeach()
