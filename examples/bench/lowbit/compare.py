#!/usr/bin/env python3
"""llama.cpp's llama-bench and our llm-bench on the same file, alternating, ROUNDS rounds per type
(pp64 and tg32, 2 threads, each tool's -r 2); one JSON line per round appended to OUT.
usage: LLAMA_BENCH=... LLM_BENCH=... compare.py ROUNDS DIR OUT TYPE...   (files DIR/tl22-<type>.gguf)"""
import json, subprocess, sys, statistics, time, os
L = os.environ['LLAMA_BENCH']
B = os.environ.get('LLM_BENCH', 'build/examples/llm-bench')
R = int(sys.argv[1]); D = sys.argv[2]; out = open(sys.argv[3], 'a'); types = sys.argv[4:]
def lc(f):
    r = subprocess.run([L, '-m', f, '-t', '2', '-p', '64', '-n', '32', '-r', '2', '-o', 'json'], capture_output=True, text=True)
    j = json.loads(r.stdout)
    pp = [x['avg_ts'] for x in j if x['n_prompt'] > 0][0]; tg = [x['avg_ts'] for x in j if x['n_gen'] > 0][0]
    return pp, tg
def ours(f):
    r = subprocess.run([B, '-m', f, '-t', '2', '-p', '64', '-n', '32', '-r', '2', '--json'], capture_output=True, text=True)
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j['prefill_tok_s'], j['decode_tok_s'], j['peak_rss_bytes'], j['file_bytes']
for t in types:
    f = f'{D}/tl22-{t}.gguf'
    for rnd in range(R):
        a = lc(f); b = ours(f)
        rec = dict(type=t, round=rnd, lc_pp=a[0], lc_tg=a[1], pp=b[0], tg=b[1], rss=b[2], file_bytes=b[3],
                   load=os.getloadavg()[0], time=time.strftime('%H:%M:%S'))
        out.write(json.dumps(rec) + '\n'); out.flush()
        print(f"{t:8s} r{rnd} pp {b[0]:7.1f}/{a[0]:7.1f}={b[0]/a[0]:.2f}  tg {b[1]:6.1f}/{a[1]:6.1f}={b[1]/a[1]:.2f}  load {rec['load']:.1f}", flush=True)
