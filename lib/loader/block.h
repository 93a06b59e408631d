// The vocabulary the loader and the model share about one transformer block: the roles of its
// tensors (TensorRole) and what each role is, where a block's tensors sit in the file (BlockTensors) and
// the bytes of one unit in RAM (BlockData). What needs the model's config (which roles
// an architecture requires, their shapes) lives in model/weights.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/keyed_table.h"
#include "gguf/weight_source.h"
#include "kernels/matmul.h"

namespace llm {

// What a layer's token mixer is (model/arch.h: a per-layer kind, read from the file's metadata).
// Each kind binds its own roles (RoleTraits::kinds) and keeps its own per-session state.
enum class MixerKind : uint8_t {
    ATTENTION,        // softmax attention over the KV cache
    GATED_DELTA_NET,  // linear attention with a delta-rule recurrent state (qwen35, qwen3next)
};
constexpr const char *name(MixerKind k) {
    switch (k) {
    case MixerKind::ATTENTION: return "attention";
    case MixerKind::GATED_DELTA_NET: return "gated_delta_net";
    }
    return "?";
}
constexpr uint8_t kind_bit(MixerKind k) { return static_cast<uint8_t>(1u << static_cast<unsigned>(k)); }
constexpr uint8_t kAnyKind = 0xFF;
constexpr uint8_t kAttentionKind = kind_bit(MixerKind::ATTENTION);
constexpr uint8_t kGdnKind = kind_bit(MixerKind::GATED_DELTA_NET);

// Roles of the tensors of one transformer block, mixer (attention) half first (the units depend on
// it), each half's matrices in the order its recipe uses them (streamed pieces follow that order).
// ModelOpt NVFP4 files add, per matrix, the scale multiplying its output (*_S: <w>.scale) and the
// activation scale its quantization used (*_IN_S: <w>.input_scale); their rows say so (RoleKind).
enum TensorRole : int {
    ATTN_NORM,
    ATTN_NORM_B,
    ATTN_Q,
    ATTN_K,
    ATTN_V,
    ATTN_QKV,
    ATTN_Q_B,
    ATTN_K_B,
    ATTN_V_B,
    ATTN_QKV_B,
    ATTN_Q_NORM,
    ATTN_K_NORM,
    ATTN_OUT,
    ATTN_OUT_B,
    ATTN_SINKS,
    ATTN_POST_NORM,
    ATTN_Q_S,
    ATTN_K_S,
    ATTN_V_S,
    ATTN_OUT_S,
    ATTN_Q_IN_S,
    ATTN_K_IN_S,
    ATTN_V_IN_S,
    ATTN_OUT_IN_S,
    GDN_QKV,
    GDN_Z,
    GDN_BETA,
    GDN_ALPHA,
    GDN_BA,
    GDN_CONV,
    GDN_DT_B,
    GDN_A,
    GDN_NORM,
    GDN_OUT,
    FFN_NORM,
    FFN_NORM_B,
    FFN_GATE,
    FFN_UP,
    FFN_DOWN,
    FFN_GATE_B,
    FFN_UP_B,
    FFN_DOWN_B,
    FFN_POST_NORM,
    LAYER_OUT_SCALE,
    FFN_POST_NORM_1,
    FFN_PRE_NORM_2,
    FFN_POST_NORM_2,
    FFN_GATE_INP_SCALE,
    FFN_DOWN_EXPS_SCALE,
    FFN_GATE_INP_SHEXP,
    FFN_GATE_SHEXP,
    FFN_UP_SHEXP,
    FFN_DOWN_SHEXP,
    FFN_GATE_INP,
    FFN_GATE_EXPS,
    FFN_UP_EXPS,
    FFN_DOWN_EXPS,
    FFN_GATE_INP_B,
    FFN_GATE_EXPS_B,
    FFN_UP_EXPS_B,
    FFN_DOWN_EXPS_B,
    PLE_INP_GATE,
    PLE_PROJ,
    PLE_POST_NORM,
    FFN_GATE_S,
    FFN_UP_S,
    FFN_DOWN_S,
    FFN_GATE_IN_S,
    FFN_UP_IN_S,
    FFN_DOWN_IN_S,
};
// Outside the enum, so a switch over the roles lists every role and nothing else (-Wswitch).
constexpr int ROLE_COUNT = FFN_DOWN_IN_S + 1;

// The unit of residency is half a block: its attention matrices (part 0) or its FFN matrices (part
// 1), numbered unit = 2·layer + part. The unit of streaming is smaller, a piece (LayerStore): one
// matrix, or a few consecutive ones of a half that together are no larger than the model's largest
// matrix, so a streaming slot holds one matrix. The F32 vectors (norms, biases: a few KB a layer)
// stay resident in every mode and belong to no unit.
constexpr uint32_t kUnitsPerBlock = 2;
constexpr uint32_t unit_index(uint32_t layer, uint32_t part) { return layer * kUnitsPerBlock + part; }

// What a role's tensor is to the block recipe besides its storage (RoleTraits::matrix).
enum class RoleKind : uint8_t {
    WEIGHT,    // a matrix or a vector (norm, bias) the recipe reads under its own role
    SCALE,     // one F32 multiplying the output of the matrix `scaled` (ModelOpt NVFP4's <w>.scale)
    IN_SCALE,  // one F32, the activation scale `scaled`'s quantization used: bound and never read,
               // as llama.cpp loads and ignores it
};

struct RoleTraits {
    TensorRole key;
    const char *name;     // the tensor's name after "blk.<layer>."
    uint32_t part = 0;    // the half of the block it belongs to: 0 attention, 1 FFN
    bool matrix = false;  // used in a matmul (any supported type, may be packed); else an F32 vector
    bool expert = false;  // packed experts [n_in, n_out, n_expert]: a streamed unit fetches one at a time
    RoleKind kind = RoleKind::WEIGHT;
    int scaled = -1;  // SCALE and IN_SCALE: the matrix role they belong to (a TensorRole); else -1
    // The mixer kinds whose layers have this role (kind_bit); 0: ATTENTION's for a role of the mixer
    // half, every kind's for one of the FFN half. Roles of different kinds may share a name.
    uint8_t kinds = 0;
};

inline constexpr RoleTraits kRoleTraits[] = {
    {.key = ATTN_NORM, .name = "attn_norm.weight", .kinds = kAnyKind},
    {.key = ATTN_NORM_B, .name = "attn_norm.bias", .kinds = kAnyKind},
    {.key = ATTN_Q, .name = "attn_q.weight", .matrix = true},
    {.key = ATTN_K, .name = "attn_k.weight", .matrix = true},
    {.key = ATTN_V, .name = "attn_v.weight", .matrix = true},
    {.key = ATTN_QKV, .name = "attn_qkv.weight", .matrix = true},
    {.key = ATTN_Q_B, .name = "attn_q.bias"},
    {.key = ATTN_K_B, .name = "attn_k.bias"},
    {.key = ATTN_V_B, .name = "attn_v.bias"},
    {.key = ATTN_QKV_B, .name = "attn_qkv.bias"},
    {.key = ATTN_Q_NORM, .name = "attn_q_norm.weight"},
    {.key = ATTN_K_NORM, .name = "attn_k_norm.weight"},
    {.key = ATTN_OUT, .name = "attn_output.weight", .matrix = true},
    {.key = ATTN_OUT_B, .name = "attn_output.bias"},
    {.key = ATTN_SINKS, .name = "attn_sinks.weight"},
    {.key = ATTN_POST_NORM, .name = "post_attention_norm.weight"},
    {.key = ATTN_Q_S, .name = "attn_q.scale", .kind = RoleKind::SCALE, .scaled = ATTN_Q},
    {.key = ATTN_K_S, .name = "attn_k.scale", .kind = RoleKind::SCALE, .scaled = ATTN_K},
    {.key = ATTN_V_S, .name = "attn_v.scale", .kind = RoleKind::SCALE, .scaled = ATTN_V},
    {.key = ATTN_OUT_S, .name = "attn_output.scale", .kind = RoleKind::SCALE, .scaled = ATTN_OUT},
    {.key = ATTN_Q_IN_S, .name = "attn_q.input_scale", .kind = RoleKind::IN_SCALE, .scaled = ATTN_Q},
    {.key = ATTN_K_IN_S, .name = "attn_k.input_scale", .kind = RoleKind::IN_SCALE, .scaled = ATTN_K},
    {.key = ATTN_V_IN_S, .name = "attn_v.input_scale", .kind = RoleKind::IN_SCALE, .scaled = ATTN_V},
    {.key = ATTN_OUT_IN_S, .name = "attn_output.input_scale", .kind = RoleKind::IN_SCALE, .scaled = ATTN_OUT},
    {.key = GDN_QKV, .name = "attn_qkv.weight", .matrix = true, .kinds = kGdnKind},
    {.key = GDN_Z, .name = "attn_gate.weight", .matrix = true, .kinds = kGdnKind},
    {.key = GDN_BETA, .name = "ssm_beta.weight", .matrix = true, .kinds = kGdnKind},
    {.key = GDN_ALPHA, .name = "ssm_alpha.weight", .matrix = true, .kinds = kGdnKind},
    {.key = GDN_BA, .name = "ssm_ba.weight", .matrix = true, .kinds = kGdnKind},
    {.key = GDN_CONV, .name = "ssm_conv1d.weight", .kinds = kGdnKind},
    {.key = GDN_DT_B, .name = "ssm_dt.bias", .kinds = kGdnKind},
    {.key = GDN_A, .name = "ssm_a", .kinds = kGdnKind},
    {.key = GDN_NORM, .name = "ssm_norm.weight", .kinds = kGdnKind},
    {.key = GDN_OUT, .name = "ssm_out.weight", .matrix = true, .kinds = kGdnKind},
    {.key = FFN_NORM, .name = "ffn_norm.weight", .part = 1},
    {.key = FFN_NORM_B, .name = "ffn_norm.bias", .part = 1},
    {.key = FFN_GATE, .name = "ffn_gate.weight", .part = 1, .matrix = true},
    {.key = FFN_UP, .name = "ffn_up.weight", .part = 1, .matrix = true},
    {.key = FFN_DOWN, .name = "ffn_down.weight", .part = 1, .matrix = true},
    {.key = FFN_GATE_B, .name = "ffn_gate.bias", .part = 1},
    {.key = FFN_UP_B, .name = "ffn_up.bias", .part = 1},
    {.key = FFN_DOWN_B, .name = "ffn_down.bias", .part = 1},
    {.key = FFN_POST_NORM, .name = "post_ffw_norm.weight", .part = 1},
    // One F32 multiplying the whole residual stream at the block's end (gemma4).
    {.key = LAYER_OUT_SCALE, .name = "layer_output_scale.weight", .part = 1},
    // A dense MLP beside the experts (gemma4): its output norm, the experts' input and output norms.
    {.key = FFN_POST_NORM_1, .name = "post_ffw_norm_1.weight", .part = 1},
    {.key = FFN_PRE_NORM_2, .name = "pre_ffw_norm_2.weight", .part = 1},
    {.key = FFN_POST_NORM_2, .name = "post_ffw_norm_2.weight", .part = 1},
    // The router's input scale, one per embedding value (gemma4), and one scale per expert
    // multiplying that expert's down projection.
    {.key = FFN_GATE_INP_SCALE, .name = "ffn_gate_inp.scale", .part = 1},
    {.key = FFN_DOWN_EXPS_SCALE, .name = "ffn_down_exps.scale", .part = 1},
    {.key = FFN_GATE_INP_SHEXP, .name = "ffn_gate_inp_shexp.weight", .part = 1},
    {.key = FFN_GATE_SHEXP, .name = "ffn_gate_shexp.weight", .part = 1, .matrix = true},
    {.key = FFN_UP_SHEXP, .name = "ffn_up_shexp.weight", .part = 1, .matrix = true},
    {.key = FFN_DOWN_SHEXP, .name = "ffn_down_shexp.weight", .part = 1, .matrix = true},
    {.key = FFN_GATE_INP, .name = "ffn_gate_inp.weight", .part = 1, .matrix = true},
    {.key = FFN_GATE_EXPS, .name = "ffn_gate_exps.weight", .part = 1, .matrix = true, .expert = true},
    {.key = FFN_UP_EXPS, .name = "ffn_up_exps.weight", .part = 1, .matrix = true, .expert = true},
    {.key = FFN_DOWN_EXPS, .name = "ffn_down_exps.weight", .part = 1, .matrix = true, .expert = true},
    // The router's and the experts' biases: F32 vectors, one row per expert ([n_out, n_expert]).
    {.key = FFN_GATE_INP_B, .name = "ffn_gate_inp.bias", .part = 1},
    {.key = FFN_GATE_EXPS_B, .name = "ffn_gate_exps.bias", .part = 1},
    {.key = FFN_UP_EXPS_B, .name = "ffn_up_exps.bias", .part = 1},
    {.key = FFN_DOWN_EXPS_B, .name = "ffn_down_exps.bias", .part = 1},
    // The per-layer token embedding's step after the FFN (gemma4's E2B/E4B): gelu(inp_gate·h) ⊙ the
    // layer's input, projected back to n_embd and normed.
    {.key = PLE_INP_GATE, .name = "inp_gate.weight", .part = 1, .matrix = true},
    {.key = PLE_PROJ, .name = "proj.weight", .part = 1, .matrix = true},
    {.key = PLE_POST_NORM, .name = "post_norm.weight", .part = 1},
    {.key = FFN_GATE_S, .name = "ffn_gate.scale", .part = 1, .kind = RoleKind::SCALE, .scaled = FFN_GATE},
    {.key = FFN_UP_S, .name = "ffn_up.scale", .part = 1, .kind = RoleKind::SCALE, .scaled = FFN_UP},
    {.key = FFN_DOWN_S, .name = "ffn_down.scale", .part = 1, .kind = RoleKind::SCALE, .scaled = FFN_DOWN},
    {.key = FFN_GATE_IN_S, .name = "ffn_gate.input_scale", .part = 1, .kind = RoleKind::IN_SCALE, .scaled = FFN_GATE},
    {.key = FFN_UP_IN_S, .name = "ffn_up.input_scale", .part = 1, .kind = RoleKind::IN_SCALE, .scaled = FFN_UP},
    {.key = FFN_DOWN_IN_S, .name = "ffn_down.input_scale", .part = 1, .kind = RoleKind::IN_SCALE, .scaled = FFN_DOWN},
};
static_assert(rows_match_keys(kRoleTraits, ROLE_COUNT), "one row per role, in TensorRole order");
// The halves are contiguous ranges of the enum (units are numbered by them): attention first.
constexpr bool halves_contiguous() {
    for (int s = 1; s < ROLE_COUNT; ++s)
        if (kRoleTraits[s].part < kRoleTraits[s - 1].part) return false;
    return true;
}
static_assert(halves_contiguous(), "every attention-half role precedes every FFN-half role");

// The kinds a role belongs to, its row's default resolved.
constexpr uint8_t role_kinds(const RoleTraits &r) {
    if (r.kinds != 0) return r.kinds;
    return r.part == 0 ? kAttentionKind : kAnyKind;
}

// A layer of any kind binds each of its tensors' names to one role.
constexpr bool names_unique_per_kind() {
    for (int a = 0; a < ROLE_COUNT; ++a)
        for (int b = a + 1; b < ROLE_COUNT; ++b) {
            const char *x = kRoleTraits[a].name, *y = kRoleTraits[b].name;
            while (*x && *x == *y) ++x, ++y;
            if (*x == *y && (role_kinds(kRoleTraits[a]) & role_kinds(kRoleTraits[b])) != 0) return false;
        }
    return true;
}
static_assert(names_unique_per_kind(), "no two roles of one mixer kind share a tensor name");

// A scale belongs to a matrix of its own half, and a matrix has at most one of each kind of scale.
constexpr bool scales_well_formed() {
    for (const RoleTraits &r : kRoleTraits) {
        if ((r.kind == RoleKind::WEIGHT) != (r.scaled < 0)) return false;
        if (r.kind == RoleKind::WEIGHT) continue;
        if (r.scaled >= ROLE_COUNT || !kRoleTraits[r.scaled].matrix || kRoleTraits[r.scaled].part != r.part || r.matrix)
            return false;
        for (const RoleTraits &o : kRoleTraits)
            if (&o != &r && o.kind == r.kind && o.scaled == r.scaled) return false;
    }
    return true;
}
static_assert(scales_well_formed(), "each scale row names a matrix of its half, one scale of a kind per matrix");

// The SCALE role of each matrix role, from the rows above; -1 where the role has none.
inline constexpr std::array<int, ROLE_COUNT> kOutputScaleOf = [] {
    std::array<int, ROLE_COUNT> a{};
    a.fill(-1);
    for (const RoleTraits &r : kRoleTraits)
        if (r.kind == RoleKind::SCALE) a[r.scaled] = r.key;
    return a;
}();

// The tensor's name after "blk.<layer>." and the one name() of the enum.
constexpr const char *name(TensorRole s) { return kRoleTraits[s].name; }

// The directory entries of one block (nullptr = optional tensor absent).
struct BlockTensors {
    std::array<const TensorInfo *, ROLE_COUNT> t{};
};

// Reads one expert's slab of a packed expert tensor on demand (streamed MoE units keep only the
// router, so only the experts a token chose are ever read). The pointer stays valid until the next
// fetch for the same role.
class ExpertFetcher {
public:
    virtual ~ExpertFetcher() = default;
    // The slabs the caller is about to fetch, in the order it will (a fetcher may read them ahead);
    // a fetch that differs from the plan is still served.
    virtual void plan(const BlockTensors &, const std::vector<std::pair<TensorRole, uint32_t>> &) {}
    virtual const uint8_t *fetch(TensorRole s, const TensorInfo &t, uint32_t e) = 0;
};

// The bytes of one unit (half a block), one streamed piece or one block's vectors in RAM, in their
// on-disk encoding; the roles it does not hold are null.
struct BlockData {
    AlignedBuffer buf;
    // A streamed piece under CachePolicy::MAP: its runs mapped from the file (then buf is empty and
    // ptr points into these).
    std::vector<MappedRange> maps;
    std::array<const uint8_t *, ROLE_COUNT> ptr{};
    std::array<bool, ROLE_COUNT> packed{};  // repacked in place after the read (kernels/repack.h)
    const BlockTensors *tensors = nullptr;  // the whole block's
    ExpertFetcher *experts = nullptr;       // set when expert tensors were left out of buf

    WeightView view(TensorRole s) const;
    // Expert e of a packed 3-D tensor [n_in, n_out, n_expert].
    WeightView expert(TensorRole s, uint32_t e) const;
    const float *f32(TensorRole s) const { return reinterpret_cast<const float *>(ptr[s]); }
};

// Packs, in place, the matrices of a unit just read whose type the active kernels take packed.
// Expert slabs stay in file layout (they are fetched one expert at a time).
void pack_block(BlockData &b);

}  // namespace llm
