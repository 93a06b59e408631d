"""The README's table from compare.py's lines. usage: table.py OUT GB_PER_S (membw's figure)"""
import json, statistics, collections, sys
BPW = {'iq1_s':1.5625,'iq1_m':1.75,'iq2_xxs':2.0625,'iq2_xs':2.3125,'iq2_s':2.5625,'iq3_xxs':3.0625,'iq3_s':3.4375,
       'tq1_0':1.6875,'tq2_0':2.0625,'q1_0':1.125,'q2_0':2.25,'mxfp4':4.25,'nvfp4':4.5}
BW = float(sys.argv[2]) * 1e9
EMB = 32000 * 2048 // 256 * 144  # token_embd in Q4_K: only one row is read per token
rows = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l); rows[r['type']].append(r)
print('| type | bits/weight | llama.cpp pp64 | libllm pp64 | ratio | llama.cpp tg32 | libllm tg32 | ratio | decode share of memory roof | peak RSS |')
print('|---|---|---|---|---|---|---|---|---|---|')
for t, rs in rows.items():
    med = lambda k: statistics.median(x[k] for x in rs)
    rp = [x['pp'] / x['lc_pp'] for x in rs]; rt = [x['tg'] / x['lc_tg'] for x in rs]
    roof = BW / (rs[0]['file_bytes'] - EMB)
    print(f"| {t.upper()} | {BPW[t]} | {med('lc_pp'):.1f} | {med('pp'):.1f} | {statistics.median(rp):.2f} ({min(rp):.2f}–{max(rp):.2f}) | "
          f"{med('lc_tg'):.1f} | {med('tg'):.1f} | {statistics.median(rt):.2f} ({min(rt):.2f}–{max(rt):.2f}) | "
          f"{med('tg')/roof:.0%} (roof {roof:.0f}) | {med('rss')/2**20:.0f} MiB |")
