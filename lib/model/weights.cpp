#include "model/weights.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/dequant.h"

namespace llm {
namespace {

struct SlotSpec {
    const char *suffix;
    bool required;
    bool matrix;  // 2-D weight used in a matmul (type must be supported); else an F32 vector
};

// Tensor names per role (blk.N.<suffix>). Which are required is architecture data; for the llama
// family biases are optional.
constexpr SlotSpec kSlots[SLOT_COUNT] = {
    {"attn_norm.weight", true, false}, {"attn_q.weight", true, true},    {"attn_k.weight", true, true},
    {"attn_v.weight", true, true},     {"attn_q.bias", false, false},    {"attn_k.bias", false, false},
    {"attn_v.bias", false, false},     {"attn_output.weight", true, true}, {"attn_output.bias", false, false},
    {"ffn_norm.weight", true, false},  {"ffn_gate.weight", true, true},  {"ffn_up.weight", true, true},
    {"ffn_down.weight", true, true},   {"ffn_gate.bias", false, false},  {"ffn_up.bias", false, false},
    {"ffn_down.bias", false, false},
};

std::vector<uint64_t> slot_shape(Slot s, const ModelConfig &c) {
    const uint64_t e = c.n_embd, q = c.n_q(), kv = c.n_kv(), ff = c.n_ff;
    switch (s) {
    case ATTN_NORM: case FFN_NORM: case ATTN_OUT_B: case FFN_DOWN_B: return {e};
    case ATTN_Q: return {e, q};
    case ATTN_K: case ATTN_V: return {e, kv};
    case ATTN_Q_B: return {q};
    case ATTN_K_B: case ATTN_V_B: return {kv};
    case ATTN_OUT: return {q, e};
    case FFN_GATE: case FFN_UP: return {e, ff};
    case FFN_DOWN: return {ff, e};
    case FFN_GATE_B: case FFN_UP_B: return {ff};
    default: return {};
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

}  // namespace

WeightView BlockData::view(Slot s) const {
    const TensorInfo *t = tensors->t[s];
    return {t->type, ptr[s], static_cast<int64_t>(t->ne[0]), static_cast<int64_t>(t->ne[1]), t->row_bytes()};
}

const TensorInfo *expect_tensor(const WeightSource &src, const std::string &name,
                                std::initializer_list<uint64_t> shape, bool required) {
    const TensorInfo *t = src.find(name);
    if (!t) {
        if (required) fail(LLM_ERR_FORMAT, "required tensor '{}' is missing", name);
        return nullptr;
    }
    return check_shape(t, name, std::vector<uint64_t>(shape));
}

std::vector<BlockTensors> bind_blocks(const WeightSource &src, const ModelConfig &cfg) {
    std::vector<BlockTensors> blocks(cfg.n_layer);
    for (uint32_t l = 0; l < cfg.n_layer; ++l) {
        for (int s = 0; s < SLOT_COUNT; ++s) {
            const std::string name = "blk." + std::to_string(l) + "." + kSlots[s].suffix;
            const TensorInfo *t = src.find(name);
            if (!t) {
                if (kSlots[s].required) fail(LLM_ERR_FORMAT, "required tensor '{}' is missing", name);
                continue;
            }
            check_shape(t, name, slot_shape(static_cast<Slot>(s), cfg));
            if (kSlots[s].matrix ? !type_supported(t->type) : t->type != TensorType::F32) {
                fail(LLM_ERR_UNSUPPORTED, "tensor '{}' has type {}, which is not supported here", name,
                     type_name(t->type));
            }
            blocks[l].t[s] = t;
        }
    }
    return blocks;
}

}  // namespace llm
