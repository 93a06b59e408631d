// Hybrid models (issue 27): gated delta-net layers with a recurrent state beside attention layers.
// Their goldens are test_golden's; here: the state in the memory plan, prefill equal to decode bit
// for bit, truncation and failed passes recomputed exactly, batched sessions each on their own
// state, and the features that cannot carry a recurrent state yet refusing cleanly.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/byte_source.h"
#include "gguf/weight_source.h"
#include "gguf_writer.h"
#include "llm.h"
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
    explicit Session(llm_model *m, bool logits_all = true, int32_t kv = LLM_KV_F32, bool shift = false) {
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
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

// A token sequence over the fixtures' 512-token vocabulary (no end-of-generation tokens: 3..511).
std::vector<int32_t> tokens(int n, int salt = 0) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = 3 + (i * 37 + salt * 101 + 11) % 509;
    return t;
}

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

std::vector<float> last(llm_session *s) {
    const float *lg = nullptr;
    int32_t nv = 0;
    REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
    return {lg, lg + nv};
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
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
            // The KV rows of the one attention layer only: 256 positions of K and V, 2 heads of 64, f16.
            llm_memory_plan plan;
            REQUIRE(llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION) == LLM_OK);
            REQUIRE(llm_model_memory_plan(m.m, 256, &plan) == LLM_OK);
            CHECK(plan.kv_cache_bytes == 256ull * 2 * 128 * 2 + state);
            // A session allocates what the plan says.
            llm_session_params sp;
            llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
            sp.n_ctx = 256;
            llm_session *s = nullptr;
            REQUIRE(llm_session_create(m.m, &sp, &s) == LLM_OK);
            CHECK(nlohmann::json::parse(llm_session_stats_json(s))["kv_cache_bytes"] == plan.kv_cache_bytes);
            llm_session_free(s);
        }
    }
}

TEST_CASE("hybrid: a prefill gives the bits of token-by-token decode, in every residency", "[hybrid][model]") {
    // 100 tokens cross the resident sub-batch of 64 positions.
    const std::vector<int32_t> seq = tokens(100);
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
    // A recurrent state cannot be cut back: the next evaluation recomputes the context.
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
            const auto st = nlohmann::json::parse(llm_session_stats_json(s.s));
            CHECK(st["kv_recomputed_tokens"] == 39 * 40 / 2);  // 1 + 2 + ... + 39: n = 0 recomputes nothing
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
}

TEST_CASE("hybrid: features that cannot carry a recurrent state refuse and change nothing", "[hybrid][state]") {
    Model m("qwen35.q8_0.gguf");
    Model draft("qwen35.q8_0.gguf");
    Model plain("../../../models/stories260K.gguf");  // attention only, the fixtures' vocabulary
    const std::vector<int32_t> seq = tokens(12, 5);
    Session s(m.m);
    REQUIRE(llm_session_prefill(s.s, seq.data(), seq.size()) == LLM_OK);
    const std::vector<float> before = rows(s.s, 12);
    auto refused = [&](int32_t st, const char *what) {
        INFO(what << ": " << llm_last_error());
        CHECK(st == LLM_ERR_UNSUPPORTED);
        CHECK(std::string(llm_last_error()).find("recurrent state") != std::string::npos);
    };

    const std::string path = "hybrid_refused.state";
    std::remove(path.c_str());
    refused(llm_session_save(s.s, path.c_str()), "save");
    CHECK(std::fopen(path.c_str(), "rb") == nullptr);  // no file, not even a temporary one left
    llm_writer w{};
    w.version = LLM_WRITER_VERSION;
    w.write = [](void *, const void *, uint64_t) -> int32_t { return LLM_OK; };
    refused(llm_session_save_io(s.s, &w), "save_io");
    refused(llm_session_load(s.s, path.c_str()), "load");

    llm_speculation_params sp;
    REQUIRE(llm_speculation_params_init(&sp, LLM_SPECULATION_PARAMS_VERSION) == LLM_OK);
    sp.lookup_ngram = 2;
    refused(llm_session_set_speculation(s.s, &sp), "lookup speculation");
    sp.lookup_ngram = 0;
    sp.draft = draft.m;
    refused(llm_session_set_speculation(s.s, &sp), "draft speculation");
    CHECK(llm_session_set_speculation(s.s, nullptr) == LLM_OK);  // off stays allowed

    const char *texts[] = {"Once upon a time"};
    size_t n_out = 0;
    refused(llm_session_embed(s.s, texts, 1, nullptr, nullptr, 0, &n_out, nullptr, nullptr), "embeddings");

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

    // A hybrid draft for an attention-only model is refused too.
    Session ps(plain.m);
    sp.draft = draft.m;
    refused(llm_session_set_speculation(ps.s, &sp), "a hybrid draft");
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
