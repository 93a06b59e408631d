#!/bin/bash
# llama.cpp's llama-bench and our llm-bench (resident, then streamed) on the Gemma 4 E2B-shaped Q4_K_M
# file, alternating, ROUNDS rounds; one JSON line per tool and round appended to OUT (decode and
# prefill tok/s, peak RSS, and our KV bytes: the 15 layers that keep a cache only).
#   llm-bench --synth gemma4-e2b --type q4_k_m -o DIR/gemma4-e2b-q4_k_m.gguf --write-only
# usage: LLAMA_BENCH=.../llama-bench [LLM_BENCH=build/examples/llm-bench] compare.sh ROUNDS DIR OUT
set -eu
R=$1; D=$2; OUT=$3; L=$LLAMA_BENCH; B=${LLM_BENCH:-build/examples/llm-bench}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
f=$D/gemma4-e2b-q4_k_m.gguf
for round in $(seq 1 "$R"); do
  /usr/bin/time -f "%M" -o "$tmp/rss" "$L" -m "$f" -t 2 -p 128 -n 32 -r 2 -o json > "$tmp/lc.json" 2>/dev/null
  python3 - "$round" "$tmp" >> "$OUT" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[2] + '/lc.json')); rss = int(open(sys.argv[2] + '/rss').read().split()[-1]) * 1024
pp = [x['avg_ts'] for x in j if x['n_prompt'] > 0][0]; tg = [x['avg_ts'] for x in j if x['n_gen'] > 0][0]
print(json.dumps(dict(tool='llama.cpp', type='q4_k_m', round=int(sys.argv[1]), pp=pp, tg=tg, rss=rss,
                      load=os.getloadavg()[0])))
PY
  for m in resident streamed; do
    "$B" -m "$f" -t 2 -p 128 -n 32 -r 2 --residency $m --json 2>/dev/null | tail -1 > "$tmp/ours.json"
    python3 - "$round" "$m" "$tmp" >> "$OUT" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[3] + '/ours.json'))
print(json.dumps(dict(tool='libllm-' + sys.argv[2], type='q4_k_m', round=int(sys.argv[1]), pp=j['prefill_tok_s'],
                      tg=j['decode_tok_s'], rss=j['peak_rss_bytes'], load=os.getloadavg()[0], kv=j.get('kv_cache_bytes'))))
PY
  done
  tail -3 "$OUT"
done
