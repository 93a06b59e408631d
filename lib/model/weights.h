// Binding GGUF tensors to the roles the block recipe uses, with exact shape checks.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"
#include "gguf/weight_source.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace llm {

// Roles of the tensors of one transformer block.
enum Slot : int {
    ATTN_NORM, ATTN_NORM_B, ATTN_Q, ATTN_K, ATTN_V, ATTN_QKV, ATTN_Q_B, ATTN_K_B, ATTN_V_B, ATTN_QKV_B,
    ATTN_Q_NORM, ATTN_K_NORM, ATTN_OUT, ATTN_OUT_B, ATTN_POST_NORM,
    FFN_NORM, FFN_NORM_B, FFN_GATE, FFN_UP, FFN_DOWN, FFN_GATE_B, FFN_UP_B, FFN_DOWN_B, FFN_POST_NORM,
    FFN_GATE_INP, FFN_GATE_EXPS, FFN_UP_EXPS, FFN_DOWN_EXPS,
    SLOT_COUNT
};

// The directory entries of one block (nullptr = optional tensor absent).
struct BlockTensors {
    std::array<const TensorInfo *, SLOT_COUNT> t{};
};

// Reads one expert's slab of a packed expert tensor on demand (streamed MoE blocks keep only the
// router resident, so only the experts a token chose are ever read). The pointer stays valid until
// the next fetch for the same slot.
class ExpertFetcher {
public:
    virtual ~ExpertFetcher() = default;
    virtual const uint8_t *fetch(Slot s, const TensorInfo &t, uint32_t e) = 0;
};

// A block's bytes in RAM, in their on-disk encoding.
struct BlockData {
    AlignedBuffer buf;
    std::array<const uint8_t *, SLOT_COUNT> ptr{};
    std::array<bool, SLOT_COUNT> packed{};  // repacked in place after the read (kernels/repack.h)
    const BlockTensors *tensors = nullptr;
    ExpertFetcher *experts = nullptr;  // set when expert tensors were left out of buf

    bool has(Slot s) const { return ptr[s] != nullptr || (experts && tensors->t[s] && is_expert_slot(s)); }
    static bool is_expert_slot(Slot s) { return s == FFN_GATE_EXPS || s == FFN_UP_EXPS || s == FFN_DOWN_EXPS; }
    WeightView view(Slot s) const;
    // Expert e of a packed 3-D tensor [n_in, n_out, n_expert].
    WeightView expert(Slot s, uint32_t e) const;
    const float *f32(Slot s) const { return reinterpret_cast<const float *>(ptr[s]); }
};

// Packs, in place, the matrices of a block just read whose type the active kernels take packed.
// Expert slabs stay in file layout (they are fetched one expert at a time).
void pack_block(BlockData &b);

// Resolves every block's tensors by name and checks shapes against the config. Throws
// LLM_ERR_FORMAT naming a missing or misshapen tensor, LLM_ERR_UNSUPPORTED for an unusable type.
std::vector<BlockTensors> bind_blocks(const WeightSource &src, const ModelConfig &cfg);

// Every tensor of the file must be one the model binds (`used`, nullptr entries ignored): a tensor
// we would ignore may change the computation (llama.cpp refuses such files too). Throws
// LLM_ERR_UNSUPPORTED naming the first unused tensor.
void refuse_unused_tensors(const WeightSource &src, const std::vector<const TensorInfo *> &used, const std::string &arch);

// Checks that tensor `name` exists (unless optional) with exactly the shape given; returns it.
const TensorInfo *expect_tensor(const WeightSource &src, const std::string &name,
                                std::initializer_list<uint64_t> shape, bool required);

}  // namespace llm
