// Gemma 4 (issue 28): its goldens are test_golden's; here what a golden cannot see: the KV-shared
// layers keep no cache (the KV bytes are the other layers' only), a saved session resumes exactly
// (per-layer row sizes, a shared window ring), and speculation by lookup keeps plain greedy's tokens.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm.h"
#include "synth_model.h"
#include "test_files.h"

namespace {

const std::string kDir = std::string(LLM_SHARED_DIR) + "/fixtures/gemma4/models/";

struct Model {
    llm_model *m = nullptr;
    // file: in the fixture directory, or an absolute path.
    explicit Model(const std::string &file, int32_t residency = LLM_RESIDENCY_RESIDENT) {
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        mp.n_threads = 2;
        mp.residency = residency;
        const std::string path = file.rfind('/', 0) == 0 ? file : kDir + file;
        const int32_t st = llm_model_load(path.c_str(), &mp, &m);
        INFO(llm_last_error());
        REQUIRE(st == LLM_OK);
    }
    ~Model() { llm_model_free(m); }
    Model(const Model &) = delete;
    Model &operator=(const Model &) = delete;
};

llm_session *make_session(llm_model *m, int32_t n_ctx = 256) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0.0f;
    sp.repeat_penalty = 1.0f;
    sp.n_ctx = n_ctx;
    sp.n_threads = 2;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    return s;
}

using test::last;
using test::same_bits;
using test::tokens;

// n greedy tokens (sample, accept), the logits before each appended to lg.
std::vector<int32_t> gen(llm_session *s, int n, std::vector<float> *lg = nullptr) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        if (lg) {
            const std::vector<float> l = last(s);
            lg->insert(lg->end(), l.begin(), l.end());
        }
        int32_t t = -1;
        REQUIRE(llm_session_sample(s, &t) == LLM_OK);
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
        out.push_back(t);
    }
    return out;
}

const char *const kFiles[] = {"gemma4.q8_0.gguf", "gemma4moe.q8_0.gguf", "gemma4e.q8_0.gguf", "gemma4e.f32.gguf"};

}  // namespace

TEST_CASE("gemma4: the KV-shared layers keep no cache; each layer's rows have its own width", "[gemma4][kv]") {
    // gemma4e: layers S F S F, the last two reading layers 0 and 1's caches; one KV head of 32 on
    // windowed layers, of 64 on full ones. Layer 0's ring holds a prompt chunk more than its window
    // of 4 (layer 2 reads it after the whole chunk was stored), here all 256 positions.
    // gemma4: S F, no sharing; KV heads 2 x 32 and 1 x 64; a window of 6 in a ring of 6 + 63.
    struct Case {
        const char *file;
        uint64_t bytes;
    };
    // K and V in F16 (the default): 2 bytes a value.
    for (const Case &c : {Case{"gemma4e.q8_0.gguf", 256ull * 2 * 2 * 32 + 256ull * 2 * 2 * 64},
                          Case{"gemma4.q8_0.gguf", 69ull * 2 * 2 * 64 + 256ull * 2 * 2 * 64}}) {
        SECTION(c.file) {
            Model m(c.file);
            const auto info = nlohmann::json::parse(llm_model_info_json(m.m));
            CHECK(info["memory"]["kv_cache_bytes_default_ctx"] == c.bytes);
            llm_session *s = make_session(m.m);
            const std::vector<int32_t> p = tokens(9);
            REQUIRE(llm_session_prefill(s, p.data(), p.size()) == LLM_OK);
            CHECK(nlohmann::json::parse(llm_session_stats_json(s))["kv_cache_bytes"] == c.bytes);
            llm_session_free(s);
        }
    }
    Model e("gemma4e.q8_0.gguf");
    const auto info = nlohmann::json::parse(llm_model_info_json(e.m));
    CHECK(info["kv_shared_layers"] == 2);
    CHECK(info["n_embd_per_layer"] == 32);
    // The per-layer embedding table is read by rows: one row of n_layer x 32 Q8_0 values, plus the
    // resident projection.
    CHECK(info["memory"]["per_layer_embd_bytes"].get<uint64_t>() > 0);
}

TEST_CASE("gemma4: a saved session resumes exactly as an uninterrupted one", "[gemma4][state]") {
    const std::string path = "/tmp/llm_test_gemma4_state_" + std::to_string(::getpid()) + ".bin";
    const std::vector<int32_t> prompt = tokens(12, 3);
    for (const char *file : kFiles) {
        for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
            SECTION(std::string(file) + (res == LLM_RESIDENCY_STREAMED ? " streamed" : "")) {
                Model m(file, res);
                std::vector<int32_t> whole;
                std::vector<float> whole_lg;
                {
                    llm_session *s = make_session(m.m);
                    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                    whole = gen(s, 70);  // past every ring's wrap
                    const std::vector<int32_t> rest = gen(s, 10, &whole_lg);
                    whole.insert(whole.end(), rest.begin(), rest.end());
                    llm_session_free(s);
                }
                std::vector<int32_t> first;
                uint64_t saved_bytes = 0;
                {
                    llm_session *s = make_session(m.m);
                    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                    first = gen(s, 70);
                    INFO(llm_last_error());
                    REQUIRE(llm_session_save(s, path.c_str()) == LLM_OK);
                    std::FILE *f = std::fopen(path.c_str(), "rb");
                    REQUIRE(f);
                    std::fseek(f, 0, SEEK_END);
                    saved_bytes = static_cast<uint64_t>(std::ftell(f));
                    std::fclose(f);
                    llm_session_free(s);
                }
                llm_session *s = make_session(m.m);
                REQUIRE(llm_session_load(s, path.c_str()) == LLM_OK);
                std::vector<float> lg;
                const std::vector<int32_t> rest = gen(s, 10, &lg);
                first.insert(first.end(), rest.begin(), rest.end());
                CHECK(first == whole);
                CHECK(same_bits(lg, whole_lg));
                llm_session_free(s);
                std::remove(path.c_str());
                if (std::string(file).rfind("gemma4e", 0) == 0) {
                    // The shared layers' rows are not in it: 82 positions of layers 0 (32 wide) and 1
                    // (64 wide), K and V in F16, are 31,488 bytes; with layers 2 and 3 it would be twice that.
                    INFO("saved " << saved_bytes << " bytes");
                    CHECK(saved_bytes < 2 * 82ull * 2 * 2 * (32 + 64));
                }
            }
        }
    }
}

TEST_CASE("gemma4: greedy with lookup speculation gives plain greedy's tokens", "[gemma4][spec]") {
    std::vector<int32_t> prompt = tokens(10, 5);
    const std::vector<int32_t> once = prompt;
    prompt.insert(prompt.end(), once.begin(), once.end());
    const int kN = 60;
    for (const char *file : kFiles) {
        SECTION(file) {
            Model m(file);
            auto run = [&](int32_t lookup) {
                llm_session *s = make_session(m.m);
                if (lookup) {
                    llm_speculation_params sp;
                    REQUIRE(llm_speculation_params_init(&sp, LLM_SPECULATION_PARAMS_VERSION) == LLM_OK);
                    sp.lookup_ngram = lookup;
                    sp.n_draft = 4;
                    REQUIRE(llm_session_set_speculation(s, &sp) == LLM_OK);
                }
                REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                std::vector<int32_t> out;
                char piece[64];
                for (int i = 0; i < kN; ++i) {
                    int32_t t = -1;
                    size_t len = 0;
                    const int32_t st = llm_session_next(s, &t, piece, sizeof piece, &len);
                    if (st == LLM_DONE) break;
                    REQUIRE(st == LLM_OK);
                    out.push_back(t);
                }
                llm_session_free(s);
                return out;
            };
            const std::vector<int32_t> plain = run(0);
            CHECK(plain.size() > 20);
            CHECK(run(2) == plain);
            CHECK(run(3) == plain);
        }
    }
}

TEST_CASE("gemma4: the synthetic writer's E-model layout loads and runs, resident and streamed alike",
          "[gemma4][synth]") {
    // gemma4-e2b's layout at toy size: 8 layers, every fourth full (3 and 7), the last 4 reading layers
    // 2 and 3's caches; heads of 32 windowed (window 8) and 64 full; per-layer inputs of 32; the
    // shared layers' FFN twice as wide.
    const tools::SynthShape sh{"toy-gemma4e", 256, 8, 4, 1, 256, 512, 256, "gemma4", 32, 8, 4};
    const tools::SynthGemma4 g4{64, 4, 32, true};
    const std::string path =
        (std::filesystem::temp_directory_path() / ("llm-test-g4e-" + std::to_string(::getpid()) + ".gguf")).string();
    tools::write_synth_gemma4(sh, g4, "q8_0", path, 3);
    const std::vector<int32_t> prompt = tokens(20, 7);
    std::vector<std::vector<float>> lg;
    for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
        Model m(path, res);
        const auto info = nlohmann::json::parse(llm_model_info_json(m.m));
        CHECK(info["kv_shared_layers"] == 4);
        CHECK(info["n_embd_per_layer"] == 32);
        // A row of the table (8 x 32 Q8_0 values: 8 blocks of 34 bytes) and the F16 projection 256 x 256.
        CHECK(info["memory"]["per_layer_embd_bytes"] == 8 * 34 + 256 * 256 * 2);
        llm_session *s = make_session(m.m);
        REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
        std::vector<float> l;
        gen(s, 12, &l);
        // F16 K and V of layers 0-3 only: windowed layers 0 and 1 in rings of 8 + 63 positions, layer 2
        // (the shared layers' windowed source) and the full layer 3 all 256.
        CHECK(nlohmann::json::parse(llm_session_stats_json(s))["kv_cache_bytes"] ==
              (2 * 71 + 256) * 2 * 2 * 32 + 256 * 2 * 2 * 64);
        llm_session_free(s);
        bool finite = true;
        for (float v : l) finite = finite && std::isfinite(v);
        CHECK(finite);
        lg.push_back(std::move(l));
    }
    std::remove(path.c_str());
    CHECK(same_bits(lg[0], lg[1]));
}

TEST_CASE("gemma4: experts with gate and up apart give the fused tensor's logits bit for bit", "[gemma4][moe]") {
    // gemma4moe rewritten with each layer's ffn_gate_up_exps [n_embd, 2 x n_ff_exp, n_expert] (gate rows
    // first per expert) as ffn_gate_exps + ffn_up_exps [n_embd, n_ff_exp, n_expert], as llama.cpp
    // also loads them; the rows are copied, so the weights are the same.
    const std::string path = "/tmp/llm_test_gemma4_split_" + std::to_string(::getpid()) + ".gguf";
    {
        auto src = llm::WeightSource::open(llm::open_file_source(kDir + "gemma4moe.q8_0.gguf"));
        llm::GgufWriter w;
        auto fused = [](const std::string &n) { return n.find("ffn_gate_up_exps.weight") != std::string::npos; };
        w.add_all_from(*src, {}, fused);
        int n_split = 0;
        for (const llm::TensorInfo &t : src->tensors()) {
            if (!fused(t.name)) continue;
            const uint64_t rb = t.row_bytes(), ff = t.ne[1] / 2, nx = t.ne[2];
            std::vector<uint8_t> all(t.nbytes), gate, up;
            src->read(t, 0, all.data(), all.size());
            for (uint64_t e = 0; e < nx; ++e) {
                const uint8_t *x = all.data() + e * 2 * ff * rb;
                gate.insert(gate.end(), x, x + ff * rb);
                up.insert(up.end(), x + ff * rb, x + 2 * ff * rb);
            }
            const std::string blk = t.name.substr(0, t.name.find("ffn_gate_up_exps"));
            w.add_tensor(blk + "ffn_gate_exps.weight", {t.ne[0], ff, nx}, t.type, std::move(gate));
            w.add_tensor(blk + "ffn_up_exps.weight", {t.ne[0], ff, nx}, t.type, std::move(up));
            ++n_split;
        }
        REQUIRE(n_split == 2);
        w.write_file(path);
    }
    const std::vector<int32_t> prompt = tokens(12, 2);
    for (int32_t res : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
        SECTION(res == LLM_RESIDENCY_STREAMED ? "streamed" : "resident") {
            auto run = [&](const std::string &file) {
                Model m(file, res);
                llm_session *s = make_session(m.m);
                REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                std::vector<float> lg;
                gen(s, 20, &lg);
                llm_session_free(s);
                return lg;
            };
            const std::vector<float> fused = run("gemma4moe.q8_0.gguf"), split = run(path);
            CHECK(same_bits(fused, split));
        }
    }
    // Half a pair is refused by name.
    const test::Outcome o = test::load_edited(path, [](llm::GgufWriter &) {},
                                              {}, [](const std::string &n) { return n == "blk.1.ffn_up_exps.weight"; });
    CHECK(o.status == LLM_ERR_FORMAT);
    CHECK_THAT(o.error, Catch::Contains("blk.1.ffn_up_exps.weight"));
    std::remove(path.c_str());
}
