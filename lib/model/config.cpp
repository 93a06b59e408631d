#include "model/config.h"

#include <cmath>

#include "core/error.h"

namespace llm {

ModelConfig read_config(const Metadata &meta) {
    ModelConfig c;
    c.arch_name = meta.req_str("general.architecture");
    c.arch = find_arch(c.arch_name);
    if (!c.arch) fail(LLM_ERR_UNSUPPORTED, "architecture '{}' is not supported (supported: {})", c.arch_name, supported_archs());
    const ArchSpec &a = *c.arch;
    const std::string p = c.arch_name + ".";

    c.n_ctx_train = meta.req_u32(p + "context_length");
    c.n_embd = meta.req_u32(p + "embedding_length");
    c.n_layer = meta.req_u32(p + "block_count");
    if (c.n_layer == 0 || c.n_layer > 512) fail(LLM_ERR_FORMAT, "{}block_count {} is out of range (1..512)", p, c.n_layer);
    if (c.n_embd == 0) fail(LLM_ERR_FORMAT, "{}embedding_length is 0", p);

    // Per-layer hparams may be arrays; we run uniform models and say so for others.
    auto uniform = [&](const std::string &key, bool required) -> uint32_t {
        auto v = meta.u32_per_layer(p + key, c.n_layer);
        if (!v) {
            if (required) fail(LLM_ERR_FORMAT, "required metadata key '{}{}' is missing", p, key);
            return 0;
        }
        for (uint32_t x : *v)
            if (x != (*v)[0]) fail(LLM_ERR_UNSUPPORTED, "'{}{}' differs between layers", p, key);
        return (*v)[0];
    };
    c.n_head = uniform("attention.head_count", true);
    c.n_ff = uniform("feed_forward_length", true);
    c.n_head_kv = meta.has(p + "attention.head_count_kv") ? uniform("attention.head_count_kv", true) : c.n_head;
    if (c.n_head == 0) fail(LLM_ERR_FORMAT, "{}attention.head_count is 0", p);
    if (c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0) {
        fail(LLM_ERR_FORMAT, "{}attention.head_count_kv {} does not divide head_count {}", p, c.n_head_kv, c.n_head);
    }
    if (c.n_ff == 0) fail(LLM_ERR_FORMAT, "{}feed_forward_length is 0", p);

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

    c.norm_eps = meta.req_f32(p + (a.norm == NormKind::RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon"));
    c.rope_base = meta.f32(p + "rope.freq_base").value_or(10000.0f);

    std::string scaling = meta.str(p + "rope.scaling.type").value_or("linear");
    float factor = meta.f32(p + "rope.scaling.factor").value_or(meta.f32(p + "rope.scale_linear").value_or(0.0f));
    if (scaling == "none") {
        c.rope_freq_scale = 1.0f;
    } else if (scaling == "linear") {
        c.rope_freq_scale = factor != 0.0f ? 1.0f / factor : 1.0f;
    } else {
        fail(LLM_ERR_UNSUPPORTED, "rope scaling type '{}' is not supported", scaling);
    }

    if (a.reads_swa) {
        c.swa_window = meta.u32(p + "attention.sliding_window").value_or(a.swa_window);
        c.swa_pattern = meta.u32(p + "attention.sliding_window_pattern").value_or(a.swa_pattern);
        c.rope_base_swa = meta.f32(p + "rope.freq_base_swa").value_or(a.swa_rope_base != 0.0f ? a.swa_rope_base : c.rope_base);
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
    case QScale::PRESCALE:
        c.q_scale = c.n_layer == a.q_scale_embd_per_head_at_n_layer
                        ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head))
                        : inv_sqrt_hd;
        break;
    }
    if (a.embed_scale_sqrt) c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));

    c.n_expert = meta.u32(p + "expert_count").value_or(0);
    c.n_expert_used = meta.u32(p + "expert_used_count").value_or(0);
    if (c.n_expert > 0) {
        if (!a.moe_allowed) fail(LLM_ERR_UNSUPPORTED, "{} with experts is not supported", c.arch_name);
        if (c.n_expert > 512) fail(LLM_ERR_FORMAT, "{}expert_count {} exceeds 512", p, c.n_expert);
        if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert) {
            fail(LLM_ERR_FORMAT, "{}expert_used_count {} must be in 1..expert_count ({})", p, c.n_expert_used, c.n_expert);
        }
    }
    return c;
}

}  // namespace llm
