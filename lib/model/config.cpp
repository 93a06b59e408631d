#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"

namespace llm {
namespace {

// rope.scaling.*: what llama.cpp's loader and llama_context derive from them (their defaults
// included), so the rotation of every file is computed as llama.cpp computes it.
void read_rope_scaling(const Metadata &meta, const std::string &p, ModelConfig &c) {
    const std::string type = meta.str(p + "rope.scaling.type").value_or("linear");
    if (type == "none") {
        c.rope_scaling = RopeScaling::NONE;
    } else if (type == "linear") {
        c.rope_scaling = RopeScaling::LINEAR;
    } else if (type == "yarn") {
        c.rope_scaling = RopeScaling::YARN;
    } else if (type == "longrope") {
        c.rope_scaling = RopeScaling::LONGROPE;
    } else {
        fail(LLM_ERR_UNSUPPORTED, "{}rope.scaling.type '{}' is not supported (none, linear, yarn, longrope)", p, type);
    }
    const float factor = meta.f32(p + "rope.scaling.factor").value_or(meta.f32(p + "rope.scale_linear").value_or(0.0f));
    if (!(factor >= 0.0f) || !std::isfinite(factor))
        fail(LLM_ERR_FORMAT, "{}rope.scaling.factor {} is invalid", p, factor);
    // "none" never scales, whatever the factor says.
    c.rope_freq_scale = c.rope_scaling == RopeScaling::NONE || factor == 0.0f ? 1.0f : 1.0f / factor;
    c.n_ctx_orig = meta.u32(p + "rope.scaling.original_context_length").value_or(c.n_ctx_train);
    if (c.n_ctx_orig == 0) c.n_ctx_orig = c.n_ctx_train;

    if (c.arch->reads_yarn_extras) {
        c.yarn_beta_fast = meta.f32(p + "rope.scaling.yarn_beta_fast").value_or(c.yarn_beta_fast);
        c.yarn_beta_slow = meta.f32(p + "rope.scaling.yarn_beta_slow").value_or(c.yarn_beta_slow);
        c.yarn_log_mul = meta.f32(p + "rope.scaling.yarn_log_multiplier").value_or(0.0f);
        if (!std::isfinite(c.yarn_beta_fast) || !std::isfinite(c.yarn_beta_slow) || !(c.yarn_beta_fast > 0.0f) ||
            !(c.yarn_beta_slow > 0.0f) || !std::isfinite(c.yarn_log_mul)) {
            fail(LLM_ERR_FORMAT,
                 "{}rope.scaling.yarn_beta_fast {} / yarn_beta_slow {} / yarn_log_multiplier {} are invalid", p,
                 c.yarn_beta_fast, c.yarn_beta_slow, c.yarn_log_mul);
        }
    }
    const float attn = meta.f32(p + "rope.scaling.attn_factor").value_or(1.0f);
    if (!(attn > 0.0f) || !std::isfinite(attn))
        fail(LLM_ERR_FORMAT, "{}rope.scaling.attn_factor {} is invalid", p, attn);
    c.rope_ext_factor = c.rope_scaling == RopeScaling::YARN ? 1.0f : 0.0f;
    c.rope_attn_factor = 1.0f;
    if (c.rope_ext_factor != 0.0f) {
        // YaRN's magnitude 1 + 0.1·ln(s): llama_context sets it, then divides out the same factor
        // that the rotation multiplies back in, so the net magnitude is HF's default.
        const float s = 1.0f / c.rope_freq_scale;
        auto mscale = [&](float m) { return s <= 1.0f ? 1.0f : 0.1f * m * std::log(s) + 1.0f; };
        // With yarn_log_multiplier (HF's mscale_all_dim; mscale taken as 1) the magnitude is the
        // ratio of the two, as transformers computes it.
        c.rope_attn_factor = c.yarn_log_mul != 0.0f ? mscale(1.0f) / mscale(c.yarn_log_mul) : mscale(1.0f);
        c.rope_attn_factor *= 1.0f / (1.0f + 0.1f * std::log(s));
    }
    c.rope_attn_factor *= attn;
}

// Keys some architecture uses to change its numbers, which this engine (like llama.cpp for the
// architectures we run) does not apply. A file that sets one to anything but its neutral value was
// made for a computation we would not perform: refuse it rather than answer differently.
void refuse_unapplied_keys(const Metadata &meta, const std::string &p, const ModelConfig &c) {
    struct Neutral {
        const char *key;
        float value;                  // the value that changes nothing
        bool one_too = false;         // 1 changes nothing either
        bool one_if_shared = false;   // 1 changes nothing for an architecture with a shared expert
        bool ArchSpec::*applied = nullptr;  // architectures with this flag read and apply the key
    };
    static constexpr Neutral kKeys[] = {
        {"attention.scale", 0.0f},
        {"logit_scale", 1.0f},
        {"embedding_scale", 1.0f},
        {"residual_scale", 1.0f},
        {"attention.temperature_scale", 0.0f, false, false, &ArchSpec::reads_attn_temperature},
        {"rope.scaling.yarn_log_multiplier", 0.0f, false, false, &ArchSpec::reads_yarn_extras},
        {"rope.scaling.yarn_beta_fast", 32.0f, false, false, &ArchSpec::reads_yarn_extras},
        {"rope.scaling.yarn_beta_slow", 1.0f, false, false, &ArchSpec::reads_yarn_extras},
        {"rope.scaling.alpha", 0.0f},
        // Scaling by one is as unset (0); one shared expert is what such an architecture runs anyway.
        {"expert_weights_scale", 0.0f, true},
        {"expert_shared_count", 0.0f, false, true},
    };
    for (const Neutral &k : kKeys) {
        if (k.applied && c.arch->*k.applied) continue;
        const std::string key = p + k.key;
        const MetaValue *mv = meta.find(key);
        if (!mv) continue;
        std::optional<float> v;
        if (mv->type == MetaType::F32) v = meta.f32(key);
        if (mv->type == MetaType::U32) v = static_cast<float>(*meta.u32(key));
        if (!v)
            fail(LLM_ERR_UNSUPPORTED, "metadata key '{}' has type {}, which this engine does not read", key,
                 name(mv->type));
        const bool one_ok = k.one_too || (k.one_if_shared && c.arch->shared_expert);
        const bool neutral = *v == k.value || (one_ok && *v == 1.0f);
        if (!neutral) {
            fail(LLM_ERR_UNSUPPORTED,
                 "metadata key '{}' = {} is not supported for {} (this engine would ignore it "
                 "and compute different logits)",
                 key, *v, c.arch_name);
        }
    }
    // Experts' gating other than softmax, and weights not renormalised, change the routing.
    const MetaValue *g = meta.find(p + "expert_gating_func");
    if (g && (g->type != MetaType::U32 || *meta.u32(p + "expert_gating_func") != 1)) {
        fail(LLM_ERR_UNSUPPORTED, "{}expert_gating_func is not supported (softmax, 1, only)", p);
    }
}

// Which layers are recurrent (llama.cpp's is_recr): the attention.recurrent_layers array (nonzero:
// recurrent) when the file has it, else every layer but each full_attention_interval-th; the
// multi-token-prediction tail is attention. Then the delta-net shape those layers need.
void read_layer_kinds(const Metadata &meta, const std::string &p, ModelConfig &c, uint32_t n_block) {
    c.layer_kind.assign(c.n_layer, MixerKind::ATTENTION);
    if (!c.arch->reads_recurrent_layers) return;
    if (const auto recr = meta.u32_per_layer(p + "attention.recurrent_layers", n_block)) {
        for (uint32_t il = 0; il < c.n_layer; ++il)
            if ((*recr)[il] != 0) c.layer_kind[il] = MixerKind::GATED_DELTA_NET;
    } else {
        const uint32_t interval = meta.u32(p + "full_attention_interval").value_or(4);
        if (interval == 0) fail(LLM_ERR_FORMAT, "{}full_attention_interval is 0", p);
        for (uint32_t il = 0; il < c.n_layer; ++il)
            if ((il + 1) % interval != 0) c.layer_kind[il] = MixerKind::GATED_DELTA_NET;
    }
    if (!c.has_recurrent()) return;
    GdnShape &g = c.gdn;
    g.d_conv = meta.req_u32(p + "ssm.conv_kernel");
    g.head_dim = meta.req_u32(p + "ssm.state_size");
    g.n_k_heads = meta.req_u32(p + "ssm.group_count");
    g.n_v_heads = meta.req_u32(p + "ssm.time_step_rank");
    const uint32_t inner = meta.req_u32(p + "ssm.inner_size");
    if (g.d_conv < 1 || g.d_conv > 64)
        fail(LLM_ERR_FORMAT, "{}ssm.conv_kernel {} is out of range (1..64)", p, g.d_conv);
    // Bounds far above any real file's (state_size 128, 16 / 48 heads), so no size below overflows.
    if (g.head_dim > 4096 || g.n_k_heads > 4096 || g.n_v_heads > 4096) {
        fail(LLM_ERR_FORMAT, "{}ssm.state_size {}, group_count {}, time_step_rank {}: each must be at most 4096", p,
             g.head_dim, g.n_k_heads, g.n_v_heads);
    }
    if (g.head_dim == 0 || g.n_k_heads == 0 || g.n_v_heads == 0 || g.n_v_heads % g.n_k_heads != 0) {
        fail(LLM_ERR_FORMAT, "{}ssm.group_count {} must divide ssm.time_step_rank {} (both > 0, state_size {})", p,
             g.n_k_heads, g.n_v_heads, g.head_dim);
    }
    // llama.cpp's delta net needs value heads of the key heads' size.
    if (inner != g.value_dim()) {
        fail(LLM_ERR_UNSUPPORTED, "{}ssm.inner_size {} is not time_step_rank x state_size ({})", p, inner,
             g.value_dim());
    }
}

// Every layer's attention and FFN sizes: the model's, or with per-layer shapes (gemma4) the
// head_count_kv and feed_forward_length arrays' entries and, on windowed layers, the _swa head and
// rotary dims, as llama.cpp's n_head_kv(il), n_ff(il), n_embd_head_k(il) and n_rot(il) give them.
void read_layer_shapes(const Metadata &meta, const std::string &p, ModelConfig &c, uint32_t n_block) {
    const LayerShape model{c.n_head_kv, c.head_dim, c.n_rot, c.n_ff};
    c.layer_shape.assign(c.n_layer, model);
    if (!c.arch->per_layer_shapes) return;
    const auto kv = meta.u32_per_layer(p + "attention.head_count_kv", n_block);
    const auto ff = meta.u32_per_layer(p + "feed_forward_length", n_block);
    // llama.cpp requires the windowed layers' head sizes for gemma4; their rotary dims default to
    // the full layers'.
    const uint32_t hd_swa = meta.req_u32(p + "attention.key_length_swa");
    const uint32_t hv_swa = meta.req_u32(p + "attention.value_length_swa");
    if (hd_swa != hv_swa || hd_swa == 0) {
        fail(LLM_ERR_UNSUPPORTED, "{}attention.key_length_swa {} / value_length_swa {} are not supported", p, hd_swa,
             hv_swa);
    }
    const uint32_t rot_swa = meta.u32(p + "rope.dimension_count_swa").value_or(c.n_rot);
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        LayerShape &l = c.layer_shape[il];
        if (kv) l.n_head_kv = (*kv)[il];
        if (ff) l.n_ff = (*ff)[il];
        if (c.is_swa(il)) {
            l.head_dim = hd_swa;
            l.n_rot = rot_swa;
        }
        if (l.n_head_kv == 0 || c.n_head % l.n_head_kv != 0) {
            fail(LLM_ERR_FORMAT, "{}attention.head_count_kv {} of layer {} does not divide head_count {}", p,
                 l.n_head_kv, il, c.n_head);
        }
        if (l.n_ff == 0) fail(LLM_ERR_FORMAT, "{}feed_forward_length of layer {} is 0", p, il);
        if (l.head_dim > 4096 || l.n_rot == 0 || l.n_rot % 2 != 0 || l.n_rot > l.head_dim) {
            fail(LLM_ERR_FORMAT, "{}rope dimension count {} of layer {} is invalid for head dimension {}", p, l.n_rot,
                 il, l.head_dim);
        }
    }
}

}  // namespace

RopeParams ModelConfig::layer_rope(uint32_t il) const {
    RopeParams r;
    r.base = is_swa(il) ? rope_base_swa : rope_base;
    r.freq_scale = is_swa(il) ? rope_freq_scale_swa : rope_freq_scale;
    r.ext_factor = rope_ext_factor;
    r.attn_factor = rope_attn_factor;
    r.sections = rope_sections;
    if (r.ext_factor != 0.0f) {
        // The pair index at which a frequency turns n_ctx_orig/(2π·β) times over the original
        // context (ggml's yarn correction dims), floored/ceiled and clamped to the rotated pairs.
        const uint32_t rot = layer_shape.empty() ? n_rot : n_rot_of(il);
        auto dim = [&](float beta) {
            return static_cast<float>(rot) *
                   std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * 3.14159265358979323846f)) /
                   (2.0f * std::log(r.base));
        };
        r.corr_low = std::max(0.0f, std::floor(dim(yarn_beta_fast)));
        r.corr_high = std::min(static_cast<float>(rot) - 1.0f, std::ceil(dim(yarn_beta_slow)));
    }
    return r;
}

ModelConfig read_config(const Metadata &meta) {
    ModelConfig c;
    c.arch_name = meta.req_str("general.architecture");
    c.arch = find_arch(c.arch_name);
    if (!c.arch)
        fail(LLM_ERR_UNSUPPORTED, "architecture '{}' is not supported (supported: {})", c.arch_name, supported_archs());
    const ArchSpec &a = *c.arch;
    const std::string p = c.arch_name + ".";

    c.n_ctx_train = meta.req_u32(p + "context_length");
    c.n_embd = meta.req_u32(p + "embedding_length");
    // Per-layer arrays have one entry per block, the multi-token-prediction tail's included.
    const uint32_t n_block = meta.req_u32(p + "block_count");
    if (n_block == 0 || n_block > 512) fail(LLM_ERR_FORMAT, "{}block_count {} is out of range (1..512)", p, n_block);
    if (a.reads_nextn) {
        c.n_layer_nextn = meta.u32(p + "nextn_predict_layers").value_or(0);
        if (c.n_layer_nextn >= n_block) {
            fail(LLM_ERR_FORMAT, "{}nextn_predict_layers {} leaves no layer of block_count {}", p, c.n_layer_nextn,
                 n_block);
        }
    }
    c.n_layer = n_block - c.n_layer_nextn;
    if (c.n_embd == 0) fail(LLM_ERR_FORMAT, "{}embedding_length is 0", p);
    read_layer_kinds(meta, p, c, n_block);

    // Per-layer hparams may be arrays; we run uniform models and say so for others, except where the
    // architecture has per-layer shapes (then the largest is the model's, read_layer_shapes the
    // rest). Keys of the attention only need agree on attention layers (a hybrid's file may give
    // its others 0).
    auto uniform = [&](const std::string &key, bool required, bool attention_only) -> uint32_t {
        auto v = meta.u32_per_layer(p + key, n_block);
        if (!v) {
            if (required) fail(LLM_ERR_FORMAT, "required metadata key '{}{}' is missing", p, key);
            return 0;
        }
        std::optional<uint32_t> first;
        for (uint32_t il = 0; il < c.n_layer; ++il) {
            if (attention_only && c.kind(il) != MixerKind::ATTENTION) continue;
            if (!first) first = (*v)[il];
            if (a.per_layer_shapes && key != "attention.head_count") {
                first = std::max(*first, (*v)[il]);
                continue;
            }
            if ((*v)[il] != *first) fail(LLM_ERR_UNSUPPORTED, "'{}{}' differs between layers", p, key);
        }
        return first.value_or(0);
    };
    c.n_head = uniform("attention.head_count", true, true);
    // MoE files that size their experts on their own need no dense width (qwen35moe has none).
    const bool ff_optional = a.moe_required && a.reads_expert_ff_length;
    c.n_ff = uniform("feed_forward_length", !ff_optional, false);
    c.n_head_kv = meta.has(p + "attention.head_count_kv") ? uniform("attention.head_count_kv", true, true) : c.n_head;
    if (c.n_head == 0) fail(LLM_ERR_FORMAT, "{}attention.head_count is 0", p);
    if (!a.per_layer_shapes && (c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0)) {
        fail(LLM_ERR_FORMAT, "{}attention.head_count_kv {} does not divide head_count {}", p, c.n_head_kv, c.n_head);
    }
    if (c.n_ff == 0 && !ff_optional) fail(LLM_ERR_FORMAT, "{}feed_forward_length is 0", p);

    c.head_dim = meta.u32(p + "attention.key_length").value_or(c.n_embd / c.n_head);
    uint32_t v_len = meta.u32(p + "attention.value_length").value_or(c.n_embd / c.n_head);
    if (c.head_dim == 0 || v_len != c.head_dim) {
        fail(LLM_ERR_UNSUPPORTED, "key length {} / value length {} are not supported", c.head_dim, v_len);
    }
    c.n_rot = meta.u32(p + "rope.dimension_count").value_or(c.head_dim);
    if (a.rope != RopeKind::NONE) {
        if (c.n_rot == 0 || c.n_rot % 2 != 0 || c.n_rot > c.head_dim) {
            fail(LLM_ERR_FORMAT, "{}rope.dimension_count {} is invalid for head dimension {}", p, c.n_rot, c.head_dim);
        }
        if (a.rope_dims_equal_head && c.n_rot != c.head_dim) {
            fail(LLM_ERR_FORMAT, "{}rope.dimension_count {} must equal the head dimension {}", p, c.n_rot, c.head_dim);
        }
    }

    if (a.rope == RopeKind::IMROPE) {
        // llama.cpp requires the sections for these architectures (a scalar repeats 4 times).
        const auto sec = meta.u32_per_layer(p + "rope.dimension_sections", 4);
        if (!sec) fail(LLM_ERR_FORMAT, "required metadata key '{}rope.dimension_sections' is missing", p);
        std::copy(sec->begin(), sec->end(), c.rope_sections.begin());
        const uint64_t total =
            uint64_t{c.rope_sections[0]} + c.rope_sections[1] + c.rope_sections[2] + c.rope_sections[3];
        if (total == 0 || total > c.head_dim) {
            fail(LLM_ERR_FORMAT, "{}rope.dimension_sections sum to {}, expected 1..{} (the head dimension)", p, total,
                 c.head_dim);
        }
    }

    c.norm_eps = meta.req_f32(
        p + (a.norm == NormKind::RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon"));
    c.rope_base = meta.f32(p + "rope.freq_base").value_or(10000.0f);

    read_rope_scaling(meta, p, c);
    if (a.reads_swa) {
        if (a.swa_pattern_per_layer) {
            c.swa_window = meta.req_u32(p + "attention.sliding_window");
            const auto flags = meta.u32_per_layer(p + "attention.sliding_window_pattern", n_block);
            if (!flags)
                fail(LLM_ERR_FORMAT, "required metadata key '{}attention.sliding_window_pattern' is missing", p);
            c.swa_layers.assign(flags->begin(), flags->begin() + c.n_layer);
        } else {
            if (a.swa_window_required && !meta.has(p + "attention.sliding_window"))
                fail(LLM_ERR_FORMAT, "required metadata key '{}attention.sliding_window' is missing", p);
            c.swa_window = meta.u32(p + "attention.sliding_window").value_or(a.swa_window);
            c.swa_pattern = meta.u32(p + "attention.sliding_window_pattern").value_or(a.swa_pattern);
        }
        c.rope_base_swa =
            meta.f32(p + "rope.freq_base_swa").value_or(a.swa_rope_base != 0.0f ? a.swa_rope_base : c.rope_base);
        c.rope_freq_scale_swa = a.swa_rope_unscaled ? 1.0f : c.rope_freq_scale;
    } else {
        c.rope_base_swa = c.rope_base;
        c.rope_freq_scale_swa = c.rope_freq_scale;
    }
    c.attn_softcap = meta.f32(p + "attn_logit_softcapping").value_or(a.attn_softcap);
    c.final_softcap = meta.f32(p + "final_logit_softcapping").value_or(a.final_softcap);

    const float inv_sqrt_hd = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    switch (a.q_scale) {
    case QScale::SOFTMAX: c.kq_scale = inv_sqrt_hd; break;
    case QScale::NONE: break;
    case QScale::PRESCALE:
        c.q_scale = c.n_layer == a.q_scale_embd_per_head_at_n_layer
                        ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head))
                        : inv_sqrt_hd;
        break;
    }
    if (a.reads_attn_temperature) {
        c.attn_temp_scale = meta.f32(p + "attention.temperature_scale").value_or(0.0f);
        if (!std::isfinite(c.attn_temp_scale))
            fail(LLM_ERR_FORMAT, "{}attention.temperature_scale {} is invalid", p, c.attn_temp_scale);
        // The temperature steps once per original context (llama.cpp's n_ctx_orig_yarn).
        c.attn_temp_floor = c.n_ctx_orig;
        if (c.attn_temp_scale != 0.0f && c.attn_temp_floor == 0)
            fail(LLM_ERR_FORMAT, "{}attention.temperature_scale needs an original context length", p);
    }
    if (a.embed_scale_sqrt) c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));

    c.n_expert = meta.u32(p + "expert_count").value_or(0);
    c.n_expert_used = meta.u32(p + "expert_used_count").value_or(0);
    if (c.n_expert > 0) {
        if (!a.moe_allowed) fail(LLM_ERR_UNSUPPORTED, "{} with experts is not supported", c.arch_name);
        if (c.n_expert > 512) fail(LLM_ERR_FORMAT, "{}expert_count {} exceeds 512", p, c.n_expert);
        if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert) {
            fail(LLM_ERR_FORMAT, "{}expert_used_count {} must be in 1..expert_count ({})", p, c.n_expert_used,
                 c.n_expert);
        }
    } else if (a.moe_required) {
        fail(LLM_ERR_FORMAT, "{} needs {}expert_count > 0", c.arch_name, p);
    }
    c.n_ff_exp = c.n_ff;
    if (a.reads_expert_ff_length && c.n_expert > 0) {
        // llama.cpp's default when the key is absent: the dense width shared among the chosen experts.
        c.n_ff_exp = meta.u32(p + "expert_feed_forward_length").value_or(c.n_ff / c.n_expert_used);
        if (c.n_ff_exp == 0) fail(LLM_ERR_FORMAT, "{}expert_feed_forward_length is 0", p);
    }
    if (a.shared_expert) {
        // llama.cpp's default when the key is absent: the dense width.
        c.n_ff_shexp = meta.u32(p + "expert_shared_feed_forward_length").value_or(c.n_ff);
        if (c.n_ff_shexp == 0) fail(LLM_ERR_FORMAT, "{}expert_shared_feed_forward_length is 0", p);
    }
    read_layer_shapes(meta, p, c, n_block);
    c.n_layer_kv = c.n_layer;
    if (a.kv_sharing) {
        const uint32_t shared = meta.u32(p + "attention.shared_kv_layers").value_or(0);
        // llama.cpp maps a shared layer to the last full or windowed layer before them.
        if (shared > 0 && (shared > c.n_layer || c.n_layer - shared < 2)) {
            fail(LLM_ERR_FORMAT, "{}attention.shared_kv_layers {} leaves fewer than 2 of {} layers a cache", p, shared,
                 c.n_layer);
        }
        c.n_layer_kv = c.n_layer - shared;
        for (uint32_t il = c.n_layer_kv; il < c.n_layer; ++il) {
            const uint32_t src = c.kv_layer(il);
            if (c.is_swa(src) != c.is_swa(il) || c.hd(src) != c.hd(il) || c.n_head_kv_of(src) != c.n_head_kv_of(il)) {
                fail(LLM_ERR_UNSUPPORTED, "{}layer {} would share the cache of layer {}, which has another shape", p,
                     il, src);
            }
        }
    }
    if (a.per_layer_embd) c.n_embd_per_layer = meta.u32(p + "embedding_length_per_layer_input").value_or(0);
    refuse_unapplied_keys(meta, p, c);
    return c;
}

const char *name(RopeScaling s) {
    switch (s) {
    case RopeScaling::NONE: return "none";
    case RopeScaling::LINEAR: return "linear";
    case RopeScaling::YARN: return "yarn";
    case RopeScaling::LONGROPE: return "longrope";
    }
    return "?";
}

}  // namespace llm
