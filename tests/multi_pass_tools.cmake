# More than one token per pass through the tools (llm-run, llm-bench; llm.h 0.4):
#  - llm-run with a draft model (the same file: every proposal agrees), with prompt lookup and with
#    --parallel 2 gives plain greedy llm-run's tokens, and the same-file draft needs fewer passes
#    than tokens;
#  - llm-bench --verify-sweep (prefill/truncate only) gives one row per K with its fields;
#  - llm-bench --draft-n 0,8 --parallel 1,2 gives one result per combination with the new fields.
# llm.h 0.4 is implemented: any tool failure (LLM_ERR_UNSUPPORTED included) fails the test.
#  - on gpt-oss (attention sinks, a window of 4 on even layers, MXFP4 experts), resident and
#    streamed: llm-run with --draft (its Q8_0 sibling, and itself) and with --lookup gives plain
#    greedy llm-run's tokens.
# Inputs: RUN, BENCH (the tools), MODEL (stories260K), WORK_DIR (scratch files), GPTOSS_DIR (the
# gpt-oss fixtures' folder).
cmake_policy(SET CMP0054 NEW)

include(${CMAKE_CURRENT_LIST_DIR}/tool_checks.cmake)

set(common -m ${MODEL} -p "Once upon a time" -n 24 --temp 0 --ignore-eos -t 1 --json)

# Plain greedy decoding: the reference tokens.
run_tool(plain ${RUN} ${common})
string(JSON ref GET "${plain}" tokens)
string(JSON n_ref LENGTH "${plain}" tokens)
if(NOT n_ref EQUAL 24)
  message(FATAL_ERROR "plain run generated ${n_ref} tokens, not 24: ${plain}")
endif()
foreach(key passes drafted accepted tokens_per_pass acceptance parallel)
  require_key("${plain}" ${key})
endforeach()

# A draft model that is the model itself: every proposal is right, so K tokens come per pass.
run_tool(out ${RUN} ${common} --draft ${MODEL} --draft-n 4)
string(JSON toks GET "${out}" tokens)
if(NOT toks STREQUAL ref)
  message(FATAL_ERROR "--draft changed the greedy tokens:\n plain ${ref}\n draft ${toks}")
endif()
string(JSON passes GET "${out}" passes)
string(JSON drafted GET "${out}" drafted)
string(JSON accepted GET "${out}" accepted)
if(NOT passes LESS 24 OR NOT passes GREATER 0 OR NOT drafted GREATER 0 OR NOT accepted GREATER 0)
  message(FATAL_ERROR "a same-file draft should take fewer passes than the 24 tokens: ${out}")
endif()
message(STATUS "same-file draft: ${passes} passes for 24 tokens, ${accepted}/${drafted} accepted")

# The synthetic pair of the README's measurements, small: a q8_0 model and its q4_0 copy as draft
# (same vocabulary, so accepted as a draft; the tokens stay the q8_0 model's own greedy ones).
file(MAKE_DIRECTORY ${WORK_DIR})
set(q8 ${WORK_DIR}/tiny-deep-q8_0.gguf)
set(q4 ${WORK_DIR}/tiny-deep-q4_0-from-q8_0.gguf)
run_tool(out ${BENCH} --synth tiny-deep --type q8_0 -o ${q8} --write-only)
run_tool(out ${BENCH} --synth tiny-deep --type q4_0 --from-type q8_0 -o ${q4} --write-only)
if(NOT EXISTS ${q8} OR NOT EXISTS ${q4})
  message(FATAL_ERROR "--write-only / --from-type wrote no file")
endif()
set(synth_args --tokens 1,300,301,302 -n 12 --temp 0 --ignore-eos -t 1 --json)
run_tool(synth_plain ${RUN} -m ${q8} ${synth_args})
string(JSON synth_ref GET "${synth_plain}" tokens)
run_tool(out ${RUN} -m ${q8} ${synth_args} --draft ${q4} --draft-n 4)
string(JSON toks GET "${out}" tokens)
if(NOT toks STREQUAL synth_ref)
  message(FATAL_ERROR "the q4_0 draft changed the q8_0 model's greedy tokens:\n plain ${synth_ref}\n draft ${toks}")
endif()

# Prompt lookup: whatever it proposes, the tokens stay greedy's.
run_tool(out ${RUN} ${common} --lookup 2)
string(JSON toks GET "${out}" tokens)
if(NOT toks STREQUAL ref)
  message(FATAL_ERROR "--lookup changed the greedy tokens:\n plain ${ref}\n lookup ${toks}")
endif()

# Two sessions of the same prompt in one pass each: both are greedy's.
run_tool(out ${RUN} ${common} --parallel 2)
foreach(i 0 1)
  string(JSON toks GET "${out}" sessions ${i} tokens)
  if(NOT toks STREQUAL ref)
    message(FATAL_ERROR "--parallel 2 session ${i} differs from the plain run:\n plain ${ref}\n got ${toks}")
  endif()
endforeach()
string(JSON passes GET "${out}" passes)
# One pass per step for both sessions (an end-of-generation token replaced under --ignore-eos
# costs that session one pass of its own): fewer passes than the 48 tokens.
if(passes LESS 24 OR NOT passes LESS 48)
  message(FATAL_ERROR "--parallel 2 took ${passes} passes for 2 x 24 tokens (expected 24..47): ${out}")
endif()

# The verify sweep: prefill + truncate only, so it runs on any library.
run_tool(out ${BENCH} -m ${MODEL} -t 1 -p 8 -r 1 --verify-sweep --residency streamed --json)
json_lines(rows "${out}" 6 "--verify-sweep (K = 1..32)")
set(ks "")
foreach(row IN LISTS rows)
  foreach(key k seconds ratio_vs_k1 bytes_read residency)
    require_key("${row}" ${key})
  endforeach()
  string(JSON k GET "${row}" k)
  string(JSON s GET "${row}" seconds)
  string(JSON b GET "${row}" bytes_read)
  if(NOT s GREATER 0 OR NOT b GREATER 0)
    message(FATAL_ERROR "--verify-sweep row without time or streamed bytes: ${row}")
  endif()
  list(APPEND ks ${k})
endforeach()
if(NOT ks STREQUAL "1;2;4;8;16;32")
  message(FATAL_ERROR "--verify-sweep K values ${ks}")
endif()
list(GET rows 0 first)
string(JSON r1 GET "${first}" ratio_vs_k1)
if(NOT r1 EQUAL 1)
  message(FATAL_ERROR "K=1 ratio is ${r1}, not 1: ${first}")
endif()

# One result per combination of --draft-n and --parallel.
run_tool(out ${BENCH} -m ${MODEL} -t 1 -p 8 -n 8 --draft ${MODEL} --draft-n 0,8 --parallel 1,2 --json)
json_lines(rows "${out}" 4 "--draft-n 0,8 x --parallel 1,2")
set(combos "")
foreach(row IN LISTS rows)
  foreach(key passes tokens_per_pass drafted accepted acceptance parallel n_draft decode_tok_s)
    require_key("${row}" ${key})
  endforeach()
  string(JSON k GET "${row}" n_draft)
  string(JSON par GET "${row}" parallel)
  string(JSON tpp GET "${row}" tokens_per_pass)
  if(NOT tpp GREATER 0)
    message(FATAL_ERROR "tokens_per_pass not positive: ${row}")
  endif()
  list(APPEND combos "${k}x${par}")
endforeach()
if(NOT combos STREQUAL "0x1;0x2;8x1;8x2")
  message(FATAL_ERROR "combinations ${combos}")
endif()

# gpt-oss through the tools: speculation's verify passes run the sinks' softmax and the window's
# ring past its wrap (80 tokens after a 5-token prompt; the ring holds 4 + 63).
set(oss ${GPTOSS_DIR}/gptoss.mxfp4_moe.gguf)
foreach(residency resident streamed)
  set(oss_common -m ${oss} -p "Once upon a time" -n 80 --temp 0 --ignore-eos -t 1 --json --residency ${residency})
  run_tool(oss_plain ${RUN} ${oss_common})
  string(JSON oss_ref GET "${oss_plain}" tokens)
  foreach(spec "--draft;${GPTOSS_DIR}/gptoss.q8_0.gguf;--draft-n;4" "--draft;${oss};--draft-n;4" "--lookup;2")
    run_tool(out ${RUN} ${oss_common} ${spec})
    string(JSON toks GET "${out}" tokens)
    if(NOT toks STREQUAL oss_ref)
      message(FATAL_ERROR "gpt-oss ${residency} ${spec} changed the greedy tokens:\n plain ${oss_ref}\n got ${toks}")
    endif()
  endforeach()
  message(STATUS "gpt-oss ${residency}: --draft (Q8_0, same file) and --lookup 2 give plain greedy's 80 tokens")
endforeach()
