#!/usr/bin/env python3
"""The RAM dial as a picture: peak RSS and decode / prefill speed against the RAM budget.

Reads the JSON lines of `llm-bench --sweep-budget N --json` (a file, or - for stdin) and writes a PNG:

    llm-bench --synth tinyllama-1.1b --type q8_0 -t 2 -p 64 -n 32 --sweep-budget 8 --json > dial.jsonl
    python3 examples/bench/plot_dial.py dial.jsonl -o dial.png --llama-rss-mib 1200 \
        --llama-bench llama.jsonl   # llama-bench -o jsonl on the same file, same -t -p -n

Needs matplotlib (Debian: apt-get install python3-matplotlib). Lines that are not JSON objects are
skipped, so a log with other output in it works too. Several sweeps in one file (other thread counts,
prefetch depths or page-cache policies) become one curve each; repeated sweeps of the same
configuration (rounds on a noisy machine) are drawn as the median of each step, with the range of
decode speeds as error bars.
"""
import argparse
import json
import statistics
import sys

MIB = 1024.0 * 1024.0


def read_steps(path):
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    steps = []
    for n, line in enumerate(f, 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"{path}:{n}: not a JSON object: {e}")
        if "ram_budget_bytes" in obj and "step" in obj:
            steps.append(obj)
    if f is not sys.stdin:
        f.close()
    if not steps:
        sys.exit(f"{path}: no sweep steps (lines of llm-bench --sweep-budget N --json)")
    return steps


def read_llama_bench(path):
    """llama-bench -o jsonl lines (any number of runs) -> (decode, prefill) tok/s lists."""
    tg, pp = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            obj = json.loads(line)
            if obj.get("n_gen", 0) > 0 and obj.get("n_prompt", 0) == 0:
                tg.append(obj["avg_ts"])
            elif obj.get("n_prompt", 0) > 0 and obj.get("n_gen", 0) == 0:
                pp.append(obj["avg_ts"])
    if not tg and not pp:
        sys.exit(f"{path}: no llama-bench results (lines of llama-bench -o jsonl)")
    return tg, pp


def merge(runs):
    """Runs at one budget -> one point: medians, and the range of decode speeds."""
    med = lambda key: statistics.median(r[key] for r in runs)
    tg = [r["decode_tok_s"] for r in runs]
    pp = [r["prefill_tok_s"] for r in runs]
    return {"budget": runs[0]["ram_budget_bytes"], "rss": med("peak_rss_bytes"), "tg": med("decode_tok_s"),
            "tg_lo": min(tg), "tg_hi": max(tg), "pp": med("prefill_tok_s"), "pp_lo": min(pp), "pp_hi": max(pp),
            "resident": runs[0]["n_resident_layers"], "n_layer": runs[0]["n_layer"], "n": len(runs)}


def group(steps):
    """One curve per configuration other than the budget, each a list of points sorted by budget."""
    keys = ("model", "threads", "prefetch", "page_cache")
    curves = {}
    for s in steps:
        curves.setdefault(tuple(s.get(k) for k in keys), {}).setdefault(s["ram_budget_bytes"], []).append(s)
    varying = [i for i, k in enumerate(keys) if len({c[i] for c in curves}) > 1]
    out = []
    for cfg, by_budget in curves.items():
        pts = [merge(by_budget[b]) for b in sorted(by_budget)]
        label = ", ".join(f"{keys[i].replace('_', ' ')} {cfg[i]}" for i in varying)
        out.append((label, pts))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="JSON lines from llm-bench --sweep-budget N --json, or - for stdin")
    ap.add_argument("-o", "--output", default="dial.png", help="PNG to write (default dial.png)")
    ap.add_argument("--llama-rss-mib", type=float, help="llama.cpp's peak RSS for the same model, drawn as a line")
    ap.add_argument("--llama-bench", metavar="JSONL",
                    help="llama-bench -o jsonl runs on the same model and settings: their median decode and "
                         "prefill tok/s (decode with its range) drawn as reference lines")
    ap.add_argument("--title", help="figure title (default: the model file and its type)")
    ap.add_argument("--dpi", type=int, default=100)
    args = ap.parse_args()

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_dial.py needs matplotlib (Debian: apt-get install python3-matplotlib)")

    steps = read_steps(args.input)
    curves = group(steps)
    fig, (ax_rss, ax_tg, ax_pp) = plt.subplots(3, 1, sharex=True, figsize=(8, 9),
                                               gridspec_kw={"height_ratios": (3, 3, 2)})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, pts) in enumerate(curves):
        c = colors[i % len(colors)]
        suffix = f", {label}" if label else ""
        x = [p["budget"] / MIB for p in pts]
        tg = [p["tg"] for p in pts]
        ax_rss.plot(x, [p["rss"] / MIB for p in pts], "o-", color=c, label="libllm peak RSS" + suffix)
        rounds = max(p["n"] for p in pts)
        if rounds > 1:
            err = [[p["tg"] - p["tg_lo"] for p in pts], [p["tg_hi"] - p["tg"] for p in pts]]
            ax_tg.errorbar(x, tg, yerr=err, fmt="o-", color=c, capsize=3,
                           label=f"decode, median of {rounds} (bars: range){suffix}")
        else:
            ax_tg.plot(x, tg, "o-", color=c, label="decode" + suffix)
        # What "buys the speed back linearly" would look like: the straight line between the ends.
        ax_tg.plot([x[0], x[-1]], [tg[0], tg[-1]], ":", color=c, alpha=0.7,
                   label="straight line between the ends" if i == 0 else None)
        pp_err = [[p["pp"] - p["pp_lo"] for p in pts], [p["pp_hi"] - p["pp"] for p in pts]]
        ax_pp.errorbar(x, [p["pp"] for p in pts], yerr=pp_err if rounds > 1 else None, fmt="s-", color=c,
                       markersize=4, capsize=2,
                       label="prefill" + (f", median of {rounds} (bars: range)" if rounds > 1 else "") + suffix)
        if i == 0:
            for p, xi, yi in zip(pts, x, tg):
                ax_tg.annotate(f"{p['resident']}/{p['n_layer']}", (xi, yi), textcoords="offset points",
                               xytext=(-4, 8), ha="right", fontsize=7, color="0.3")
    lo = min(c[1][0]["budget"] for c in curves) / MIB
    hi = max(c[1][-1]["budget"] for c in curves) / MIB
    ax_rss.plot([lo, hi], [lo, hi], color="0.6", linewidth=0.8, label="RSS = budget")
    if args.llama_rss_mib:
        ax_rss.axhline(args.llama_rss_mib, color="firebrick", linestyle="--", linewidth=1.2,
                       label=f"llama.cpp peak RSS ({args.llama_rss_mib:.0f} MiB)")
    if args.llama_bench:
        # llama.cpp has no dial: one figure for the whole model in memory, drawn across the budgets.
        ltg, lpp = read_llama_bench(args.llama_bench)
        if ltg:
            m = statistics.median(ltg)
            ax_tg.axhline(m, color="firebrick", linestyle="--", linewidth=1.2,
                          label=f"llama.cpp decode, all in memory (median {m:.1f}" +
                                (f", range {min(ltg):.1f}-{max(ltg):.1f}, {len(ltg)} runs)" if len(ltg) > 1 else ")"))
            if len(ltg) > 1:
                ax_tg.axhspan(min(ltg), max(ltg), color="firebrick", alpha=0.08)
        if lpp:
            m = statistics.median(lpp)
            ax_pp.axhline(m, color="firebrick", linestyle="--", linewidth=1.2,
                          label=f"llama.cpp prefill, all in memory (median {m:.0f})")

    first = steps[0]
    title = args.title or f"RAM dial: {first.get('model', '')} ({first.get('type', '')})"
    fig.suptitle(title, fontsize=11)
    ax_rss.set_ylabel("peak RSS (MiB)")
    ax_rss.set_ylim(bottom=0)
    ax_tg.set_ylabel("decode tok/s")
    top = max(max(p["tg_hi"] for p in c[1]) for c in curves)
    if args.llama_bench and ltg:
        top = max(top, max(ltg))
    ax_tg.set_ylim(bottom=0, top=top * 1.1)
    ax_pp.set_ylabel("prefill tok/s")
    ax_pp.set_ylim(bottom=0)
    ax_pp.set_xlabel("RAM budget (MiB); numbers by the decode points: layers resident")
    for ax, where in ((ax_rss, "upper left"), (ax_tg, "upper left"), (ax_pp, "lower right")):
        ax.legend(fontsize=8, loc=where)
        ax.grid(alpha=0.3)
    meta = (f"threads {first.get('threads')}, -p {first.get('prompt_tokens')} -n {first.get('decode_tokens')} "
            f"-r {first.get('reps')}, prefetch {first.get('prefetch')}")
    if len(curves) == 1:
        meta += f", page cache {first.get('page_cache')}"
    fig.text(0.01, 0.005, meta, fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(args.output, dpi=args.dpi)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
