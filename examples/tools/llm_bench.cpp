// llm-bench: prefill / decode speed, load time, peak RSS and I/O of a GGUF model (or of a synthetic
// model it writes itself), across threads, residency modes and prefetch depths, or along the RAM dial
// (--sweep-budget). Every configuration runs in its own child process so each peak RSS is its own.
// Not public API only: everything it measures goes through llm.h, but --synth writes its models with
// the test-support GGUF writer (tests/support/synth_model.h), internal C++ that libllm does not hold;
// so it links the core objects and that archive instead of libllm (examples/CMakeLists.txt).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <random>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "common.h"
#include "membw.h"
#include "synth_model.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-bench (-m MODEL.gguf | --synth SHAPE --type TYPE [-o FILE]) [options]\n"
    "  -t N[,N..]           threads (default: physical cores)\n"
    "  -p N                 prompt tokens for prefill (default 512)\n"
    "  -n N                 tokens to decode (default 128)\n"
    "  --ctx N              session context (default: what -d, -p and -n need); the KV cache is\n"
    "                       allocated for it, so it shows in peak RSS\n"
    "  -d N                 context depth: both tests start after N prompt tokens already in the\n"
    "                       context (untimed), as llama-bench's -d (default 0)\n"
    "  -r N                 repetitions, averaged (default 1)\n"
    "  --residency M[,M..]  resident | streamed | budget (default resident)\n"
    "  --ram-budget SIZE    for budget mode, e.g. 256M\n"
    "  --prefetch D[,D..]   prefetch depths (default 1)\n"
    "  --page-cache P[,P..] keep | drop | direct | map (default keep); map streams by mapping the file\n"
    "                       instead of copying; page_cache_bytes reports how much of the file the OS\n"
    "                       still caches after the run, page_cache_in_force the policy the model used\n"
    "  --sweep-budget N     budget residency at N budgets, evenly spaced from the model's minimum to\n"
    "                       all blocks and the head resident (replaces --residency / --ram-budget)\n"
    "  --context-shift      shift the context when full (keeping --keep N tokens) instead of failing:\n"
    "                       with --ctx smaller than the run, the decode test measures shifting\n"
    "  --keep N             tokens context shift never drops (default 0)\n"
    "  --kv-type T          KV cache element type for keys and values: f32 | f16 (default) | q8_0\n"
    "  --kv-type-k T, --kv-type-v T   the same for keys or values only\n"
    "  --ignore-eos         decode exactly -n tokens (always so here: an end-of-generation token is\n"
    "                       accepted like any other; the flag is taken for symmetry with llm-run)\n"
    "  --json               one JSON object per configuration on stdout\n"
    "  --write-only         with --synth -o: write the model and exit\n"
    "  --from-type T        with --synth: make every matrix the --type quantization of the values a\n"
    "                       --type T file of the same shape and seed holds (e.g. a q4_0 draft that is\n"
    "                       a copy of the q8_0 model: --type q4_0 --from-type q8_0)\n"
    "  --verify-sweep       cost of a K-token pass against a 1-token pass, K = 1,2,4,8,16,32: after -p\n"
    "                       prompt tokens, prefill K tokens (logits for all K, as a verify pass needs)\n"
    "                       and truncate back, -r times; the median per K (no prefill/decode tests)\n"
    "  --membw              only the RAM read bandwidth with -t threads (the memory roof of decode:\n"
    "                       best of 5 passes over 1 GiB), as JSON; no model\n"
    "  --roof               after each decode repetition, the RAM read bandwidth with -t threads (best\n"
    "                       of 3 passes over --roof-bytes, default 1G), so decode and its roof are\n"
    "                       measured seconds apart:\n"
    "                       decode_roof_share is the median over repetitions of that repetition's\n"
    "                       decode tok/s x weights.decode_read_bytes / its bandwidth; peak_rss_bytes\n"
    "                       is taken before the first roof pass (the buffer is not the model's)\n"
    "  --roof-bytes SIZE    --roof's buffer, e.g. 256M (default 1G; 16M or more, past the caches)\n"
    "more than one token per pass (--draft-n, --lookup and --parallel take lists; one run per\n"
    "combination, --draft-n 0 = speculation off; with --parallel N decode_tok_s is the aggregate\n"
    "N x tokens / the decode loop's wall time, with speculation the wall-time figure too):\n";

std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p <= s.size()) {
        size_t c = s.find(',', p);
        out.push_back(s.substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (c == std::string::npos) break;
        p = c + 1;
    }
    return out;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Bytes of the file in the OS page cache (mincore over a mapping that is never touched).
uint64_t cached_bytes(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return 0;
    struct stat st {};
    uint64_t n = 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        const size_t len = static_cast<size_t>(st.st_size);
        void *p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            const long page = sysconf(_SC_PAGESIZE);
            std::vector<unsigned char> v((len + page - 1) / page);
            if (mincore(p, len, v.data()) == 0)
                for (unsigned char c : v) n += (c & 1) ? static_cast<uint64_t>(page) : 0;
            munmap(p, len);
        }
    }
    ::close(fd);
    return n;
}

// A number from a flat JSON object (the children's lines, the session's stats).
double field(const std::string &js, const char *key);

// --- child: one configuration ---------------------------------------------------------------------

// Context settings of a run (--ctx, --context-shift, --keep).
struct CtxOptions {
    int32_t n_ctx = 0;  // 0: what the run needs
    bool shift = false;
    int32_t keep = 0;
};

// One run's speculation / parallel settings (single values of the list flags).
struct SpecRun {
    SpecFlags flags;
    int32_t n_draft = 0, lookup = 0, parallel = 1;
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The raw text of the object member `key` of a JSON object (e.g. llm_model_info_json's "weights"),
// or "null"; strings inside may hold braces.
std::string json_member(const std::string &js, const char *key) {
    const std::string k = std::string("\"") + key + "\":";
    const size_t b = js.find(k);
    if (b == std::string::npos || b + k.size() >= js.size() || js[b + k.size()] != '{') return "null";
    int depth = 0;
    bool in_str = false;
    for (size_t i = b + k.size(); i < js.size(); ++i) {
        const char c = js[i];
        if (in_str) {
            i += c == '\\';  // the escaped character
            in_str = c != '"';
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{') {
            ++depth;
        } else if (c == '}' && --depth == 0) {
            return js.substr(b + k.size(), i + 1 - b - k.size());
        }
    }
    return "null";
}

int run_child(const std::string &model, int32_t threads, int32_t P, int32_t N, int32_t D, int32_t reps,
              int32_t residency, uint64_t budget, int32_t prefetch, int32_t page_cache, const CtxOptions &ctx,
              int32_t kv_k, int32_t kv_v, const SpecRun &spec, bool verify_sweep, uint64_t roof) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = threads;
    mp.residency = residency;
    mp.ram_budget_bytes = budget;
    mp.prefetch_depth = prefetch;
    mp.page_cache = page_cache;
    const double t0 = now_s();
    llm_model *m = nullptr;
    check(llm_model_load(model.c_str(), &mp, &m), "loading model");
    const double load_s = now_s() - t0;
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    // A --ctx smaller than the run is kept only when context shift is to be measured.
    const int32_t need = D + std::max(P, N + 1);
    sp.n_ctx = ctx.n_ctx <= 0 ? need : ctx.shift ? ctx.n_ctx : std::max(ctx.n_ctx, need);
    sp.context_shift = ctx.shift;
    sp.n_keep = ctx.keep;
    sp.n_threads = threads;
    sp.temperature = 0;
    sp.kv_type_k = kv_k;
    sp.kv_type_v = kv_v;
    static const int32_t kSweepK[] = {1, 2, 4, 8, 16, 32};
    if (verify_sweep) {
        sp.n_ctx = std::max(P, 1) + 32;
        sp.logits_all = true;  // a verify pass needs the logits of all K positions: the head runs K rows
    }
    llm_session *s = nullptr;
    check(llm_session_create(m, &sp, &s), "creating session");

    std::mt19937 rng(42);
    const int32_t nv = llm_model_n_vocab(m);
    std::vector<int32_t> prompt(std::max(P, 1)), context(D);
    prompt[0] = std::max(0, llm_model_token_bos(m));
    for (int32_t i = 1; i < P; ++i) prompt[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(nv));
    for (int32_t i = 0; i < D; ++i)
        context[i] = i == 0 ? prompt[0] : static_cast<int32_t>(rng() % static_cast<uint32_t>(nv));
    // The untimed context of depth D both tests start from (nothing at depth 0).
    auto start = [&](const char *what) {
        check(llm_session_reset(s), "reset");
        if (D > 0) check(llm_session_prefill(s, context.data(), context.size()), what);
    };

    if (verify_sweep) {
        // One pass over K tokens after the prompt, then back: what a speculative verify pass costs.
        check(llm_session_prefill(s, prompt.data(), prompt.size()), "prefill");
        const int32_t base = llm_session_n_past(s);
        const size_t nk = sizeof kSweepK / sizeof kSweepK[0];
        std::vector<std::vector<int32_t>> toks(nk);
        for (size_t i = 0; i < nk; ++i) {
            toks[i].resize(static_cast<size_t>(kSweepK[i]));
            for (int32_t &t : toks[i]) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(nv));
        }
        // Rounds over all K (the first a warm-up), so a slow spell of a loaded machine hits every K
        // alike rather than one K's repetitions.
        std::vector<std::vector<double>> times(nk);
        std::vector<uint64_t> bytes(nk, 0);
        for (int32_t r = 0; r <= reps; ++r) {
            for (size_t i = 0; i < nk; ++i) {
                const double t0 = now_s();
                check(llm_session_prefill(s, toks[i].data(), toks[i].size()), "prefill");
                const double dt = now_s() - t0;
                llm_stats last{};
                llm_stats_init(&last, LLM_STATS_VERSION);
                check(llm_session_stats(s, nullptr, &last), "stats");
                check(llm_session_truncate(s, base), "truncate");
                if (r == 0) continue;
                times[i].push_back(dt);
                bytes[i] += last.bytes_read;
            }
        }
        const double t1 = median(times[0]);
        for (size_t i = 0; i < nk; ++i) {
            const double med = median(times[i]);
            std::printf(
                "{\"k\":%d,\"seconds\":%.6f,\"ratio_vs_k1\":%.4f,\"bytes_read\":%llu,\"reps\":%d,"
                "\"residency\":\"%s\",\"prefetch\":%d,\"prompt_tokens\":%d}\n",
                kSweepK[i], med, t1 > 0 ? med / t1 : 0.0,
                static_cast<unsigned long long>(bytes[i] / static_cast<uint64_t>(reps)), reps,
                residency == LLM_RESIDENCY_RESIDENT   ? "resident"
                : residency == LLM_RESIDENCY_STREAMED ? "streamed"
                                                      : "budget",
                prefetch, P);
        }
        llm_session_free(s);
        llm_model_free(m);
        return 0;
    }

    // --parallel N: N - 1 more sessions advanced with s; speculation on each when asked for.
    std::vector<llm_session *> sessions = {s};
    for (int32_t i = 1; i < spec.parallel; ++i) {
        llm_session *o = nullptr;
        check(llm_session_create(m, &sp, &o), "creating session");
        sessions.push_back(o);
    }
    llm_model *draft = spec.n_draft > 0 ? load_draft(spec.flags, threads, prefetch) : nullptr;
    bool spec_on = false;
    for (llm_session *x : sessions) spec_on = set_speculation(x, draft, spec.n_draft, spec.lookup, spec.flags.p_min);
    llm_model_free(draft);
    uint64_t passes = 0, drafted = 0, accepted = 0;
    double dc_wall = 0;

    // As llama-bench does: the prefill test and the decode test are separate runs from a context of
    // depth D, so it only needs D + max(P, N + 1) positions.
    double pf_s = 0, dc_s = 0;
    uint64_t pf_bytes = 0, dc_bytes = 0, dc_calls = 0;
    double io_wait = 0;
    // --roof: the bandwidth after each decode repetition and that repetition's share of it. On a shared
    // host the read bandwidth moves by 2x within minutes, so a roof measured apart from the decode it
    // divides is not a roof.
    std::vector<double> roof_bw, roof_share;
    uint64_t peak_before_roof = 0;
    // The model's description: its weights' bytes per token here, its policy in force at the end.
    const std::string info = llm_model_info_json(m);
    const std::string weights = json_member(info, "weights");
    const double token_bytes = field(weights, "decode_read_bytes");
    std::unique_ptr<bench::ReadBuffer> roof_buf;  // made after the first repetition, then reused
    const int roof_threads =
        threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int32_t r = 0; r < reps; ++r) {
        llm_stats last{};
        llm_stats_init(&last, LLM_STATS_VERSION);
        if (P > 0) {
            start("context");
            check(llm_session_prefill(s, prompt.data(), prompt.size()), "prefill");
            check(llm_session_stats(s, nullptr, &last), "stats");
            pf_s += last.prefill_seconds;
            pf_bytes += last.bytes_read;
        }
        if (N > 0) {
            const size_t ns = sessions.size();
            std::vector<llm_stats> before(ns), after(ns);
            for (size_t k = 0; k < ns; ++k) {
                llm_session *x = sessions[k];
                check(llm_session_reset(x), "reset");
                if (D > 0) check(llm_session_prefill(x, context.data(), context.size()), "context");
                if (D == 0) check(llm_session_prefill(x, prompt.data(), 1), "prefill");
                llm_stats_init(&before[k], LLM_STATS_VERSION);
                llm_stats_init(&after[k], LLM_STATS_VERSION);
                check(llm_session_stats(x, &before[k], nullptr), "stats");
            }
            const double t0 = now_s();
            if (ns == 1) {
                for (int32_t i = 0; i < N; ++i) {
                    int32_t tok;
                    if (spec_on) {
                        // An end-of-generation token is handed out but not accepted: accept it, as
                        // the plain loop does, so both decode exactly N tokens.
                        const int32_t st = llm_session_next(s, &tok, nullptr, 0, nullptr);
                        if (st == LLM_DONE)
                            check(llm_session_accept(s, tok), "decode");
                        else
                            check(st, "decode");
                    } else {
                        check(llm_session_sample(s, &tok), "sample");
                        check(llm_session_accept(s, tok), "decode");
                    }
                }
            } else {
                std::vector<int32_t> toks(ns), sts(ns);
                for (int32_t i = 0; i < N; ++i) {
                    check(llm_session_next_batch(sessions.data(), static_cast<int32_t>(ns), toks.data(), sts.data()),
                          "batched decode");
                    ++passes;
                    for (size_t k = 0; k < ns; ++k) {
                        if (sts[k] == LLM_DONE) {
                            check(llm_session_accept(sessions[k], toks[k]), "decode");
                            ++passes;
                        } else if (sts[k] != LLM_OK) {
                            die(std::string("batched decode: session ") + std::to_string(k) + ": " +
                                llm_status_string(sts[k]) + ": " + llm_session_last_error(sessions[k]));
                        }
                    }
                }
            }
            const double rep_wall = now_s() - t0;
            dc_wall += rep_wall;
            for (size_t k = 0; k < ns; ++k) {
                check(llm_session_stats(sessions[k], &after[k], nullptr), "stats");
                if (k == 0) {
                    const double rep_s = after[k].decode_seconds - before[k].decode_seconds;
                    if (roof) {
                        if (!roof_buf) {
                            peak_before_roof = peak_rss_bytes();
                            roof_buf = std::make_unique<bench::ReadBuffer>(roof);
                        }
                        const double bw = roof_buf->bandwidth(roof_threads, 3);
                        // The same clock decode_tok_s uses: evaluation time, or the wall time when
                        // several sessions or speculation share the loop.
                        const double secs = ns > 1 || spec_on ? rep_wall : rep_s;
                        roof_bw.push_back(bw);
                        if (bw > 0 && secs > 0)
                            roof_share.push_back(static_cast<double>(N) * static_cast<double>(ns) / secs * token_bytes / bw);
                    }
                    dc_s += rep_s;
                    dc_bytes += after[k].bytes_read - before[k].bytes_read;
                    dc_calls += after[k].read_calls - before[k].read_calls;
                    io_wait += after[k].io_wait_seconds - before[k].io_wait_seconds;
                    if (ns == 1) passes += after[k].passes - before[k].passes;
                }
                drafted += after[k].drafted_tokens - before[k].drafted_tokens;
                accepted += after[k].accepted_tokens - before[k].accepted_tokens;
            }
        }
    }
    llm_memory_plan plan{};
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    check(llm_model_memory_plan(m, sp.n_ctx, &plan), "memory plan");
    const char *names[] = {"resident", "streamed", "budget"};
    // Decode speed is the library's evaluation time, as before, except where evaluation is not all
    // there is: with --parallel N it is the aggregate over the N sessions by the decode loop's wall
    // time, and with speculation the wall time too (drafting included whatever the counters count).
    // decode_wall_tok_s is the wall-time figure for every run, to compare across combinations.
    const double all_tokens = static_cast<double>(N) * reps * static_cast<double>(sessions.size());
    const double dc_wall_tok_s = dc_wall > 0 ? all_tokens / dc_wall : 0.0;
    const double dc_tok_s = sessions.size() > 1 || spec_on ? dc_wall_tok_s
                            : dc_s > 0                     ? static_cast<double>(N) * reps / dc_s
                                                           : 0.0;
    const double per_pass = passes ? all_tokens / static_cast<double>(passes) : 0.0;
    const double acceptance = drafted ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
    const char *cache_names[] = {"keep", "drop", "direct", "map"};
    // The policy in force: a host's llm_io maps nothing, a file system may refuse O_DIRECT.
    const size_t ip = info.find("\"page_cache\":\"");
    const std::string in_force = ip == std::string::npos ? "?" : info.substr(ip + 14, info.find('"', ip + 14) - ip - 14);
    const uint64_t cached = cached_bytes(model);
    // The session's own cache (its types and ring); the C plan counts the default types.
    const std::string sj = llm_session_stats_json(s);
    const size_t kp = sj.find("\"kv_cache_bytes\":");
    const uint64_t kv_bytes = kp == std::string::npos ? 0 : std::strtoull(sj.c_str() + kp + 17, nullptr, 10);
    const uint64_t predicted = plan.total_bytes - plan.kv_cache_bytes + kv_bytes;
    std::string roof_json;
    if (!roof_bw.empty()) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "\"decode_roof_bytes_s\":%.0f,\"decode_roof_share\":%.4f,\"decode_roof_shares\":[",
                      median(roof_bw), roof_share.empty() ? 0.0 : median(roof_share));
        roof_json = buf;
        for (size_t i = 0; i < roof_share.size(); ++i) {
            std::snprintf(buf, sizeof buf, "%s%.4f", i ? "," : "", roof_share[i]);
            roof_json += buf;
        }
        roof_json += "],";
    }
    std::printf(
        "{\"prefill_tok_s\":%.3f,\"decode_tok_s\":%.3f,\"load_s\":%.4f,\"peak_rss_bytes\":%llu,"
        "\"bytes_read\":%llu,\"prefill_bytes_read\":%llu,\"decode_bytes_per_token\":%.0f,"
        "\"read_calls_per_token\":%.2f,\"io_wait_s\":%.4f,\"residency\":\"%s\",\"prefetch\":%d,"
        "\"ram_budget_bytes\":%llu,\"predicted_peak_bytes\":%llu,\"n_resident_layers\":%u,"
        "\"n_layer\":%u,\"page_cache\":\"%s\",\"page_cache_in_force\":\"%s\",\"page_cache_bytes\":%llu,\"kv_type_k\":\"%s\","
        "\"kv_type_v\":\"%s\",\"kv_cache_bytes\":%llu,\"n_ctx\":%d,\"context_shifts\":%llu,"
        "\"passes\":%llu,\"tokens_per_pass\":%.4f,\"drafted\":%llu,\"accepted\":%llu,\"acceptance\":%.4f,"
        "\"parallel\":%d,\"n_draft\":%d,\"lookup\":%d,\"draft\":\"%s\",\"decode_wall_tok_s\":%.3f,%s"
        "\"weights\":%s}\n",
        pf_s > 0 ? static_cast<double>(P) * reps / pf_s : 0.0, dc_tok_s, load_s,
        static_cast<unsigned long long>(peak_before_roof ? peak_before_roof : peak_rss_bytes()),
        static_cast<unsigned long long>((pf_bytes + dc_bytes) / reps), static_cast<unsigned long long>(pf_bytes / reps),
        N > 0 ? static_cast<double>(dc_bytes) / reps / N : 0.0, N > 0 ? static_cast<double>(dc_calls) / reps / N : 0.0,
        io_wait / reps, names[residency], prefetch, static_cast<unsigned long long>(budget),
        static_cast<unsigned long long>(predicted), plan.n_resident_layers, plan.n_layer, cache_names[page_cache], in_force.c_str(),
        static_cast<unsigned long long>(cached), kv_type_label(kv_k), kv_type_label(kv_v),
        static_cast<unsigned long long>(kv_bytes), sp.n_ctx,
        static_cast<unsigned long long>(field(llm_session_stats_json(s), "context_shifts")),
        static_cast<unsigned long long>(passes / static_cast<uint64_t>(reps)), per_pass,
        static_cast<unsigned long long>(drafted / static_cast<uint64_t>(reps)),
        static_cast<unsigned long long>(accepted / static_cast<uint64_t>(reps)), acceptance, spec.parallel,
        spec_on ? spec.n_draft : 0, spec_on ? spec.lookup : 0,
        json_escape(spec_on ? spec.flags.draft : std::string()).c_str(), dc_wall_tok_s, roof_json.c_str(),
        weights.c_str());
    for (size_t k = 1; k < sessions.size(); ++k) llm_session_free(sessions[k]);
    llm_session_free(s);
    llm_model_free(m);
    return 0;
}

// The two ends of the RAM dial: the smallest budget that runs the model (the library's minimum, which
// grows with the prefetch depth and depends on the page-cache policy: map rounds pieces to its
// alignment) and the one that keeps every block and the LM head resident. The second is only
// reported after a resident load, hence a child of its own.
int run_dial_ends(const std::string &model, int32_t prefetch, int32_t page_cache) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.residency = LLM_RESIDENCY_RESIDENT;
    mp.prefetch_depth = prefetch;
    mp.page_cache = page_cache;
    llm_model *m = nullptr;
    check(llm_model_load(model.c_str(), &mp, &m), "loading model");
    llm_memory_plan plan{};
    plan.version = LLM_MEMORY_PLAN_VERSION;
    check(llm_model_memory_plan(m, 0, &plan), "memory plan");
    std::printf("{\"minimum_weight_bytes\":%llu,\"full_weight_bytes\":%llu}\n",
                static_cast<unsigned long long>(plan.minimum_weight_bytes),
                static_cast<unsigned long long>(plan.resident_block_bytes + plan.lm_head_bytes));
    llm_model_free(m);
    return 0;
}

// --- parent ---------------------------------------------------------------------------------------

// Sequential read bandwidth of the file with large preads (warm page cache after the first pass).
double read_bandwidth(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return 0;
    std::vector<char> buf(16 << 20);
    double best = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const double t0 = now_s();
        uint64_t total = 0;
        ssize_t got;
        while ((got = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(total))) > 0)
            total += static_cast<uint64_t>(got);
        const double dt = now_s() - t0;
        if (dt > 0) best = std::max(best, static_cast<double>(total) / dt);
    }
    ::close(fd);
    return best;
}

std::string run_capture(const std::vector<std::string> &args) {
    int pipefd[2];
    if (pipe(pipefd) != 0) die("pipe failed");
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        close(pipefd[1]);
        std::vector<char *> argv;
        for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        _exit(127);
    }
    close(pipefd[1]);
    std::string out;
    char b[4096];
    ssize_t n;
    while ((n = read(pipefd[0], b, sizeof b)) > 0) out.append(b, static_cast<size_t>(n));
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
    return out;
}

std::vector<std::string> split_lines(const std::string &s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p < s.size()) {
        size_t e = s.find('\n', p);
        if (e == std::string::npos) e = s.size();
        if (e > p) out.push_back(s.substr(p, e - p));
        p = e + 1;
    }
    return out;
}

int32_t num_or_zero(const std::string &s) { return static_cast<int32_t>(std::strtol(s.c_str(), nullptr, 10)); }

double field(const std::string &js, const char *key) {
    size_t p = js.find(std::string("\"") + key + "\":");
    if (p == std::string::npos) return 0;
    p += std::strlen(key) + 3;
    if (js[p] == '"') ++p;
    return std::strtod(js.c_str() + p, nullptr);
}

}  // namespace

int main(int argc, char **argv) {
    std::string model, synth, type, out_path;
    std::string threads_s = "0", residency_s = "resident", prefetch_s = "1", cache_s = "keep";
    int32_t P = 512, N = 128, D = 0, reps = 1;
    uint64_t budget = 0;
    int32_t sweep = 0;
    CtxOptions ctx;
    bool json = false, child = false, dial_ends = false, write_only = false, residency_given = false;
    std::string kv_k = "f16", kv_v = "f16", from_type;
    bool verify_sweep = false, membw = false, roof = false;
    uint64_t roof_bytes = uint64_t{1} << 30;
    SpecFlags spec;
    for (int i = 1; i < argc; ++i) {
        std::string f = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        auto num = [&](const std::string &v) {
            char *end = nullptr;
            long x = std::strtol(v.c_str(), &end, 10);
            if (!end || *end || end == v.c_str() || x < 0) die("bad number for " + f + ": '" + v + "'");
            return static_cast<int32_t>(x);
        };
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            std::fputs(kSpecUsage, stdout);
            std::printf("shapes: %s\ntypes: %s\n", shape_names().c_str(), synth_type_names().c_str());
            return 0;
        } else if (f == "-m")
            model = val();
        else if (f == "--synth")
            synth = val();
        else if (f == "--type")
            type = val();
        else if (f == "-o")
            out_path = val();
        else if (f == "-t")
            threads_s = val();
        else if (f == "-p")
            P = num(val());
        else if (f == "-n")
            N = num(val());
        else if (f == "-d")
            D = num(val());
        else if (f == "-r")
            reps = std::max(1, num(val()));
        else if (f == "--residency")
            residency_s = val(), residency_given = true;
        else if (f == "--ram-budget") {
            std::string v = val();
            if (!(budget = parse_size(v))) die("bad size for --ram-budget: '" + v + "'");
        } else if (f == "--prefetch")
            prefetch_s = val();
        else if (f == "--page-cache")
            cache_s = val();
        else if (f == "--sweep-budget") {
            if ((sweep = num(val())) < 2) die("--sweep-budget needs at least 2 steps (the minimum and all resident)");
        } else if (f == "--ctx")
            ctx.n_ctx = num(val());
        else if (f == "--context-shift")
            ctx.shift = true;
        else if (f == "--keep")
            ctx.keep = num(val());
        else if (f == "--kv-type" || f == "--kv-type-k" || f == "--kv-type-v") {
            const std::string t = val();
            if (parse_kv_type(t) < 0) die(f + " takes f32, f16 or q8_0");
            if (f != "--kv-type-v") kv_k = t;
            if (f != "--kv-type-k") kv_v = t;
        } else if (f == "--ignore-eos") {
        } else if (f == "--json")
            json = true;
        else if (f == "--write-only")
            write_only = true;
        else if (f == "--child")
            child = true;
        else if (f == "--dial-ends")
            dial_ends = true;
        else if (f == "--from-type")
            from_type = val();
        else if (f == "--verify-sweep")
            verify_sweep = true;
        else if (f == "--membw")
            membw = true;
        else if (f == "--roof")
            roof = true;
        else if (f == "--roof-bytes") {
            std::string v = val();
            // Well past any last-level cache, or the roof is the cache's.
            if ((roof_bytes = parse_size(v)) < (uint64_t{16} << 20)) die("--roof-bytes takes a size of 16M or more: '" + v + "'");
        }
        else if (parse_spec_flag(f, val, spec))
            continue;
        else
            die("unknown flag '" + f + "' (see --help)");
    }

    if (dial_ends) return run_dial_ends(model, num_or_zero(prefetch_s), parse_page_cache(cache_s));
    if (membw) {
        // The memory roof alone; --roof measures it beside each decode repetition.
        const int t = num_or_zero(threads_s) > 0 ? num_or_zero(threads_s)
                                                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        std::printf("{\"ram_read_bandwidth_bytes_s\":%.0f,\"threads\":%d}\n", bench::ram_read_bandwidth(t), t);
        return 0;
    }
    if (child) {
        return run_child(model, num_or_zero(threads_s), P, N, D, reps, parse_residency(residency_s), budget,
                         static_cast<int32_t>(std::strtol(prefetch_s.c_str(), nullptr, 10)), parse_page_cache(cache_s),
                         ctx, parse_kv_type(kv_k), parse_kv_type(kv_v),
                         SpecRun{spec, single("--draft-n", spec.n_draft), single("--lookup", spec.lookup),
                                 single("--parallel", spec.parallel)},
                         verify_sweep, roof ? roof_bytes : 0);
    }

    std::string type_label = type;
    if (!synth.empty()) {
        const SynthShape *sh = find_shape(synth);
        if (!sh) die("unknown shape '" + synth + "' (known: " + shape_names() + ")");
        if (!is_synth_type(type)) die("--synth needs --type, one of: " + synth_type_names());
        if (!from_type.empty() && !is_synth_type(from_type)) die("--from-type takes one of: " + synth_type_names());
        if (out_path.empty())
            out_path =
                "/tmp/llm-bench-" + synth + "-" + type + (from_type.empty() ? "" : "-from-" + from_type) + ".gguf";
        struct stat st {};
        if (write_only || stat(out_path.c_str(), &st) != 0) {
            std::fprintf(stderr, "writing %s ...\n", out_path.c_str());
            try {
                write_synth_model(*sh, type, out_path, 1, from_type);
            } catch (const std::exception &e) {
                die(std::string("writing the synthetic model: ") + e.what());
            }
        }
        if (write_only) return 0;
        model = out_path;
    }
    if (model.empty()) die("give -m MODEL.gguf or --synth SHAPE --type TYPE (see --help)");
    if (type_label.empty()) type_label = "file";
    if (sweep && (residency_given || budget)) {
        die("--sweep-budget chooses the budgets itself: drop --residency / --ram-budget");
    }

    const double bw = read_bandwidth(model);
    struct stat st {};
    stat(model.c_str(), &st);
    if (!json) {
        std::printf("model %s (%.1f MiB), read bandwidth %.2f GB/s\n", model.c_str(), st.st_size / 1048576.0, bw / 1e9);
        if (verify_sweep)
            std::printf("%-6s %-9s %-8s %-10s %-6s %4s %12s %10s %14s\n", "thr", "residency", "prefetch", "budget",
                        "cache", "K", "s/pass", "vs K=1", "MiB read");
        else
            std::printf("%-6s %-9s %-8s %-10s %-6s %10s %10s %8s %10s %12s %8s %10s %3s %6s %4s %8s %6s\n", "thr",
                        "residency", "prefetch", "budget", "cache", "pp tok/s", "tg tok/s", "load s", "peak MiB",
                        "MiB/token", "io-bound", "cached MiB", "K", "lookup", "par", "tok/pass", "accept");
    }
    // Every configuration to run, in order; a sweep is one run of budgets per thread count, prefetch
    // depth and page-cache policy.
    struct Config {
        std::string t, res, pf, pc;
        uint64_t budget;
        int32_t step;  // index along --sweep-budget, -1 outside a sweep
        int32_t n_draft = 0, lookup = 0, parallel = 1;
    };
    std::vector<Config> configs;
    if (sweep) residency_s = "budget";
    for (const std::string &t : split(threads_s))
        for (const std::string &res : split(residency_s))
            for (const std::string &pf : split(prefetch_s))
                for (const std::string &pc : split(cache_s)) {
                    if (parse_residency(res) < 0) die("unknown residency '" + res + "'");
                    if (parse_page_cache(pc) < 0) die("unknown page cache policy '" + pc + "' (keep, drop, direct, map)");
                    if (!sweep) {
                        if (res == "budget" && budget == 0) die("budget residency needs --ram-budget SIZE");
                        configs.push_back({t, res, pf, pc, budget, -1});
                        continue;
                    }
                    const std::string ends = run_capture({"llm-bench", "--dial-ends", "-m", model, "--prefetch", pf, "--page-cache", pc});
                    const uint64_t lo = static_cast<uint64_t>(field(ends, "minimum_weight_bytes"));
                    const uint64_t hi = static_cast<uint64_t>(field(ends, "full_weight_bytes"));
                    if (ends.empty() || lo == 0 || hi < lo) die("could not read the model's minimum and full budgets");
                    for (int32_t i = 0; i < sweep; ++i) {
                        const double f = static_cast<double>(i) / (sweep - 1);
                        const uint64_t b =
                            i == sweep - 1 ? hi : lo + static_cast<uint64_t>(static_cast<double>(hi - lo) * f);
                        configs.push_back({t, res, pf, pc, b, i});
                    }
                }

    // One run per combination of --draft-n, --lookup and --parallel (not for the verify sweep, which
    // measures passes themselves).
    if (!verify_sweep) {
        std::vector<Config> expanded;
        for (const Config &c : configs)
            for (int32_t k : parse_int_list("--draft-n", spec.n_draft))
                for (int32_t l : parse_int_list("--lookup", spec.lookup))
                    for (int32_t par : parse_int_list("--parallel", spec.parallel)) {
                        Config x = c;
                        x.n_draft = k;
                        x.lookup = l;
                        x.parallel = par;
                        expanded.push_back(x);
                    }
        configs = expanded;
    }

    int failures = 0;
    for (const Config &c : configs) {
        std::vector<std::string> args = {"llm-bench",    "--child",
                                         "-m",           model,
                                         "-t",           c.t,
                                         "-p",           std::to_string(P),
                                         "-n",           std::to_string(N),
                                         "-d",           std::to_string(D),
                                         "-r",           std::to_string(reps),
                                         "--residency",  c.res,
                                         "--prefetch",   c.pf,
                                         "--page-cache", c.pc,
                                         "--kv-type-k",  kv_k,
                                         "--kv-type-v",  kv_v};
        if (c.res == "budget") args.insert(args.end(), {"--ram-budget", std::to_string(c.budget)});
        if (ctx.n_ctx > 0) args.insert(args.end(), {"--ctx", std::to_string(ctx.n_ctx)});
        if (ctx.shift) args.insert(args.end(), {"--context-shift", "--keep", std::to_string(ctx.keep)});
        if (verify_sweep) args.push_back("--verify-sweep");
        if (roof) args.insert(args.end(), {"--roof", "--roof-bytes", std::to_string(roof_bytes)});
        args.insert(args.end(),
                    {"--draft-n", std::to_string(c.n_draft), "--lookup", std::to_string(c.lookup), "--parallel",
                     std::to_string(c.parallel), "--draft-p-min", std::to_string(spec.p_min)});
        if (!spec.draft.empty()) {
            const char *dres[] = {"resident", "streamed", "budget"};
            args.insert(args.end(), {"--draft", spec.draft, "--draft-residency", dres[spec.draft_residency]});
            if (spec.draft_budget) args.insert(args.end(), {"--draft-ram-budget", std::to_string(spec.draft_budget)});
        }
        std::string out = run_capture(args);
        if (out.empty()) {
            std::fprintf(stderr,
                         "configuration threads=%s residency=%s budget=%llu prefetch=%s page-cache=%s draft-n=%d "
                         "lookup=%d parallel=%d failed\n",
                         c.t.c_str(), c.res.c_str(), static_cast<unsigned long long>(c.budget), c.pf.c_str(),
                         c.pc.c_str(), c.n_draft, c.lookup, c.parallel);
            ++failures;
            continue;
        }
        while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
        const int32_t threads = c.t == "0" ? 0 : std::atoi(c.t.c_str());
        if (verify_sweep) {
            for (const std::string &row : split_lines(out)) {
                if (json) {
                    std::printf(
                        "%s,\"model\":\"%s\",\"type\":\"%s\",\"threads\":%d,\"page_cache\":\"%s\",\"ram_budget_bytes\":"
                        "%llu}\n",
                        row.substr(0, row.size() - 1).c_str(), json_escape(model).c_str(),
                        json_escape(type_label).c_str(), threads, c.pc.c_str(),
                        static_cast<unsigned long long>(c.budget));
                } else {
                    std::printf("%-6s %-9s %-8s %-10s %-6s %4d %12.5f %10.3f %14.1f\n", c.t.c_str(), c.res.c_str(),
                                c.pf.c_str(),
                                c.res == "budget" ? std::to_string(c.budget >> 20).append("M").c_str() : "-",
                                c.pc.c_str(), static_cast<int>(field(row, "k")), field(row, "seconds"),
                                field(row, "ratio_vs_k1"), field(row, "bytes_read") / 1048576.0);
                }
            }
            std::fflush(stdout);
            continue;
        }
        const double bpt = field(out, "decode_bytes_per_token"), tg = field(out, "decode_tok_s");
        // The I/O bound of streamed decode: tokens/s if every byte read came at full bandwidth.
        const double bound = bpt > 0 ? bw / bpt : 0;
        if (json) {
            out.pop_back();  // the closing brace
            std::string step;
            if (c.step >= 0) step = ",\"step\":" + std::to_string(c.step) + ",\"n_steps\":" + std::to_string(sweep);
            std::printf(
                "%s,\"model\":\"%s\",\"type\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,"
                "\"decode_tokens\":%d,\"depth\":%d,\"reps\":%d,\"file_bytes\":%lld,\"read_bandwidth_bytes_s\":%.0f,"
                "\"io_bound_tok_s\":%.3f,\"fraction_of_io_bound\":%.3f%s}\n",
                out.c_str(), json_escape(model).c_str(), json_escape(type_label).c_str(), threads, P, N, D, reps,
                static_cast<long long>(st.st_size), bw, bound, bound > 0 ? tg / bound : 0.0, step.c_str());
        } else {
            char frac[32] = "-";
            if (bound > 0) std::snprintf(frac, sizeof frac, "%.2f", tg / bound);
            std::printf(
                "%-6s %-9s %-8s %-10s %-6s %10.2f %10.2f %8.3f %10.1f %12.2f %8s %10.1f %3d %6d %4d %8.2f %6.2f\n",
                c.t.c_str(), c.res.c_str(), c.pf.c_str(),
                c.res == "budget" ? std::to_string(c.budget >> 20).append("M").c_str() : "-", c.pc.c_str(),
                field(out, "prefill_tok_s"), tg, field(out, "load_s"), field(out, "peak_rss_bytes") / 1048576.0,
                bpt / 1048576.0, frac, field(out, "page_cache_bytes") / 1048576.0,
                static_cast<int>(field(out, "n_draft")), static_cast<int>(field(out, "lookup")), c.parallel,
                field(out, "tokens_per_pass"), field(out, "acceptance"));
        }
        std::fflush(stdout);
    }
    return failures ? 1 : 0;
}
