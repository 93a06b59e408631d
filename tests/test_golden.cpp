// Golden tests: our logits and greedy continuations against llama.cpp's, per fixtures/README.md.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm.h"
#include "test_files.h"

namespace {

const std::string kShared = LLM_SHARED_DIR;

nlohmann::json read_json(const std::string &path) {
    std::ifstream f(path);
    REQUIRE(f.good());
    return nlohmann::json::parse(f);
}

std::vector<float> read_f32(const std::string &path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    REQUIRE(f.good());
    std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
    f.seekg(0);
    f.read(reinterpret_cast<char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    return v;
}

struct Golden {
    std::string stem;   // e.g. golden/llama.q8_0, relative to dir
    std::string model;  // path relative to dir
    std::string prompt;
    nlohmann::json tol;
    int32_t n_ctx = 0;  // 0: the model's own; else the entry's llm_run_args `--ctx N`
    int32_t residency = LLM_RESIDENCY_RESIDENT;
    int32_t kv_type = LLM_KV_F32;   // the entry's kv_type: the goldens' cache, F32 unless it says f16
    std::string dir = "fixtures/";  // its index's folder under the shared dir
    // Each golden runs resident and streamed (the low-bit ones under a budget too); a split model
    // shares its unsplit file's stem.
    std::string name() const {
        std::string n = dir == "fixtures/" ? stem : dir.substr(9) + stem;
        if (model.rfind("split/", 0) == 0) n += " (split)";
        if (residency == LLM_RESIDENCY_STREAMED) n += " (streamed)";
        if (residency == LLM_RESIDENCY_BUDGET) n += " (budget)";
        if (kv_type == LLM_KV_Q8_0) n += " (kv q8_0)";
        return n;
    }
};

int32_t ctx_arg(const nlohmann::json &g) {
    if (!g.contains("llm_run_args")) return 0;
    const auto &a = g["llm_run_args"];
    for (size_t i = 0; i + 1 < a.size(); ++i)
        if (a[i] == "--ctx") return std::stoi(a[i + 1].get<std::string>());
    FAIL("unhandled llm_run_args " << a.dump());
    return 0;
}

// Appends the goldens of <dir>index.json (paths in it are relative to dir); `budget`: each also
// under a RAM budget that keeps some of its blocks resident and streams the others (partial_budget).
// `archs`: if not empty, only the entries of those architectures.
void add_goldens(std::vector<Golden> &out, const std::string &dir, bool budget = false,
                 const std::vector<std::string> &archs = {}) {
    nlohmann::json idx = read_json(kShared + "/" + dir + "index.json");
    for (const auto &g : idx["goldens"]) {
        std::string arch = g["arch"];
        if (!archs.empty() && std::find(archs.begin(), archs.end(), arch) == archs.end()) continue;
        if (arch == "stories260K" || g["golden"].get<std::string>().find("stories260K") != std::string::npos) {
            out.push_back({g["golden"], g["model"], idx["stories260K"]["prompt"], g["tolerance"]});
        } else {
            // An entry may carry its own prompt (qwen35.f32.long).
            out.push_back({g["golden"], g["model"], g.value("prompt", idx["prompt"].get<std::string>()), g["tolerance"],
                           ctx_arg(g)});
        }
        // llama.cpp's F16 cache, run with ours (which rounds q and the probabilities to f16 as
        // llama.cpp's F16 products do), holds at the f32 class, not just at the index's own looser
        // one: an f16 rounding turns a 1-ulp difference upstream into an f16 ulp, so this checks
        // that every op of a decode step gives llama.cpp's bits (kernels/kernel_isa.h, rope.cpp);
        // measured max 5.7e-6, mean 2.6e-7 (3.2e-3 / 1.4e-4 before the F32 tail and RoPE's FMA
        // matched).
        if (g.value("kv_type", "f32") == "f16") {
            out.back().kv_type = LLM_KV_F16;
            out.back().tol = idx["tolerance_classes"]["f32"];
            out.back().tol["class"] = "f32";
        }
        out.back().dir = dir;
        // Every golden holds streamed too: blocks then come through the ring (and shards' own reads).
        out.push_back(out.back());
        out.back().residency = LLM_RESIDENCY_STREAMED;
        if (budget) {
            out.push_back(out.back());
            out.back().residency = LLM_RESIDENCY_BUDGET;
        }
    }
}

// Under qemu and the sanitizers (test::kSlowBuild), where a golden costs 7 to 20 times its native
// time: each architecture's first golden in every residency (test::fixture_arch_type: models/llama,
// lowbit's models/llamaq, split/llama, whose file reads through its own shards), and the others
// resident (`rest_resident`) or not at all. Residency moves the weights, never the arithmetic: check_golden
// holds a streamed or budget run to the resident run's bits.
std::vector<Golden> slow_build_sample(const std::vector<Golden> &all, bool rest_resident) {
    std::vector<Golden> out;
    std::set<std::string> archs;
    bool first = false;  // of the resident entry that heads this golden's modes
    for (const Golden &g : all) {
        if (g.residency == LLM_RESIDENCY_RESIDENT) first = archs.insert(test::fixture_arch_type(g.model).arch).second;
        if (first || (rest_resident && g.residency == LLM_RESIDENCY_RESIDENT)) out.push_back(g);
    }
    return out;
}

std::vector<Golden> goldens() {
    std::vector<Golden> out;
    add_goldens(out, "fixtures/");
    // Every weight type llama.cpp writes, pure files and the label mixes real files use (issue 26),
    // in every residency mode: a budget mixes resident blocks with streamed pieces (and the streamed
    // LM head) in one pass. (The main group's budget runs are test_streaming's, bit for bit.)
    add_goldens(out, "fixtures/lowbit/", true);
    // gpt-oss (f32, q8_0 and MXFP4 experts as real files hold them), Mistral 3 without and with
    // Llama 4's attention temperature, and a qwen3moe file as llama-quantize's MXFP4_MOE writes it:
    // 3-D expert tensors in MXFP4, the other matrices Q8_0.
    add_goldens(out, "fixtures/gptoss_mistral3/", true);
    // The hybrids (issue 27): gated delta-net layers with their recurrent state beside gated
    // attention, dense and MoE, with and without a multi-token-prediction tail.
    add_goldens(out, "fixtures/qwen35/", true);
    // Gemma 4 (issue 28): per-layer window flags, windowed layers with their own head dim and KV
    // heads, proportional RoPE on full layers, V from K; the MoE with its dense branch.
    add_goldens(out, "fixtures/gemma4/", true, {"gemma4", "gemma4moe", "gemma4e"});
    return out;
}

struct Loaded {
    llm_model *m = nullptr;
    llm_session *s = nullptr;
    ~Loaded() {
        llm_session_free(s);
        llm_model_free(m);
    }
};

// The smallest of 32 budgets evenly spaced from the model's minimum to all resident that keeps some
// but not all half-blocks resident (a fixed fraction does not: these models are mostly LM head).
uint64_t partial_budget(const std::string &model) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(model.c_str(), &mp, &m) == LLM_OK);
    const auto info = nlohmann::json::parse(llm_model_info_json(m));
    const uint64_t lo = info["memory"]["minimum_weight_bytes"],
                   hi = info["memory"]["resident_block_bytes"].get<uint64_t>() +
                        info["memory"]["lm_head_bytes"].get<uint64_t>();
    const uint32_t units = 2 * info["n_layer"].get<uint32_t>();
    uint64_t found = 0;
    for (uint64_t k = 0; k < 32 && !found; ++k) {
        const uint64_t b = lo + (hi - lo) * k / 32;
        REQUIRE(llm_model_set_ram_budget(m, b) == LLM_OK);  // the policy a BUDGET load applies
        const uint32_t kept = nlohmann::json::parse(llm_model_info_json(m))["memory"]["n_resident_half_blocks"];
        if (kept > 0 && kept < units) found = b;
    }
    llm_model_free(m);
    INFO(model << ": no budget from " << lo << " to " << hi << " keeps some but not all of " << units
               << " half-blocks");
    REQUIRE(found > 0);
    return found;
}

void open(Loaded &l, const std::string &model, bool logits_all, int32_t n_ctx = 0,
          int32_t residency = LLM_RESIDENCY_RESIDENT, int32_t kv_type = LLM_KV_F32) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = residency;
    if (residency == LLM_RESIDENCY_BUDGET) mp.ram_budget_bytes = partial_budget(model);
    INFO(llm_last_error());
    REQUIRE(llm_model_load(model.c_str(), &mp, &l.m) == LLM_OK);
    if (residency == LLM_RESIDENCY_BUDGET) {
        // Some but not all half-blocks resident, or the budget run would repeat another mode's.
        const auto info = nlohmann::json::parse(llm_model_info_json(l.m));
        const uint32_t kept = info["memory"]["n_resident_half_blocks"], units = 2 * info["n_layer"].get<uint32_t>();
        INFO("budget " << mp.ram_budget_bytes << ": " << kept << " of " << units << " half-blocks resident");
        REQUIRE((kept > 0 && kept < units));
    }
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.n_ctx = n_ctx;  // 0: the model's own (fixtures: 256 positions; gpt2 has no embedding past that)
    sp.temperature = 0.0f;
    sp.logits_all = logits_all;
    sp.kv_type_k = sp.kv_type_v = kv_type;
    REQUIRE(llm_session_create(l.m, &sp, &l.s) == LLM_OK);
}

// 1. the prompt tokenizes as llama.cpp did; 2. teacher-forced logits within g.tol; 3. the greedy
// continuation with llama.cpp's margin rule.
void check_golden(const Golden &g) {
    nlohmann::json gj = read_json(kShared + "/" + g.dir + g.stem + ".json");
    const std::vector<float> ref = read_f32(kShared + "/" + g.dir + g.stem + ".f32");
    const std::string model = kShared + "/" + g.dir + g.model;
    const std::vector<int32_t> prompt = gj["prompt_tokens"];
    const std::vector<int32_t> gen = gj["generated_tokens"];
    const int32_t n_vocab = gj["n_vocab"];
    const double max_abs = g.tol["max_abs"], mean_abs = g.tol["mean_abs"];
    const double min_rows = g.tol["min_row_fraction"], margin = g.tol["greedy_margin"];
    INFO(g.name() << " (class " << g.tol["class"].get<std::string>() << ")");

    // 1. The prompt tokenizes as llama.cpp did.
    Loaded l;
    open(l, model, true, g.n_ctx, g.residency, g.kv_type);
    std::vector<int32_t> toks(256);
    int32_t n = 0;
    REQUIRE(llm_tokenize(l.m, g.prompt.data(), g.prompt.size(), true, false, toks.data(), 256, &n) == LLM_OK);
    toks.resize(n);
    CHECK(toks == prompt);

    // 2. Teacher-forced logits of prompt ++ generated, from an empty cache, in one batch.
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), gen.begin(), gen.end());
    REQUIRE(ref.size() == seq.size() * static_cast<size_t>(n_vocab));
    REQUIRE(llm_session_prefill(l.s, seq.data(), seq.size()) == LLM_OK);
    double sum_abs = 0, worst = 0;
    size_t rows_ok = 0;
    uint64_t fnv = 1469598103934665603ull;  // FNV-1a of our logits' bits: refactors must keep it

    for (size_t r = 0; r < seq.size(); ++r) {
        const float *lg;
        int32_t nv;
        REQUIRE(llm_session_logits_ith(l.s, static_cast<int32_t>(r), &lg, &nv) == LLM_OK);
        REQUIRE(nv == n_vocab);
        double row_max = 0;
        for (size_t b = 0; b < static_cast<size_t>(nv) * sizeof(float); ++b) {
            fnv = (fnv ^ reinterpret_cast<const uint8_t *>(lg)[b]) * 1099511628211ull;
        }
        for (int32_t v = 0; v < nv; ++v) {
            double d = std::fabs(static_cast<double>(lg[v]) - ref[r * nv + v]);
            if (!(d == d)) d = INFINITY;
            row_max = std::max(row_max, d);
            sum_abs += d;
        }
        worst = std::max(worst, row_max);
        if (row_max <= max_abs) ++rows_ok;
    }
    const double mean = sum_abs / static_cast<double>(ref.size());
    INFO("worst row max|diff| " << worst << ", mean|diff| " << mean << ", rows within " << rows_ok << "/"
                                << seq.size());
    if (std::getenv("LLM_GOLDEN_REPORT")) {
        std::printf("%-28s %-10s max|diff| %.3g  mean|diff| %.3g  rows %zu/%zu  bits %016llx\n", g.name().c_str(),
                    g.tol["class"].get<std::string>().c_str(), worst, mean, rows_ok, seq.size(),
                    static_cast<unsigned long long>(fnv));
    }
    // Residency changes where the weights are, never the arithmetic: a streamed or budget run's logits
    // are the resident run's bits (that one ran first, as goldens() lists them).
    static std::map<std::string, uint64_t> resident_bits;
    const std::string key = g.dir + g.stem + "|" + g.model + "|" + std::to_string(g.kv_type);
    if (g.residency == LLM_RESIDENCY_RESIDENT) {
        resident_bits[key] = fnv;
    } else if (const auto it = resident_bits.find(key); it != resident_bits.end()) {
        CHECK(fnv == it->second);
    }
    CHECK(static_cast<double>(rows_ok) >= min_rows * static_cast<double>(seq.size()) - 1e-9);
    CHECK(mean <= mean_abs);

    // 3. Greedy continuation, token by token, with llama.cpp's margin rule.
    Loaded g2;
    open(g2, model, false, g.n_ctx, g.residency, g.kv_type);
    REQUIRE(llm_session_prefill(g2.s, prompt.data(), prompt.size()) == LLM_OK);
    for (size_t k = 0; k < gen.size(); ++k) {
        int32_t t;
        REQUIRE(llm_session_sample(g2.s, &t) == LLM_OK);
        if (t != gen[k]) {
            // The golden's top-1 margin at that row, from its logits (not every .json has top5).
            std::vector<float> row(ref.begin() + (prompt.size() - 1 + k) * n_vocab,
                                   ref.begin() + (prompt.size() + k) * n_vocab);
            std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
            const double m = static_cast<double>(row[0]) - row[1];
            INFO("step " << k << ": got " << t << ", golden " << gen[k] << ", golden margin " << m);
            CHECK(m <= margin);
            break;
        }
        REQUIRE(llm_session_accept(g2.s, t) == LLM_OK);
    }
}

}  // namespace

TEST_CASE("fixtures: tokens, teacher-forced logits and greedy continuation match llama.cpp", "[model][golden]") {
    const std::vector<Golden> all = goldens();
    REQUIRE(all.size() >= 20);
    for (const Golden &g : test::kSlowBuild ? slow_build_sample(all, true) : all) {
        SECTION(g.name()) { check_golden(g); }
    }
}

TEST_CASE("fixtures: a Q8_0 KV cache keeps logits and greedy continuations at the quant class", "[model][golden][kv]") {
    nlohmann::json idx = read_json(kShared + "/fixtures/index.json");
    // In slow builds, each architecture once: the Q8_0 cache's code is the same whatever the weights.
    const std::vector<Golden> all = test::kSlowBuild ? slow_build_sample(goldens(), false) : goldens();
    for (Golden g : all) {
        if (g.residency != LLM_RESIDENCY_RESIDENT) continue;  // the cache does not depend on residency
        SECTION(g.name()) {
            g.kv_type = LLM_KV_Q8_0;
            if (g.tol["class"] != "quant_moe") g.tol = idx["tolerance_classes"]["quant"], g.tol["class"] = "quant";
            // stories260K's heads of 8 share one Q8_0 block four at a time (llama.cpp refuses a
            // Q8_0 K cache there): a few rows reach 0.87; its greedy story still holds.
            if (g.stem.find("stories260K") != std::string::npos) g.tol["min_row_fraction"] = 0.9;
            check_golden(g);
        }
    }
}

TEST_CASE("stories260K: greedy 'Once upon a time' reads the golden story", "[model][golden]") {
    nlohmann::json gj = read_json(kShared + "/fixtures/golden/stories260K.json");
    Loaded l;
    open(l, kShared + "/models/stories260K.gguf", false);
    std::string text;
    auto on_token = [](int32_t, const char *piece, size_t len, void *user) {
        static_cast<std::string *>(user)->append(piece, len);
        return true;
    };
    const int32_t n_gen = static_cast<int32_t>(gj["generated_tokens"].size());
    int32_t st = llm_session_generate(l.s, "Once upon a time", n_gen, on_token, &text);
    REQUIRE((st == LLM_OK || st == LLM_DONE));
    CHECK(text == gj["text"].get<std::string>());
    CHECK(llm_session_n_past(l.s) == static_cast<int32_t>(gj["prompt_tokens"].size()) + n_gen);
}
