#!/bin/bash
# llama.cpp's llama-bench (mmap, the default) and our llm-bench (resident; streamed; a 2 GiB budget) on
# the gpt-oss-20b-shaped file, alternating, ROUNDS rounds; one JSON line per tool and round appended to OUT.
#   llm-bench --synth gpt-oss-20b --type mxfp4_moe -o DIR/gpt-oss-20b-mxfp4.gguf --write-only
# usage: LLAMA_BENCH=.../llama-bench [LLM_BENCH=build/examples/llm-bench] compare.sh ROUNDS DIR OUT
set -eu
R=$1; D=$2; OUT=$3; L=$LLAMA_BENCH; B=${LLM_BENCH:-build/examples/llm-bench}
f=$D/gpt-oss-20b-mxfp4.gguf
P=${PROMPT:-32}; N=${GEN:-16}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$R"); do
  /usr/bin/time -f "%M" -o "$tmp/rss" "$L" -m "$f" -t 2 -p "$P" -n "$N" -r 1 -o json > "$tmp/lc.json" 2>/dev/null
  python3 - "$round" "$tmp" >> "$OUT" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[2] + '/lc.json')); rss = int(open(sys.argv[2] + '/rss').read().split()[-1]) * 1024
pp = [x['avg_ts'] for x in j if x['n_prompt'] > 0][0]; tg = [x['avg_ts'] for x in j if x['n_gen'] > 0][0]
print(json.dumps(dict(tool='llama.cpp-mmap', round=int(sys.argv[1]), pp=pp, tg=tg, rss=rss, load=os.getloadavg()[0])))
PY
  for m in resident streamed budget; do
    "$B" -m "$f" -t 2 -p "$P" -n "$N" -r 1 --residency $m --ram-budget 2G --json 2>/dev/null | tail -1 > "$tmp/ours.json"
    python3 - "$round" "$m" "$tmp" >> "$OUT" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[3] + '/ours.json'))
print(json.dumps(dict(tool='libllm-' + sys.argv[2], round=int(sys.argv[1]), pp=j['prefill_tok_s'], tg=j['decode_tok_s'],
                      rss=j['peak_rss_bytes'], decode_bytes_per_token=j['decode_bytes_per_token'],
                      n_resident_layers=j['n_resident_layers'], load=os.getloadavg()[0])))
PY
  done
  tail -4 "$OUT"
done
