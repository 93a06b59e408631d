// Hyper-parameters of a model, read from GGUF metadata with llama.cpp's exact-type rules, with the
// architecture's defaults from its ArchSpec.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/metadata.h"
#include "model/arch.h"

namespace llm {

// How positions turn into rotation angles on one layer: llama.cpp's ggml_rope_ext arguments.
struct RopeParams {
    float base = 10000.0f;
    float freq_scale = 1.0f;                  // 1/factor for linear and YaRN scaling
    float ext_factor = 0.0f;                  // YaRN's extrapolation mix (1 with YaRN, else 0)
    float attn_factor = 1.0f;                 // multiplies cos and sin
    float corr_low = 0.0f, corr_high = 0.0f;  // YaRN: pair indices where the ramp starts and ends
};

enum class RopeScaling : uint8_t { NONE, LINEAR, YARN, LONGROPE };
const char *name(RopeScaling s);

struct ModelConfig {
    std::string arch_name;
    const ArchSpec *arch = nullptr;
    uint32_t n_ctx_train = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t n_ff = 0;
    uint32_t head_dim = 0;  // key_length (= value_length for the archs we run)
    uint32_t n_rot = 0;
    uint32_t n_expert = 0;  // 0: dense FFN
    uint32_t n_expert_used = 0;
    uint32_t n_ff_exp = 0;  // one expert's FFN width (= n_ff unless the file says otherwise)
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    RopeScaling rope_scaling = RopeScaling::LINEAR;
    float rope_ext_factor = 0.0f;   // YaRN: 1
    float rope_attn_factor = 1.0f;  // net cos/sin magnitude before YaRN's own correction
    float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
    uint32_t n_ctx_orig = 0;  // rope.scaling.original_context_length (YaRN, LongRoPE switch)
    float rope_base_swa = 10000.0f;
    float rope_freq_scale_swa = 1.0f;
    uint32_t swa_window = 0;  // 0: no sliding-window layers
    uint32_t swa_pattern = 0;
    float attn_softcap = 0.0f;   // 0: off
    float final_softcap = 0.0f;  // 0: off
    float q_scale = 1.0f;        // applied to q before the dot products (PRESCALE archs)
    float kq_scale = 1.0f;       // applied to the scores (SOFTMAX archs)
    float embed_scale = 1.0f;
    uint32_t n_vocab = 0;  // from the tokenizer, checked against token_embd

    uint32_t n_q() const { return n_head * head_dim; }
    uint32_t n_kv() const { return n_head_kv * head_dim; }
    // Layer il attends only to the last swa_window positions (llama.cpp's pattern rule).
    bool is_swa(uint32_t il) const {
        if (swa_window == 0) return false;
        if (swa_pattern == 0) return true;
        return il % swa_pattern < swa_pattern - 1;
    }
    // Layer il rotates q and k (smollm3 leaves every 4th layer without positions).
    bool uses_rope(uint32_t il) const {
        return arch->rope != RopeKind::NONE &&
               (arch->no_rope_layer_step == 0 || (il + 1) % arch->no_rope_layer_step != 0);
    }
    RopeParams layer_rope(uint32_t il) const;
};

// Throws LLM_ERR_UNSUPPORTED for unknown architectures, LLM_ERR_FORMAT for bad hparams.
ModelConfig read_config(const Metadata &meta);

}  // namespace llm
