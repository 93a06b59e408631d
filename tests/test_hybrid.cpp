// Hybrid models (issue 27): gated delta-net layers with a recurrent state beside attention layers.
// Their goldens are test_golden's; here: the state in the memory plan, prefill equal to decode bit
// for bit, truncation and failed passes recomputed exactly, batched sessions each on their own
// state, and the features that cannot carry a recurrent state yet refusing cleanly.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "gguf/byte_source.h"
#include "gguf/weight_source.h"
#include "gguf_writer.h"
#include "llm.h"
#include "model/limits.h"
#include "test_files.h"

namespace {

const std::string kDir = std::string(LLM_SHARED_DIR) + "/fixtures/qwen35/models/";

struct Model {
    llm_model *m = nullptr;
    // file: under the fixtures' models folder (ignored with io)
    explicit Model(const std::string &file, int32_t residency = LLM_RESIDENCY_RESIDENT, const llm_io *io = nullptr,
                   int32_t prefetch = 1) {
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        mp.n_threads = 2;
        mp.residency = residency;
        mp.prefetch_depth = prefetch;
        const int32_t st = io ? llm_model_load_io(io, &mp, &m) : llm_model_load((kDir + file).c_str(), &mp, &m);
        INFO(llm_last_error());
        REQUIRE(st == LLM_OK);
    }
    ~Model() { llm_model_free(m); }
    Model(const Model &) = delete;
    Model &operator=(const Model &) = delete;
};

struct Session {
    llm_session *s = nullptr;
    explicit Session(llm_model *m, bool logits_all = true, int32_t kv = LLM_KV_F32, bool shift = false,
                     int32_t n_ctx = 0) {
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
        sp.n_ctx = n_ctx;
        sp.temperature = 0.0f;
        sp.logits_all = logits_all;
        sp.kv_type_k = sp.kv_type_v = kv;
        sp.context_shift = shift;
        const int32_t st = llm_session_create(m, &sp, &s);
        INFO(llm_last_error());
        REQUIRE(st == LLM_OK);
    }
    ~Session() { llm_session_free(s); }
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;
};

using test::last;
using test::same_bits;
using test::tokens;

// The logits of rows [0, n) of the last prefill (logits_all), or of the last position (n = 1).
std::vector<float> rows(llm_session *s, int n) {
    std::vector<float> out;
    for (int r = 0; r < n; ++r) {
        const float *lg = nullptr;
        int32_t nv = 0;
        REQUIRE(llm_session_logits_ith(s, r, &lg, &nv) == LLM_OK);
        out.insert(out.end(), lg, lg + nv);
    }
    return out;
}

// Every position's logits of `seq` evaluated in one prefill.
std::vector<float> prefill_rows(llm_model *m, const std::vector<int32_t> &seq) {
    Session s(m);
    REQUIRE(llm_session_prefill(s.s, seq.data(), seq.size()) == LLM_OK);
    return rows(s.s, static_cast<int>(seq.size()));
}

const char *const kFiles[] = {"qwen35.f32.gguf", "qwen35.q8_0.gguf", "qwen35moe.q8_0.gguf", "qwen35mtp.q8_0.gguf",
                              "qwen3next.q8_0.gguf"};

}  // namespace

TEST_CASE("hybrid: layer kinds from the metadata, the recurrent state in the memory plan", "[hybrid][model]") {
    for (const char *file : kFiles) {
        SECTION(file) {
            Model m(file);
            const auto info = nlohmann::json::parse(llm_model_info_json(m.m));
            CHECK(info["n_layer"] == 4);  // qwen35mtp: block_count 5, its NextN block skipped
            CHECK(info["layer_kinds"] ==
                  nlohmann::json::array({"gated_delta_net", "gated_delta_net", "gated_delta_net", "attention"}));
            // Per recurrent layer (fixtures README): a conv window of 3 x 256 channels and four 32 x 32
            // matrices, f32.
            const uint64_t state = 3ull * (768 + 4096) * 4;
            CHECK(info["memory"]["recurrent_state_bytes"] == state);
            CHECK(info["gated_delta_net"]["state_bytes_per_layer"] == (768 + 4096) * 4);
            // The KV rows of the one attention layer only: 256 positions of K and V, 2 heads of 64, f16;
            // the state and its 4 checkpoints.
            llm_memory_plan plan;
            REQUIRE(llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION) == LLM_OK);
            REQUIRE(llm_model_memory_plan(m.m, 256, &plan) == LLM_OK);
            CHECK(plan.kv_cache_bytes == 256ull * 2 * 128 * 2 + 5 * state);
            // A session allocates the rows and the state at once, a checkpoint's copy when it is first
            // taken (one per prefill here): after four prefills, what the plan says, and never more.
            llm_session_params sp;
            llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
            sp.n_ctx = 256;
            llm_session *s = nullptr;
            REQUIRE(llm_session_create(m.m, &sp, &s) == LLM_OK);
            auto allocated = [&] { return nlohmann::json::parse(llm_session_stats_json(s))["kv_cache_bytes"]; };
            CHECK(allocated() == plan.kv_cache_bytes - 4 * state);
            const std::vector<int32_t> t = tokens(6);
            for (int i = 0; i < 6; ++i) {
                REQUIRE(llm_session_prefill(s, &t[static_cast<size_t>(i)], 1) == LLM_OK);
                CHECK(allocated() == plan.kv_cache_bytes - static_cast<uint64_t>(std::max(0, 3 - i)) * state);
            }
            llm_session_free(s);
        }
    }
}

TEST_CASE("hybrid: a prefill gives the bits of token-by-token decode, in every residency", "[hybrid][model]") {
    // Crosses the resident sub-batch; the split below falls inside the first one.
    const std::vector<int32_t> seq = tokens(static_cast<int>(llm::kSubBatch) + 22);
    for (const char *file : kFiles) {
        for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
            SECTION(std::string(file) + (res == LLM_RESIDENCY_STREAMED ? " streamed" : " resident")) {
                Model m(file, res);
                const std::vector<float> all = prefill_rows(m.m, seq);
                const size_t nv = all.size() / seq.size();
                // One token at a time.
                Session d(m.m, false);
                REQUIRE(llm_session_prefill(d.s, seq.data(), 1) == LLM_OK);
                std::vector<float> dec = last(d.s);
                for (size_t i = 1; i < seq.size(); ++i) {
                    REQUIRE(llm_session_accept(d.s, seq[i]) == LLM_OK);
                    const std::vector<float> r = last(d.s);
                    dec.insert(dec.end(), r.begin(), r.end());
                }
                CHECK(same_bits(dec, all));
                // Two prefills split inside a sub-batch.
                Session p(m.m);
                REQUIRE(llm_session_prefill(p.s, seq.data(), 37) == LLM_OK);
                std::vector<float> split = rows(p.s, 37);
                REQUIRE(llm_session_prefill(p.s, seq.data() + 37, seq.size() - 37) == LLM_OK);
                const std::vector<float> rest = rows(p.s, static_cast<int>(seq.size()) - 37);
                split.insert(split.end(), rest.begin(), rest.end());
                CHECK(same_bits(split, all));
                CHECK(nv == 512);
            }
        }
    }
}

TEST_CASE("hybrid: truncating to any length and going on gives the logits of the first time", "[hybrid][state]") {
    // A recurrent state cannot be cut back: the next evaluation restores the newest checkpoint at or
    // below the new length and recomputes the tokens after it.
    const std::vector<int32_t> seq = tokens(40, 1);
    for (const char *file : {"qwen35.q8_0.gguf", "qwen3next.q8_0.gguf"}) {
        SECTION(file) {
            Model m(file);
            const std::vector<float> ref = prefill_rows(m.m, seq);
            const size_t nv = ref.size() / seq.size();
            Session s(m.m);
            REQUIRE(llm_session_prefill(s.s, seq.data(), seq.size()) == LLM_OK);
            for (int n = 0; n < 40; ++n) {
                INFO("truncate to " << n);
                REQUIRE(llm_session_truncate(s.s, n) == LLM_OK);
                REQUIRE(llm_session_prefill(s.s, seq.data() + n, seq.size() - static_cast<size_t>(n)) == LLM_OK);
                const std::vector<float> got = rows(s.s, 40 - n);
                CHECK(same_bits(got, std::vector<float>(ref.begin() + static_cast<int64_t>(n * nv), ref.end())));
            }
            // From position 0 every time (no checkpoints) this would be 1 + 2 + ... + 39. Each recompute's
            // end is a checkpoint, so truncating to n + 1 next recomputes one token from n.
            const auto st = nlohmann::json::parse(llm_session_stats_json(s.s));
            CHECK(st["kv_recomputed_tokens"] == 39);
        }
    }
}

TEST_CASE("hybrid: checkpoints at prompt-chunk boundaries and prefill ends bound the recompute", "[hybrid][state]") {
    // 600 tokens run in a 512-token chunk and an 88-token one (256-token chunks when streamed).
    const std::vector<int32_t> seq = tokens(600, 6);
    for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
        SECTION(res == LLM_RESIDENCY_STREAMED ? "streamed" : "resident") {
            const int32_t chunk = res == LLM_RESIDENCY_STREAMED ? 256 : 512;
            Model m("qwen35.q8_0.gguf", res);
            Session ref(m.m, false, LLM_KV_F32, false, 1024);
            REQUIRE(llm_session_prefill(ref.s, seq.data(), seq.size()) == LLM_OK);
            const std::vector<float> want = last(ref.s);
            Session s(m.m, false, LLM_KV_F32, false, 1024);
            auto recomputed = [&] {
                return nlohmann::json::parse(llm_session_stats_json(s.s))["kv_recomputed_tokens"].get<int>();
            };
            REQUIRE(llm_session_prefill(s.s, seq.data(), 580) == LLM_OK);       // checkpoints at chunk, (2 chunk), 580
            REQUIRE(llm_session_prefill(s.s, seq.data() + 580, 20) == LLM_OK);  // and 600
            // Back to 590: from the checkpoint at 580, 10 tokens.
            REQUIRE(llm_session_truncate(s.s, 590) == LLM_OK);
            REQUIRE(llm_session_prefill(s.s, seq.data() + 590, 10) == LLM_OK);
            CHECK(same_bits(last(s.s), want));
            CHECK(recomputed() == 10);
            // Back to 570 (the checkpoints at 580, 590 and 600 dropped): from the chunk boundary below.
            const int32_t below = 570 / chunk * chunk;
            REQUIRE(llm_session_truncate(s.s, 570) == LLM_OK);
            REQUIRE(llm_session_prefill(s.s, seq.data() + 570, 30) == LLM_OK);
            CHECK(same_bits(last(s.s), want));
            CHECK(recomputed() == 10 + 570 - below);
            // A reset forgets them: back to 0 and a new context.
            REQUIRE(llm_session_reset(s.s) == LLM_OK);
            REQUIRE(llm_session_prefill(s.s, seq.data(), 600) == LLM_OK);
            CHECK(same_bits(last(s.s), want));
        }
    }
}

TEST_CASE("hybrid: sessions advanced together by next_batch equal each one alone", "[hybrid][batch]") {
    for (const char *file : {"qwen35.q8_0.gguf", "qwen35moe.q8_0.gguf"}) {
        for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
            SECTION(std::string(file) + (res == LLM_RESIDENCY_STREAMED ? " streamed" : " resident")) {
                Model m(file, res);
                // Alone: each prompt, then 12 greedy tokens.
                const std::vector<int32_t> p0 = tokens(9, 2), p1 = tokens(23, 3);
                std::vector<std::vector<float>> alone(2);
                std::vector<std::vector<int32_t>> alone_tok(2);
                for (int i = 0; i < 2; ++i) {
                    Session s(m.m, false);
                    const std::vector<int32_t> &p = i == 0 ? p0 : p1;
                    REQUIRE(llm_session_prefill(s.s, p.data(), p.size()) == LLM_OK);
                    for (int k = 0; k < 12; ++k) {
                        int32_t t = 0;
                        REQUIRE(llm_session_sample(s.s, &t) == LLM_OK);
                        REQUIRE(llm_session_accept(s.s, t) == LLM_OK);
                        alone_tok[static_cast<size_t>(i)].push_back(t);
                        const std::vector<float> r = last(s.s);
                        alone[static_cast<size_t>(i)].insert(alone[static_cast<size_t>(i)].end(), r.begin(), r.end());
                    }
                }
                Session a(m.m, false), b(m.m, false);
                REQUIRE(llm_session_prefill(a.s, p0.data(), p0.size()) == LLM_OK);
                REQUIRE(llm_session_prefill(b.s, p1.data(), p1.size()) == LLM_OK);
                llm_session *ss[2] = {a.s, b.s};
                std::vector<std::vector<float>> got(2);
                std::vector<std::vector<int32_t>> got_tok(2);
                for (int k = 0; k < 12; ++k) {
                    int32_t toks[2], sts[2];
                    REQUIRE(llm_session_next_batch(ss, 2, toks, sts) == LLM_OK);
                    for (int i = 0; i < 2; ++i) {
                        REQUIRE(sts[i] == LLM_OK);
                        got_tok[static_cast<size_t>(i)].push_back(toks[i]);
                        const std::vector<float> r = last(ss[i]);
                        got[static_cast<size_t>(i)].insert(got[static_cast<size_t>(i)].end(), r.begin(), r.end());
                    }
                }
                for (int i = 0; i < 2; ++i) {
                    CHECK(got_tok[static_cast<size_t>(i)] == alone_tok[static_cast<size_t>(i)]);
                    CHECK(same_bits(got[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]));
                }
            }
        }
    }
}

namespace {

using test::CancellingFile;

}  // namespace

TEST_CASE("hybrid: a pass cancelled half way leaves the context as it was", "[hybrid][state]") {
    const std::vector<int32_t> seq = tokens(30, 4);
    Model ref_m("qwen35.q8_0.gguf");
    const std::vector<float> ref = prefill_rows(ref_m.m, seq);
    const size_t nv = ref.size() / seq.size();

    CancellingFile file(kDir + "qwen35.q8_0.gguf");
    const llm_io io = file.io();
    Model m("", LLM_RESIDENCY_STREAMED, &io, 0);  // synchronous reads: the n-th read is in the pass
    Session s(m.m);
    file.victim = s.s;
    REQUIRE(llm_session_prefill(s.s, seq.data(), 10) == LLM_OK);
    int cancelled = 0;
    // A cancel at the k-th read of the next pass (token rows, then each layer's pieces, then the
    // head), for k over the whole pass: it takes effect at the next layer, so the delta-net layers
    // before it have absorbed the tokens and those after it not.
    for (int k = 1; k <= 40; ++k) {
        INFO("cancel at read " << k);
        file.cancel_in = k;
        const int32_t st = llm_session_prefill(s.s, seq.data() + 10, 10);
        file.cancel_in = 0;
        if (st == LLM_OK) {
            // The pass finished before the k-th read: go back to 10 tokens for the next round.
            REQUIRE(llm_session_truncate(s.s, 10) == LLM_OK);
            continue;
        }
        REQUIRE(st == LLM_ERR_CANCELLED);
        ++cancelled;
        REQUIRE(llm_session_n_past(s.s) == 10);
    }
    CHECK(cancelled >= 6);
    REQUIRE(llm_session_prefill(s.s, seq.data() + 10, seq.size() - 10) == LLM_OK);
    CHECK(same_bits(rows(s.s, 20), std::vector<float>(ref.begin() + static_cast<int64_t>(10 * nv), ref.end())));
    // Each failed pass went back to the checkpoint the first prefill left at 10: nothing recomputed.
    CHECK(nlohmann::json::parse(llm_session_stats_json(s.s))["kv_recomputed_tokens"] == 0);
}

TEST_CASE("hybrid: context shift, which a recurrent state cannot follow, is refused", "[hybrid][state]") {
    Model m("qwen35.q8_0.gguf");
    const std::vector<int32_t> seq = tokens(12, 5);
    Session s(m.m);
    REQUIRE(llm_session_prefill(s.s, seq.data(), seq.size()) == LLM_OK);
    const std::vector<float> before = rows(s.s, 12);
    auto refused = [&](int32_t st, const char *what) {
        INFO(what << ": " << llm_last_error());
        CHECK(st == LLM_ERR_UNSUPPORTED);
        CHECK(std::string(llm_last_error()).find("recurrent state") != std::string::npos);
    };

    llm_session_params p;
    llm_session_params_init(&p, LLM_SESSION_PARAMS_VERSION);
    p.context_shift = true;
    llm_session *shifted = nullptr;
    refused(llm_session_create(m.m, &p, &shifted), "context shift");
    CHECK(shifted == nullptr);

    // The session is as it was: same context, same logits, and it goes on.
    CHECK(llm_session_n_past(s.s) == 12);
    CHECK(same_bits(rows(s.s, 12), before));
    int32_t t = 0;
    REQUIRE(llm_session_sample(s.s, &t) == LLM_OK);
    CHECK(llm_session_accept(s.s, t) == LLM_OK);
}

namespace {

using test::Outcome;

Outcome load_edited(const std::string &file, const std::function<void(llm::GgufWriter &)> &edit,
                    const std::function<bool(const std::string &)> &skip_key = {},
                    const std::function<bool(const std::string &)> &skip_tensor = {}) {
    return test::load_edited(kDir + file, edit, skip_key, skip_tensor);
}

auto key_is(const std::string &k) {
    return [k](const std::string &x) { return x == k; };
}

}  // namespace

TEST_CASE("hybrid: the layer pattern, sections and NextN tail are read as llama.cpp reads them", "[hybrid][refuse]") {
    SECTION("attention.recurrent_layers overrides full_attention_interval") {
        const Outcome same = load_edited(
            "qwen35.q8_0.gguf",
            [](llm::GgufWriter &w) {
                w.add_array<int32_t>("qwen35.attention.recurrent_layers", {1, 1, 1, 0});
                w.add_u32("qwen35.full_attention_interval", 2);  // ignored beside the array
            },
            key_is("qwen35.full_attention_interval"));
        INFO(same.error);
        REQUIRE(same.status == LLM_OK);
        CHECK(nlohmann::json::parse(same.info)["layer_kinds"][3] == "attention");
        // Layer 2 as attention: its q, k, v are missing.
        const Outcome other = load_edited("qwen35.q8_0.gguf", [](llm::GgufWriter &w) {
            w.add_array<int32_t>("qwen35.attention.recurrent_layers", {1, 1, 0, 0});
        });
        CHECK(other.status == LLM_ERR_FORMAT);
        CHECK(other.error.find("blk.2.attn_q.weight") != std::string::npos);
    }
    SECTION("the interval alone") {
        const Outcome o = load_edited(
            "qwen35.q8_0.gguf", [](llm::GgufWriter &w) { w.add_u32("qwen35.full_attention_interval", 2); },
            key_is("qwen35.full_attention_interval"));
        CHECK(o.status == LLM_ERR_FORMAT);  // layer 1 would be attention
        CHECK(o.error.find("blk.1.") != std::string::npos);
    }
    SECTION("IMRoPE needs rope.dimension_sections") {
        const Outcome o = load_edited(
            "qwen35.q8_0.gguf", [](llm::GgufWriter &) {}, key_is("qwen35.rope.dimension_sections"));
        CHECK(o.status == LLM_ERR_FORMAT);
        CHECK(o.error.find("rope.dimension_sections") != std::string::npos);
    }
    SECTION("value heads of another size than the key heads") {
        const Outcome o = load_edited(
            "qwen35.q8_0.gguf", [](llm::GgufWriter &w) { w.add_u32("qwen35.ssm.inner_size", 256); },
            key_is("qwen35.ssm.inner_size"));
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find("ssm.inner_size") != std::string::npos);
    }
    SECTION("one shared expert is what qwen35moe runs; more would be another computation") {
        const Outcome one = load_edited("qwen35moe.q8_0.gguf",
                                        [](llm::GgufWriter &w) { w.add_u32("qwen35moe.expert_shared_count", 1); });
        INFO(one.error);
        CHECK(one.status == LLM_OK);
        const Outcome two = load_edited("qwen35moe.q8_0.gguf",
                                        [](llm::GgufWriter &w) { w.add_u32("qwen35moe.expert_shared_count", 2); });
        CHECK(two.status == LLM_ERR_UNSUPPORTED);
        CHECK(two.error.find("expert_shared_count") != std::string::npos);
    }
    SECTION("a separate beta in a fused-ssm_ba architecture is a tensor nobody reads") {
        const Outcome o = load_edited("qwen3next.q8_0.gguf", [](llm::GgufWriter &w) {
            w.add_tensor("blk.0.ssm_beta.weight", {128, 4}, llm::TensorType::F32, std::vector<uint8_t>(128 * 4 * 4));
        });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find("blk.0.ssm_beta.weight") != std::string::npos);
    }
    SECTION("the NextN block is skipped only as the tail nextn_predict_layers names") {
        // Without the key, block 4 is a fifth layer (recurrent by the interval) with no such tensors.
        const Outcome o = load_edited(
            "qwen35mtp.q8_0.gguf", [](llm::GgufWriter &) {}, key_is("qwen35.nextn_predict_layers"));
        CHECK(o.status == LLM_ERR_FORMAT);
        CHECK(o.error.find("blk.4.") != std::string::npos);
        // A tensor the tail's block has no role for is still refused.
        const Outcome extra = load_edited("qwen35mtp.q8_0.gguf", [](llm::GgufWriter &w) {
            w.add_tensor("blk.4.nextn.mystery.weight", {128}, llm::TensorType::F32, std::vector<uint8_t>(128 * 4));
        });
        CHECK(extra.status == LLM_ERR_UNSUPPORTED);
        CHECK(extra.error.find("blk.4.nextn.mystery.weight") != std::string::npos);
    }
}

// ---- saved sessions ----------------------------------------------------------------------------------

namespace {

llm_session *make_session(llm_model *m, float temperature, int32_t n_ctx = 256, float repeat_penalty = 1.1f) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = temperature;
    sp.seed = 77;
    sp.repeat_penalty = repeat_penalty;
    sp.n_ctx = n_ctx;
    sp.n_threads = 2;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    return s;
}

// n steps of sample + accept; the logits after each go to lg when given.
std::vector<int32_t> gen(llm_session *s, int n, std::vector<float> *lg = nullptr) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        int32_t t = -1;
        REQUIRE(llm_session_sample(s, &t) == LLM_OK);
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
        out.push_back(t);
        if (lg) {
            const std::vector<float> r = last(s);
            lg->insert(lg->end(), r.begin(), r.end());
        }
    }
    return out;
}

std::vector<uint8_t> save_bytes(llm_session *s) {
    std::vector<uint8_t> out;
    llm_writer w{};
    w.version = LLM_WRITER_VERSION;
    w.user = &out;
    w.write = [](void *u, const void *src, uint64_t n) -> int32_t {
        auto *v = static_cast<std::vector<uint8_t> *>(u);
        v->insert(v->end(), static_cast<const uint8_t *>(src), static_cast<const uint8_t *>(src) + n);
        return LLM_OK;
    };
    REQUIRE(llm_session_save_io(s, &w) == LLM_OK);
    return out;
}

int32_t load_bytes(llm_session *s, const std::vector<uint8_t> &b) {
    struct R {
        const std::vector<uint8_t> *b;
    } r{&b};
    llm_io io{};
    io.version = LLM_IO_VERSION;
    io.user = &r;
    io.size = [](void *u) -> uint64_t { return static_cast<R *>(u)->b->size(); };
    io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
        const std::vector<uint8_t> &v = *static_cast<R *>(u)->b;
        if (off > v.size() || n > v.size() - off) return LLM_ERR_IO;
        std::memcpy(dst, v.data() + off, n);
        return LLM_OK;
    };
    return llm_session_load_io(s, &io);
}

}  // namespace

TEST_CASE("hybrid: save, free, reload, load, continue equals an uninterrupted run", "[hybrid][state]") {
    const std::vector<int32_t> prompt = tokens(12, 7), more = tokens(3, 8);
    const std::string path = "hybrid_resume.llmstate";
    for (const char *file : {"qwen35.q8_0.gguf", "qwen35moe.q8_0.gguf", "qwen3next.q8_0.gguf"}) {
        for (float temp : {0.0f, 0.9f}) {
            // after_truncate: saved after a truncation, so the state file holds a checkpoint below
            // n_past and the loading session recomputes the rest.
            for (bool after_truncate : {false, true}) {
                SECTION(std::string(file) + " temperature " + std::to_string(temp) +
                        (after_truncate ? " after a truncation" : "")) {
                    std::vector<int32_t> whole;
                    std::vector<float> whole_lg;
                    {
                        Model m(file);
                        llm_session *s = make_session(m.m, temp);
                        REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                        whole = gen(s, 8);
                        if (after_truncate) {
                            REQUIRE(llm_session_truncate(s, 17) == LLM_OK);
                            REQUIRE(llm_session_prefill(s, more.data(), more.size()) == LLM_OK);
                        }
                        const std::vector<int32_t> rest = gen(s, 12, &whole_lg);
                        whole.insert(whole.end(), rest.begin(), rest.end());
                        llm_session_free(s);
                    }
                    std::vector<int32_t> first;
                    {
                        Model m(file);
                        llm_session *s = make_session(m.m, temp);
                        REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                        first = gen(s, 8);
                        if (after_truncate) REQUIRE(llm_session_truncate(s, 17) == LLM_OK);
                        INFO(llm_last_error());
                        REQUIRE(llm_session_save(s, path.c_str()) == LLM_OK);
                        llm_session_free(s);
                    }
                    Model m(file);
                    llm_session *s = make_session(m.m, temp);
                    REQUIRE(llm_session_load(s, path.c_str()) == LLM_OK);
                    if (after_truncate) {
                        CHECK(llm_session_n_past(s) == 17);
                        REQUIRE(llm_session_prefill(s, more.data(), more.size()) == LLM_OK);
                    }
                    std::vector<float> lg;
                    const std::vector<int32_t> rest = gen(s, 12, &lg);
                    first.insert(first.end(), rest.begin(), rest.end());
                    CHECK(first == whole);
                    CHECK(same_bits(lg, whole_lg));
                    const auto st = nlohmann::json::parse(llm_session_stats_json(s));
                    // Saved after a truncation: the newest checkpoint below 17 is the prompt's end, 12.
                    CHECK(st["kv_recomputed_tokens"] == (after_truncate ? 5 : 0));
                    llm_session_free(s);
                    std::remove(path.c_str());
                }
            }
        }
    }
}

TEST_CASE("hybrid: a truncated or corrupted state is refused and changes nothing", "[hybrid][state][cpu-neutral]") {
    Model m("qwen35.q8_0.gguf");
    const std::vector<int32_t> prompt = tokens(6, 9), other = tokens(7, 10);
    llm_session *src = make_session(m.m, 0.9f, 16);
    REQUIRE(llm_session_prefill(src, prompt.data(), prompt.size()) == LLM_OK);
    gen(src, 2);
    const std::vector<uint8_t> state = save_bytes(src);
    llm_session_free(src);
    INFO("state of " << state.size() << " bytes");
    REQUIRE(state.size() < 80000);

    // The target holds another context, part of it to be recomputed (a truncation): its recurrent
    // state, checkpoints and tokens must survive every failed load; the twin never sees one.
    llm_session *t = make_session(m.m, 0.9f, 16), *twin = make_session(m.m, 0.9f, 16);
    for (llm_session *s : {t, twin}) {
        REQUIRE(llm_session_prefill(s, other.data(), other.size()) == LLM_OK);
        gen(s, 3);
        REQUIRE(llm_session_truncate(s, 9) == LLM_OK);
    }
    llm_session *empty = make_session(m.m, 0.9f, 16);
    auto fails = [&](const std::vector<uint8_t> &b, llm_session *s) {
        const int32_t st = load_bytes(s, b);
        return st == LLM_ERR_FORMAT && llm_session_n_past(t) == 9;
    };
    for (size_t n = 0; n < state.size(); ++n) {
        const std::vector<uint8_t> cut(state.begin(), state.begin() + static_cast<ptrdiff_t>(n));
        if (!fails(cut, n % 10 == 0 ? empty : t)) FAIL("truncated to " << n << " bytes: " << llm_last_error());
    }
    std::vector<uint8_t> b = state;
    for (size_t i = 0; i < state.size(); ++i) {
        const uint8_t bit = static_cast<uint8_t>(1u << (i * 5 % 8));
        b[i] ^= bit;
        if (!fails(b, i % 7 == 0 ? empty : t)) FAIL("bit flipped in byte " << i << ": " << llm_last_error());
        b[i] ^= bit;
    }
    // A version 1 state (no recurrent fields) cannot carry a hybrid session: the state's floats and
    // the two header fields removed, checksum recomputed.
    {
        std::vector<uint8_t> v1 = state;
        const uint32_t one = 1;
        std::memcpy(v1.data() + 8, &one, 4);
        uint32_t arch = 0, n_types = 0;
        std::memcpy(&arch, v1.data() + 12, 4);
        std::memcpy(&n_types, v1.data() + 16 + arch + 24, 4);
        const size_t table = 16 + arch + 24 + 4 + 8ull * n_types + 8 + 6 * 4 + 4 + 624 * 4;
        const size_t fields = table + 4 * 20;  // 4 layers of (u32, u64, u64)
        uint64_t floats = 0;
        std::memcpy(&floats, v1.data() + fields + 4, 8);
        REQUIRE(floats == 3 * (768 + 4096));
        v1.erase(v1.end() - 8 - static_cast<ptrdiff_t>(4 * floats), v1.end() - 8);
        v1.erase(v1.begin() + static_cast<ptrdiff_t>(fields), v1.begin() + static_cast<ptrdiff_t>(fields + 12));
        llm::Fnv1a64 h;
        h.add(v1.data(), v1.size() - 8);
        const uint64_t sum = h.value();
        std::memcpy(v1.data() + v1.size() - 8, &sum, 8);
        CHECK(load_bytes(t, v1) == LLM_ERR_FORMAT);
        CHECK(std::string(llm_last_error()).find("no recurrent state") != std::string::npos);
    }
    CHECK(llm_session_n_past(empty) == 0);
    // The target goes on as its twin, the empty session as a fresh one.
    for (llm_session *s : {t, twin}) REQUIRE(llm_session_prefill(s, prompt.data(), 2) == LLM_OK);
    std::vector<float> a, c;
    CHECK(gen(t, 4, &a) == gen(twin, 4, &c));
    CHECK(same_bits(a, c));
    CHECK(nlohmann::json::parse(llm_session_stats_json(t))["kv_recomputed_tokens"] == 2);  // from its checkpoint at 7
    llm_session *fresh = make_session(m.m, 0.9f, 16);
    for (llm_session *s : {empty, fresh}) REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    CHECK(same_bits(last(empty), last(fresh)));
    // And the good state loads into the target.
    REQUIRE(load_bytes(t, state) == LLM_OK);
    CHECK(llm_session_n_past(t) == 8);
    for (llm_session *s : {t, twin, empty, fresh}) llm_session_free(s);
}

// ---- speculation -------------------------------------------------------------------------------------

namespace {

struct Run {
    std::vector<int32_t> tokens;
    std::vector<float> logits;  // after each token
    nlohmann::json stats;
};

// prompt, then up to n tokens through llm_session_next (stops at an end-of-generation token), with
// speculation by draft and / or lookup when given.
Run next_run(llm_model *m, const std::vector<int32_t> &prompt, int n, float temp, llm_model *draft = nullptr,
             int32_t lookup = 0, int32_t n_draft = 4) {
    // No repetition penalty: greedy then picks what a draft of the same file proposes, and random
    // weights fall into loops that lookup can predict.
    llm_session *s = make_session(m, temp, 256, 1.0f);
    if (draft || lookup) {
        llm_speculation_params sp;
        REQUIRE(llm_speculation_params_init(&sp, LLM_SPECULATION_PARAMS_VERSION) == LLM_OK);
        sp.draft = draft;
        sp.lookup_ngram = lookup;
        sp.n_draft = n_draft;
        INFO(llm_last_error());
        REQUIRE(llm_session_set_speculation(s, &sp) == LLM_OK);
    }
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    Run r;
    char piece[64];
    for (int i = 0; i < n; ++i) {
        int32_t t = -1;
        size_t len = 0;
        const int32_t st = llm_session_next(s, &t, piece, sizeof piece, &len);
        if (st == LLM_DONE) break;
        REQUIRE(st == LLM_OK);
        r.tokens.push_back(t);
        const std::vector<float> lg = last(s);
        r.logits.insert(r.logits.end(), lg.begin(), lg.end());
    }
    r.stats = nlohmann::json::parse(llm_session_stats_json(s));
    llm_session_free(s);
    return r;
}

}  // namespace

TEST_CASE("hybrid: speculation by draft and by lookup gives exactly plain decoding's tokens", "[hybrid][spec][cpu-neutral]") {
    // The prompt twice, so that lookup finds n-grams; a draft of the same file proposes what greedy
    // picks (most drafts kept), one of another file proposes other tokens (most rejected: the state
    // goes back through the journal every pass).
    std::vector<int32_t> prompt = tokens(10, 11);
    const std::vector<int32_t> once = prompt;
    prompt.insert(prompt.end(), once.begin(), once.end());
    const int kN = 40;
    for (const char *file : {"qwen35.q8_0.gguf", "qwen35moe.q8_0.gguf", "qwen3next.q8_0.gguf"}) {
        for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
            SECTION(std::string(file) + (res == LLM_RESIDENCY_STREAMED ? " streamed" : " resident")) {
                Model m(file, res), same(file),
                    other(std::string(file) == "qwen35.q8_0.gguf" ? "qwen35.f32.gguf" : "qwen35.q8_0.gguf");
                for (float temp : {0.0f, 0.9f}) {
                    const Run plain = next_run(m.m, prompt, kN, temp);
                    struct Config {
                        const char *name;
                        llm_model *draft;
                        int32_t lookup;
                    };
                    for (const Config &c : {Config{"draft = same file", same.m, 0}, Config{"draft = other", other.m, 0},
                                            Config{"lookup 2", nullptr, 2}, Config{"lookup 3 + other", other.m, 3}}) {
                        INFO(c.name << " temperature " << temp);
                        const Run r = next_run(m.m, prompt, kN, temp, c.draft, c.lookup);
                        CHECK(r.tokens == plain.tokens);
                        CHECK(same_bits(r.logits, plain.logits));
                        const nlohmann::json &st = r.stats;
                        if (temp == 0.0f) CHECK(st["drafted_tokens"].get<int>() > 0);  // 0.9 may end early
                        // One pass per token not taken from a verified draft, besides the prompt's:
                        // a rejection costs no second pass, only a replay of the kept tokens.
                        CHECK(st["passes"].get<int>() ==
                              1 + st["generated_tokens"].get<int>() - st["accepted_tokens"].get<int>());
                        CHECK(st["kv_recomputed_tokens"] == 0);
                        if (c.draft == same.m && temp == 0.0f) {
                            CHECK(st["drafted_tokens"].get<int>() - st["accepted_tokens"].get<int>() < 4);
                        }
                        if (c.draft == other.m && temp == 0.0f) CHECK(st["recurrent_replayed_tokens"].get<int>() > 0);
                    }
                }
            }
        }
    }
}

TEST_CASE("hybrid: drafts left pending by speculation leave no trace in truncate, save and next_batch",
          "[hybrid][spec]") {
    // A draft of another file: most passes leave rejected drafts in the state. After each step the
    // session is copied through a saved state, truncated by one and given its token back, or advanced
    // by next_batch beside another session: every path must see exactly plain decoding's state.
    Model m("qwen35.q8_0.gguf"), other("qwen35.f32.gguf");
    const std::vector<int32_t> prompt = tokens(14, 12);
    const Run plain = next_run(m.m, prompt, 20, 0.0f);
    llm_session *s = make_session(m.m, 0.0f, 256, 1.0f), *peer = make_session(m.m, 0.0f, 256, 1.0f);
    llm_speculation_params sp;
    REQUIRE(llm_speculation_params_init(&sp, LLM_SPECULATION_PARAMS_VERSION) == LLM_OK);
    sp.draft = other.m;
    sp.n_draft = 4;
    REQUIRE(llm_session_set_speculation(s, &sp) == LLM_OK);
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    REQUIRE(llm_session_prefill(peer, prompt.data(), prompt.size()) == LLM_OK);
    char piece[64];
    std::vector<int32_t> got;
    for (size_t i = 0; i < plain.tokens.size(); ++i) {
        INFO("token " << i);
        int32_t t = -1;
        if (i % 4 == 3) {
            llm_session *both[2] = {s, peer};
            int32_t toks[2], sts[2];
            REQUIRE(llm_session_next_batch(both, 2, toks, sts) == LLM_OK);
            REQUIRE(sts[0] == LLM_OK);
            t = toks[0];
        } else {
            size_t len = 0;
            REQUIRE(llm_session_next(s, &t, piece, sizeof piece, &len) == LLM_OK);
        }
        got.push_back(t);
        REQUIRE(t == plain.tokens[i]);
        CHECK(same_bits(last(s), std::vector<float>(plain.logits.begin() + static_cast<int64_t>(i * 512),
                                                    plain.logits.begin() + static_cast<int64_t>((i + 1) * 512))));
        if (i % 4 == 1) {
            // A copy through a saved state (pending drafts ignored) decodes the next token as plain did.
            llm_session *copy = make_session(m.m, 0.0f, 256, 1.0f);
            REQUIRE(load_bytes(copy, save_bytes(s)) == LLM_OK);
            int32_t c = -1;
            REQUIRE(llm_session_sample(copy, &c) == LLM_OK);
            if (i + 1 < plain.tokens.size()) CHECK(c == plain.tokens[i + 1]);
            llm_session_free(copy);
        }
        if (i % 4 == 2) {
            // Truncated by one and the token given back.
            REQUIRE(llm_session_truncate(s, llm_session_n_past(s) - 1) == LLM_OK);
            REQUIRE(llm_session_accept(s, t) == LLM_OK);
        }
    }
    CHECK(got == plain.tokens);
    // A state loaded over a session that holds a verify pass's journal, of as many positions as the
    // journal covers, saved after a truncation (so the loading session must recompute from the
    // state's checkpoint): the old records must not be replayed into it.
    int32_t t = -1;
    size_t len = 0;
    REQUIRE(llm_session_next(s, &t, piece, sizeof piece, &len) == LLM_OK);  // a verify pass
    const int32_t n = llm_session_n_past(s);
    REQUIRE(nlohmann::json::parse(llm_session_stats_json(s))["drafted_tokens"].get<int>() > 0);
    llm_session *src = make_session(m.m, 0.0f, 256, 1.0f);
    const std::vector<int32_t> other_prompt = tokens(n + 2, 14);
    REQUIRE(llm_session_prefill(src, other_prompt.data(), static_cast<size_t>(n - 3)) == LLM_OK);
    REQUIRE(llm_session_prefill(src, other_prompt.data() + n - 3, 5) == LLM_OK);
    REQUIRE(llm_session_truncate(src, n) == LLM_OK);
    const std::vector<uint8_t> saved = save_bytes(src);
    REQUIRE(llm_session_accept(src, 7) == LLM_OK);
    REQUIRE(load_bytes(s, saved) == LLM_OK);
    REQUIRE(llm_session_accept(s, 7) == LLM_OK);
    CHECK(same_bits(last(s), last(src)));
    CHECK(nlohmann::json::parse(llm_session_stats_json(s))["kv_recomputed_tokens"] == 3);
    llm_session_free(src);
    llm_session_free(s);
    llm_session_free(peer);
}

TEST_CASE("hybrid: embeddings, each input on a fresh state, equal alone and together", "[hybrid][embed]") {
    // Seven inputs: more than the four a hybrid runs at once, several passes; each input's rows do
    // not depend on the others (a fresh recurrent state and KV rows of its own).
    for (const char *file : {"qwen35.q8_0.gguf", "qwen3next.q8_0.gguf"}) {
        SECTION(file) {
            Model m(file);
            Session s(m.m);
            const std::vector<int32_t> ctx = tokens(9, 13);
            REQUIRE(llm_session_prefill(s.s, ctx.data(), ctx.size()) == LLM_OK);
            const std::vector<float> before = rows(s.s, 9);
            const char *texts[] = {
                "Once upon a time",       "Lily liked to play", "a",
                "The cat sat on the mat", "She was happy",      "Tom had a big red ball and a small blue one",
                "Once upon a time"};
            const size_t n = 7;
            for (int32_t pooling : {LLM_POOLING_MEAN, LLM_POOLING_LAST}) {
                llm_embed_params ep;
                REQUIRE(llm_embed_params_init(&ep, LLM_EMBED_PARAMS_VERSION) == LLM_OK);
                ep.pooling = pooling;
                size_t n_out = 0;
                int32_t dim = 0;
                REQUIRE(llm_session_embed(s.s, texts, n, &ep, nullptr, 0, &n_out, &dim, nullptr) ==
                        LLM_ERR_BUFFER_TOO_SMALL);
                REQUIRE(n_out == n * 128);
                std::vector<float> all(n_out);
                INFO(llm_last_error());
                REQUIRE(llm_session_embed(s.s, texts, n, &ep, all.data(), all.size(), &n_out, &dim, nullptr) == LLM_OK);
                for (size_t i = 0; i < n; ++i) {
                    std::vector<float> one(128);
                    REQUIRE(llm_session_embed(s.s, &texts[i], 1, &ep, one.data(), one.size(), &n_out, &dim, nullptr) ==
                            LLM_OK);
                    CHECK(same_bits(one, std::vector<float>(all.begin() + static_cast<int64_t>(i * 128),
                                                            all.begin() + static_cast<int64_t>((i + 1) * 128))));
                }
                // The same text twice, the same rows; another text, others.
                CHECK(std::memcmp(&all[0], &all[6 * 128], 128 * sizeof(float)) == 0);
                CHECK(std::memcmp(&all[0], &all[1 * 128], 128 * sizeof(float)) != 0);
            }
            // The session's own context is untouched.
            CHECK(llm_session_n_past(s.s) == 9);
            CHECK(same_bits(rows(s.s, 9), before));
        }
    }
}
