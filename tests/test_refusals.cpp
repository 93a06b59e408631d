// "Run it or refuse it": a file whose computation this engine would not perform as llama.cpp does
// (a tensor nobody reads, a scaling key nobody applies) is refused with LLM_ERR_UNSUPPORTED naming
// the culprit; the same file without the culprit loads, so each refusal is targeted.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <functional>
#include <string>
#include <vector>

#include "gguf/byte_source.h"
#include "gguf_writer.h"
#include "gguf/weight_source.h"
#include <nlohmann/json.hpp>

#include "llm.h"
#include "test_files.h"

using namespace llm;

namespace {

const std::string kFixtures = std::string(LLM_SHARED_DIR) + "/fixtures/models/";

using test::Outcome;

// Fixture `name` written again with `edit` applied (after everything was copied, except what the
// skips name), loaded: its status, message and info.
Outcome load_edited(const std::string &name, const std::function<void(GgufWriter &)> &edit,
                    const std::function<bool(const std::string &)> &skip_key = {},
                    const std::function<bool(const std::string &)> &skip_tensor = {}) {
    return test::load_edited(kFixtures + name, edit, skip_key, skip_tensor);
}

std::vector<uint8_t> f32_bytes(size_t n, float v) {
    std::vector<float> f(n, v);
    return {reinterpret_cast<const uint8_t *>(f.data()), reinterpret_cast<const uint8_t *>(f.data() + n)};
}

}  // namespace

TEST_CASE("a copied fixture loads: the refusals below are the edits' doing", "[model][refuse]") {
    for (const char *f : {"qwen2.f32.gguf", "llama.q8_0.gguf", "phi3longrope.f32.gguf", "qwen3moe.q8_0.gguf"}) {
        INFO(f);
        const Outcome o = load_edited(f, [](GgufWriter &) {});
        INFO(o.error);
        CHECK(o.status == LLM_OK);
    }
}

TEST_CASE("a tensor the architecture does not bind is refused by name", "[model][refuse]") {
    SECTION("an unknown block tensor") {
        const Outcome o = load_edited("qwen2.f32.gguf", [](GgufWriter &w) {
            w.add_tensor("blk.0.attn_mystery.weight", {256}, TensorType::F32, f32_bytes(256, 1.0f));
        });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find("blk.0.attn_mystery.weight") != std::string::npos);
    }
    SECTION("rope_freqs in an architecture that never applies it") {
        // qwen2 has a head dimension of 32: rope_freqs would hold 16 divisors.
        const Outcome o = load_edited("qwen2.f32.gguf", [](GgufWriter &w) {
            w.add_tensor("rope_freqs.weight", {16}, TensorType::F32, f32_bytes(16, 2.0f));
        });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find("rope_freqs.weight") != std::string::npos);
    }
    SECTION("a shared-expert tensor next to routed experts") {
        const Outcome o = load_edited("qwen3moe.q8_0.gguf", [](GgufWriter &w) {
            w.add_tensor("blk.1.ffn_up_shexp.weight", {256, 32}, TensorType::F32, f32_bytes(256 * 32, 0.5f));
        });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find("blk.1.ffn_up_shexp.weight") != std::string::npos);
    }
}

TEST_CASE("a scaling key the engine would ignore is refused unless it is neutral", "[model][refuse]") {
    struct Case {
        const char *file, *key;
        float bad, neutral;
    };
    const Case cases[] = {
        {"qwen2.f32.gguf", "qwen2.attention.scale", 0.125f, 0.0f},
        {"llama.q8_0.gguf", "llama.logit_scale", 0.5f, 1.0f},
        {"llama.q8_0.gguf", "llama.embedding_scale", 12.0f, 1.0f},
        {"llama.q8_0.gguf", "llama.residual_scale", 0.22f, 1.0f},
        {"qwen2yarn.f32.gguf", "qwen2.rope.scaling.yarn_log_multiplier", 0.1f, 0.0f},
        {"qwen2yarn.f32.gguf", "qwen2.rope.scaling.yarn_beta_fast", 16.0f, 32.0f},
        {"qwen3moe.q8_0.gguf", "qwen3moe.expert_weights_scale", 2.5f, 1.0f},
    };
    for (const Case &c : cases) {
        INFO(c.file << " " << c.key);
        const Outcome bad = load_edited(c.file, [&](GgufWriter &w) { w.add_f32(c.key, c.bad); });
        CHECK(bad.status == LLM_ERR_UNSUPPORTED);
        CHECK(bad.error.find(c.key) != std::string::npos);
        const Outcome ok = load_edited(c.file, [&](GgufWriter &w) { w.add_f32(c.key, c.neutral); });
        INFO(ok.error);
        CHECK(ok.status == LLM_OK);
    }
}

// mistral3 reads and applies attention.temperature_scale and YaRN's beta and log-multiplier keys;
// every other scaling key stays refused there, and those keys stay refused for the architectures
// that do not read them.
TEST_CASE("mistral3's own scaling keys apply only to mistral3", "[model][refuse]") {
    const std::string group = std::string(LLM_SHARED_DIR) + "/fixtures/gptoss_mistral3/models/";
    const Outcome as_is = test::load_edited(group + "ministral3.f32.gguf", [](GgufWriter &) {});
    INFO(as_is.error);
    REQUIRE(as_is.status == LLM_OK);
    const auto info = nlohmann::json::parse(as_is.info);
    CHECK(info["attention_temperature"]["floor_positions"] == 8);  // the original context
    CHECK(info["yarn"]["log_multiplier"] == 1.0);
    for (const char *key : {"mistral3.rope.scaling.alpha", "mistral3.attention.scale", "mistral3.logit_scale"}) {
        INFO(key);
        const Outcome o =
            test::load_edited(group + "ministral3.f32.gguf", [&](GgufWriter &w) { w.add_f32(key, 2.0f); });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find(key) != std::string::npos);
    }
    for (const char *key : {"llama.attention.temperature_scale", "llama.rope.scaling.yarn_log_multiplier"}) {
        INFO(key);
        const Outcome o = load_edited("llama.q8_0.gguf", [&](GgufWriter &w) { w.add_f32(key, 0.1f); });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find(key) != std::string::npos);
    }
}

TEST_CASE("gpt-oss reads none of the scaling keys it does not apply", "[model][refuse]") {
    const std::string group = std::string(LLM_SHARED_DIR) + "/fixtures/gptoss_mistral3/models/";
    for (const char *key : {"gpt-oss.rope.scaling.yarn_log_multiplier", "gpt-oss.attention.temperature_scale"}) {
        INFO(key);
        const Outcome o = test::load_edited(group + "gptoss.f32.gguf", [&](GgufWriter &w) { w.add_f32(key, 1.0f); });
        CHECK(o.status == LLM_ERR_UNSUPPORTED);
        CHECK(o.error.find(key) != std::string::npos);
    }
}

TEST_CASE("gpt-oss needs its window key, its sinks and its biases", "[model][refuse]") {
    const std::string file = std::string(LLM_SHARED_DIR) + "/fixtures/gptoss_mistral3/models/gptoss.mxfp4_moe.gguf";
    const Outcome ok = test::load_edited(file, [](GgufWriter &) {});
    INFO(ok.error);
    REQUIRE(ok.status == LLM_OK);
    const auto info = nlohmann::json::parse(ok.info);
    CHECK(info["attention_sinks"] == true);
    CHECK(info["experts"]["weights"] == "softmax_topk");
    CHECK(info["sliding_window"]["window"] == 4);
    CHECK(info["sliding_window"]["pattern"] == 2);  // llama.cpp's default for gpt-oss: even layers slide
    CHECK(info["head_dim"] == 64);
    const Outcome no_window = test::load_edited(
        file, [](GgufWriter &) {}, [](const std::string &k) { return k == "gpt-oss.attention.sliding_window"; });
    CHECK(no_window.status == LLM_ERR_FORMAT);
    CHECK(no_window.error.find("sliding_window") != std::string::npos);
    for (const char *t : {"blk.1.attn_sinks.weight", "blk.0.ffn_gate_inp.bias", "blk.1.ffn_down_exps.bias"}) {
        INFO(t);
        const Outcome o = test::load_edited(
            file, [](GgufWriter &) {}, {}, [&](const std::string &n) { return n == t; });
        CHECK(o.status == LLM_ERR_FORMAT);
        CHECK(o.error.find(t) != std::string::npos);
    }
    // Sinks belong to gpt-oss: another architecture's file with them is refused, not run without.
    const Outcome sinks = load_edited("qwen2.f32.gguf", [](GgufWriter &w) {
        w.add_tensor("blk.0.attn_sinks.weight", {8}, TensorType::F32, f32_bytes(8, 1.0f));
    });
    CHECK(sinks.status == LLM_ERR_UNSUPPORTED);
    CHECK(sinks.error.find("attn_sinks") != std::string::npos);
}

TEST_CASE("rope scaling types: unknown ones are refused, 'none' ignores the factor", "[model][refuse]") {
    const Outcome dyn =
        load_edited("qwen2.f32.gguf", [](GgufWriter &w) { w.add_string("qwen2.rope.scaling.type", "dynamic"); });
    CHECK(dyn.status == LLM_ERR_UNSUPPORTED);
    CHECK(dyn.error.find("dynamic") != std::string::npos);

    const Outcome none = load_edited("qwen2.f32.gguf", [](GgufWriter &w) {
        w.add_string("qwen2.rope.scaling.type", "none");
        w.add_f32("qwen2.rope.scaling.factor", 4.0f);
    });
    CHECK(none.status == LLM_OK);
}

TEST_CASE("LongRoPE needs both tables; qwen3moe needs experts", "[model][refuse]") {
    const Outcome half = load_edited(
        "phi3longrope.f32.gguf", [](GgufWriter &) {}, {},
        [](const std::string &t) { return t == "rope_factors_short.weight"; });
    CHECK(half.status == LLM_ERR_FORMAT);
    CHECK(half.error.find("rope_factors_short") != std::string::npos);

    const Outcome dense = load_edited(
        "qwen3moe.q8_0.gguf", [](GgufWriter &) {}, [](const std::string &k) { return k == "qwen3moe.expert_count"; });
    CHECK(dense.status == LLM_ERR_FORMAT);
    CHECK(dense.error.find("expert_count") != std::string::npos);
}

TEST_CASE("info JSON stays valid UTF-8 when the file's strings are not", "[api]") {
    const Outcome o = load_edited(
        "qwen2.f32.gguf", [](GgufWriter &w) { w.add_string("general.name", std::string("tiny\xff\xfe-\xe4\xb8", 8)); },
        [](const std::string &k) { return k == "general.name"; });  // stray bytes, a cut-off CJK char
    REQUIRE(o.status == LLM_OK);
    const auto j = nlohmann::json::parse(o.info);  // throws on invalid UTF-8
    const std::string name = j["name"];
    CHECK(name.rfind("tiny\xef\xbf\xbd", 0) == 0);
}
