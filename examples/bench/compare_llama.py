#!/usr/bin/env python3
"""libllm against llama.cpp on the same GGUF files: the ratio table of the README's benchmark section.

usage: compare_llama.py --llama-bench PATH [--llm-bench PATH] [-t 2] [-p 512] [-n 128] [-r 5]
                        [--rounds 1] [--roof-bytes 1G] [--out ROUNDS.jsonl] FILE.gguf...
       compare_llama.py --from ROUNDS.jsonl   (the table of rounds saved by --out, e.g. of a cut-short run)

For each round and each file, in turn: llama.cpp's `llama-bench -m FILE -t T -p P -n N -r R -o json`,
then `llm-bench -m FILE -t T -p P -n N -r R --roof --json` (resident). Each tool averages its -r
repetitions; with several rounds the table shows the median round and the range of the ratios. One
JSON line per (round, file) goes to --out. The table is Markdown on stdout, preceded by the machine
and the load.

"Share of the roof": decode tok/s over the fastest decode the RAM read bandwidth allows for the
bytes one token reads (`weights.decode_read_bytes`, from `llm_model_info_json`: every tensor but the
tables a token reads one row of — the token-embedding table unless it is also the LM head — and
routed experts at the share a token uses). The bandwidth is `llm-bench --roof`'s: measured with -t
threads right after each decode repetition, so each repetition has its own roof seconds away (on a
shared host the bandwidth moves by 2x within minutes). The table gives the median of all
repetitions' shares and their range.

Run it on a quiet machine (nothing else running: the load average is printed before and after).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# ---- running the tools -----------------------------------------------------------------------------

def run_json_lines(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'{" ".join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}')
    return r.stdout


def llama(args, path):
    out = run_json_lines([args.llama_bench, '-m', path, '-t', str(args.t), '-p', str(args.p), '-n', str(args.n),
                          '-r', str(args.r), '-o', 'json'])
    rows = json.loads(out)
    pp = [x['avg_ts'] for x in rows if x['n_prompt'] > 0 and x['n_gen'] == 0]
    tg = [x['avg_ts'] for x in rows if x['n_gen'] > 0 and x['n_prompt'] == 0]
    label = rows[0].get('model_type', os.path.basename(path)).replace(' (guessed)', '')
    return (pp[0] if pp else 0.0), (tg[0] if tg else 0.0), label, rows[0].get('build_commit', '?')


def ours(args, path):
    out = run_json_lines([args.llm_bench, '-m', path, '-t', str(args.t), '-p', str(args.p), '-n', str(args.n),
                          '-r', str(args.r), '--roof', '--roof-bytes', args.roof_bytes, '--json'])
    return json.loads(out.strip().splitlines()[-1])


def cpu_name():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--llama-bench', help="llama.cpp's llama-bench")
    ap.add_argument('--llm-bench', default=os.path.join(os.path.dirname(__file__), '..', '..', 'build', 'examples',
                                                        'llm-bench'))
    ap.add_argument('-t', type=int, default=2)
    ap.add_argument('-p', type=int, default=512)
    ap.add_argument('-n', type=int, default=128)
    ap.add_argument('-r', type=int, default=5)
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('--roof-bytes', default='1G', help="llm-bench --roof's read buffer (past the caches)")
    ap.add_argument('--out', help='append one JSON line per (round, file) here')
    ap.add_argument('--from', dest='saved', help='print the table of the rounds in this --out file; run nothing')
    ap.add_argument('files', nargs='*')
    args = ap.parse_args()
    if args.saved:
        with open(args.saved) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        if not rows:
            sys.exit(f'{args.saved}: no rounds')
        recs, labels = {}, {}
        for r in rows:
            recs.setdefault(r['file'], []).append(r)
            labels[r['file']] = r['label']
        r0 = rows[0]
        args.t, args.p, args.n, args.r = r0['threads'], r0['p'], r0['n'], r0['r']
        args.rounds = max(r['round'] for r in rows) + 1
        when = f'rounds saved in {args.saved}, {rows[0]["time"]}–{rows[-1]["time"]} UTC'
        table(args, recs, labels, when, rows[0]['load'], rows[-1]['load'], r0['llama_commit'], list(recs))
        return
    if not args.llama_bench or not args.files:
        ap.error('give --llama-bench PATH and the files (or --from ROUNDS.jsonl)')
    out = open(args.out, 'a') if args.out else None

    load0 = os.getloadavg()
    started = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())
    recs = {f: [] for f in args.files}
    labels = {}
    commit = '?'
    for rnd in range(args.rounds):
        for f in args.files:
            lpp, ltg, label, commit = llama(args, f)
            j = ours(args, f)
            bw, bpt = j['decode_roof_bytes_s'], j['weights']['decode_read_bytes']
            labels[f] = label
            rec = dict(file=f, label=label, round=rnd, threads=args.t, p=args.p, n=args.n, r=args.r,
                       llama_pp=lpp, llama_tg=ltg, pp=j['prefill_tok_s'], tg=j['decode_tok_s'],
                       peak_rss_bytes=j['peak_rss_bytes'], bandwidth=bw, bytes_per_token=bpt,
                       roof_tok_s=bw / bpt if bpt else 0, shares=j['decode_roof_shares'],
                       load=os.getloadavg()[0], time=time.strftime('%H:%M:%S', time.gmtime()), llama_commit=commit)
            recs[f].append(rec)
            if out:
                out.write(json.dumps(rec) + '\n')
                out.flush()
            print(f'# {label}: round {rnd}: decode {rec["tg"]:.2f} vs {ltg:.2f}, prefill {rec["pp"]:.1f} vs {lpp:.1f}, '
                  f'roof {rec["roof_tok_s"]:.1f} tok/s ({bw / 1e9:.1f} GB/s), share {j["decode_roof_share"]:.2f}, '
                  f'load {rec["load"]:.2f}',
                  file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    table(args, recs, labels, f'started {started}', load0[0], load1[0], commit, args.files)


def table(args, recs, labels, when, load_before, load_after, commit, files):
    def med(xs):
        return statistics.median(xs)

    def ratio(rs, key_a, key_b):
        v = [r[key_a] / r[key_b] for r in rs if r[key_b] > 0]
        if not v:
            return '-'
        s = f'{med(v):.2f}x'
        return s + (f' ({min(v):.2f}–{max(v):.2f})' if len(v) > 1 else '')

    print(f'Machine: {cpu_name()}, {os.cpu_count()} logical CPUs; {args.t} threads; {when}; '
          f'load average {load_before:.2f} before, {load_after:.2f} after. llama.cpp build {commit}.')
    print(f'Command: compare_llama.py -t {args.t} -p {args.p} -n {args.n} -r {args.r} --rounds {args.rounds}; '
          f'pp{args.p} / tg{args.n}, resident, each tool the mean of its -r runs, the median of the rounds.')
    print()
    print('| model | decode tok/s | llama.cpp | ratio | share of roof | roof tok/s (GB/s) | prefill tok/s | '
          'llama.cpp | ratio | peak RSS MiB |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for f in files:
        rs = recs[f]
        share = [x for r in rs for x in r['shares']]
        share_s = '-' if not share else f'{med(share) * 100:.0f}%' + (
            f' ({min(share) * 100:.0f}–{max(share) * 100:.0f})' if len(share) > 1 else '')
        print(f'| {labels[f]} | {med([r["tg"] for r in rs]):.2f} | {med([r["llama_tg"] for r in rs]):.2f} | '
              f'{ratio(rs, "tg", "llama_tg")} | {share_s} | {med([r["roof_tok_s"] for r in rs]):.1f} '
              f'({med([r["bandwidth"] for r in rs]) / 1e9:.1f}) | {med([r["pp"] for r in rs]):.1f} | '
              f'{med([r["llama_pp"] for r in rs]):.1f} | {ratio(rs, "pp", "llama_pp")} | '
              f'{med([r["peak_rss_bytes"] for r in rs]) / 1048576:.0f} |')


if __name__ == '__main__':
    main()
