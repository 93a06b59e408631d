#!/bin/bash
# llama.cpp's llama-bench and our llm-bench (resident, then streamed) on the Qwen3.5-4B-shaped files,
# alternating, ROUNDS rounds; one JSON line per tool, file and round appended to OUT.
#   llm-bench --synth qwen3.5-4b --type q8_0 -o DIR/qwen35-4b-q8_0.gguf --write-only
#   llama-quantize --allow-requantize DIR/qwen35-4b-q8_0.gguf DIR/qwen35-4b-q4_k_m.gguf Q4_K_M
# usage: LLAMA_BENCH=.../llama-bench [LLM_BENCH=build/examples/llm-bench] compare.sh ROUNDS DIR OUT
set -eu
R=$1; D=$2; OUT=$3; L=$LLAMA_BENCH; B=${LLM_BENCH:-build/examples/llm-bench}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$R"); do
  for t in q8_0 q4_k_m; do
    f=$D/qwen35-4b-$t.gguf
    /usr/bin/time -f "%M" -o "$tmp/rss" "$L" -m "$f" -t 2 -p 128 -n 32 -r 2 -o json > "$tmp/lc.json" 2>/dev/null
    python3 - "$t" "$round" "$tmp" >> "$OUT" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[3] + '/lc.json')); rss = int(open(sys.argv[3] + '/rss').read().split()[-1]) * 1024
pp = [x['avg_ts'] for x in j if x['n_prompt'] > 0][0]; tg = [x['avg_ts'] for x in j if x['n_gen'] > 0][0]
print(json.dumps(dict(tool='llama.cpp', type=sys.argv[1], round=int(sys.argv[2]), pp=pp, tg=tg, rss=rss,
                      load=os.getloadavg()[0])))
PY
    for m in resident streamed; do
      "$B" -m "$f" -t 2 -p 128 -n 32 -r 2 --residency $m --json 2>/dev/null | tail -1 > "$tmp/ours.json"
      python3 - "$t" "$round" "$m" "$tmp" >> "$OUT" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[4] + '/ours.json'))
print(json.dumps(dict(tool='libllm-' + sys.argv[3], type=sys.argv[1], round=int(sys.argv[2]), pp=j['prefill_tok_s'],
                      tg=j['decode_tok_s'], rss=j['peak_rss_bytes'], load=os.getloadavg()[0], kv=j.get('kv_cache_bytes'))))
PY
    done
    tail -3 "$OUT"
  done
done
