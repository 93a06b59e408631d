// Writes synthetic GGUF models of named shapes with random weights in a chosen type, so benchmarks
// and tests can run realistic sizes without downloading anything. Test support (tests/support, not
// part of libllm): the tests, the fuzz corpus and llm-bench --synth link it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tools {

struct SynthShape {
    std::string name;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    std::string arch = "llama";  // or "gemma3": GeGLU, post-norms, q/k norms, sliding-window layers;
                                 // or "qwen35": gated delta-net layers, every fourth one full attention
                                 // or "gpt-oss": biased attention with sinks, windowed even layers, and
                                 // n_expert SwiGLU-OAI experts of width n_ff, top n_expert_used
                                 // or "gemma4": Gemma 4's E-models (SynthGemma4 below)
    uint32_t head_dim = 0;       // 0: n_embd / n_head
    uint32_t swa_window = 0, swa_pattern = 0;
    uint32_t gdn_k_heads = 0, gdn_v_heads = 0, gdn_head_dim = 0;  // qwen35's delta-net heads
    uint32_t n_expert = 0, n_expert_used = 0;                       // gpt-oss's experts
    // The vocabulary: "" a SentencePiece one (specials, byte tokens, made-up pieces); "bpe" a
    // byte-level BPE one (GPT-2's byte alphabet, then n_vocab - 257 seeded merges, "<|endoftext|>"
    // last); otherwise the path of a GGUF whose tokenizer.* keys are copied (n_vocab then its size).
    std::string vocab = "";
};

// Gemma 4's E2B/E4B layout beside SynthShape's fields (arch "gemma4"; head_dim is the windowed layers',
// every swa_pattern-th layer is full attention, n_ff the width of the layers keeping a KV cache).
struct SynthGemma4 {
    uint32_t global_head_dim;   // the full-attention layers' head dim (a quarter of it rotated)
    uint32_t shared_kv_layers;  // the trailing layers that read an earlier layer's cache
    uint32_t n_embd_per_layer;  // per-layer token embedding width
    bool double_wide_mlp;       // the shared layers' FFN twice n_ff wide
};

// nullptr if unknown.
const SynthShape *find_shape(const std::string &name);
std::string shape_names();
// Types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m (llama-quantize's
// Q4_K_M mix: Q6_K for the head and some attn_v/ffn_down), mxfp4_moe (experts MXFP4, the rest Q8_0, as
// published gpt-oss files are laid out). Returns false for an unknown type.
bool is_synth_type(const std::string &type);
std::string synth_type_names();
// Writes the model; throws std::runtime_error on failure. With from_type (e.g. "q8_0" for a q4_0
// file), every matrix holds the `type` quantization of the values the from_type file of the same shape
// and seed holds: the same model at another precision (a draft for speculative decoding). `type` is
// then f32, f16, q8_0 or q4_0; from_type any type but q4_k_m.
void write_synth_model(const SynthShape &shape, const std::string &type, const std::string &path, uint64_t seed = 1,
                       const std::string &from_type = "");
// write_synth_model for a "gemma4" shape with its layout given (write_synth_model takes it from the named
// shape's table entry).
void write_synth_gemma4(const SynthShape &shape, const SynthGemma4 &g4, const std::string &type,
                        const std::string &path, uint64_t seed = 1, const std::string &from_type = "");
// One q4_0 row (n a multiple of 32) from f32: per block of 32, d = the value of largest magnitude
// / -8, q = round(x / d) + 8 clamped to 0..15 (llama.cpp's reference rounding). dst: n / 32 * 18 bytes.
void quantize_row_q4_0_ref(const float *x, uint8_t *dst, int64_t n);

}  // namespace tools
