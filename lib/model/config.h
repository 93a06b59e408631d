// Hyper-parameters of a model, read from GGUF metadata with llama.cpp's exact-type rules, with the
// architecture's defaults from its ArchSpec.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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
    std::array<uint32_t, 4> sections{};       // IMROPE: pairs per position section (ModelConfig::rope_sections)
};

enum class RopeScaling : uint8_t { NONE, LINEAR, YARN, LONGROPE };
const char *name(RopeScaling s);

// Shape of the gated delta-net layers, from llama.cpp's ssm.* keys. Key and value heads have one
// size (ssm.state_size); value head j reads key head j % n_k_heads or j / (n_v_heads / n_k_heads)
// (ArchSpec::gdn_head_map).
struct GdnShape {
    uint32_t d_conv = 0;     // ssm.conv_kernel: taps of the causal depthwise conv1d
    uint32_t n_k_heads = 0;  // ssm.group_count
    uint32_t n_v_heads = 0;  // ssm.time_step_rank
    uint32_t head_dim = 0;   // ssm.state_size
    uint32_t key_dim() const { return n_k_heads * head_dim; }
    uint32_t value_dim() const { return n_v_heads * head_dim; }             // = ssm.inner_size
    uint32_t conv_channels() const { return 2 * key_dim() + value_dim(); }  // q | k | v, as attn_qkv's rows
    // The per-sequence state of one layer, in floats: the conv's last d_conv - 1 inputs per channel,
    // and one head_dim x head_dim matrix per value head.
    uint64_t conv_state_floats() const { return static_cast<uint64_t>(d_conv - 1) * conv_channels(); }
    uint64_t ssm_state_floats() const { return static_cast<uint64_t>(n_v_heads) * head_dim * head_dim; }
    // The key head value head j reads.
    uint32_t key_head(uint32_t j, GdnHeadMap map) const {
        return map == GdnHeadMap::TILED ? j % n_k_heads : j / (n_v_heads / n_k_heads);
    }
};

// The attention and FFN sizes of one layer. Uniform models give every layer the model's; gemma4's
// windowed layers have their own head dim, KV head count and rotary dims, and its layers their own
// FFN width (ArchSpec::per_layer_shapes).
struct LayerShape {
    uint32_t n_head_kv = 0;
    uint32_t head_dim = 0;  // of keys and values alike
    uint32_t n_rot = 0;
    uint32_t n_ff = 0;
};

struct ModelConfig {
    std::string arch_name;
    const ArchSpec *arch = nullptr;
    uint32_t n_ctx_train = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    // The model's sizes; with per-layer shapes (layer_shape) these are the full-attention layers'
    // (n_head_kv, n_ff: the largest), and the layers' own are read through the accessors below.
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
    // rope.scaling.yarn_log_multiplier (ArchSpec::reads_yarn_extras); 0: unset.
    float yarn_log_mul = 0.0f;
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
    // Llama 4's attention temperature (ArchSpec::reads_attn_temperature): q at position pos is
    // multiplied by attn_temp(pos); 0: off.
    float attn_temp_scale = 0.0f;
    // Positions per step of the temperature (n_ctx_orig).
    uint32_t attn_temp_floor = 0;
    uint32_t n_vocab = 0;                     // from the tokenizer, checked against token_embd
    uint32_t n_ff_shexp = 0;                  // the shared expert's FFN width (ArchSpec::shared_expert)
    uint32_t n_layer_nextn = 0;               // multi-token-prediction blocks after the n_layer run (bound, never run)
    std::array<uint32_t, 4> rope_sections{};  // IMROPE: pairs per position section (t, h, w, e)
    std::vector<MixerKind> layer_kind;        // one per layer
    std::vector<LayerShape> layer_shape;      // one per layer
    std::vector<uint8_t> swa_layers;          // one flag per layer when the file gives them (gemma4); else empty
    // Layers [n_layer_kv, n_layer) keep no cache: each attends to kv_layer(il)'s (gemma4's
    // attention.shared_kv_layers).
    uint32_t n_layer_kv = UINT32_MAX;
    uint32_t n_embd_per_layer = 0;  // per-layer token embedding width (gemma4's E2B/E4B); 0: none
    GdnShape gdn;                   // when any layer is GATED_DELTA_NET

    MixerKind kind(uint32_t il) const { return layer_kind[il]; }
    // Some layer keeps a recurrent state instead of KV rows (a state that cannot be cut back).
    bool has_recurrent() const {
        for (MixerKind k : layer_kind)
            if (k != MixerKind::ATTENTION) return true;
        return false;
    }

    // Whose cache layer il reads and writes: its own, or for a KV-shared layer the last layer of its
    // kind (windowed or full) before the shared ones, as llama.cpp's reuse rule.
    uint32_t kv_layer(uint32_t il) const {
        if (il < n_layer_kv) return il;
        return n_layer_kv - (is_swa(il) ? 2 : 1);
    }
    bool has_kv(uint32_t il) const { return il < n_layer_kv; }
    // Layer il's sizes: q is [n_head][hd(il)], k and v [n_head_kv(il)][hd(il)].
    uint32_t hd(uint32_t il) const { return layer_shape[il].head_dim; }
    uint32_t n_head_kv_of(uint32_t il) const { return layer_shape[il].n_head_kv; }
    uint32_t n_rot_of(uint32_t il) const { return layer_shape[il].n_rot; }
    uint32_t n_ff_of(uint32_t il) const { return layer_shape[il].n_ff; }
    uint32_t n_q(uint32_t il) const { return n_head * hd(il); }
    uint32_t n_kv(uint32_t il) const { return n_head_kv_of(il) * hd(il); }
    // The widest layer's q and k (v) rows: what buffers spanning every layer are sized for.
    uint32_t n_q() const {
        uint32_t m = n_head * head_dim;
        for (uint32_t il = 0; il < layer_shape.size(); ++il) m = std::max(m, n_q(il));
        return m;
    }
    uint32_t n_kv() const {
        uint32_t m = 0;
        for (uint32_t il = 0; il < layer_shape.size(); ++il) m = std::max(m, n_kv(il));
        return layer_shape.empty() ? n_head_kv * head_dim : m;
    }
    uint32_t n_ff_max() const {
        uint32_t m = n_ff;
        for (const LayerShape &l : layer_shape) m = std::max(m, l.n_ff);
        return m;
    }
    // Layer il attends only to the last swa_window positions (llama.cpp's pattern rule, or the
    // file's flag per layer).
    bool is_swa(uint32_t il) const {
        if (swa_window == 0) return false;
        if (!swa_layers.empty()) return swa_layers[il] != 0;
        if (swa_pattern == 0) return true;
        return il % swa_pattern < swa_pattern - 1;
    }
    // Layer il rotates q and k (smollm3 leaves every 4th layer without positions).
    // (Only attention layers have q and k.)
    bool uses_rope(uint32_t il) const {
        return arch->rope != RopeKind::NONE &&
               (arch->no_rope_layer_step == 0 || (il + 1) % arch->no_rope_layer_step != 0);
    }
    RopeParams layer_rope(uint32_t il) const;
    // 1 + s·ln(⌊pos / floor⌋ + 1), evaluated as llama.cpp fills its input (in double, stored as f32).
    float attn_temp(int32_t pos) const {
        const float steps = std::floor(static_cast<float>(pos) / static_cast<float>(attn_temp_floor));
        return static_cast<float>(std::log(static_cast<double>(steps) + 1.0) * static_cast<double>(attn_temp_scale) +
                                  1.0);
    }
};

// Throws LLM_ERR_UNSUPPORTED for unknown architectures, LLM_ERR_FORMAT for bad hparams.
ModelConfig read_config(const Metadata &meta);

}  // namespace llm
