// The units (half-blocks, loader/block.h) that live in RAM, in their on-disk encoding (packed where
// the kernels take it). The model picks how many leading units stay (Residency, choose_residency):
// RESIDENT keeps every unit; STREAMED keeps none (sessions stream them through a few slots); BUDGET
// keeps as many as the budget allows. The set can change at run time (keep_resident), so sessions
// hold the mutex shared while they compute and the dial takes it exclusively.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "gguf/weight_source.h"
#include "loader/block.h"
#include "loader/io_stats.h"

namespace llm {

enum class Residency : int32_t { RESIDENT = 0, STREAMED = 1, BUDGET = 2 };

struct LoaderOptions {
    Residency residency = Residency::RESIDENT;
    uint64_t budget_bytes = 0;   // BUDGET: weight memory allowed (resident units + head + stream slots)
    int32_t prefetch_depth = 1;  // units read ahead while one computes (streamed units only)
    CachePolicy cache = CachePolicy::KEEP;  // in force on the source (after any fallback)
};

// The RAM-budget policy, in one place: what a budget keeps resident, given the bytes of each unit
// (in unit order), of the resident LM head and of one session's streaming slots. The leading units
// that fit stay resident; once any unit is streamed, the slots must fit too. The head stays
// resident only if every unit and the head fit.
struct ResidencyChoice {
    uint32_t n_units = 0;
    bool head_resident = false;
};
ResidencyChoice choose_residency(uint64_t budget, const std::vector<uint64_t> &unit_bytes, uint64_t head_bytes,
                                 uint64_t slot_bytes);

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
// The layout of unit `part` of a block. skip_experts: leave packed expert tensors out (streamed MoE
// units fetch chosen experts instead).
BlockLayout plan_unit(const BlockTensors &bt, uint32_t part, bool skip_experts = false, uint64_t align = 0);

// Reads a unit's bytes into out (reusing its buffer), counting into stats if given. In file layout:
// resident units are packed afterwards (LayerStore), streamed ones are not.
void read_unit(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
               IoStats *stats);

class LayerStore {
public:
    LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks, const LoaderOptions &opt);

    // Keeps units [0, n) resident: frees the others first, then reads and packs the missing ones, so
    // the peak never holds both the old and the new set. progress(fraction of the reads) may return
    // false to cancel. Caller holds mutex() exclusively (or no session exists yet).
    void keep_resident(uint32_t n, const std::function<bool(float)> &progress = {});

    // The resident copy of a unit, or nullptr if it must be streamed. Callers hold mutex() shared.
    const BlockData *resident(uint32_t unit) const { return resident_[unit].get(); }
    const BlockTensors &tensors(uint32_t unit) const { return blocks_[unit / kUnitsPerBlock]; }
    const BlockLayout &layout(uint32_t unit) const { return layouts_[unit]; }
    // The layout a streamed unit uses: without packed expert tensors.
    const BlockLayout &stream_layout(uint32_t unit) const { return stream_layouts_[unit]; }
    const WeightSource &source() const { return src_; }
    uint32_t n_layer() const { return static_cast<uint32_t>(blocks_.size()); }
    uint32_t n_units() const { return static_cast<uint32_t>(layouts_.size()); }
    int32_t prefetch_depth() const { return opt_.prefetch_depth; }

    uint64_t max_unit_bytes() const { return max_unit_; }  // largest streamed unit
    uint64_t total_block_bytes() const { return total_blocks_; }
    std::vector<uint64_t> unit_bytes() const;  // each unit's resident bytes, in unit order
    uint64_t resident_bytes() const;
    uint32_t n_resident_layers() const;  // layers with both units resident
    uint32_t n_resident_units() const;
    // Bytes of streaming slots one session needs when any unit is streamed: the ring, plus three
    // expert slabs (gate, up, down) for a MoE model.
    uint64_t stream_slot_bytes() const;

    std::shared_mutex &mutex() const { return mu_; }

private:
    const WeightSource &src_;
    const std::vector<BlockTensors> &blocks_;
    LoaderOptions opt_;
    std::vector<BlockLayout> layouts_, stream_layouts_;
    std::vector<std::unique_ptr<BlockData>> resident_;
    uint64_t max_unit_ = 0, total_blocks_ = 0, max_slab_ = 0;
    mutable std::shared_mutex mu_;
};

}  // namespace llm
