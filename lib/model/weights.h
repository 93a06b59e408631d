// Binding GGUF tensors to the roles the block recipe uses, with exact shape checks, and the
// LayerStore: the load/unload seam through which the forward pass gets a block's weights.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/aligned_buffer.h"
#include "gguf/weight_source.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace llm {

// Roles of the tensors of one transformer block.
enum Slot : int {
    ATTN_NORM, ATTN_Q, ATTN_K, ATTN_V, ATTN_Q_B, ATTN_K_B, ATTN_V_B, ATTN_OUT, ATTN_OUT_B,
    FFN_NORM, FFN_GATE, FFN_UP, FFN_DOWN, FFN_GATE_B, FFN_UP_B, FFN_DOWN_B,
    SLOT_COUNT
};

// The directory entries of one block (nullptr = optional tensor absent).
struct BlockTensors {
    std::array<const TensorInfo *, SLOT_COUNT> t{};
};

// A block's bytes in RAM, in their on-disk encoding.
struct BlockData {
    AlignedBuffer buf;
    std::array<const uint8_t *, SLOT_COUNT> ptr{};
    const BlockTensors *tensors = nullptr;

    bool has(Slot s) const { return ptr[s] != nullptr; }
    WeightView view(Slot s) const;
    const float *f32(Slot s) const { return reinterpret_cast<const float *>(ptr[s]); }
};

// Resolves every block's tensors by name and checks shapes against the config. Throws
// LLM_ERR_FORMAT naming a missing or misshapen tensor, LLM_ERR_UNSUPPORTED for an unusable type.
std::vector<BlockTensors> bind_blocks(const WeightSource &src, const ModelConfig &cfg);

// Checks that tensor `name` exists (unless optional) with exactly the shape given; returns it.
const TensorInfo *expect_tensor(const WeightSource &src, const std::string &name,
                                std::initializer_list<uint64_t> shape, bool required);

// Reads all of a block's tensors into one buffer, coalescing tensors that are adjacent in the file
// into one read.
void load_block(const WeightSource &src, const BlockTensors &bt, BlockData &out);

// The load/unload seam. Resident: every block is read once at load and acquire() just hands it out.
// (Streaming residencies plug in here.)
class LayerStore {
public:
    LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks);
    // progress(fraction) may return false to cancel (throws LLM_ERR_CANCELLED).
    void load_all(const std::function<bool(float)> &progress);
    const BlockData &acquire(uint32_t layer) const;
    void release(uint32_t layer) const {}
    uint64_t resident_bytes() const;

private:
    const WeightSource &src_;
    const std::vector<BlockTensors> &blocks_;
    std::vector<BlockData> resident_;
};

}  // namespace llm
