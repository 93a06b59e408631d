// The KV cache: element types, the sliding-window ring (bit-identical to a full cache), truncation
// over a ring, and the memory plan's count.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"
#include "gguf/weight_source.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "llm.h"
#include "model/kv_cache.h"
#include "model/limits.h"
#include "model/model.h"
#include "runtime/session.h"
#include "test_files.h"

using namespace llm;

namespace {

const std::string kShared = LLM_SHARED_DIR;

std::unique_ptr<Model> load(const std::string &fixture, Residency r = Residency::RESIDENT) {
    LoadOptions opt;
    opt.n_threads = 2;
    opt.store.residency = r;
    return Model::load(WeightSource::open(open_file_source(kShared + "/fixtures/models/" + fixture)), opt);
}

SessionOptions options(int32_t n_ctx, KvType t, bool ring, bool all = true) {
    SessionOptions o;
    o.n_ctx = n_ctx;
    o.n_threads = 2;
    o.logits_all = all;
    o.kv_type_k = o.kv_type_v = t;
    o.kv_ring = ring;
    o.sampling.temperature = 0.0f;
    return o;
}

std::vector<int32_t> random_tokens(const Model &m, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (auto &x : t) x = static_cast<int32_t>(rng() % m.config().n_vocab);
    return t;
}

// Every logits row of the last call, as bytes.
std::vector<uint8_t> logit_bytes(const Session &s) {
    const size_t row = s.model().config().n_vocab * sizeof(float);
    std::vector<uint8_t> out(row * static_cast<size_t>(s.logits_rows()));
    for (int64_t r = 0; r < s.logits_rows(); ++r) std::memcpy(out.data() + r * row, s.logits(r), row);
    return out;
}

uint64_t recomputed(const Session &s) { return nlohmann::json::parse(s.stats_json())["kv_recomputed_tokens"]; }

}  // namespace

TEST_CASE("KV rows: F16 rounds to nearest even, Q8_0 is the activation quantizer's blocks", "[kv]") {
    auto m = load("llama.f32.gguf");
    const ModelConfig &c = m->config();
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    std::vector<float> k(c.n_kv()), v(c.n_kv()), got(c.n_kv());
    for (auto &x : k) x = u(rng);
    for (auto &x : v) x = u(rng);
    for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0}) {
        INFO(name(t));
        KvCache kv(c, 16, t, t);
        CHECK(kv.row_bytes_k(1) == kv_row_bytes(t, c.n_kv()));
        kv.store(1, 5, k.data(), v.data());
        kv.read_k(1, 5, 0, c.n_kv(), got.data());
        std::vector<float> want(c.n_kv());
        if (t == KvType::F32) want = k;
        if (t == KvType::F16)
            for (size_t i = 0; i < want.size(); ++i) want[i] = fp16_to_f32(f32_to_fp16(k[i]));
        if (t == KvType::Q8_0) {
            std::vector<BlockQ8_0> b(c.n_kv() / QK);
            quantize_row_q8_0(k.data(), b.data(), c.n_kv());
            for (size_t i = 0; i < want.size(); ++i) want[i] = fp16_to_f32(b[i / QK].d) * b[i / QK].qs[i % QK];
            CHECK(std::memcmp(kv.k_row(1, 5), b.data(), kv.row_bytes_k(1)) == 0);
        }
        CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
        CHECK(kv.bytes() == 2ull * c.n_layer * 16 * kv_row_bytes(t, c.n_kv()));
    }
    // A row that is not whole blocks is zero-padded to them.
    CHECK(kv_row_bytes(KvType::Q8_0, 40) == 2 * sizeof(BlockQ8_0));
}

TEST_CASE("KV ring: windowed layers keep window + KV write batch - 1 positions, global layers n_ctx", "[kv]") {
    auto m = load("gemma3.f32.gguf");  // window 6, pattern 2: layer 0 slides, layer 1 is global
    const ModelConfig &c = m->config();
    REQUIRE(c.is_swa(0));
    REQUIRE_FALSE(c.is_swa(1));
    KvCache ring(c, 256, KvType::F16, KvType::F16), full(c, 256, KvType::F16, KvType::F16, false);
    const int32_t cap = static_cast<int32_t>(c.swa_window + kKvWriteBatch - 1);
    CHECK(ring.capacity(0) == cap);
    CHECK(ring.capacity(1) == 256);
    CHECK(full.capacity(0) == 256);
    CHECK(ring.bytes() == static_cast<uint64_t>(cap + 256) * 2 * kv_row_bytes(KvType::F16, c.n_kv()));
    CHECK(ring.bytes() == KvCache::planned_bytes(c, 256, KvType::F16, KvType::F16));
    CHECK(m->memory_plan(256, KvType::F16, KvType::F16).kv_cache_bytes == ring.bytes());
    CHECK(m->memory_plan(256, KvType::Q8_0, KvType::F32).kv_cache_bytes ==
          static_cast<uint64_t>(cap + 256) *
              (kv_row_bytes(KvType::Q8_0, c.n_kv()) + kv_row_bytes(KvType::F32, c.n_kv())));
    // A window at least the context: no ring.
    CHECK_FALSE(KvCache(c, 16, KvType::F32, KvType::F32).is_ring(0));

    // The ring knows which positions it still holds.
    std::vector<float> k(c.n_kv(), 1.0f), v(c.n_kv(), 2.0f);
    for (int32_t p = 0; p < cap + 10; ++p) ring.store(0, p, k.data(), v.data());
    CHECK_FALSE(ring.holds(0, 9));
    CHECK(ring.holds(0, 10));
    CHECK(ring.holds(1, 9));
    CHECK(ring.holds_window_before(cap + 10));
    ring.store(0, cap + 10, k.data(), v.data());  // takes position 11's slot, which a query at 14 reads
    CHECK_FALSE(ring.holds_window_before(14));
    CHECK(ring.holds_window_before(cap + 11));
}

TEST_CASE("KV ring: logits equal a full cache's bit for bit past the window, prefill and decode", "[kv][cpu-neutral]") {
    struct Case {
        const char *fixture;
        Residency residency;
        KvType type;
    };
    const Case cases[] = {
        {"gemma2.f32.gguf", Residency::RESIDENT, KvType::F32},  {"gemma2.q8_0.gguf", Residency::STREAMED, KvType::F32},
        {"gemma3.f32.gguf", Residency::RESIDENT, KvType::F16},  {"gemma3.q8_0.gguf", Residency::STREAMED, KvType::F16},
        {"gemma3.f32.gguf", Residency::STREAMED, KvType::Q8_0},
    };
    for (size_t c = 0; c < std::size(cases); ++c) {
        const Case &cs = cases[c];
        // Slow builds (sanitizers, qemu) take cases 0, 2 and 4: each KV type, both residencies.
        if (test::kSlowBuild && c % 2 == 1) continue;
        SECTION(std::string(cs.fixture) + (cs.residency == Residency::STREAMED ? " streamed " : " resident ") +
                name(cs.type)) {
            auto m = load(cs.fixture, cs.residency);
            // 700 prompt tokens: two prompt chunks, the ring (window + 63 slots) wraps many times.
            const std::vector<int32_t> prompt = random_tokens(*m, 700, 5);
            Session ring(*m, options(1024, cs.type, true)), full(*m, options(1024, cs.type, false));
            REQUIRE(ring.kv_cache().bytes() < full.kv_cache().bytes());
            ring.prefill(prompt.data(), prompt.size());
            full.prefill(prompt.data(), prompt.size());
            CHECK(logit_bytes(ring) == logit_bytes(full));
            for (int i = 0; i < 20; ++i) {
                const int32_t t = full.sample();
                REQUIRE(ring.sample() == t);
                ring.accept(t);
                full.accept(t);
                REQUIRE(logit_bytes(ring) == logit_bytes(full));
            }
        }
    }
}

TEST_CASE("KV ring: truncation recomputes exactly when the ring lost positions the next token reads", "[kv][cpu-neutral]") {
    for (Residency r : {Residency::RESIDENT, Residency::STREAMED}) {
        SECTION(r == Residency::STREAMED ? "streamed" : "resident") {
            auto m = load("gemma2.f32.gguf", r);  // window 8, ring of 71 on the sliding layers
            const std::vector<int32_t> seq = random_tokens(*m, 300, 9);
            const std::vector<int32_t> more = random_tokens(*m, 5, 10);
            // Reference: a session that only ever saw the kept tokens, then `more`.
            auto reference = [&](int32_t keep) {
                Session s(*m, options(512, KvType::F16, true));
                s.prefill(seq.data(), static_cast<size_t>(keep));
                s.prefill(more.data(), more.size());
                return logit_bytes(s);
            };
            Session s(*m, options(512, KvType::F16, true));
            s.prefill(seq.data(), seq.size());

            // Back by 3: the ring still holds the 7 positions before 297.
            s.truncate(297);
            s.prefill(more.data(), more.size());
            CHECK(recomputed(s) == 0);
            CHECK(logit_bytes(s) == reference(297));

            // Back by 150: those positions were overwritten long ago; the cache is rebuilt first.
            s.truncate(152);
            s.prefill(more.data(), more.size());
            CHECK(recomputed(s) == 152);
            CHECK(logit_bytes(s) == reference(152));
            CHECK(s.n_past() == 157);
        }
    }
}

// Context shift renumbers positions, so a ring's rows move to other slots: the logits after every
// shift must equal those of a full-length cache (same rows moved, same keys re-rotated).
TEST_CASE("KV ring: context shift equals a full cache's bit for bit", "[kv][shift][cpu-neutral]") {
    for (const char *fixture : {"gemma2.f32.gguf", "gemma3.f32.gguf"}) {
        auto m = load(fixture);
        const std::vector<int32_t> prompt = random_tokens(*m, 90, 21), more = random_tokens(*m, 70, 22);
        for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0}) {
            INFO(fixture << " " << name(t));
            SessionOptions ro = options(100, t, true, false), fo = options(100, t, false, false);
            for (SessionOptions *o : {&ro, &fo}) {
                o->context_shift = true;
                o->n_keep = 4;
            }
            Session ring(*m, ro), full(*m, fo);
            ring.prefill(prompt.data(), prompt.size());
            full.prefill(prompt.data(), prompt.size());
            for (int32_t tok : more) {
                ring.accept(tok);
                full.accept(tok);
                REQUIRE(logit_bytes(ring) == logit_bytes(full));
            }
            CHECK(ring.stats().context_shifts == 2);
            CHECK(ring.tokens() == full.tokens());
            CHECK(recomputed(ring) == 0);
        }
    }
}

TEST_CASE("ignore-eos (tools): the best token that does not end generation", "[kv][tools]") {
    llm_model *m = nullptr;
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    REQUIRE(llm_model_load((kShared + "/models/stories260K.gguf").c_str(), &mp, &m) == LLM_OK);
    const int32_t nv = llm_model_n_vocab(m), eos = llm_model_token_eos(m);
    REQUIRE((eos >= 0 && llm_model_token_is_eog(m, eos)));
    std::vector<float> lg(static_cast<size_t>(nv), 0.0f);
    lg[static_cast<size_t>(eos)] = 9.0f;
    lg[17] = 5.0f;
    lg[300] = 4.0f;
    CHECK(tools::best_non_eog(m, lg.data(), nv) == 17);
    lg[17] = 3.0f;
    CHECK(tools::best_non_eog(m, lg.data(), nv) == 300);
    llm_model_free(m);
}
