// Small helpers shared by the llm-* tools. They use only the public C API (llm.h); llm-bench and
// llm-template also reach into the core, each says why in its opening comment.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "llm.h"

namespace tools {

// Peak resident set size (VmHWM) of this process, in bytes; 0 if unknown.
inline uint64_t peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024ull;
    }
    return 0;
}

// A one-line progress bar on stderr, only when stderr is a terminal.
inline bool progress_bar(float f, void *) {
    static bool tty = isatty(2);
    if (!tty) return true;
    int filled = static_cast<int>(f * 30.0f);
    std::fprintf(stderr, "\rloading [%.*s%*s] %3d%%", filled, "==============================", 30 - filled, "",
                 static_cast<int>(f * 100.0f));
    if (f >= 1.0f) std::fprintf(stderr, "\r%*s\r", 50, "");
    std::fflush(stderr);
    return true;
}

[[noreturn]] inline void die(const std::string &msg) {
    std::fprintf(stderr, "error: %s\n", msg.c_str());
    std::exit(1);
}

inline void check(int32_t st, const char *what) {
    if (st < 0) die(std::string(what) + ": " + llm_status_string(st) + ": " + llm_last_error());
}

// text's tokens through llm_tokenize (add_bos: BOS as the vocabulary dictates; with parse_special,
// a text that begins with the BOS text, as a chat template may, still starts with one BOS).
inline std::vector<int32_t> tokenize(const llm_model *m, const std::string &text, bool add_bos, bool parse_special) {
    int32_t n = 0;
    int32_t st = llm_tokenize(m, text.data(), text.size(), add_bos, parse_special, nullptr, 0, &n);
    if (st != LLM_ERR_BUFFER_TOO_SMALL) check(st, "tokenizing");
    std::vector<int32_t> ids(static_cast<size_t>(n));
    check(llm_tokenize(m, text.data(), text.size(), add_bos, parse_special, ids.data(), n, &n), "tokenizing");
    return ids;
}

// The whole of a file; false if it cannot be read.
inline bool read_file(const std::string &path, std::string *out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    return !f.bad();
}

// "123", "64M", "1.5G", "512K" -> bytes (binary units). 0 on a malformed value.
inline uint64_t parse_size(const std::string &s) {
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (!end || end == s.c_str() || v < 0) return 0;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        ++end;
        break;
    case 'm':
    case 'M':
        mul = 1048576.0;
        ++end;
        break;
    case 'g':
    case 'G':
        mul = 1073741824.0;
        ++end;
        break;
    case 't':
    case 'T':
        mul = 1099511627776.0;
        ++end;
        break;
    default: break;
    }
    if (*end == 'i' || *end == 'B') ++end;
    if (*end == 'B') ++end;
    if (*end) return 0;
    return static_cast<uint64_t>(v * mul);
}

// A flag's numeric value; dies naming the flag when it is not a number.
inline double parse_number(const std::string &flag, const char *v) {
    char *end = nullptr;
    const double d = std::strtod(v, &end);
    if (!end || *end || end == v) die("bad number for " + flag + ": '" + v + "'");
    return d;
}

// --residency NAME -> LLM_RESIDENCY_*; -1 if unknown.
inline int32_t parse_residency(const std::string &s) {
    if (s == "resident") return LLM_RESIDENCY_RESIDENT;
    if (s == "streamed") return LLM_RESIDENCY_STREAMED;
    if (s == "budget") return LLM_RESIDENCY_BUDGET;
    return -1;
}

inline int32_t parse_page_cache(const std::string &s) {
    if (s == "keep") return LLM_PAGE_CACHE_KEEP;
    if (s == "drop") return LLM_PAGE_CACHE_DROP;
    if (s == "direct") return LLM_PAGE_CACHE_DIRECT;
    if (s == "map") return LLM_PAGE_CACHE_MAP;
    return -1;
}

// --kv-type NAME -> LLM_KV_*; -1 if unknown.
inline int32_t parse_kv_type(const std::string &s) {
    if (s == "f32") return LLM_KV_F32;
    if (s == "f16") return LLM_KV_F16;
    if (s == "q8_0") return LLM_KV_Q8_0;
    return -1;
}

inline const char *kv_type_label(int32_t t) { return t == LLM_KV_F32 ? "f32" : t == LLM_KV_F16 ? "f16" : "q8_0"; }

// The sampling and KV-cache flags llm-run and llm-chat share, into sp. val() takes the flag's value.
// False if f is not one of them.
template <class Val>
bool parse_session_flag(const std::string &f, Val &&val, llm_session_params &sp) {
    if (f == "--temp")
        sp.temperature = static_cast<float>(parse_number(f, val()));
    else if (f == "--top-k")
        sp.top_k = static_cast<int32_t>(parse_number(f, val()));
    else if (f == "--top-p")
        sp.top_p = static_cast<float>(parse_number(f, val()));
    else if (f == "--min-p")
        sp.min_p = static_cast<float>(parse_number(f, val()));
    else if (f == "--repeat-penalty")
        sp.repeat_penalty = static_cast<float>(parse_number(f, val()));
    else if (f == "--repeat-last-n")
        sp.repeat_last_n = static_cast<int32_t>(parse_number(f, val()));
    else if (f == "--presence-penalty")
        sp.presence_penalty = static_cast<float>(parse_number(f, val()));
    else if (f == "--frequency-penalty")
        sp.frequency_penalty = static_cast<float>(parse_number(f, val()));
    else if (f == "--seed")
        sp.seed = static_cast<uint64_t>(parse_number(f, val()));
    else if (f == "--kv-type" || f == "--kv-type-k" || f == "--kv-type-v") {
        const int32_t t = parse_kv_type(val());
        if (t < 0) die(f + " takes f32, f16 or q8_0");
        if (f != "--kv-type-v") sp.kv_type_k = t;
        if (f != "--kv-type-k") sp.kv_type_v = t;
    } else
        return false;
    return true;
}

// --residency and --ram-budget (which implies budget). False if f is neither.
template <class Val>
bool parse_residency_flag(const std::string &f, Val &&val, int32_t &residency, uint64_t &budget) {
    if (f == "--residency") {
        residency = parse_residency(val());
        if (residency < 0) die("--residency takes resident, streamed or budget");
    } else if (f == "--ram-budget") {
        const std::string v = val();
        budget = parse_size(v);
        if (budget == 0) die("bad size for --ram-budget: '" + v + "' (e.g. 64M, 1.5G)");
        residency = LLM_RESIDENCY_BUDGET;
    } else
        return false;
    return true;
}

// More than one token per pass (llm.h 0.4): the flags llm-run and llm-bench share. Values are kept
// as written, since llm-bench takes comma lists of --draft-n, --lookup and --parallel (one run per
// combination) where llm-run takes one number (single() below).
struct SpecFlags {
    std::string draft;                                 // --draft MODEL ("" none)
    int32_t draft_residency = LLM_RESIDENCY_RESIDENT;  // --draft-residency
    uint64_t draft_budget = 0;                         // --draft-ram-budget (implies budget)
    std::string n_draft = "8", lookup = "0", parallel = "1";
    float p_min = 0.0f;  // --draft-p-min
    bool n_draft_given = false;
};

inline const char *kSpecUsage =
    "  --draft MODEL        speculative decoding with MODEL proposing tokens (same vocabulary)\n"
    "  --draft-residency M  resident (default) | streamed | budget, for the draft model\n"
    "  --draft-ram-budget SIZE  the draft's weight RAM in budget mode (implies budget)\n"
    "  --draft-n K          most tokens proposed per pass, 1..64 (default 8)\n"
    "  --lookup N           prompt lookup: propose what followed the last N-gram earlier in the\n"
    "                       context (0 = off, default)\n"
    "  --draft-p-min P      the draft stops proposing below this probability (default 0: always K)\n"
    "  --parallel N         N sessions of the same prompt advanced together, one token each per\n"
    "                       pass (llm_session_next_batch; speculation is not used there) (default 1)\n";

// A comma list of non-negative integers ("0,8"); dies naming the flag on anything else.
inline std::vector<int32_t> parse_int_list(const std::string &flag, const std::string &s) {
    std::vector<int32_t> out;
    size_t p = 0;
    while (p <= s.size()) {
        const size_t c = s.find(',', p);
        const std::string item = s.substr(p, c == std::string::npos ? std::string::npos : c - p);
        const double v = parse_number(flag, item.c_str());
        if (v < 0 || v != static_cast<double>(static_cast<int32_t>(v)))
            die("bad value for " + flag + ": '" + item + "'");
        out.push_back(static_cast<int32_t>(v));
        if (c == std::string::npos) break;
        p = c + 1;
    }
    return out;
}

// The one value of a flag that llm-run does not take as a list.
inline int32_t single(const std::string &flag, const std::string &s) {
    const std::vector<int32_t> v = parse_int_list(flag, s);
    if (v.size() != 1) die(flag + " takes one number here (lists are for llm-bench)");
    return v[0];
}

// False if f is not one of the speculation / parallel flags.
template <class Val>
bool parse_spec_flag(const std::string &f, Val &&val, SpecFlags &sf) {
    if (f == "--draft")
        sf.draft = val();
    else if (f == "--draft-residency") {
        sf.draft_residency = parse_residency(val());
        if (sf.draft_residency < 0) die("--draft-residency takes resident, streamed or budget");
    } else if (f == "--draft-ram-budget") {
        const std::string v = val();
        if (!(sf.draft_budget = parse_size(v))) die("bad size for --draft-ram-budget: '" + v + "' (e.g. 64M)");
        sf.draft_residency = LLM_RESIDENCY_BUDGET;
    } else if (f == "--draft-n") {
        sf.n_draft = val();
        sf.n_draft_given = true;
        parse_int_list(f, sf.n_draft);
    } else if (f == "--lookup") {
        sf.lookup = val();
        parse_int_list(f, sf.lookup);
    } else if (f == "--draft-p-min") {
        const std::string v = val();
        sf.p_min = static_cast<float>(parse_number(f, v.c_str()));
        if (sf.p_min < 0 || sf.p_min > 1) die("--draft-p-min takes a probability in [0, 1]");
    } else if (f == "--parallel") {
        sf.parallel = val();
        for (int32_t n : parse_int_list(f, sf.parallel))
            if (n < 1) die("--parallel takes N >= 1");
    } else
        return false;
    return true;
}

// Loads sf's draft model (nullptr when there is none) with the target's threads and prefetch depth.
inline llm_model *load_draft(const SpecFlags &sf, int32_t threads, int32_t prefetch) {
    if (sf.draft.empty()) return nullptr;
    if (sf.draft_residency == LLM_RESIDENCY_BUDGET && sf.draft_budget == 0)
        die("--draft-residency budget needs --draft-ram-budget SIZE");
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = threads;
    mp.residency = sf.draft_residency;
    mp.ram_budget_bytes = sf.draft_budget;
    mp.prefetch_depth = prefetch;
    llm_model *m = nullptr;
    check(llm_model_load(sf.draft.c_str(), &mp, &m), "loading the draft model");
    return m;
}

// Turns speculation on for s when there is something to propose with (a draft with n_draft > 0, or
// lookup > 0); false (and nothing set) otherwise. n_draft 0 means off, as in llm-bench's --draft-n 0.
// A library without speculation says LLM_ERR_UNSUPPORTED: the message names it ("speculation:
// unsupported: ..."), which the multi_pass_tools test recognises.
inline bool set_speculation(llm_session *s, llm_model *draft, int32_t n_draft, int32_t lookup, float p_min) {
    if (n_draft <= 0 || (!draft && lookup <= 0)) return false;
    llm_speculation_params p;
    check(llm_speculation_params_init(&p, LLM_SPECULATION_PARAMS_VERSION), "speculation params");
    p.draft = draft;
    p.n_draft = n_draft;
    p.lookup_ngram = lookup;
    p.draft_p_min = p_min;
    check(llm_session_set_speculation(s, &p), "speculation");
    return true;
}

// The most likely token that does not end generation (--ignore-eos): llama.cpp's --ignore-eos
// sets the end-of-generation logits to -inf, so the sampler never sees them. With greedy sampling
// this is that; with other settings we take the argmax too, so the run is a fixed-length greedy
// continuation past an EOG (soak and benchmark runs, not text quality).
inline int32_t best_non_eog(const llm_model *m, const float *logits, int32_t n_vocab) {
    int32_t best = -1;
    for (int32_t t = 0; t < n_vocab; ++t)
        if (!llm_model_token_is_eog(m, t) && (best < 0 || logits[t] > logits[best])) best = t;
    return best;
}

// s with every ill-formed UTF-8 sequence replaced by U+FFFD, one per maximal invalid subpart (as the
// Unicode standard recommends). Generated text can end inside a character, or hold byte tokens that
// never form one; JSON must be valid UTF-8 all the same.
inline std::string utf8_repair(const std::string &s) {
    std::string o;
    o.reserve(s.size());
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = p[i];
        if (c < 0x80) {
            o += static_cast<char>(c);
            ++i;
            continue;
        }
        // Length and the allowed range of the second byte (excluding overlongs, surrogates, > U+10FFFF).
        int len = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        size_t k = 1;
        if (len > 0) {
            for (; k < static_cast<size_t>(len) && i + k < n; ++k) {
                const unsigned char b = p[i + k];
                if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
            }
        }
        if (len > 0 && k == static_cast<size_t>(len)) {
            o.append(s, i, k);
        } else {
            o += "\xEF\xBF\xBD";
        }
        i += k;
    }
    return o;
}

// A JSON string body for s; ill-formed UTF-8 becomes U+FFFD (utf8_repair).
inline std::string json_escape(const std::string &raw) {
    const std::string s = utf8_repair(raw);
    std::string o;
    for (unsigned char c : s) {
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\r': o += "\\r"; break;
        case '\t': o += "\\t"; break;
        default:
            if (c < 0x20) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", c);
                o += b;
            } else {
                o += static_cast<char>(c);
            }
        }
    }
    return o;
}

}  // namespace tools
