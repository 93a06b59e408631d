// llm_session_next_batch: several sessions advanced in one pass equal each session run alone (tokens
// and logits bit for bit), read each streamed block once for all of them, and leave every session
// as it was when the call fails.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "gguf/byte_source.h"
#include "gguf/weight_source.h"
#include "llm.h"
#include "loader/streamer.h"
#include "model/forward.h"
#include "model/limits.h"
#include "model/model.h"
#include "test_files.h"

namespace {

const std::string kShared = LLM_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";

constexpr bool kReduced = test::kSlowBuild;

constexpr int kSteps = 12;

struct Fixture {
    std::string path;
    int32_t n_ctx = 0;  // the entry's llm_run_args --ctx, else 0 (the model's own)
};

// Every model of fixtures/index.json and of the attention-only groups (Gemma 4: windowed layers with
// their own head dim, KV sharing; gpt-oss / Mistral 3: sinks) once, with its --ctx if any. The hybrid
// group has its own batch test (test_hybrid.cpp).
std::vector<Fixture> fixtures() {
    std::vector<Fixture> out;
    std::set<std::pair<std::string, int32_t>> seen;
    for (const std::string group : {"", "gemma4/", "gptoss_mistral3/"}) {
        std::ifstream f(kShared + "/fixtures/" + group + "index.json");
        REQUIRE(f.good());
        const nlohmann::json idx = nlohmann::json::parse(f);
        for (const auto &g : idx["goldens"]) {
            Fixture fx{kShared + "/fixtures/" + group + g["model"].get<std::string>(), 0};
            if (g.contains("llm_run_args")) {
                const auto &a = g["llm_run_args"];
                for (size_t i = 0; i + 1 < a.size(); ++i)
                    if (a[i] == "--ctx") fx.n_ctx = std::stoi(a[i + 1].get<std::string>());
            }
            if (seen.insert({fx.path, fx.n_ctx}).second) out.push_back(fx);
        }
    }
    return out;
}

struct Mode {
    const char *name;
    int32_t residency;
    int32_t depth;
    bool budget;  // BUDGET halfway between the minimum and everything resident
};

llm_model *load(const std::string &path, const Mode &md, uint64_t budget = 0, const llm_io *io = nullptr) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = md.residency;
    mp.prefetch_depth = md.depth;
    mp.ram_budget_bytes = budget;
    llm_model *m = nullptr;
    INFO(path << " mode " << md.name << ": " << llm_last_error());
    REQUIRE((io ? llm_model_load_io(io, &mp, &m) : llm_model_load(path.c_str(), &mp, &m)) == LLM_OK);
    return m;
}

// Three differently set sessions: greedy with an F16 cache, sampled with an F32 cache, hotter and
// another seed with a Q8_0 cache.
struct Spec {
    float temperature;
    uint64_t seed;
    int32_t kv;
    bool unfiltered = false;  // no top-k / top-p / min-p: every token can be drawn
};
const Spec kSpecs[3] = {{0.0f, 0, LLM_KV_F16}, {0.8f, 42, LLM_KV_F32}, {1.3f, 7, LLM_KV_Q8_0}};

llm_session *open_session(llm_model *m, const Spec &sp, int32_t n_ctx, const std::vector<int32_t> &prompt,
                          bool context_shift = false) {
    llm_session_params p;
    llm_session_params_init(&p, LLM_SESSION_PARAMS_VERSION);
    p.n_ctx = n_ctx;
    p.n_threads = 2;
    p.temperature = sp.temperature;
    p.seed = sp.seed;
    p.kv_type_k = p.kv_type_v = sp.kv;
    p.context_shift = context_shift;
    if (sp.unfiltered) {
        p.top_k = 0;
        p.top_p = 1.0f;
        p.min_p = 0.0f;
    }
    llm_session *s = nullptr;
    INFO(llm_last_error());
    REQUIRE(llm_session_create(m, &p, &s) == LLM_OK);
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    return s;
}

std::vector<int32_t> tokenize(llm_model *m, const char *text) {
    std::vector<int32_t> t(256);
    int32_t n = 0;
    REQUIRE(llm_tokenize(m, text, std::strlen(text), true, false, t.data(), 256, &n) == LLM_OK);
    t.resize(static_cast<size_t>(n));
    return t;
}

// Prompts of different lengths.
std::vector<std::vector<int32_t>> prompts(llm_model *m) {
    return {tokenize(m, "Once upon a time"), tokenize(m, "The little dog ran to the park and saw a big red ball"),
            tokenize(m, "Hi")};
}

// What one session went through, step by step: status, token and the logits it had afterwards.
struct Trace {
    std::vector<int32_t> status, token;
    std::vector<float> logits;
    bool operator==(const Trace &o) const {
        return status == o.status && token == o.token && logits.size() == o.logits.size() &&
               std::memcmp(logits.data(), o.logits.data(), logits.size() * sizeof(float)) == 0;
    }
};

void record(Trace &t, llm_session *s, int32_t status, int32_t token) {
    t.status.push_back(status);
    t.token.push_back(token);
    const float *lg = nullptr;
    int32_t nv = 0;
    REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
    t.logits.insert(t.logits.end(), lg, lg + nv);
}

// A session alone, llm_session_next steps at a time (LLM_DONE leaves the session unchanged).
Trace solo(llm_model *m, const Spec &sp, int32_t n_ctx, const std::vector<int32_t> &prompt, int steps = kSteps,
           bool context_shift = false) {
    llm_session *s = open_session(m, sp, n_ctx, prompt, context_shift);
    Trace t;
    for (int i = 0; i < steps; ++i) {
        int32_t tok = -1;
        const int32_t st = llm_session_next(s, &tok, nullptr, 0, nullptr);
        REQUIRE((st == LLM_OK || st == LLM_DONE));
        record(t, s, st, tok);
    }
    llm_session_free(s);
    return t;
}

// Sessions advanced together; every call must succeed.
std::vector<Trace> batched(const std::vector<llm_session *> &ss, int steps = kSteps) {
    std::vector<Trace> t(ss.size());
    std::vector<int32_t> toks(ss.size()), sts(ss.size());
    for (int i = 0; i < steps; ++i) {
        INFO("step " << i << ": " << llm_last_error());
        REQUIRE(llm_session_next_batch(ss.data(), static_cast<int32_t>(ss.size()), toks.data(), sts.data()) == LLM_OK);
        for (size_t j = 0; j < ss.size(); ++j) record(t[j], ss[j], sts[j], toks[j]);
    }
    return t;
}

uint64_t info_u64(llm_model *m, const char *key) {
    return nlohmann::json::parse(llm_model_info_json(m))["memory"][key].get<uint64_t>();
}

// A session's observable state: n_past, context tokens and last logits.
struct Snapshot {
    int32_t n_past = 0;
    std::vector<int32_t> tokens;
    std::vector<float> logits;
    bool operator==(const Snapshot &o) const {
        return n_past == o.n_past && tokens == o.tokens && logits.size() == o.logits.size() &&
               std::memcmp(logits.data(), o.logits.data(), logits.size() * sizeof(float)) == 0;
    }
};

Snapshot snap(llm_session *s) {
    Snapshot r;
    r.n_past = llm_session_n_past(s);
    r.tokens.resize(static_cast<size_t>(r.n_past));
    int32_t n = 0;
    REQUIRE(llm_session_tokens(s, r.tokens.data(), r.n_past, &n) == LLM_OK);
    const float *lg = nullptr;
    int32_t nv = 0;
    if (llm_session_logits(s, &lg, &nv) == LLM_OK) r.logits.assign(lg, lg + nv);
    return r;
}

// A model file behind llm_io whose reads can be made to fail, or to cancel a session at the n-th read.
struct FlakyFile {
    FILE *f = nullptr;
    uint64_t size = 0;
    std::atomic<bool> fail{false};
    std::atomic<int> cancel_in{0};  // > 0: cancel `victim` when this many more reads have happened
    llm_session *victim = nullptr;

    explicit FlakyFile(const std::string &path) {
        f = std::fopen(path.c_str(), "rb");
        REQUIRE(f);
        std::fseek(f, 0, SEEK_END);
        size = static_cast<uint64_t>(std::ftell(f));
    }
    ~FlakyFile() { std::fclose(f); }
    FlakyFile(const FlakyFile &) = delete;
    FlakyFile &operator=(const FlakyFile &) = delete;

    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) { return static_cast<FlakyFile *>(u)->size; };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *c = static_cast<FlakyFile *>(u);
            if (c->fail) return LLM_ERR_IO;
            if (c->cancel_in > 0 && --c->cancel_in == 0) llm_session_cancel(c->victim);
            // One model, reads never concurrent for it (llm.h): a FILE* is enough.
            if (std::fseek(c->f, static_cast<long>(off), SEEK_SET) != 0) return LLM_ERR_IO;
            return std::fread(dst, 1, n, c->f) == n ? LLM_OK : LLM_ERR_IO;
        };
        return io;
    }
};

}  // namespace

TEST_CASE("next_batch: sessions advanced together equal each one alone, in every residency", "[batch]") {
    std::vector<Fixture> fx = fixtures();
    REQUIRE(fx.size() >= 50);
    std::vector<Mode> modes = {{"resident", LLM_RESIDENCY_RESIDENT, 1, false},
                               {"streamed depth 0", LLM_RESIDENCY_STREAMED, 0, false},
                               {"streamed depth 1", LLM_RESIDENCY_STREAMED, 1, false},
                               {"streamed depth 2", LLM_RESIDENCY_STREAMED, 2, false},
                               {"budget", LLM_RESIDENCY_BUDGET, 1, true}};
    if (kReduced) {
        // Every sixth model, resident and streamed.
        std::vector<Fixture> some;
        for (size_t i = 0; i < fx.size(); i += 6) some.push_back(fx[i]);
        fx = some;
        modes = {modes[0], modes[2]};
    }
    for (const Fixture &f : fx) {
        SECTION(f.path + " ctx " + std::to_string(f.n_ctx)) {
            // The reference: each session alone on a resident model (every residency gives the same
            // bits: [streaming]).
            llm_model *ref = load(f.path, modes[0]);
            const std::vector<std::vector<int32_t>> ps = prompts(ref);
            REQUIRE(ps[0].size() != ps[1].size());
            std::vector<Trace> alone;
            for (int i = 0; i < 3; ++i) alone.push_back(solo(ref, kSpecs[i], f.n_ctx, ps[i]));
            const uint64_t min = info_u64(ref, "minimum_weight_bytes");
            const uint64_t total = info_u64(ref, "resident_block_bytes") + info_u64(ref, "lm_head_bytes");
            llm_model_free(ref);
            for (const Mode &md : modes) {
                INFO(f.path << " mode " << md.name);
                llm_model *m = load(f.path, md, md.budget ? (min + total) / 2 : 0);
                std::vector<llm_session *> ss;
                for (int i = 0; i < 3; ++i) ss.push_back(open_session(m, kSpecs[i], f.n_ctx, ps[i]));
                const std::vector<Trace> together = batched(ss);
                for (int i = 0; i < 3; ++i) {
                    INFO("session " << i);
                    CHECK(together[i] == alone[i]);
                }
                for (llm_session *s : ss) llm_session_free(s);
                llm_model_free(m);
            }
        }
    }
}

TEST_CASE("next_batch: more sessions than a sub-batch split across sub-batches, each still as alone", "[batch]") {
    // kSubBatch + 12 rows: a resident unit takes them kSubBatch at a time, so a sub-batch ends between
    // two sessions' rows; a streamed one takes them all at once.
    constexpr int kMany = static_cast<int>(llm::kSubBatch) + 12, kManySteps = 3;
    static_assert(kMany <= llm::kStreamChunk, "a streamed pass must take every row at once");
    llm_model *ref = load(kStories, {"resident", LLM_RESIDENCY_RESIDENT, 1, false});
    const std::vector<int32_t> text = tokenize(ref, "Once upon a time there was a little dog who liked to run");
    REQUIRE(text.size() >= 8);
    std::vector<Spec> specs;
    std::vector<std::vector<int32_t>> ps;
    std::vector<Trace> alone;
    for (int i = 0; i < kMany; ++i) {
        specs.push_back({i % 3 == 0 ? 0.0f : 0.9f, static_cast<uint64_t>(i), i % 2 ? LLM_KV_F32 : LLM_KV_F16});
        ps.emplace_back(text.begin(), text.begin() + 1 + i % 7);
        alone.push_back(solo(ref, specs.back(), 32, ps.back(), kManySteps));
    }
    for (const Mode &md : {Mode{"resident", LLM_RESIDENCY_RESIDENT, 1, false},
                           Mode{"streamed depth 1", LLM_RESIDENCY_STREAMED, 1, false}}) {
        INFO(md.name);
        llm_model *m = md.residency == LLM_RESIDENCY_RESIDENT ? ref : load(kStories, md);
        std::vector<llm_session *> ss;
        for (int i = 0; i < kMany; ++i)
            ss.push_back(open_session(m, specs[static_cast<size_t>(i)], 32, ps[static_cast<size_t>(i)]));
        const std::vector<Trace> t = batched(ss, kManySteps);
        for (size_t i = 0; i < ss.size(); ++i) {
            INFO("session " << i);
            CHECK(t[i] == alone[i]);
        }
        for (llm_session *s : ss) llm_session_free(s);
        if (m != ref) llm_model_free(m);
    }
    llm_model_free(ref);
}

TEST_CASE("next_batch: more sessions than a prompt chunk take several passes, each still as alone", "[batch]") {
    // Streamed, a pass takes at most kStreamChunk (256) rows: 260 sessions go in two passes, each
    // reading the streamed blocks once, so the step reads about twice what one pass reads.
    constexpr int kMany = 260;
    const Mode md{"streamed depth 1", LLM_RESIDENCY_STREAMED, 1, false};
    llm_model *m = load(kStories, md);
    const std::vector<int32_t> text = tokenize(m, "Once upon a time there was a little dog");
    auto open1 = [&](int i) {
        llm_session_params p;
        llm_session_params_init(&p, LLM_SESSION_PARAMS_VERSION);
        p.n_ctx = 16;
        p.n_threads = 1;
        p.temperature = i % 2 ? 0.0f : 0.9f;
        p.seed = static_cast<uint64_t>(i);
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &p, &s) == LLM_OK);
        REQUIRE(llm_session_prefill(s, text.data(), 1 + static_cast<size_t>(i) % 3) == LLM_OK);
        return s;
    };
    std::vector<Trace> alone;
    uint64_t one_pass = 0;
    for (int i = 0; i < kMany; ++i) {
        llm_session *s = open1(i);
        Trace t;
        int32_t tok = -1;
        const int32_t st = llm_session_next(s, &tok, nullptr, 0, nullptr);
        REQUIRE((st == LLM_OK || st == LLM_DONE));
        record(t, s, st, tok);
        alone.push_back(t);
        llm_stats last;
        llm_stats_init(&last, LLM_STATS_VERSION);
        REQUIRE(llm_session_stats(s, nullptr, &last) == LLM_OK);
        if (i == 0) one_pass = last.bytes_read;
        llm_session_free(s);
    }
    std::vector<llm_session *> ss;
    for (int i = 0; i < kMany; ++i) ss.push_back(open1(i));
    const std::vector<Trace> t = batched(ss, 1);
    for (size_t i = 0; i < ss.size(); ++i) {
        INFO("session " << i);
        CHECK(t[i] == alone[i]);
    }
    llm_stats last;
    llm_stats_init(&last, LLM_STATS_VERSION);
    REQUIRE(llm_session_stats(ss[0], nullptr, &last) == LLM_OK);
    INFO("one pass " << one_pass << " bytes, the batched step " << last.bytes_read);
    CHECK(last.bytes_read > one_pass + one_pass / 2);
    CHECK(last.bytes_read < 2 * one_pass + one_pass / 2);
    CHECK(last.passes == 1);  // each session takes part in one of the two passes
    for (llm_session *s : ss) llm_session_free(s);
    llm_model_free(m);
}

TEST_CASE("next_batch: a context shift on a windowed (ring) cache goes as alone", "[batch]") {
    // gemma3's sliding-window layers keep a ring (window 6 here) that has wrapped before the shift;
    // the shift marks the cache for Session::restore_window's check, which runs in the batch (a
    // shift keeps the window, so it finds nothing to recompute: kv_recomputed_tokens stays 0).
    const std::string path = kShared + "/fixtures/models/gemma3.q8_0.gguf";
    llm_model *m = load(path, {"resident", LLM_RESIDENCY_RESIDENT, 1, false});
    const auto ps = prompts(m);
    const Spec shifty{0.9f, 3, LLM_KV_F16};
    const int32_t ctx = 96;
    constexpr int kLong = 100;
    const Trace alone = solo(m, shifty, ctx, ps[1], kLong, true);
    llm_session *a = open_session(m, shifty, ctx, ps[1], true);
    llm_session *b = open_session(m, kSpecs[0], 0, ps[0]);
    const std::vector<Trace> t = batched({b, a}, kLong);
    CHECK(t[1] == alone);
    INFO(llm_session_stats_json(a));
    llm_stats st;
    llm_stats_init(&st, LLM_STATS_VERSION);
    REQUIRE(llm_session_stats(a, &st, nullptr) == LLM_OK);
    CHECK(st.generated_tokens == static_cast<uint64_t>(std::count(t[1].status.begin(), t[1].status.end(), LLM_OK)));
    CHECK(nlohmann::json::parse(llm_session_stats_json(a))["context_shifts"].get<int>() > 0);
    llm_session_free(a);
    llm_session_free(b);
    llm_model_free(m);
}

TEST_CASE("next_batch: a streamed pass reads each block once for all sessions", "[batch]") {
    const std::string path = kShared + "/fixtures/models/llama.q8_0.gguf";
    llm_model *m = load(path, {"streamed depth 1", LLM_RESIDENCY_STREAMED, 1, false});
    const auto ps = prompts(m);
    std::vector<llm_session *> ss;
    for (int i = 0; i < 3; ++i) ss.push_back(open_session(m, kSpecs[i], 0, ps[i]));
    llm_stats solo_total, solo_last, last;
    llm_stats_init(&solo_total, LLM_STATS_VERSION);
    llm_stats_init(&solo_last, LLM_STATS_VERSION);
    llm_stats_init(&last, LLM_STATS_VERSION);
    // One session alone: its step reads every streamed matrix.
    int32_t tok;
    REQUIRE(llm_session_next(ss[0], &tok, nullptr, 0, nullptr) == LLM_OK);
    REQUIRE(llm_session_stats(ss[0], &solo_total, &solo_last) == LLM_OK);
    const uint64_t one = solo_last.bytes_read;
    REQUIRE(one > 0);
    // Three together: about the same bytes, counted on the first session; the others read nothing.
    std::vector<int32_t> toks(3), sts(3);
    REQUIRE(llm_session_next_batch(ss.data(), 3, toks.data(), sts.data()) == LLM_OK);
    REQUIRE(llm_session_stats(ss[0], nullptr, &last) == LLM_OK);
    INFO("solo step " << one << " bytes, batched step " << last.bytes_read);
    CHECK(last.bytes_read < one + one / 4);
    CHECK(last.bytes_read > one - one / 4);
    CHECK(last.passes == 1);
    CHECK(last.generated_tokens == 1);
    for (int i = 1; i < 3; ++i) {
        REQUIRE(llm_session_stats(ss[i], nullptr, &last) == LLM_OK);
        CHECK(last.bytes_read == 0);
        CHECK(last.passes == 1);
        CHECK(last.generated_tokens == 1);
    }
    for (llm_session *s : ss) llm_session_free(s);
    llm_model_free(m);
}

TEST_CASE("next_batch: a full context or an end of text stops that session only", "[batch]") {
    llm_model *m = load(kStories, {"resident", LLM_RESIDENCY_RESIDENT, 1, false});
    const auto ps = prompts(m);
    const Trace b_alone = solo(m, kSpecs[1], 0, ps[1], 6);

    SECTION("context full") {
        const int32_t ctx = static_cast<int32_t>(ps[0].size()) + 2;
        std::vector<llm_session *> ss = {open_session(m, kSpecs[0], ctx, ps[0]), open_session(m, kSpecs[1], 0, ps[1])};
        std::vector<int32_t> toks(2), sts(2);
        for (int i = 0; i < 6; ++i) {
            const Snapshot before = snap(ss[0]);
            REQUIRE(llm_session_next_batch(ss.data(), 2, toks.data(), sts.data()) == LLM_OK);
            CHECK(sts[1] == LLM_OK);
            CHECK(toks[1] == b_alone.token[static_cast<size_t>(i)]);
            if (i < 2) {
                CHECK(sts[0] == LLM_OK);
                CHECK(toks[0] >= 0);
            } else {
                CHECK(sts[0] == LLM_ERR_CONTEXT_FULL);
                CHECK(toks[0] == -1);
                CHECK(snap(ss[0]) == before);
            }
        }
        CHECK(llm_session_n_past(ss[0]) == ctx);
        for (llm_session *s : ss) llm_session_free(s);
    }
    SECTION("context shift makes room as it does alone") {
        const int32_t ctx = static_cast<int32_t>(ps[0].size()) + 3;
        const Spec shifty{0.9f, 99, LLM_KV_F16};
        const Trace a_alone = solo(m, shifty, ctx, ps[0], 10, true);
        std::vector<llm_session *> ss = {open_session(m, shifty, ctx, ps[0], true),
                                         open_session(m, kSpecs[1], 0, ps[1])};
        const std::vector<Trace> t = batched(ss, 6);
        CHECK(t[1] == b_alone);
        const std::vector<Trace> t2 = batched({ss[0]}, 4);
        Trace a = t[0];
        a.status.insert(a.status.end(), t2[0].status.begin(), t2[0].status.end());
        a.token.insert(a.token.end(), t2[0].token.begin(), t2[0].token.end());
        a.logits.insert(a.logits.end(), t2[0].logits.begin(), t2[0].logits.end());
        CHECK(a == a_alone);
        llm_stats st;
        llm_stats_init(&st, LLM_STATS_VERSION);
        REQUIRE(llm_session_stats(ss[0], &st, nullptr) == LLM_OK);
        CHECK(st.generated_tokens == 10);
        for (llm_session *s : ss) llm_session_free(s);
    }
    SECTION("end of text") {
        // A context and a sampler whose first token ends the text: after a story sentence, the token
        // that makes the end of text likeliest, then the first seed that samples it.
        std::vector<int32_t> story =
            tokenize(m, "Once upon a time, there was a little girl named Lily. She liked to play.");
        llm_session *g = open_session(m, kSpecs[0], 0, story);
        const int32_t nv = llm_model_n_vocab(m), eos = llm_model_token_eos(m);
        const int32_t n0 = llm_session_n_past(g);
        int32_t best = -1;
        float best_gap = -1e30f;
        for (int32_t t = 0; t < nv; ++t) {
            if (llm_model_token_is_eog(m, t)) continue;
            REQUIRE(llm_session_truncate(g, n0) == LLM_OK);
            REQUIRE(llm_session_accept(g, t) == LLM_OK);
            const float *lg = nullptr;
            int32_t n = 0;
            REQUIRE(llm_session_logits(g, &lg, &n) == LLM_OK);
            const float gap = lg[eos] - *std::max_element(lg, lg + n);
            if (gap > best_gap) {
                best_gap = gap;
                best = t;
            }
        }
        llm_session_free(g);
        story.push_back(best);
        // Draws from the same logits until one ends the text; sessions that make the draws before
        // it first then sample it next.
        const Spec hot{1.5f, 5, LLM_KV_F16, true};
        llm_session *h = open_session(m, hot, 0, story);
        int burn = 0;
        for (;; ++burn) {
            INFO("end of text at " << best_gap << " below the top logit");
            REQUIRE(burn < 20000);
            int32_t t = -1;
            REQUIRE(llm_session_sample(h, &t) == LLM_OK);
            if (llm_model_token_is_eog(m, t)) break;
        }
        llm_session_free(h);
        auto open_hot = [&] {
            llm_session *x = open_session(m, hot, 0, story);
            int32_t t = -1;
            for (int i = 0; i < burn; ++i) REQUIRE(llm_session_sample(x, &t) == LLM_OK);
            return x;
        };
        Trace a_alone;
        {
            llm_session *x = open_hot();
            for (int i = 0; i < 6; ++i) {
                int32_t t = -1;
                const int32_t st = llm_session_next(x, &t, nullptr, 0, nullptr);
                REQUIRE((st == LLM_OK || st == LLM_DONE));
                record(a_alone, x, st, t);
            }
            llm_session_free(x);
        }
        REQUIRE(a_alone.status[0] == LLM_DONE);
        std::vector<llm_session *> ss = {open_hot(), open_session(m, kSpecs[1], 0, ps[1])};
        const Snapshot before = snap(ss[0]);
        std::vector<int32_t> toks(2), sts(2);
        REQUIRE(llm_session_next_batch(ss.data(), 2, toks.data(), sts.data()) == LLM_OK);
        CHECK(sts[0] == LLM_DONE);
        CHECK(llm_model_token_is_eog(m, toks[0]));
        CHECK(sts[1] == LLM_OK);
        CHECK(snap(ss[0]) == before);
        for (llm_session *s : ss) llm_session_free(s);
        // And over several steps, the same as alone (the session samples again after its DONE).
        ss = {open_hot(), open_session(m, kSpecs[1], 0, ps[1])};
        const std::vector<Trace> t = batched(ss, 6);
        CHECK(t[0] == a_alone);
        CHECK(t[1] == b_alone);
        for (llm_session *s : ss) llm_session_free(s);
    }
    llm_model_free(m);
}

TEST_CASE("next_batch: bad arguments fail and change no session", "[batch][api]") {
    llm_model *m = load(kStories, {"resident", LLM_RESIDENCY_RESIDENT, 1, false});
    llm_model *other = load(kStories, {"resident", LLM_RESIDENCY_RESIDENT, 1, false});
    const auto ps = prompts(m);
    llm_session *a = open_session(m, kSpecs[1], 0, ps[0]);
    llm_session *b = open_session(m, kSpecs[2], 0, ps[1]);
    llm_session *c = open_session(other, kSpecs[1], 0, ps[2]);
    const Snapshot sa = snap(a), sb = snap(b), sc = snap(c);
    std::vector<int32_t> toks(3, 7), sts(3, 7);
    llm_session *none[2] = {a, nullptr};
    llm_session *twice[3] = {a, b, a};
    llm_session *mixed[3] = {a, b, c};
    llm_session *ok[2] = {a, b};
    CHECK(llm_session_next_batch(nullptr, 2, toks.data(), sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(none, 2, toks.data(), sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(twice, 3, toks.data(), sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(mixed, 3, toks.data(), sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(ok, 0, toks.data(), sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(ok, -1, toks.data(), sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(ok, 2, nullptr, sts.data()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_next_batch(ok, 2, toks.data(), nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("llm_session_next_batch") != std::string::npos);
    CHECK(snap(a) == sa);
    CHECK(snap(b) == sb);
    CHECK(snap(c) == sc);
    // A session without logits fails alone; the other advances.
    REQUIRE(llm_session_reset(a) == LLM_OK);
    REQUIRE(llm_session_next_batch(ok, 2, toks.data(), sts.data()) == LLM_OK);
    CHECK(sts[0] == LLM_ERR_INVALID_ARGUMENT);
    CHECK(toks[0] == -1);
    CHECK(llm_session_n_past(a) == 0);
    CHECK(sts[1] == LLM_OK);
    CHECK(llm_session_n_past(b) == sb.n_past + 1);
    for (llm_session *s : {a, b, c}) llm_session_free(s);
    llm_model_free(other);
    llm_model_free(m);
}

TEST_CASE("next_batch: a cancel or a failed read rolls every session back; they go on as if it never happened",
          "[batch]") {
    const std::string path = kShared + "/fixtures/models/llama.q8_0.gguf";
    const Mode md{"streamed depth 1", LLM_RESIDENCY_STREAMED, 1, false};
    constexpr int kN = 7;
    llm_model *ref = load(path, md);
    const auto ps = prompts(ref);
    std::vector<Trace> alone;
    for (int i = 0; i < 3; ++i) alone.push_back(solo(ref, kSpecs[i], 0, ps[i], kN));
    llm_model_free(ref);

    // Streamed through llm_io, so that reads can fail, or cancel a session in the middle of a pass.
    FlakyFile file(path);
    const llm_io io = file.io();
    llm_model *m = load(path, md, 0, &io);
    std::vector<llm_session *> ss;
    for (int i = 0; i < 3; ++i) ss.push_back(open_session(m, kSpecs[i], 0, ps[i]));
    std::vector<Trace> got(3);
    auto step = [&] {
        const std::vector<Trace> t = batched(ss, 1);
        for (int i = 0; i < 3; ++i) {
            Trace &g = got[static_cast<size_t>(i)];
            g.status.push_back(t[static_cast<size_t>(i)].status[0]);
            g.token.push_back(t[static_cast<size_t>(i)].token[0]);
            g.logits.insert(g.logits.end(), t[static_cast<size_t>(i)].logits.begin(),
                            t[static_cast<size_t>(i)].logits.end());
        }
    };
    auto failing = [&](const char *what, bool cancelled) {
        INFO(what);
        std::vector<Snapshot> before;
        for (llm_session *s : ss) before.push_back(snap(s));
        std::vector<int32_t> toks(3, 7), sts(3, 7);
        const int32_t st = llm_session_next_batch(ss.data(), 3, toks.data(), sts.data());
        INFO(llm_last_error());
        if (cancelled) {
            CHECK(st == LLM_ERR_CANCELLED);
        } else {
            CHECK(st != LLM_OK);
            CHECK(st != LLM_ERR_CANCELLED);
        }
        for (size_t i = 0; i < 3; ++i) {
            CHECK(toks[i] == -1);
            CHECK(snap(ss[i]) == before[i]);
        }
    };
    step();
    llm_session_cancel(ss[1]);  // pending from between calls: next_batch continues, so it applies
    failing("pending cancel", true);
    step();
    file.victim = ss[2];
    file.cancel_in = 2;  // during the pass, from the reads
    failing("cancel during the pass", true);
    step();
    file.fail = true;
    failing("failed read", false);
    file.fail = false;
    for (int i = 0; i < kN - 3; ++i) step();
    for (size_t i = 0; i < 3; ++i) {
        INFO("session " << i);
        CHECK(got[i] == alone[i]);
    }
    for (llm_session *s : ss) llm_session_free(s);
    llm_model_free(m);
}

// forward_batch itself: segments of several tokens (a prefill's shape), logits in separate buffers
// (through the scratch) and every row's logits or only the last, each as forward() alone.

TEST_CASE("forward_batch: multi-token segments with separate logits equal forward() of each alone", "[batch]") {
    using namespace llm;
    for (const char *fx : {"llama.q8_0.gguf", "gemma3.q8_0.gguf", "phi2.q8_0.gguf"}) {
        for (Residency r : {Residency::RESIDENT, Residency::STREAMED}) {
            INFO(fx << " residency " << static_cast<int>(r));
            LoadOptions opt;
            opt.n_threads = 2;
            opt.store.residency = r;
            auto model = Model::load(WeightSource::open(open_file_source(kShared + "/fixtures/models/" + fx)), opt);
            const ModelConfig &c = model->config();
            const int64_t V = c.n_vocab;
            ThreadPool pool(2);
            // Segment lengths 5 (every row's logits), more than a sub-batch (last row only), 1; each
            // fits the 256-position caches below.
            constexpr int64_t kLong = kSubBatch + 12;
            static_assert(kLong <= 256, "the segment must fit its cache");
            const std::vector<int64_t> lens = {5, kLong, 1};
            const std::vector<bool> all = {true, false, false};
            std::vector<std::vector<int32_t>> toks;
            for (size_t i = 0; i < lens.size(); ++i) {
                toks.emplace_back();
                for (int64_t p = 0; p < lens[i]; ++p)
                    toks.back().push_back(static_cast<int32_t>((p * 37 + i * 11 + 1) % V));
            }
            auto rows = [&](size_t i) { return all[i] ? lens[i] : 1; };
            // Alone: each on its own cache, from position 0.
            std::vector<std::vector<float>> alone;
            for (size_t i = 0; i < lens.size(); ++i) {
                IoStats io;
                BlockStreamer bs(model->layers(), io);
                KvCache kv(c, 256, KvType::F16, KvType::F16);
                Scratch s;
                ForwardRequest q;
                q.tokens = toks[i].data();
                q.n_tokens = lens[i];
                q.all_logits = all[i];
                alone.emplace_back(static_cast<size_t>(rows(i) * V));
                q.logits = alone.back().data();
                q.blocks = &bs;
                q.stats = &io;
                forward(*model, kv, s, &pool, q);
            }
            // Together: the same segments in one pass, logits in separate buffers.
            IoStats io;
            BlockStreamer bs(model->layers(), io);
            std::vector<std::unique_ptr<KvCache>> kvs;
            std::vector<std::vector<float>> got;
            std::vector<ForwardSegment> segs;
            for (size_t i = 0; i < lens.size(); ++i) {
                kvs.push_back(std::make_unique<KvCache>(c, 256, KvType::F16, KvType::F16));
                got.emplace_back(static_cast<size_t>(rows(i) * V));
            }
            for (size_t i = 0; i < lens.size(); ++i) {
                ForwardSegment g;
                g.kv = kvs[i].get();
                g.tokens = toks[i].data();
                g.n_tokens = lens[i];
                g.all_logits = all[i];
                g.logits = got[i].data();
                segs.push_back(g);
            }
            Scratch s;
            forward_batch(*model, segs.data(), segs.size(), s, &pool, &bs, &io);
            for (size_t i = 0; i < lens.size(); ++i) {
                INFO("segment " << i);
                CHECK(std::memcmp(got[i].data(), alone[i].data(), got[i].size() * sizeof(float)) == 0);
            }
        }
    }
}
