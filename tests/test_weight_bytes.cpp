// Bytes of files of every weight type (the low-bit fixtures, each a mix): llm_model_info_json's
// "weights" and llm_model_memory_plan against an independent count: each tensor's size from this
// file's own table of block sizes (ggml-common.h's block structs, worked out by hand), checked first
// against the gaps between the tensors' offsets in the file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/weight_source.h"
#include "llm.h"

using namespace llm;

namespace {

const std::string kLowbit = std::string(LLM_SHARED_DIR) + "/fixtures/lowbit/";

struct Block {
    uint64_t elements, bytes;
};

// Elements and bytes of one block, by the GGUF type name.
const std::map<std::string, Block> kBlocks = {
    {"F32", {1, 4}},       {"F16", {1, 2}},      {"BF16", {1, 2}},       {"Q8_0", {32, 34}},     {"Q2_K", {256, 84}},
    {"Q3_K", {256, 110}},  {"Q4_K", {256, 144}}, {"Q5_K", {256, 176}},   {"Q6_K", {256, 210}},   {"IQ2_XXS", {256, 66}},
    {"IQ2_XS", {256, 74}}, {"IQ2_S", {256, 82}}, {"IQ3_XXS", {256, 98}}, {"IQ3_S", {256, 110}},  {"IQ1_S", {256, 50}},
    {"IQ1_M", {256, 56}},  {"TQ1_0", {256, 54}}, {"TQ2_0", {256, 66}},   {"MXFP4", {32, 17}},    {"NVFP4", {64, 36}},
    {"Q1_0", {128, 18}},   {"Q2_0", {64, 18}},   {"IQ4_NL", {32, 18}},   {"IQ4_XS", {256, 136}},
};

uint64_t own_bytes(const TensorInfo &t) {
    const auto it = kBlocks.find(type_name(t.type));
    INFO(t.name << " of type " << type_name(t.type));
    REQUIRE(it != kBlocks.end());
    REQUIRE(t.ne[0] % it->second.elements == 0);
    return t.n_elements() / it->second.elements * it->second.bytes;
}

struct Plan {
    llm_memory_plan mem{};
    nlohmann::json info;
};

Plan load_plan(const std::string &path, int32_t residency) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.residency = residency;
    llm_model *m = nullptr;
    INFO(path << ": " << llm_last_error());
    REQUIRE(llm_model_load(path.c_str(), &mp, &m) == LLM_OK);
    Plan p;
    llm_memory_plan_init(&p.mem, LLM_MEMORY_PLAN_VERSION);
    REQUIRE(llm_model_memory_plan(m, 0, &p.mem) == LLM_OK);
    p.info = nlohmann::json::parse(llm_model_info_json(m));
    llm_model_free(m);
    return p;
}

}  // namespace

TEST_CASE("low-bit mixes: info JSON and memory plan count each tensor's bytes as the file holds them",
          "[model][lowbit]") {
    std::ifstream f(kLowbit + "index.json");
    REQUIRE(f.good());
    const nlohmann::json idx = nlohmann::json::parse(f);
    REQUIRE(idx["goldens"].size() >= 29);
    for (const auto &g : idx["goldens"]) {
        const std::string path = kLowbit + g["model"].get<std::string>();
        SECTION(g["model"].get<std::string>()) {
            const uint64_t file_size = std::filesystem::file_size(path);
            const auto src = WeightSource::open_file(path);
            std::vector<const TensorInfo *> by_offset;
            for (const TensorInfo &t : src->tensors()) by_offset.push_back(&t);
            std::sort(by_offset.begin(), by_offset.end(), [](auto *a, auto *b) { return a->offset < b->offset; });

            // 1. The table above against the file: each tensor fills the gap to the next one but for
            // the alignment padding (so no block size in it is off), and the library agrees with it.
            std::map<std::string, std::pair<uint64_t, uint64_t>> per_type;  // tensors, bytes
            uint64_t all = 0, all_elements = 0, blocks = 0, vectors = 0, max_matrix = 0, n_block_tensors = 0;
            for (size_t i = 0; i < by_offset.size(); ++i) {
                const TensorInfo &t = *by_offset[i];
                const uint64_t own = own_bytes(t);
                const uint64_t end = i + 1 < by_offset.size() ? by_offset[i + 1]->offset : file_size;
                INFO(t.name << " " << type_name(t.type) << " at " << t.offset << ", " << own << " bytes");
                CHECK(t.offset + own <= end);
                CHECK(end - t.offset < own + src->alignment());
                CHECK(t.nbytes == own);
                ++per_type[type_name(t.type)].first;
                per_type[type_name(t.type)].second += own;
                all += own;
                all_elements += t.n_elements();
                if (t.name.rfind("blk.", 0) == 0) {
                    ++n_block_tensors;
                    blocks += own;
                    if (t.ne[1] == 1)
                        vectors += own;
                    else
                        max_matrix = std::max(max_matrix, own);
                }
            }
            CHECK(all + src->data_offset() <= file_size);

            // 2. llm_model_info_json: the file's types as the index lists them, with these bytes.
            const Plan res = load_plan(path, LLM_RESIDENCY_RESIDENT);
            const nlohmann::json &w = res.info["weights"];
            CHECK(res.info["file_bytes"].get<uint64_t>() == file_size);
            CHECK(w["bytes"].get<uint64_t>() == all);
            CHECK(w["elements"].get<uint64_t>() == all_elements);
            CHECK(w["bits_per_weight"].get<double>() == Approx(8.0 * all / all_elements).epsilon(1e-12));
            CHECK(w["types"].size() == g["tensor_types"].size());
            for (const auto &[type, n] : g["tensor_types"].items()) {
                INFO(type);
                REQUIRE(w["types"].contains(type));
                const nlohmann::json &x = w["types"][type];
                CHECK(x["tensors"].get<uint64_t>() == n.get<uint64_t>());
                CHECK(x["tensors"].get<uint64_t>() == per_type[type].first);
                CHECK(x["bytes"].get<uint64_t>() == per_type[type].second);
                CHECK(x["bits_per_weight"].get<double>() ==
                      Approx(8.0 * x["bytes"].get<double>() / x["elements"].get<double>()).epsilon(1e-12));
            }

            // 3. llm_model_memory_plan, resident: every block and the exact head. A unit reads its
            // matrices in runs that keep the file's layout: each tensor adds under 2 alignments and a
            // 64-byte buffer alignment, and a run also holds a norm lying between two of its matrices
            // (a norm is counted again with the vectors, which stay resident in every mode).
            const TensorInfo *head = src->find("output.weight");
            if (!head) head = src->find("token_embd.weight");
            const TensorInfo *embd = src->find("token_embd.weight");
            REQUIRE(head);
            REQUIRE(embd);
            const uint64_t slack = n_block_tensors * (2 * src->alignment() + 64);
            INFO("blocks " << blocks << " (vectors " << vectors << "), resident " << res.mem.resident_block_bytes);
            CHECK(res.mem.n_resident_layers == res.mem.n_layer);
            CHECK(res.mem.resident_block_bytes >= blocks);
            CHECK(res.mem.resident_block_bytes < blocks + vectors + slack);
            CHECK(res.mem.lm_head_bytes == own_bytes(*head));
            CHECK(res.mem.embedding_bytes == own_bytes(*embd) / embd->ne[1]);
            // A decoded token reads every tensor but the token table, which it reads only as the head.
            CHECK(w["decode_read_bytes"].get<uint64_t>() == all - (head == embd ? 0 : own_bytes(*embd)));

            // Streamed: only the vectors stay; a slot holds the largest matrix.
            const Plan st = load_plan(path, LLM_RESIDENCY_STREAMED);
            CHECK(st.mem.n_resident_layers == 0);
            CHECK(st.mem.resident_block_bytes >= vectors);
            CHECK(st.mem.resident_block_bytes < vectors + slack);
            CHECK(st.mem.n_stream_slots >= 1);
            CHECK(st.mem.stream_slot_bytes >= st.mem.n_stream_slots * max_matrix);
            CHECK(st.mem.stream_slot_bytes < st.mem.n_stream_slots * (max_matrix + slack));
            CHECK(st.info["weights"] == w);  // the file's, whatever the residency
        }
    }
}

TEST_CASE("decode_read_bytes leaves out the tables a token reads one row of and counts the experts it routes to",
          "[model]") {
    const std::string dir = std::string(LLM_SHARED_DIR) + "/fixtures/";
    int with_experts = 0, with_row_tables = 0;
    for (const char *file : {"models/gpt2.q8_0.gguf", "models/mixtral.q8_0.gguf", "models/qwen3moe.f32.gguf",
                             "gemma4/models/gemma4e.q8_0.gguf", "models/llama.q8_0.gguf"}) {
        const std::string path = dir + file;
        INFO(path);
        const auto src = WeightSource::open_file(path);
        const bool tied = src->find("output.weight") == nullptr;
        const std::string arch = src->meta().req_str("general.architecture");
        const auto n_expert = src->meta().u32(arch + ".expert_count");
        const auto n_used = src->meta().u32(arch + ".expert_used_count");
        uint64_t dense = 0, experts = 0, skipped = 0;
        for (const TensorInfo &t : src->tensors()) {
            if ((t.name == "token_embd.weight" && !tied) || t.name == "position_embd.weight" ||
                t.name == "per_layer_token_embd.weight") {
                skipped += t.nbytes;
                continue;
            }
            const std::string suffix = "_exps.weight";  // ffn_{gate,up,down}_exps: every expert's matrix stacked
            const bool expert_matrix = t.name.size() > suffix.size() &&
                                       t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
            (expert_matrix ? experts : dense) += t.nbytes;
        }
        uint64_t want = dense + experts;
        if (n_expert && *n_expert > 0) {
            REQUIRE(n_used);
            REQUIRE(experts > 0);
            want = dense + experts * *n_used / *n_expert;
            ++with_experts;
        }
        if (src->find("position_embd.weight") || src->find("per_layer_token_embd.weight")) ++with_row_tables;
        if (!tied) CHECK(skipped > 0);
        const Plan p = load_plan(path, LLM_RESIDENCY_RESIDENT);
        CHECK(p.info["weights"]["decode_read_bytes"].get<uint64_t>() == want);
        CHECK(load_plan(path, LLM_RESIDENCY_STREAMED).info["weights"]["decode_read_bytes"] == p.info["weights"]["decode_read_bytes"]);
    }
    CHECK(with_experts == 2);
    CHECK(with_row_tables == 2);
}
