// Which transformer blocks live in RAM. Weights stay in their on-disk encoding. RESIDENT keeps every
// block; STREAMED keeps none (sessions stream them through a few slots); BUDGET keeps as many as
// ram_budget_bytes allows after the streaming slots. The set can change at run time (set_budget), so
// sessions hold the mutex shared while they compute and the dial takes it exclusively.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "gguf/weight_source.h"
#include "loader/io_stats.h"
#include "model/weights.h"

namespace llm {

enum class Residency : int32_t { RESIDENT = 0, STREAMED = 1, BUDGET = 2 };

struct LoaderOptions {
    Residency residency = Residency::RESIDENT;
    uint64_t budget_bytes = 0;   // BUDGET: weight memory allowed (resident blocks + head + stream slots)
    int32_t prefetch_depth = 1;  // blocks read ahead while one computes (streamed blocks only)
};

// Byte layout of one block in RAM: runs of file-adjacent tensors, each read with one call.
struct BlockLayout {
    struct Run { uint64_t file_begin, file_end, buf_off; };
    std::vector<Run> runs;
    std::array<uint64_t, SLOT_COUNT> where{};  // offset of each tensor in the buffer
    uint64_t total = 0;
};
BlockLayout plan_block(const BlockTensors &bt);

// Reads a block into out (reusing its buffer), counting into stats if given.
void load_block(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
                IoStats *stats);

class LayerStore {
public:
    LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks, const LoaderOptions &opt);

    // Reads the blocks the policy keeps resident. progress(fraction) may return false to cancel.
    void load_initial(const std::function<bool(float)> &progress);

    // The resident copy of a block, or nullptr if it must be streamed. Callers hold mutex() shared.
    const BlockData *resident(uint32_t layer) const { return resident_[layer].get(); }
    const BlockTensors &tensors(uint32_t layer) const { return blocks_[layer]; }
    const BlockLayout &layout(uint32_t layer) const { return layouts_[layer]; }
    const WeightSource &source() const { return src_; }
    uint32_t n_layer() const { return static_cast<uint32_t>(blocks_.size()); }
    int32_t prefetch_depth() const { return opt_.prefetch_depth; }
    Residency residency() const { return opt_.residency; }

    uint64_t max_block_bytes() const { return max_block_; }
    uint64_t total_block_bytes() const { return total_blocks_; }
    uint64_t resident_bytes() const;
    uint32_t n_resident() const;
    // Bytes of streaming slots one session needs when any block is streamed.
    uint64_t stream_slot_bytes() const;

    // How many leading blocks a budget keeps resident, given other fixed costs.
    uint32_t blocks_for_budget(uint64_t budget, uint64_t fixed) const;

    // Switches to BUDGET with a new budget: frees or reads blocks. Caller holds mutex() exclusively.
    void set_resident_count(uint32_t n, IoStats *stats);

    std::shared_mutex &mutex() const { return mu_; }

private:
    const WeightSource &src_;
    const std::vector<BlockTensors> &blocks_;
    LoaderOptions opt_;
    std::vector<BlockLayout> layouts_;
    std::vector<std::unique_ptr<BlockData>> resident_;
    uint32_t initial_resident_ = 0;
    uint64_t max_block_ = 0, total_blocks_ = 0;
    mutable std::shared_mutex mu_;

    friend class Model;
};

}  // namespace llm
