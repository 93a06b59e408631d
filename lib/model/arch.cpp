#include "model/arch.h"

namespace llm {
namespace {

// One row per GGUF architecture; each names only what differs from ArchSpec's defaults (a plain
// Llama block: RMSNorm, adjacent-pair RoPE, SwiGLU, scores scaled in the softmax).
constexpr ArchSpec kArchs[] = {
    // Also Mistral-labelled files, llama3's rope_freqs (a tensor, not a flag) and Mixtral
    // (expert_count > 0).
    {.name = "llama",
     .moe_allowed = true,
     .rope_dims_equal_head = true,
     .rope_freqs_tensor = true,
     .longrope_tensors = true},
    {.name = "qwen2", .rope = RopeKind::NEOX},
    {.name = "qwen3", .qk_norm = true, .rope = RopeKind::NEOX, .rank_last_softmax = true},
    {.name = "qwen3moe",
     .qk_norm = true,
     .moe_allowed = true,
     .moe_required = true,
     .reads_expert_ff_length = true,
     .rope = RopeKind::NEOX},
    // Hybrids: three gated delta-net layers to one gated-attention layer, the FFN's norm under its
    // HF name, a multi-token-prediction tail that is bound and skipped.
    {.name = "qwen35",
     .qk_norm = true,
     .ffn_norm_named_post_attention = true,
     .reads_recurrent_layers = true,
     .attn_output_gate = true,
     .reads_nextn = true,
     .rope = RopeKind::IMROPE},
    {.name = "qwen35moe",
     .qk_norm = true,
     .moe_allowed = true,
     .moe_required = true,
     .reads_expert_ff_length = true,
     .shared_expert = true,
     .ffn_norm_named_post_attention = true,
     .reads_recurrent_layers = true,
     .attn_output_gate = true,
     .reads_nextn = true,
     .rope = RopeKind::IMROPE},
    {.name = "qwen3next",
     .qk_norm = true,
     .moe_allowed = true,
     .moe_required = true,
     .reads_expert_ff_length = true,
     .shared_expert = true,
     .ffn_norm_named_post_attention = true,
     .reads_recurrent_layers = true,
     .gdn_head_map = GdnHeadMap::INTERLEAVED,
     .gdn_fused_ba = true,
     .attn_output_gate = true,
     .reads_nextn = true,
     .rope = RopeKind::NEOX},
    // Mistral 3 (Ministral 3, Devstral 2, re-converted Mistral Small): the Llama block, plus Llama 4's
    // attention temperature and YaRN's extra keys when the file sets them.
    {.name = "mistral3",
     .moe_allowed = true,
     .rope_dims_equal_head = true,
     .rope_freqs_tensor = true,
     .longrope_tensors = true,
     .reads_yarn_extras = true,
     .reads_attn_temperature = true},
    // Experts with biases and a clamped SwiGLU, weighted by a softmax over the chosen logits; sinks in
    // every softmax; a 128-position window on every other layer (even ones), the same RoPE on both.
    {.name = "gpt-oss",
     .ffn = FfnKind::SWIGLU_OAI,
     .moe_allowed = true,
     .moe_required = true,
     .reads_expert_ff_length = true,
     .expert_weights = ExpertWeights::SOFTMAX_TOPK,
     .moe_biases = true,
     .ffn_norm_named_post_attention = true,
     .rope = RopeKind::NEOX,
     .attn_sinks = true,
     .reads_swa = true,
     .swa_pattern = 2,
     .swa_window_required = true},
    {.name = "smollm3", .rope_dims_equal_head = true, .no_rope_layer_step = 4},
    {.name = "gemma2",
     .ffn = FfnKind::GEGLU,
     .post_norms = true,
     .rope = RopeKind::NEOX,
     .q_scale = QScale::PRESCALE,
     .q_scale_embd_per_head_at_n_layer = 46,
     .attn_softcap = 50.0f,
     .final_softcap = 30.0f,
     .reads_swa = true,
     .swa_pattern = 2,
     .swa_window = 4096,
     .embed_scale_sqrt = true,
     .output_tied_always = true},
    {.name = "gemma3",
     .ffn = FfnKind::GEGLU,
     .post_norms = true,
     .qk_norm = true,
     .rope = RopeKind::NEOX,
     .q_scale = QScale::PRESCALE,
     .q_scale_embd_per_head_at_n_layer = 62,
     .reads_swa = true,
     .swa_pattern = 6,
     .swa_rope_base = 10000.0f,
     .swa_rope_unscaled = true,
     .embed_scale_sqrt = true},
    // Gemma 4 (31B, 26B-A4B, E2B, E4B): a per-layer window flag array, windowed layers with their
    // own head dim, KV heads and rotary dims, full layers with proportional RoPE through rope_freqs
    // and V = the raw K projection where there is no attn_v; unscaled scores over RMS-normed q, k,
    // v; norms stored as they apply (no +1); the final soft-cap even when the key is absent.
    {.name = "gemma4",
     .ffn = FfnKind::GEGLU,
     .post_norms = true,
     .qk_norm = true,
     .v_norm = true,
     .v_from_k = true,
     .per_layer_shapes = true,
     .moe_allowed = true,
     .reads_expert_ff_length = true,
     .experts_fused_gate_up = true,
     .moe_dense_branch = true,
     .per_layer_embd = true,
     .kv_sharing = true,
     .rope = RopeKind::NEOX,
     .rope_freqs_tensor = true,
     .rope_freqs_full_only = true,
     .q_scale = QScale::NONE,
     .final_softcap = 30.0f,
     .reads_swa = true,
     .swa_pattern_per_layer = true,
     .embed_scale_sqrt = true},
    {.name = "phi3",
     .ffn = FfnKind::SWIGLU_FUSED,
     .rope = RopeKind::NEOX,
     .longrope_tensors = true,
     .q_scale = QScale::PRESCALE},
    {.name = "phi2",
     .norm = NormKind::LAYER,
     .ffn = FfnKind::GELU,
     .parallel_residual = true,
     .rope = RopeKind::NEOX,
     .q_scale = QScale::PRESCALE},
    {.name = "gpt2", .norm = NormKind::LAYER, .ffn = FfnKind::GELU, .rope = RopeKind::NONE, .position_embd = true},
};

}  // namespace

const ArchSpec *find_arch(const std::string &name) {
    for (const ArchSpec &a : kArchs)
        if (name == a.name) return &a;
    return nullptr;
}

std::string supported_archs() {
    std::string s;
    for (const ArchSpec &a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
    return s;
}

const char *name(NormKind k) {
    switch (k) {
    case NormKind::RMS: return "rms";
    case NormKind::LAYER: return "layer";
    }
    return "?";
}

const char *name(RopeKind k) {
    switch (k) {
    case RopeKind::NONE: return "none";
    case RopeKind::NORM: return "norm";
    case RopeKind::NEOX: return "neox";
    case RopeKind::IMROPE: return "imrope";
    }
    return "?";
}

const char *name(FfnKind k) {
    switch (k) {
    case FfnKind::SWIGLU: return "swiglu";
    case FfnKind::GEGLU: return "geglu";
    case FfnKind::SWIGLU_FUSED: return "swiglu_fused";
    case FfnKind::GELU: return "gelu";
    case FfnKind::SWIGLU_OAI: return "swiglu_oai";
    }
    return "?";
}

const char *name(ExpertWeights k) {
    switch (k) {
    case ExpertWeights::SOFTMAX_NORM: return "softmax_norm";
    case ExpertWeights::SOFTMAX_TOPK: return "softmax_topk";
    }
    return "?";
}

const char *name(QScale k) {
    switch (k) {
    case QScale::SOFTMAX: return "softmax";
    case QScale::PRESCALE: return "prescale";
    case QScale::NONE: return "none";
    }
    return "?";
}

}  // namespace llm
