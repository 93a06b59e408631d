// Speculative decoding (llm_session_set_speculation): tokens and every logits row the API exposes
// must equal plain generation's, bit for bit, for every fixture, residency and proposal source, at
// any temperature for a given seed; and the accepted token's law must be the model's softmax (a
// chi-square test that a biased acceptance rule fails).
#include <catch2/catch.hpp>

#include <atomic>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "llm.h"
#include "synth_model.h"
#include "test_files.h"

namespace {

const std::string kShared = LLM_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";

constexpr bool kSanitized = test::kSlowBuild;

struct Mode {
    const char *name;
    int32_t residency;
    int32_t depth;
    bool budget;  // BUDGET at the model's minimum_weight_bytes
};
const Mode kResident{"resident", LLM_RESIDENCY_RESIDENT, 1, false};
const Mode kModes[] = {{"streamed/0", LLM_RESIDENCY_STREAMED, 0, false},
                       {"streamed/1", LLM_RESIDENCY_STREAMED, 1, false},
                       {"streamed/2", LLM_RESIDENCY_STREAMED, 2, false},
                       {"budget/min", LLM_RESIDENCY_BUDGET, 1, true}};

struct ModelH {
    llm_model *m = nullptr;
    ModelH() = default;
    ModelH(const ModelH &) = delete;
    ModelH &operator=(const ModelH &) = delete;
    ~ModelH() { llm_model_free(m); }
};
struct SessionH {
    llm_session *s = nullptr;
    SessionH() = default;
    SessionH(const SessionH &) = delete;
    SessionH &operator=(const SessionH &) = delete;
    ~SessionH() { llm_session_free(s); }
};

uint64_t minimum_weight_bytes(const std::string &path) {
    ModelH h;
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.residency = LLM_RESIDENCY_STREAMED;
    REQUIRE(llm_model_load(path.c_str(), &mp, &h.m) == LLM_OK);
    return nlohmann::json::parse(llm_model_info_json(h.m))["memory"]["minimum_weight_bytes"].get<uint64_t>();
}

void load(ModelH &h, const std::string &path, const Mode &md = kResident) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = md.residency;
    mp.prefetch_depth = md.depth;
    if (md.budget) mp.ram_budget_bytes = minimum_weight_bytes(path);
    INFO(path << " " << md.name);
    REQUIRE(llm_model_load(path.c_str(), &mp, &h.m) == LLM_OK);
}

struct Sampling {
    float temperature = 0.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    float repeat_penalty = 1.0f;
    uint64_t seed = 0;
};

void open(SessionH &h, llm_model *m, int32_t n_ctx, const Sampling &sm = {}) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.n_ctx = n_ctx;
    sp.n_threads = 2;
    sp.temperature = sm.temperature;
    sp.top_k = sm.top_k;
    sp.top_p = sm.top_p;
    sp.min_p = sm.min_p;
    sp.repeat_penalty = sm.repeat_penalty;
    sp.seed = sm.seed;
    sp.kv_type_k = sp.kv_type_v = LLM_KV_F32;
    INFO(llm_last_error());
    REQUIRE(llm_session_create(m, &sp, &h.s) == LLM_OK);
}

void speculate(llm_session *s, llm_model *draft, int32_t n_draft, int32_t lookup, float p_min = 0.0f) {
    llm_speculation_params p;
    REQUIRE(llm_speculation_params_init(&p, LLM_SPECULATION_PARAMS_VERSION) == LLM_OK);
    p.draft = draft;
    p.n_draft = n_draft;
    p.lookup_ngram = lookup;
    p.draft_p_min = p_min;
    INFO(llm_session_last_error(s));
    REQUIRE(llm_session_set_speculation(s, &p) == LLM_OK);
}

std::vector<int32_t> tokenize(llm_model *m, const std::string &text, bool bos) {
    std::vector<int32_t> t(text.size() + 8);
    int32_t n = 0;
    REQUIRE(llm_tokenize(m, text.data(), text.size(), bos, false, t.data(), static_cast<int32_t>(t.size()), &n) ==
            LLM_OK);
    t.resize(static_cast<size_t>(n));
    return t;
}

// Tokens and the logits row after each of them, as llm_session_next hands them out.
struct Gen {
    std::vector<int32_t> tokens;
    std::vector<float> logits;
    bool done = false;
};

void next_n(llm_session *s, int32_t n, Gen &g) {
    for (int32_t i = 0; i < n; ++i) {
        int32_t t = -1;
        const int32_t rc = llm_session_next(s, &t, nullptr, 0, nullptr);
        INFO(llm_session_last_error(s));
        REQUIRE((rc == LLM_OK || rc == LLM_DONE));
        if (rc == LLM_DONE) {
            g.done = true;
            return;
        }
        g.tokens.push_back(t);
        const float *l = nullptr;
        int32_t nv = 0;
        REQUIRE(llm_session_logits(s, &l, &nv) == LLM_OK);
        g.logits.insert(g.logits.end(), l, l + nv);
    }
}

// n steps of llm_session_next_batch with s alone (it forgets pending drafts and evaluates one token).
void batch_n(llm_session *s, int32_t n, Gen &g) {
    for (int32_t i = 0; i < n; ++i) {
        int32_t t = -1, st = 0;
        REQUIRE(llm_session_next_batch(&s, 1, &t, &st) == LLM_OK);
        INFO(llm_session_last_error(s));
        REQUIRE(st == LLM_OK);
        g.tokens.push_back(t);
        const float *l = nullptr;
        int32_t nv = 0;
        REQUIRE(llm_session_logits(s, &l, &nv) == LLM_OK);
        g.logits.insert(g.logits.end(), l, l + nv);
    }
}

bool bitwise_equal(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void require_same(const Gen &want, const Gen &got) {
    CHECK(got.tokens == want.tokens);
    CHECK(got.done == want.done);
    CHECK(bitwise_equal(got.logits, want.logits));
}

llm_stats stats(llm_session *s, bool last = false) {
    llm_stats total, call;
    llm_stats_init(&total, LLM_STATS_VERSION);
    llm_stats_init(&call, LLM_STATS_VERSION);
    REQUIRE(llm_session_stats(s, &total, &call) == LLM_OK);
    return last ? call : total;
}

struct Fixture {
    std::string path;
    int32_t n_ctx = 0;
    std::string prompt;
};

// The main fixture group's models and the gpt-oss / Mistral 3 group's (sinks in every softmax, a
// window-4 ring on every other layer, MXFP4 experts with biases; Llama 4's attention temperature).
std::vector<Fixture> fixtures() {
    std::vector<Fixture> out;
    for (const std::string dir : {"/fixtures/", "/fixtures/gptoss_mistral3/"}) {
        std::ifstream f(kShared + dir + "index.json");
        const nlohmann::json idx = nlohmann::json::parse(f);
        for (const auto &g : idx["goldens"]) {
            Fixture fx;
            const std::string model = g["model"];
            fx.path = kShared + dir + model;
            fx.prompt = model.find("stories260K") != std::string::npos ? idx["stories260K"]["prompt"] : idx["prompt"];
            if (g.contains("llm_run_args")) {
                const auto &a = g["llm_run_args"];
                for (size_t i = 0; i + 1 < a.size(); ++i)
                    if (a[i] == "--ctx") fx.n_ctx = std::stoi(a[i + 1].get<std::string>());
            }
            bool seen = false;
            for (const Fixture &o : out) seen = seen || (o.path == fx.path && o.n_ctx == fx.n_ctx);
            if (!seen) out.push_back(fx);
        }
    }
    return out;
}

// Another quantization of the same architecture in the fixture's folder, if any: q4_0, else q8_0,
// else f32.
std::string sibling(const std::string &path) {
    const std::string base = std::filesystem::path(path).filename().string();
    const std::string arch = base.substr(0, base.find('.'));
    if (base.find("stories260K") != std::string::npos) return {};
    for (const char *q : {"q4_0", "q8_0", "f32"}) {
        const std::string p = std::filesystem::path(path).parent_path().string() + "/" + arch + "." + q + ".gguf";
        if (std::filesystem::path(p).filename() != base && std::filesystem::exists(p)) return p;
    }
    return {};
}

constexpr int32_t kGen = 24;

}  // namespace

TEST_CASE("greedy speculation gives the tokens and logits of plain generation on every fixture", "[spec]") {
    std::vector<Fixture> all = fixtures();
    REQUIRE(all.size() >= 50);
    if (kSanitized) {
        // A ring model (gemma2), learned positions (gpt2), and the rest's common case.
        std::vector<Fixture> few;
        for (const Fixture &f : all) {
            for (const char *name : {"/llama.f32.gguf", "/gemma2.q8_0.gguf", "/gpt2.f32.gguf"})
                if (f.path.size() > std::strlen(name) && f.path.ends_with(name)) few.push_back(f);
        }
        REQUIRE(few.size() == 3);
        all = few;
    }
    for (size_t fi = 0; fi < all.size(); ++fi) {
        const Fixture &fx = all[fi];
        SECTION(fx.path + " ctx " + std::to_string(fx.n_ctx)) {
            ModelH target;
            load(target, fx.path);
            const std::vector<int32_t> prompt = tokenize(target.m, fx.prompt, true);
            // Prompt lookup needs recurring n-grams: the prompt twice.
            std::vector<int32_t> twice = prompt;
            twice.insert(twice.end(), prompt.begin() + 1, prompt.end());

            Gen plain, plain_twice;
            {
                SessionH s;
                open(s, target.m, fx.n_ctx);
                REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
                next_n(s.s, kGen, plain);
                SessionH s2;
                open(s2, target.m, fx.n_ctx);
                REQUIRE(llm_session_prefill(s2.s, twice.data(), twice.size()) == LLM_OK);
                next_n(s2.s, kGen, plain_twice);
            }
            ModelH same, sib;
            load(same, fx.path);
            const std::string sib_path = sibling(fx.path);
            if (!sib_path.empty()) load(sib, sib_path);

            // Every residency mode (the done-when); under a sanitizer RESIDENT and one
            // streamed mode per fixture.
            std::vector<Mode> modes = {kResident};
            if (kSanitized) {
                modes.push_back(kModes[1 + fi % 3]);
            } else {
                modes.insert(modes.end(), std::begin(kModes), std::end(kModes));
            }
            for (const Mode &md : modes) {
                ModelH t;
                if (md.residency == LLM_RESIDENCY_RESIDENT) {
                    t.m = nullptr;
                } else {
                    load(t, fx.path, md);
                }
                llm_model *tm = t.m ? t.m : target.m;
                struct Config {
                    const char *name;
                    llm_model *draft;
                    int32_t lookup;
                    const Gen *want;
                    const std::vector<int32_t> *prompt;
                };
                const Config configs[] = {{"draft = same file", same.m, 0, &plain, &prompt},
                                          {"draft = sibling", sib.m, 0, &plain, &prompt},
                                          {"lookup 2", nullptr, 2, &plain_twice, &twice}};
                for (const Config &c : configs) {
                    if (!c.draft && c.lookup == 0) continue;
                    INFO(fx.path << " mode " << md.name << " " << c.name << " " << sib_path);
                    SessionH s;
                    open(s, tm, fx.n_ctx);
                    speculate(s.s, c.draft, 4, c.lookup);
                    REQUIRE(llm_session_prefill(s.s, c.prompt->data(), c.prompt->size()) == LLM_OK);
                    Gen g;
                    next_n(s.s, kGen, g);
                    require_same(*c.want, g);
                    const llm_stats st = stats(s.s);
                    CHECK(st.accepted_tokens <= st.drafted_tokens);
                    if (c.draft == same.m && !g.done) {
                        // The same model proposes exactly what greedy decoding picks: every draft is
                        // kept but the last pass's leftovers, so passes are saved.
                        CHECK(st.drafted_tokens > 0);
                        CHECK(st.drafted_tokens - st.accepted_tokens < 4);
                        CHECK(st.generated_tokens - st.accepted_tokens < st.generated_tokens);
                    }
                }
            }
        }
    }
}

// gpt-oss past its window: layer 0's ring (window 4 + 63 positions) has wrapped before the first
// verify pass, so rejected drafts are rolled back inside a ring whose sinks take weight in every
// softmax; with each cache type, resident and streamed. The prompt repeats a run of tokens so that
// lookup finds n-grams to propose.
TEST_CASE("greedy speculation on gpt-oss past its window equals plain greedy, every KV type", "[spec][cpu-neutral]") {
    const std::string dir = kShared + "/fixtures/gptoss_mistral3/models/";
    std::mt19937 rng(29);
    std::vector<int32_t> prompt(80);
    for (int32_t &t : prompt) t = 3 + static_cast<int32_t>(rng() % 500);
    prompt.insert(prompt.end(), prompt.begin() + 40, prompt.begin() + 60);
    for (const char *file : {"gptoss.mxfp4_moe.gguf", "gptoss.f32.gguf"}) {
        ModelH target, draft;
        load(target, dir + file);
        load(draft, dir + "gptoss.q8_0.gguf");
        for (const int32_t kv : {LLM_KV_F32, LLM_KV_F16, LLM_KV_Q8_0}) {
            auto session = [&](SessionH &h, llm_model *m) {
                llm_session_params sp;
                llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
                sp.n_ctx = 256;
                sp.n_threads = 2;
                sp.temperature = 0.0f;
                sp.kv_type_k = sp.kv_type_v = kv;
                REQUIRE(llm_session_create(m, &sp, &h.s) == LLM_OK);
            };
            Gen plain;
            {
                SessionH s;
                session(s, target.m);
                REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
                next_n(s.s, kGen, plain);
            }
            for (const Mode &md : {kResident, kModes[1]}) {
                ModelH t;
                load(t, dir + file, md);
                for (int c = 0; c < 3; ++c) {
                    const char *const kNames[] = {"lookup 2", "draft q8_0", "draft same"};
                    INFO(file << " kv " << kv << " " << md.name << " " << kNames[c]);
                    SessionH s;
                    session(s, t.m);
                    speculate(s.s, c == 0 ? nullptr : c == 1 ? draft.m : target.m, 4, c == 0 ? 2 : 0);
                    REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
                    Gen g;
                    next_n(s.s, kGen, g);
                    require_same(plain, g);
                    const llm_stats st = stats(s.s);
                    CHECK(st.drafted_tokens > 0);
                    CHECK(st.accepted_tokens <= st.drafted_tokens);
                }
            }
        }
    }
}

TEST_CASE("speculation at temperature > 0 gives the same tokens for a seed", "[spec]") {
    ModelH m, draft;
    load(m, kStories);
    load(draft, kStories);
    const std::vector<int32_t> prompt =
        tokenize(m.m, "Once upon a time, there was a little girl. Once upon a time", true);
    for (uint64_t seed : {1u, 2u, 7u, 42u}) {
        Sampling sm;
        sm.temperature = 0.8f;
        sm.top_k = 40;
        sm.top_p = 0.9f;
        sm.min_p = 0.05f;
        sm.repeat_penalty = 1.1f;
        sm.seed = seed;
        Gen want;
        {
            SessionH s;
            open(s, m.m, 256, sm);
            REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
            next_n(s.s, 48, want);
        }
        for (int config = 0; config < 3; ++config) {
            INFO("seed " << seed << " config " << config);
            SessionH s;
            open(s, m.m, 256, sm);
            if (config == 0) speculate(s.s, draft.m, 6, 0);
            if (config == 1) speculate(s.s, nullptr, 6, 2);
            if (config == 2) speculate(s.s, draft.m, 6, 3, 0.3f);
            REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
            Gen g;
            next_n(s.s, 48, g);
            require_same(want, g);
            const llm_stats st = stats(s.s);
            CHECK(st.drafted_tokens > 0);
            CHECK(st.accepted_tokens <= st.drafted_tokens);
        }
    }
}

namespace {

// Regularized upper incomplete gamma Q(a, x): the chi-square survival function is Q(dof/2, x/2).
double gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    const double lg = std::lgamma(a);
    if (x < a + 1) {  // series for P
        double sum = 1.0 / a, term = sum;
        for (int n = 1; n < 1000; ++n) {
            term *= x / (a + n);
            sum += term;
            if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
        }
        return 1.0 - sum * std::exp(-x + a * std::log(x) - lg);
    }
    // Continued fraction for Q (modified Lentz).
    double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
    for (int i = 1; i < 1000; ++i) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (std::fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (std::fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (std::fabs(del - 1) < 1e-15) break;
    }
    return std::exp(-x + a * std::log(x) - lg) * h;
}

// Pearson's test of observed counts against probabilities p (over token ids); bins with an expected
// count under 5 are pooled.
double chi_square_p(const std::map<int32_t, int> &observed, const std::vector<double> &p, int n) {
    std::vector<double> exp_bins, obs_bins;
    double pooled_e = 0, pooled_o = 0;
    for (size_t id = 0; id < p.size(); ++id) {
        const auto it = observed.find(static_cast<int32_t>(id));
        const double o = it == observed.end() ? 0 : it->second, e = p[id] * n;
        if (e >= 5) {
            exp_bins.push_back(e);
            obs_bins.push_back(o);
        } else {
            pooled_e += e;
            pooled_o += o;
        }
    }
    if (pooled_e > 0) {
        exp_bins.push_back(pooled_e);
        obs_bins.push_back(pooled_o);
    }
    double x = 0;
    for (size_t i = 0; i < exp_bins.size(); ++i)
        x += (obs_bins[i] - exp_bins[i]) * (obs_bins[i] - exp_bins[i]) / exp_bins[i];
    const double dof = static_cast<double>(exp_bins.size()) - 1;
    return gamma_q(dof / 2, x / 2);
}

}  // namespace

TEST_CASE("chi-square: the statistics helper rejects what it should", "[spec]") {
    // Known values: chi2 survival at x = 3.84, 1 dof ~ 0.05; at x = 18.31, 10 dof ~ 0.05.
    CHECK(std::fabs(gamma_q(0.5, 3.841 / 2) - 0.05) < 1e-3);
    CHECK(std::fabs(gamma_q(5.0, 18.307 / 2) - 0.05) < 1e-3);
}

TEST_CASE("the accepted draft's law is the model's softmax (chi-square), and a biased rule fails it", "[spec][cpu-neutral]") {
    ModelH m;
    load(m, kStories);
    // Prompt "<bos> phrase <c> phrase-without-its-last-token": after the model's likely last token
    // of the phrase, lookup (n = 3, K = 1) proposes c, so the second generated token is the one
    // decided by the acceptance rule.
    Sampling sm;
    sm.temperature = 1.0f;
    // softmax of the last logits after `tokens` (temperature 1, no top-k/p, no penalty: the sampler's law).
    const auto law = [&](const std::vector<int32_t> &tokens) {
        SessionH s;
        open(s, m.m, 64, sm);
        REQUIRE(llm_session_prefill(s.s, tokens.data(), tokens.size()) == LLM_OK);
        const float *l = nullptr;
        int32_t nv = 0;
        REQUIRE(llm_session_logits(s.s, &l, &nv) == LLM_OK);
        double mx = l[0], sum = 0;
        for (int32_t i = 0; i < nv; ++i) mx = std::max(mx, static_cast<double>(l[i]));
        std::vector<double> q(static_cast<size_t>(nv));
        for (int32_t i = 0; i < nv; ++i) sum += q[i] = std::exp(l[i] - mx);
        for (double &v : q) v /= sum;
        return q;
    };
    // The draft c: among the likely continuations of the phrase, one the model gives a middling
    // probability in the final prompt, so that both acceptance and rejection are frequent.
    int32_t c = -1, time_tok = -1;
    std::vector<int32_t> prompt;
    std::vector<double> p;
    for (const char *text : {"Once upon a time, there was a little girl named", "One day, a little girl",
                             "Once upon a time, there was a"}) {
        const std::vector<int32_t> phrase = tokenize(m.m, text, true);
        time_tok = phrase.back();
        const std::vector<double> p0 = law(phrase);
        std::vector<int32_t> order(p0.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
        std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return p0[x] > p0[y]; });
        for (int i = 0; i < 20 && c < 0; ++i) {
            const int32_t cand = order[static_cast<size_t>(i)];
            std::vector<int32_t> pr = phrase;
            pr.push_back(cand);
            pr.insert(pr.end(), phrase.begin() + 1, phrase.end() - 1);
            const double p_time = law(pr)[time_tok];
            std::vector<int32_t> full = pr;
            full.push_back(time_tok);
            const std::vector<double> q = law(full);
            if (p_time < 0.5) continue;
            if (q[cand] > 0.1 && q[cand] < 0.8) {
                c = cand;
                prompt = pr;
                p = q;
            }
        }
        if (c >= 0) break;
    }
    REQUIRE(c >= 0);
    INFO("p(draft) = " << p[c]);

    const int kSeeds = kSanitized ? 600 : 2000;
    std::map<int32_t, int> fair, biased;
    int n = 0, accepted = 0;
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    for (int seed = 1; seed <= kSeeds; ++seed) {
        sm.seed = static_cast<uint64_t>(seed);
        SessionH s;
        open(s, m.m, 64, sm);
        speculate(s.s, nullptr, 1, 3);
        REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
        int32_t t0 = -1, t1 = -1;
        REQUIRE(llm_session_next(s.s, &t0, nullptr, 0, nullptr) == LLM_OK);
        if (t0 != time_tok) continue;
        REQUIRE(stats(s.s, true).drafted_tokens == 1);  // the verify pass checked c
        const int32_t rc = llm_session_next(s.s, &t1, nullptr, 0, nullptr);
        REQUIRE((rc == LLM_OK || rc == LLM_DONE));
        if (rc == LLM_OK && stats(s.s, true).accepted_tokens == 1) ++accepted;
        ++n;
        ++fair[t1];
        // A classic mistake: accept d with probability p(d), else keep a draw from p itself (not
        // from p with d removed): d then comes out with p + (1 - p) p.
        ++biased[unif(rng) < p[c] ? c : t1];
    }
    const double p_fair = chi_square_p(fair, p, n), p_biased = chi_square_p(biased, p, n);
    INFO("samples " << n << " accepted drafts " << accepted << " p-value " << p_fair << " biased " << p_biased);
    REQUIRE(n > kSeeds / 4);
    CHECK(accepted > 0);
    CHECK(accepted == fair[c]);
    CHECK(p_fair > 1e-3);
    REQUIRE(p_biased < 1e-6);
    if (std::getenv("LLM_SPEC_REPORT")) {
        std::printf("spec chi-square: %d samples, p(draft) %.3f, accepted %d, p-value %.4f, biased rule p-value %.3g\n",
                    n, p[c], accepted, p_fair, p_biased);
    }
}

TEST_CASE("speculation counters, bad parameters and turning it off", "[spec]") {
    ModelH m, draft;
    load(m, kStories);
    load(draft, kStories);
    SessionH s;
    open(s, m.m, 256);
    llm_speculation_params p;
    llm_speculation_params_init(&p, LLM_SPECULATION_PARAMS_VERSION);
    CHECK(p.n_draft == 8);
    struct Bad {
        int32_t n_draft;
        int32_t lookup;
        float p_min;
        const char *msg;
    };
    for (const Bad &b : {Bad{0, 2, 0.0f, "n_draft"}, Bad{65, 2, 0.0f, "n_draft"}, Bad{8, -1, 0.0f, "lookup_ngram"},
                         Bad{8, 33, 0.0f, "lookup_ngram"}, Bad{8, 2, -1.0f, "draft_p_min"},
                         Bad{8, 2, std::nanf(""), "draft_p_min"}, Bad{8, 2, 1.5f, "draft_p_min"}}) {
        p.n_draft = b.n_draft;
        p.lookup_ngram = b.lookup;
        p.draft_p_min = b.p_min;
        CHECK(llm_session_set_speculation(s.s, &p) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_session_last_error(s.s)).find(b.msg) != std::string::npos);
    }
    // Drafts with another vocabulary: synthetic models (the fixtures share stories260K's).
    {
        const std::filesystem::path dir = std::filesystem::temp_directory_path();
        const std::string p300 = (dir / ("llm_spec_v300_" + std::to_string(::getpid()) + ".gguf")).string();
        const std::string p512 = (dir / ("llm_spec_v512_" + std::to_string(::getpid()) + ".gguf")).string();
        tools::write_synth_model(tools::SynthShape{"v300", 64, 1, 4, 2, 128, 300, 256}, "f32", p300, 4);
        tools::write_synth_model(tools::SynthShape{"v512", 64, 1, 4, 2, 128, 512, 256}, "f32", p512, 4);
        ModelH v300, v512;
        load(v300, p300);
        load(v512, p512);
        REQUIRE(llm_model_n_vocab(m.m) == 512);
        llm_speculation_params_init(&p, LLM_SPECULATION_PARAMS_VERSION);
        p.draft = v300.m;
        CHECK(llm_session_set_speculation(s.s, &p) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_session_last_error(s.s)) ==
              "draft vocabulary differs in size: 300 tokens vs the session model's 512");
        p.draft = v512.m;
        CHECK(llm_session_set_speculation(s.s, &p) == LLM_ERR_INVALID_ARGUMENT);
        const std::string msg = llm_session_last_error(s.s);
        INFO(msg);
        CHECK(msg.find("draft vocabulary differs at token ") == 0);
        CHECK(msg.find("' vs '") != std::string::npos);
        std::filesystem::remove(p300);
        std::filesystem::remove(p512);
    }
    CHECK(nlohmann::json::parse(llm_session_stats_json(s.s))["speculation"]["mode"] == "off");

    // The host frees its draft handle: the session keeps the model.
    {
        ModelH d;
        load(d, kStories);
        speculate(s.s, d.m, 5, 0);
    }
    const std::vector<int32_t> prompt = tokenize(m.m, "Once upon a time", true);
    REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
    Gen g;
    next_n(s.s, 30, g);
    const llm_stats st = stats(s.s);
    CHECK(st.generated_tokens == g.tokens.size());
    CHECK(st.drafted_tokens > 0);
    CHECK(st.accepted_tokens <= st.drafted_tokens);
    CHECK(st.drafted_tokens - st.accepted_tokens < 5);
    const nlohmann::json j = nlohmann::json::parse(llm_session_stats_json(s.s));
    CHECK(j["speculation"]["mode"] == "draft");
    CHECK(j["speculation"]["n_draft"] == 5);
    CHECK(j["tokens_per_pass"].get<double>() > 1.5);
    CHECK(j["acceptance"].get<double>() > 0.5);
    CHECK(j["last_call"].contains("tokens_per_pass"));
    // Decode passes: one per generated token not taken from the drafts.
    CHECK(st.passes == 1 + st.generated_tokens - st.accepted_tokens);

    // Off: plain steps, one pass each, nothing drafted.
    REQUIRE(llm_session_set_speculation(s.s, nullptr) == LLM_OK);
    CHECK(nlohmann::json::parse(llm_session_stats_json(s.s))["speculation"]["mode"] == "off");
    const uint64_t drafted = stats(s.s).drafted_tokens;
    Gen more;
    next_n(s.s, 5, more);
    CHECK(stats(s.s).drafted_tokens == drafted);
    CHECK(stats(s.s, true).passes == 1);
}

TEST_CASE("stats JSON and llm_stats give the same counters, under the keys hosts read", "[spec][api]") {
    ModelH m, d;
    load(m, kStories);
    load(d, kStories);
    SessionH s;
    open(s, m.m, 256);
    speculate(s.s, d.m, 5, 0);
    const std::vector<int32_t> prompt = tokenize(m.m, "Once upon a time", true);
    REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
    Gen g;
    next_n(s.s, 12, g);
    const llm_stats total = stats(s.s), call = stats(s.s, true);
    REQUIRE(total.accepted_tokens > 0);
    const nlohmann::json j = nlohmann::json::parse(llm_session_stats_json(s.s));
    const nlohmann::json &lc = j["last_call"];
    // The keys in order, space-separated (nlohmann::json keeps an object's keys sorted).
    const auto keys = [](const nlohmann::json &o) {
        std::string out;
        for (const auto &[k, v] : o.items()) out += (out.empty() ? "" : " ") + k;
        return out;
    };
    CHECK(keys(j) ==
          "acceptance accepted_tokens bytes_read context_shifts decode_seconds decode_tok_s drafted_tokens "
          "generated_tokens grammar grammar_masks grammar_seconds grammar_tokens grammar_us_per_token "
          "io_wait_seconds kv_cache_bytes kv_recomputed_tokens kv_type_k kv_type_v last_call n_ctx "
          "n_past passes prefill_seconds prefill_tok_s prompt_tokens read_calls recurrent_replayed_tokens "
          "speculation threads tokens_per_pass");
    CHECK(keys(lc) ==
          "acceptance accepted_tokens bytes_read drafted_tokens generated_tokens grammar_masks grammar_seconds "
          "grammar_tokens io_wait_seconds passes prompt_tokens read_calls tokens_per_pass");
    CHECK(j["prompt_tokens"] == total.prompt_tokens);
    CHECK(j["generated_tokens"] == total.generated_tokens);
    CHECK(j["prefill_seconds"] == total.prefill_seconds);
    CHECK(j["decode_seconds"] == total.decode_seconds);
    CHECK(j["bytes_read"] == total.bytes_read);
    CHECK(j["read_calls"] == total.read_calls);
    CHECK(j["io_wait_seconds"] == total.io_wait_seconds);
    CHECK(j["passes"] == total.passes);
    CHECK(j["drafted_tokens"] == total.drafted_tokens);
    CHECK(j["accepted_tokens"] == total.accepted_tokens);
    CHECK(lc["generated_tokens"] == call.generated_tokens);
    CHECK(lc["passes"] == call.passes);
    CHECK(lc["drafted_tokens"] == call.drafted_tokens);
    CHECK(lc["accepted_tokens"] == call.accepted_tokens);
    CHECK(lc["prompt_tokens"] == 0);
    CHECK(total.generated_tokens == g.tokens.size());
    CHECK(total.prompt_tokens == prompt.size());
}

namespace {

// Runs the same script of calls on a plain and a speculating session, comparing every output.
void script(const std::function<void(llm_session *, Gen &)> &f, bool with_draft) {
    ModelH m, draft;
    load(m, kStories);
    load(draft, kStories);
    Gen want, got;
    SessionH a, b;
    open(a, m.m, 256);
    open(b, m.m, 256);
    if (with_draft) {
        speculate(b.s, draft.m, 6, 0);
    } else {
        speculate(b.s, nullptr, 6, 2);
    }
    f(a.s, want);
    f(b.s, got);
    require_same(want, got);
    CHECK(llm_session_n_past(a.s) == llm_session_n_past(b.s));
    CHECK(stats(b.s).drafted_tokens > 0);
}

std::vector<int32_t> story_prompt(llm_session *s) {
    (void)s;
    return {1, 403, 407, 261, 378, 383, 286, 356, 420, 169, 391, 310, 403, 407, 261};
}

}  // namespace

TEST_CASE("calls between next() with pending drafts act as without speculation", "[spec]") {
    for (bool with_draft : {true, false}) {
        INFO("draft " << with_draft);
        script(
            [](llm_session *s, Gen &g) {
                const std::vector<int32_t> pr = story_prompt(s);
                REQUIRE(llm_session_prefill(s, pr.data(), pr.size()) == LLM_OK);
                next_n(s, 3, g);
                REQUIRE(llm_session_truncate(s, llm_session_n_past(s) - 2) == LLM_OK);
                REQUIRE(llm_session_accept(s, 403) == LLM_OK);
                next_n(s, 4, g);
                REQUIRE(llm_session_accept(s, 407) == LLM_OK);
                next_n(s, 4, g);
                batch_n(s, 2, g);
                next_n(s, 4, g);
                const int32_t extra[] = {261, 378};
                REQUIRE(llm_session_prefill(s, extra, 2) == LLM_OK);
                next_n(s, 4, g);
                int32_t t = -1;
                REQUIRE(llm_session_sample(s, &t) == LLM_OK);
                g.tokens.push_back(t);
                REQUIRE(llm_session_accept(s, t) == LLM_OK);
                next_n(s, 3, g);
                REQUIRE(llm_session_reset(s) == LLM_OK);
                REQUIRE(llm_session_prefill(s, pr.data(), pr.size()) == LLM_OK);
                next_n(s, 6, g);
                std::vector<int32_t> toks(static_cast<size_t>(llm_session_n_past(s)));
                int32_t n = 0;
                REQUIRE(llm_session_tokens(s, toks.data(), static_cast<int32_t>(toks.size()), &n) == LLM_OK);
                g.tokens.insert(g.tokens.end(), toks.begin(), toks.begin() + n);
            },
            with_draft);
    }
}

namespace {

// What a state saved with pending drafts must do. The saving session speculates with `draft` (k
// drafts, no lookup) and hands out 2 tokens after `prompt`, which leaves at least min_pending drafted
// tokens not yet accepted, then saves; the saving session itself (when continue_saver) and a fresh
// session loading the state (without speculation, then with lookup when spec_loader) continue to n
// tokens with the tokens and logits of plain generation.
struct PendingSave {
    int32_t k = 8;
    int32_t n = 20;
    uint64_t min_pending = 2;
    bool continue_saver = true;
    bool spec_loader = true;
    const char *name = "llm_spec_state_";
};

void check_saved_with_pending(llm_model *m, llm_model *draft, const std::vector<int32_t> &prompt,
                              const PendingSave &c) {
    const std::string path = (std::filesystem::temp_directory_path() / (c.name + std::to_string(::getpid()))).string();
    Gen want;
    {
        SessionH a;
        open(a, m, 256);
        REQUIRE(llm_session_prefill(a.s, prompt.data(), prompt.size()) == LLM_OK);
        next_n(a.s, c.n, want);
    }
    SessionH b;
    open(b, m, 256);
    speculate(b.s, draft, c.k, 0);
    REQUIRE(llm_session_prefill(b.s, prompt.data(), prompt.size()) == LLM_OK);
    Gen got;
    next_n(b.s, 2, got);  // the first step drafted k; one of them handed out: pending remain
    REQUIRE(stats(b.s).drafted_tokens >= stats(b.s).accepted_tokens + c.min_pending);
    REQUIRE(llm_session_save(b.s, path.c_str()) == LLM_OK);
    if (c.continue_saver) {
        Gen cont = got;
        next_n(b.s, c.n - 2, cont);
        require_same(want, cont);
    }
    for (bool spec : {false, true}) {
        if (spec && !c.spec_loader) break;
        SessionH l;
        open(l, m, 256);
        if (spec) speculate(l.s, nullptr, 4, 2);
        INFO("loaded, speculation " << spec);
        REQUIRE(llm_session_load(l.s, path.c_str()) == LLM_OK);
        Gen g = got;
        next_n(l.s, c.n - 2, g);
        require_same(want, g);
    }
    std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("a state saved with pending drafts loads and continues identically", "[spec]") {
    ModelH m, draft;
    load(m, kStories);
    load(draft, kStories);
    check_saved_with_pending(m.m, draft.m, story_prompt(nullptr), PendingSave{});
}

namespace {

// A streamed stories260K through host callbacks on the calling thread; read_at cancels the armed
// session (a cancel in the middle of a forward pass).
struct CancellingFile {
    FILE *f = nullptr;
    uint64_t size = 0;
    std::atomic<llm_session *> arm{nullptr};
    explicit CancellingFile(const std::string &path) {
        f = std::fopen(path.c_str(), "rb");
        REQUIRE(f);
        std::fseek(f, 0, SEEK_END);
        size = static_cast<uint64_t>(std::ftell(f));
    }
    ~CancellingFile() { std::fclose(f); }
    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.flags = LLM_IO_THREAD_BOUND;
        io.user = this;
        io.size = [](void *u) { return static_cast<CancellingFile *>(u)->size; };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *c = static_cast<CancellingFile *>(u);
            if (llm_session *s = c->arm.exchange(nullptr)) llm_session_cancel(s);
            if (std::fseek(c->f, static_cast<long>(off), SEEK_SET) != 0) return LLM_ERR_IO;
            return std::fread(dst, 1, n, c->f) == n ? LLM_OK : LLM_ERR_IO;
        };
        return io;
    }
};

}  // namespace

TEST_CASE("a cancel during the verify pass leaves the context as before the call", "[spec]") {
    CancellingFile file(kStories);
    const llm_io io = file.io();
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.residency = LLM_RESIDENCY_STREAMED;
    ModelH m, ref;
    REQUIRE(llm_model_load_io(&io, &mp, &m.m) == LLM_OK);
    load(ref, kStories);
    const std::vector<int32_t> pr = story_prompt(nullptr);
    Gen want;
    {
        SessionH a;
        open(a, ref.m, 256);
        REQUIRE(llm_session_prefill(a.s, pr.data(), pr.size()) == LLM_OK);
        next_n(a.s, 16, want);
    }
    SessionH s;
    open(s, m.m, 256);
    speculate(s.s, ref.m, 4, 0);  // the draft reads from its own file: every read is the session's verify pass
    REQUIRE(llm_session_prefill(s.s, pr.data(), pr.size()) == LLM_OK);
    Gen got;
    int cancelled = 0;
    while (got.tokens.size() < 16) {
        const int32_t n_past = llm_session_n_past(s.s);
        const float *l = nullptr;
        int32_t nv = 0;
        REQUIRE(llm_session_logits(s.s, &l, &nv) == LLM_OK);
        const std::vector<float> before(l, l + nv);
        file.arm = s.s;
        int32_t t = -1;
        const int32_t rc = llm_session_next(s.s, &t, nullptr, 0, nullptr);
        file.arm = nullptr;
        if (rc == LLM_OK) {  // a pending draft handed out: no pass, nothing read
            got.tokens.push_back(t);
            REQUIRE(llm_session_logits(s.s, &l, &nv) == LLM_OK);
            got.logits.insert(got.logits.end(), l, l + nv);
            continue;
        }
        REQUIRE(rc == LLM_ERR_CANCELLED);
        ++cancelled;
        CHECK(llm_session_n_past(s.s) == n_past);
        REQUIRE(llm_session_logits(s.s, &l, &nv) == LLM_OK);
        CHECK(bitwise_equal(before, std::vector<float>(l, l + nv)));
        // Then the same step without a cancel: identical to plain generation.
        next_n(s.s, 1, got);
    }
    require_same(want, got);
    CHECK(cancelled > 0);
    CHECK(stats(s.s).drafted_tokens > 0);
}

TEST_CASE("prompt lookup on a long stories260K continuation (LLM_SPEC_REPORT=1 prints the rates)", "[spec]") {
    ModelH m;
    load(m, kStories);
    const std::vector<int32_t> prompt =
        tokenize(m.m, "Once upon a time, there was a little girl named Lily. She loved to play outside.", true);
    const int32_t n = kSanitized ? 64 : 240;
    Gen want;
    {
        SessionH a;
        open(a, m.m, 512);
        REQUIRE(llm_session_prefill(a.s, prompt.data(), prompt.size()) == LLM_OK);
        next_n(a.s, n, want);
    }
    SessionH s;
    open(s, m.m, 512);
    speculate(s.s, nullptr, 8, 3);
    REQUIRE(llm_session_prefill(s.s, prompt.data(), prompt.size()) == LLM_OK);
    Gen got;
    next_n(s.s, n, got);
    require_same(want, got);
    const nlohmann::json j = nlohmann::json::parse(llm_session_stats_json(s.s));
    const llm_stats st = stats(s.s);
    CHECK(st.accepted_tokens <= st.drafted_tokens);
    if (std::getenv("LLM_SPEC_REPORT")) {
        std::printf(
            "spec lookup n=3 K=8 on stories260K: %zu tokens, drafted %llu, accepted %llu, acceptance %.3f, "
            "tokens per pass %.3f, passes %llu\n",
            got.tokens.size(), static_cast<unsigned long long>(st.drafted_tokens),
            static_cast<unsigned long long>(st.accepted_tokens), j["acceptance"].get<double>(),
            j["tokens_per_pass"].get<double>(), static_cast<unsigned long long>(st.passes));
    }
}

TEST_CASE("64 drafts ahead on windowed rings (gemma2, gemma3), with truncation into them", "[spec][cpu-neutral]") {
    for (const char *name : {"gemma2.f32.gguf", "gemma3.q8_0.gguf"}) {
        const std::string path = kShared + "/fixtures/models/" + name;
        INFO(path);
        ModelH m, draft;
        load(m, path);
        load(draft, path);
        const std::vector<int32_t> prompt = tokenize(m.m, "Once upon a time there was", true);
        const auto run = [&](llm_session *s, Gen &g) {
            REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
            next_n(s, 3, g);
            REQUIRE(llm_session_truncate(s, llm_session_n_past(s) - 1) == LLM_OK);
            REQUIRE(llm_session_accept(s, g.tokens.back()) == LLM_OK);
            next_n(s, 70, g);
            const int32_t back = llm_session_n_past(s) - 30;
            REQUIRE(llm_session_truncate(s, back) == LLM_OK);
            REQUIRE(llm_session_accept(s, g.tokens[g.tokens.size() - 30]) == LLM_OK);
            next_n(s, 90, g);
        };
        Gen want, got;
        SessionH a, b;
        open(a, m.m, 256);
        open(b, m.m, 256);
        speculate(b.s, draft.m, 64, 0);
        run(a.s, want);
        run(b.s, got);
        require_same(want, got);
        CHECK(stats(b.s).drafted_tokens >= 64);
    }
}

TEST_CASE("a ring model's state saved with 60+ pending drafts loads and continues identically", "[spec]") {
    const std::string path = kShared + "/fixtures/models/gemma2.f32.gguf";
    ModelH m, draft;
    load(m, path);
    load(draft, path);
    const std::vector<int32_t> prompt = tokenize(m.m, "Once upon a time there was", true);
    check_saved_with_pending(m.m, draft.m, prompt,
                             PendingSave{.k = 64,
                                         .n = 60,
                                         .min_pending = 60,
                                         .continue_saver = false,
                                         .spec_loader = false,
                                         .name = "llm_spec_ring_state_"});
}

TEST_CASE("llm_session_generate with speculation: same text, stopping callback, continuation", "[spec]") {
    ModelH m, draft;
    load(m, kStories);
    load(draft, kStories);
    struct Collect {
        std::vector<int32_t> tokens;
        size_t stop_after = 0;  // 0: never stop
    };
    const auto cb = [](int32_t t, const char *, size_t, void *u) {
        auto *c = static_cast<Collect *>(u);
        c->tokens.push_back(t);
        return c->stop_after == 0 || c->tokens.size() % c->stop_after != 0;
    };
    Sampling sm;
    sm.temperature = 0.8f;
    sm.top_k = 40;
    sm.seed = 3;
    Collect want, got;
    want.stop_after = got.stop_after = 7;  // stops inside a run of pending drafts
    SessionH a, b;
    open(a, m.m, 256, sm);
    open(b, m.m, 256, sm);
    speculate(b.s, draft.m, 8, 2);
    for (const char *prompt : {"Once upon a time", "", "", " The end. Once upon a time"}) {
        const int32_t ra = llm_session_generate(a.s, prompt, 30, cb, &want);
        const int32_t rb = llm_session_generate(b.s, prompt, 30, cb, &got);
        CHECK(ra == rb);
        CHECK(got.tokens == want.tokens);
        CHECK(llm_session_n_past(a.s) == llm_session_n_past(b.s));
    }
    CHECK(stats(b.s).accepted_tokens > 0);
}

TEST_CASE("speculation near the end of the context and across context shifts", "[spec]") {
    ModelH m, draft;
    load(m, kStories);
    load(draft, kStories);
    const auto make = [&](SessionH &h) {
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
        sp.n_ctx = 48;
        sp.n_threads = 2;
        sp.temperature = 0.0f;
        sp.repeat_penalty = 1.0f;
        sp.kv_type_k = sp.kv_type_v = LLM_KV_F32;
        sp.context_shift = true;
        sp.n_keep = 4;
        REQUIRE(llm_session_create(m.m, &sp, &h.s) == LLM_OK);
    };
    const std::vector<int32_t> pr = story_prompt(nullptr);
    Gen want;
    SessionH a;
    make(a);
    REQUIRE(llm_session_prefill(a.s, pr.data(), pr.size()) == LLM_OK);
    next_n(a.s, 150, want);
    for (int config = 0; config < 2; ++config) {
        INFO("config " << config);
        SessionH b;
        make(b);
        if (config == 0) speculate(b.s, draft.m, 16, 0);
        if (config == 1) speculate(b.s, nullptr, 16, 2);
        REQUIRE(llm_session_prefill(b.s, pr.data(), pr.size()) == LLM_OK);
        Gen got;
        next_n(b.s, 150, got);
        require_same(want, got);
        const auto shifts = [](llm_session *s) {
            return nlohmann::json::parse(llm_session_stats_json(s))["context_shifts"].get<uint64_t>();
        };
        CHECK(shifts(b.s) == shifts(a.s));
        CHECK(shifts(b.s) > 0);
        CHECK(stats(b.s).drafted_tokens > 0);
    }
}
