#include "model/weights.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "kernels/dequant.h"

namespace llm {
namespace {

// Whether a layer of kind k of this architecture has role s at all: the kind's roles, less those the
// architecture stores otherwise. A tensor of a role that does not apply is left unbound (and so
// refused as unused).
bool role_applies(TensorRole s, const ModelConfig &c, MixerKind k) {
    const ArchSpec &a = *c.arch;
    if ((role_kinds(kRoleTraits[s]) & kind_bit(k)) == 0) return false;
    switch (s) {
    case ATTN_QKV:
    case ATTN_QKV_B: return !a.attn_output_gate;                   // the gated q is its own projection
    case ATTN_POST_NORM: return !a.ffn_norm_named_post_attention;  // that tensor is the FFN's norm
    case GDN_BETA:
    case GDN_ALPHA: return !a.gdn_fused_ba;
    case GDN_BA: return a.gdn_fused_ba;
    case FFN_GATE_INP_SHEXP:
    case FFN_GATE_SHEXP:
    case FFN_UP_SHEXP:
    case FFN_DOWN_SHEXP: return a.shared_expert;
    case ATTN_SINKS: return a.attn_sinks;
    case FFN_GATE_INP_B:
    case FFN_GATE_EXPS_B:
    case FFN_UP_EXPS_B:
    case FFN_DOWN_EXPS_B: return a.moe_biases;
    case FFN_GATE_EXPS: return !a.experts_fused_gate_up;
    case PLE_INP_GATE:
    case PLE_PROJ:
    case PLE_POST_NORM: return c.n_embd_per_layer > 0;
    case FFN_POST_NORM_1:
    case FFN_PRE_NORM_2:
    case FFN_POST_NORM_2:
    case FFN_GATE_INP_SCALE: return a.moe_dense_branch && c.n_expert > 0;
    default: return true;
    }
}

// The tensor's name after "blk.<layer>.": the role's, except where the architecture's files use
// another for it.
const char *role_tensor_name(TensorRole s, const ArchSpec &a) {
    if (s == FFN_NORM && a.ffn_norm_named_post_attention) return "post_attention_norm.weight";
    if (s == FFN_UP_EXPS && a.experts_fused_gate_up) return "ffn_gate_up_exps.weight";
    return name(s);
}

// Which tensors an architecture cannot do without. Everything else is optional, and the block
// recipe uses whatever is present (a bias, a post-norm) the same way for every architecture.
bool role_required(TensorRole s, const ModelConfig &c, bool fused_qkv) {
    const ArchSpec &a = *c.arch;
    const bool moe = c.n_expert > 0,
               gated = a.ffn == FfnKind::SWIGLU || a.ffn == FfnKind::GEGLU || a.ffn == FfnKind::SWIGLU_OAI;
    const bool dense = !moe || a.moe_dense_branch;
    if (kRoleTraits[s].kind != RoleKind::WEIGHT) return false;  // a file without scales has plain matrices
    switch (s) {
    case ATTN_NORM:
    case ATTN_OUT: return true;
    case ATTN_NORM_B: return a.norm == NormKind::LAYER;
    case ATTN_Q:
    case ATTN_K:
    case ATTN_V: return !fused_qkv && !a.v_from_k;
    case ATTN_Q_NORM:
    case ATTN_K_NORM: return a.qk_norm;
    case ATTN_POST_NORM:
    case FFN_POST_NORM: return a.post_norms;
    case FFN_NORM: return !a.parallel_residual;
    case FFN_NORM_B: return !a.parallel_residual && a.norm == NormKind::LAYER;
    case FFN_GATE: return gated && dense;
    case FFN_UP:
    case FFN_DOWN: return dense;
    case FFN_POST_NORM_1:
    case FFN_PRE_NORM_2:
    case FFN_POST_NORM_2:
    case FFN_GATE_INP_SCALE:
    case PLE_INP_GATE:
    case PLE_PROJ:
    case PLE_POST_NORM: return true;  // of the roles that apply (role_applies)
    case FFN_GATE_INP:
    case FFN_UP_EXPS:
    case FFN_DOWN_EXPS: return moe;
    case FFN_GATE_EXPS: return moe && a.ffn == FfnKind::SWIGLU_OAI;  // its clamp needs a gate
    case ATTN_SINKS: return a.attn_sinks;
    case FFN_GATE_INP_B:
    case FFN_GATE_EXPS_B:
    case FFN_UP_EXPS_B:
    case FFN_DOWN_EXPS_B: return a.moe_biases;  // llama.cpp requires each for gpt-oss
    case GDN_QKV:
    case GDN_Z:
    case GDN_CONV:
    case GDN_DT_B:
    case GDN_A:
    case GDN_NORM:
    case GDN_OUT:
    case GDN_BETA:
    case GDN_ALPHA:
    case GDN_BA: return true;  // of the kind's roles that apply (role_applies)
    case FFN_GATE_INP_SHEXP:
    case FFN_GATE_SHEXP:
    case FFN_UP_SHEXP:
    case FFN_DOWN_SHEXP: return a.shared_expert;
    case ATTN_QKV:
    case ATTN_Q_B:
    case ATTN_K_B:
    case ATTN_V_B:
    case ATTN_QKV_B:
    case ATTN_OUT_B:
    case FFN_GATE_B:
    case FFN_UP_B:
    case FFN_DOWN_B:
    default: return false;  // optional; the scales were answered above, by their rows
    }
}

std::vector<uint64_t> role_shape(TensorRole s, const ModelConfig &c, uint32_t il) {
    const uint64_t e = c.n_embd, q = c.n_q(il), kv = c.n_kv(il), ff = c.n_ff_of(il), hd = c.hd(il), x = c.n_expert;
    const uint64_t fx = c.n_ff_exp;
    const uint64_t up = c.arch->ffn == FfnKind::SWIGLU_FUSED ? 2 * ff : ff;
    const uint64_t qg = c.arch->attn_output_gate ? 2 * q : q;  // q, or per head [q | gate]
    const uint64_t sh = c.n_ff_shexp;
    const GdnShape &g = c.gdn;
    if (kRoleTraits[s].kind != RoleKind::WEIGHT) return {1};  // one F32 per matrix
    switch (s) {
    case ATTN_NORM:
    case ATTN_NORM_B:
    case FFN_NORM:
    case FFN_NORM_B:
    case ATTN_OUT_B:
    case FFN_DOWN_B:
    case ATTN_POST_NORM:
    case FFN_POST_NORM: return {e};
    case LAYER_OUT_SCALE: return {1};
    case ATTN_Q: return {e, qg};
    case ATTN_K:
    case ATTN_V: return {e, kv};
    case ATTN_QKV: return {e, q + 2 * kv};
    case ATTN_Q_B: return {qg};
    case ATTN_K_B:
    case ATTN_V_B: return {kv};
    case ATTN_QKV_B: return {q + 2 * kv};
    case ATTN_Q_NORM:
    case ATTN_K_NORM: return {hd};
    case ATTN_OUT: return {q, e};
    case FFN_GATE: return {e, ff};
    case FFN_UP: return {e, up};
    case FFN_DOWN: return {ff, e};
    case FFN_GATE_B: return {ff};
    case FFN_UP_B: return {up};
    case FFN_GATE_INP: return {e, x};
    case ATTN_SINKS: return {c.n_head};
    case FFN_GATE_INP_B: return {x};
    case FFN_GATE_EXPS_B:
    case FFN_UP_EXPS_B: return {fx, x};
    case FFN_DOWN_EXPS_B: return {e, x};
    case FFN_GATE_EXPS: return {e, fx, x};
    case FFN_UP_EXPS: return {e, c.arch->experts_fused_gate_up ? 2 * fx : fx, x};
    case FFN_POST_NORM_1:
    case FFN_PRE_NORM_2:
    case FFN_POST_NORM_2:
    case FFN_GATE_INP_SCALE: return {e};
    case FFN_DOWN_EXPS_SCALE: return {x};
    case PLE_INP_GATE: return {e, c.n_embd_per_layer};
    case PLE_PROJ: return {c.n_embd_per_layer, e};
    case PLE_POST_NORM: return {e};
    case FFN_DOWN_EXPS: return {fx, e, x};
    case FFN_GATE_INP_SHEXP: return {e};
    case FFN_GATE_SHEXP:
    case FFN_UP_SHEXP: return {e, sh};
    case FFN_DOWN_SHEXP: return {sh, e};
    case GDN_QKV: return {e, g.conv_channels()};
    case GDN_Z: return {e, g.value_dim()};
    case GDN_BETA:
    case GDN_ALPHA: return {e, g.n_v_heads};
    case GDN_BA: return {e, 2ull * g.n_v_heads};
    case GDN_CONV: return {g.d_conv, g.conv_channels()};
    case GDN_DT_B:
    case GDN_A: return {g.n_v_heads};
    case GDN_NORM: return {g.head_dim};
    case GDN_OUT: return {g.value_dim(), e};
    default: return {};  // the scales were answered above, by their rows
    }
}

const TensorInfo *check_shape(const TensorInfo *t, const std::string &name, const std::vector<uint64_t> &shape) {
    bool ok = true;
    for (size_t d = 0; d < 4; ++d) {
        uint64_t want = d < shape.size() ? shape[d] : 1;
        if (t->ne[d] != want) ok = false;
    }
    if (!ok) {
        std::string want = "[";
        for (size_t d = 0; d < shape.size(); ++d) want += (d ? ", " : "") + std::to_string(shape[d]);
        fail(LLM_ERR_FORMAT, "tensor '{}' has shape {}, expected {}]", name, t->shape_string(), want);
    }
    return t;
}

// The roles of a layer's own keys and values: a layer that reads another's cache (gemma4's KV-shared
// layers) has them in real files, and llama.cpp loads them and never reads them.
bool kv_role(TensorRole s) {
    switch (s) {
    case ATTN_K:
    case ATTN_V:
    case ATTN_K_B:
    case ATTN_V_B:
    case ATTN_K_NORM:
    case ATTN_K_S:
    case ATTN_V_S:
    case ATTN_K_IN_S:
    case ATTN_V_IN_S: return true;
    default: return false;
    }
}

}  // namespace

const TensorInfo *expect_tensor(const WeightSource &src, const std::string &name, std::initializer_list<uint64_t> shape,
                                bool required) {
    const TensorInfo *t = src.find(name);
    if (!t) {
        if (required) fail(LLM_ERR_FORMAT, "required tensor '{}' is missing", name);
        return nullptr;
    }
    return check_shape(t, name, std::vector<uint64_t>(shape));
}

void refuse_unused_tensors(const WeightSource &src, const std::vector<const TensorInfo *> &used,
                           const std::string &arch) {
    std::unordered_set<const TensorInfo *> set(used.begin(), used.end());
    for (const TensorInfo &t : src.tensors()) {
        if (!set.count(&t)) {
            fail(LLM_ERR_UNSUPPORTED,
                 "tensor '{}' is not used by the {} architecture here; a file with tensors this "
                 "engine would ignore is refused (llama.cpp refuses it too)",
                 t.name, arch);
        }
    }
}

std::vector<BlockTensors> bind_blocks(const WeightSource &src, const ModelConfig &cfg) {
    std::vector<BlockTensors> blocks(cfg.n_layer);
    for (uint32_t l = 0; l < cfg.n_layer; ++l) {
        const std::string prefix = "blk." + std::to_string(l) + ".";
        const MixerKind kind = cfg.kind(l);
        const bool fused_qkv = kind == MixerKind::ATTENTION && role_applies(ATTN_QKV, cfg, kind) &&
                               src.find(prefix + name(ATTN_QKV)) != nullptr;
        // Experts whose gate and up the converter fuses may come apart too (llama.cpp loads either):
        // without the fused tensor but with ffn_gate_exps, the layer binds the pair, each [n_embd,
        // n_ff_exp, n_expert], and the recipe runs them as any gated experts.
        const bool split_exps = cfg.arch->experts_fused_gate_up &&
                                !src.find(prefix + role_tensor_name(FFN_UP_EXPS, *cfg.arch)) &&
                                src.find(prefix + name(FFN_GATE_EXPS)) != nullptr;
        for (int s = 0; s < ROLE_COUNT; ++s) {
            const TensorRole role = static_cast<TensorRole>(s);
            const bool split_role = split_exps && (role == FFN_GATE_EXPS || role == FFN_UP_EXPS);
            if (!role_applies(role, cfg, kind) && !split_role) continue;
            if (!cfg.has_kv(l) && kv_role(role)) continue;  // skipped_nextn_tensors lists them
            const std::string name = prefix + (split_role ? llm::name(role) : role_tensor_name(role, *cfg.arch));
            const TensorInfo *t = src.find(name);
            if (!t) {
                if (role_required(role, cfg, fused_qkv) || split_role) {
                    fail(LLM_ERR_FORMAT, "required tensor '{}' is missing", name);
                }
                continue;
            }
            check_shape(t, name, role_shape(split_role ? FFN_GATE_EXPS : role, cfg, l));
            if (kRoleTraits[s].matrix ? !type_supported(t->type) : t->type != TensorType::F32) {
                fail(LLM_ERR_UNSUPPORTED, "tensor '{}' has type {}, which is not supported here", name,
                     type_name(t->type));
            }
            blocks[l].t[s] = t;
        }
    }
    return blocks;
}

std::vector<const TensorInfo *> skipped_nextn_tensors(const WeightSource &src, const ModelConfig &cfg) {
    // The block of an attention layer plus the head that turns it into a predictor of token t+2.
    static constexpr const char *kNextn[] = {"nextn.eh_proj.weight",
                                             "nextn.enorm.weight",
                                             "nextn.hnorm.weight",
                                             "nextn.embed_tokens.weight",
                                             "nextn.shared_head_head.weight",
                                             "nextn.shared_head_norm.weight"};
    std::vector<const TensorInfo *> out;
    for (uint32_t l = cfg.n_layer; l < cfg.n_layer + cfg.n_layer_nextn; ++l) {
        const std::string prefix = "blk." + std::to_string(l) + ".";
        for (int s = 0; s < ROLE_COUNT; ++s) {
            const TensorRole role = static_cast<TensorRole>(s);
            if (role_applies(role, cfg, MixerKind::ATTENTION))
                out.push_back(src.find(prefix + role_tensor_name(role, *cfg.arch)));
        }
        for (const char *n : kNextn) out.push_back(src.find(prefix + n));
    }
    // KV-shared layers' own keys and values: bound, never read.
    for (uint32_t l = 0; l < cfg.n_layer; ++l) {
        if (cfg.has_kv(l)) continue;
        const std::string prefix = "blk." + std::to_string(l) + ".";
        for (int s = 0; s < ROLE_COUNT; ++s) {
            const TensorRole role = static_cast<TensorRole>(s);
            if (kv_role(role) && role_applies(role, cfg, cfg.kind(l)))
                out.push_back(src.find(prefix + role_tensor_name(role, *cfg.arch)));
        }
    }
    return out;
}

}  // namespace llm
