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
    CachePolicy cache = CachePolicy::KEEP;  // in force on the source (after any fallback)
};

// The unit of residency and streaming is half a block: its attention tensors (unit 2·L) or its FFN
// tensors (unit 2·L + 1). A streamed block then needs a slot of half a block, and each half is still
// read once per prompt chunk.
constexpr uint32_t kUnitsPerBlock = 2;
inline uint32_t unit_of(Slot s) { return s < FFN_NORM ? 0 : 1; }

// Byte layout of one unit in RAM: runs of file-adjacent tensors (never across a split model's
// shards), each read with one call. For direct I/O (align = kDirectAlign) each run starts on an
// aligned file offset and buffer offset and has room for its length rounded up; the tensors sit at
// their offset from the run's start.
struct BlockLayout {
    struct Run {
        uint64_t file_begin, file_end, buf_off;
        uint32_t shard = 0;  // the file of a split model it is read from
        uint64_t bytes() const { return file_end - file_begin; }
    };
    std::vector<Run> runs;
    std::array<uint64_t, SLOT_COUNT> where{};  // offset of each tensor in the buffer
    std::array<bool, SLOT_COUNT> used{};       // tensors of this unit
    uint64_t total = 0;
};
// skip_experts: leave packed expert tensors out (streamed MoE units fetch chosen experts instead).
BlockLayout plan_block(const BlockTensors &bt, uint32_t part, bool skip_experts = false, uint64_t align = 0);

// Reads a block into out (reusing its buffer), counting into stats if given.
void load_block(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
                IoStats *stats);

class LayerStore {
public:
    LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks, const LoaderOptions &opt);

    // Reads the blocks the policy keeps resident. progress(fraction) may return false to cancel.
    void load_initial(const std::function<bool(float)> &progress);

    // Units are numbered 2·layer + part. The resident copy of a unit, or nullptr if it must be
    // streamed. Callers hold mutex() shared.
    const BlockData *resident(uint32_t unit) const { return resident_[unit].get(); }
    const BlockTensors &tensors(uint32_t unit) const { return blocks_[unit / kUnitsPerBlock]; }
    const BlockLayout &layout(uint32_t unit) const { return layouts_[unit]; }
    // The layout a streamed unit uses: without packed expert tensors.
    const BlockLayout &stream_layout(uint32_t unit) const { return stream_layouts_[unit]; }
    const WeightSource &source() const { return src_; }
    uint32_t n_layer() const { return static_cast<uint32_t>(blocks_.size()); }
    uint32_t n_units() const { return static_cast<uint32_t>(layouts_.size()); }
    int32_t prefetch_depth() const { return opt_.prefetch_depth; }
    Residency residency() const { return opt_.residency; }

    uint64_t max_unit_bytes() const { return max_unit_; }
    // Largest single expert slab (0 without experts): a streamed MoE session holds three of them.
    uint64_t max_expert_slab_bytes() const { return max_slab_; }
    uint64_t total_block_bytes() const { return total_blocks_; }
    uint64_t resident_bytes() const;
    uint32_t n_resident_layers() const;  // layers with both units resident
    uint32_t n_resident_units() const;
    // Bytes of streaming slots one session needs when any block is streamed.
    uint64_t stream_slot_bytes() const;

    // How many leading units a budget keeps resident, given other fixed costs.
    uint32_t units_for_budget(uint64_t budget, uint64_t fixed) const;

    // Keeps the first n units resident: frees or reads units. Caller holds mutex() exclusively.
    void set_resident_count(uint32_t n, IoStats *stats);

    std::shared_mutex &mutex() const { return mu_; }

private:
    const WeightSource &src_;
    const std::vector<BlockTensors> &blocks_;
    LoaderOptions opt_;
    std::vector<BlockLayout> layouts_, stream_layouts_;
    std::vector<std::unique_ptr<BlockData>> resident_;
    uint64_t max_unit_ = 0, total_blocks_ = 0, max_slab_ = 0;
    mutable std::shared_mutex mu_;

    friend class Model;
};

}  // namespace llm
