cmake_policy(SET CMP0054 NEW)
# 10,000 tokens at n_ctx 512 with context shift (llm-run --context-shift --keep 16 --ignore-eos): the
# run must not fail (without the shift it stops at CONTEXT_FULL after ~500 tokens) and its peak RSS
# (VmHWM) must stay what a 1,000-token run needs: a cache or buffer that grew with the tokens
# generated would add to it (the KV cache alone would grow ~1.3 KiB per token on this model).
# The slack covers the tool's own text (~20 KiB) and allocator noise (under 250 KiB measured).
set(slack_kib 512)
function(run n out_var)
  execute_process(COMMAND ${RUN} -m ${MODEL} -p "Once upon a time" -t 1 --ctx 512 -n ${n} --context-shift --keep 16
                          --ignore-eos --json RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llm-run -n ${n} with context shift failed (${rc}):\n${err}")
  endif()
  string(JSON generated GET "${out}" generated_tokens)
  string(JSON n_past GET "${out}" stats n_past)
  if(NOT generated EQUAL n OR n_past GREATER 512)
    message(FATAL_ERROR "-n ${n}: generated ${generated} tokens, n_past ${n_past}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

run(1000 short)
run(10000 long)
string(JSON peak_1k GET "${short}" peak_rss_bytes)
string(JSON peak_10k GET "${long}" peak_rss_bytes)
string(JSON shifts GET "${long}" stats context_shifts)
math(EXPR peak_1k_kib "${peak_1k} / 1024")
math(EXPR peak_10k_kib "${peak_10k} / 1024")
math(EXPR limit "${peak_1k_kib} + ${slack_kib}")
message(STATUS "peak RSS: ${peak_1k_kib} KiB after 1,000 tokens, ${peak_10k_kib} KiB after 10,000 (${shifts} shifts)")
# (10,000 + prompt - 512) / ((512 - 16) / 2 + 1) shifts, about 39.
if(shifts LESS 35)
  message(FATAL_ERROR "only ${shifts} context shifts in 10,000 tokens at n_ctx 512")
endif()
if(peak_10k_kib GREATER limit)
  message(FATAL_ERROR "peak RSS grew from ${peak_1k_kib} KiB (1,000 tokens) to ${peak_10k_kib} KiB (10,000 tokens)")
endif()
