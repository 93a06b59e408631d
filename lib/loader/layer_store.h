// The LayerStore: the load/unload seam through which the forward pass gets a block's weights.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gguf/weight_source.h"
#include "model/weights.h"

namespace llm {

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
