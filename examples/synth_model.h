// Writes synthetic GGUF models of named shapes with random weights in a chosen type, so benchmarks
// and tests can run realistic sizes without downloading anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tools {

struct SynthShape {
    std::string name;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    std::string arch = "llama";  // or "gemma3": GeGLU, post-norms, q/k norms, sliding-window layers
    uint32_t head_dim = 0;       // 0: n_embd / n_head
    uint32_t swa_window = 0, swa_pattern = 0;
};

// nullptr if unknown.
const SynthShape *find_shape(const std::string &name);
std::string shape_names();
// Types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m (llama-quantize's
// Q4_K_M mix: Q6_K for the head and some attn_v/ffn_down). Returns false for an unknown type.
bool is_synth_type(const std::string &type);
std::string synth_type_names();
// Writes the model; throws std::runtime_error on failure.
void write_synth_model(const SynthShape &shape, const std::string &type, const std::string &path, uint64_t seed = 1);

}  // namespace tools
