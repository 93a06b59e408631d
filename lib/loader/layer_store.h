// The units (half-blocks, loader/block.h) that live in RAM, in their on-disk encoding (packed where
// the kernels take it), and the pieces (single matrices, or a few small consecutive ones) in which
// sessions stream the others. The model picks how many leading units stay (Residency,
// choose_residency): RESIDENT keeps every unit; STREAMED keeps none (sessions stream their pieces
// through a few slots); BUDGET keeps as many as the budget allows. Every block's vectors (norms,
// biases) stay in every mode. The set can change at run time (keep_resident), so sessions hold the
// mutex shared while they compute and the dial takes it exclusively.
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
const char *name(Residency r);

struct LayerStoreOptions {
    Residency residency = Residency::RESIDENT;
    uint64_t budget_bytes = 0;   // BUDGET: weight memory allowed (vectors + resident units + head + stream slots)
    int32_t prefetch_depth = 1;  // pieces read ahead while one computes (streamed units only)
    CachePolicy cache = CachePolicy::KEEP;  // in force on the source (after any fallback)
};

// The RAM-budget policy, in one place: what a budget keeps resident, given the bytes of each unit
// (in unit order), of the resident LM head and of one session's streaming slots. A resident byte is
// worth the bytes a decoded token no longer reads: all of a dense unit's and the head's, only the
// routed share of a unit's experts. So units are taken by that worth per byte (unit_decode_bytes /
// unit_bytes; ties in unit order) and the head after the units worth as much, each while it fits,
// stopping at the first that does not; once any unit is streamed, the slots must fit too. For a dense
// model this keeps the leading units, and the head only if every unit and the head fit; for a MoE
// model the attention halves and the head come before the expert halves.
struct ResidencyChoice {
    std::vector<bool> units;  // [unit]: resident
    bool head_resident = false;
    uint32_t n_units() const;
};
// unit_decode_bytes empty: every unit is read whole by a token (dense).
ResidencyChoice choose_residency(uint64_t budget, const std::vector<uint64_t> &unit_bytes, uint64_t head_bytes,
                                 uint64_t slot_bytes, const std::vector<uint64_t> &unit_decode_bytes = {});

// Byte layout of some of a block's tensors in RAM (a unit, a streamed piece, the vectors): runs of
// file-adjacent tensors (never across a split model's shards), each read with one call. For direct
// I/O (align = kDirectAlign) each run starts on an aligned file offset and buffer offset and has
// room for its length rounded up; the tensors sit at their offset from the run's start.
struct BlockLayout {
    struct Run {
        uint64_t file_begin, file_end, buf_off;
        uint32_t shard = 0;  // the file of a split model it is read from
        uint64_t bytes() const { return file_end - file_begin; }
    };
    std::vector<Run> runs;
    std::array<uint64_t, ROLE_COUNT> where{};  // offset of each tensor in the buffer
    std::array<bool, ROLE_COUNT> used{};       // tensors of this layout
    uint64_t total = 0;
};
// The layout of the tensors of bt whose role is marked in `want` (absent tensors are skipped).
BlockLayout plan_roles(const BlockTensors &bt, const std::array<bool, ROLE_COUNT> &want, uint64_t align = 0);

// Reads a layout's bytes into out (reusing its buffer), counting into stats if given. In file layout:
// resident units are packed afterwards (LayerStore), streamed ones are not.
void read_unit(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
               IoStats *stats);

// The alignment a mapped tensor must have (CachePolicy::MAP). The kernels load weights with
// unaligned vector loads and never branch on an address, so no result depends on it; but they read a
// block's scales (fp16) and F32/F16 elements through typed pointers, and in a copied slot every tensor
// of a default-aligned file (general.alignment 32) sits at a multiple of 32. A mapped tensor sits at
// its file offset modulo the page, so a piece is mapped only if each of its tensors starts on a
// multiple of 32 in the file: then the kernels get what they get from a copy. Files aligned less
// (general.alignment 8, say) are copied, where a run starts 64-aligned as before.
constexpr uint64_t kMapAlign = 32;

// Under MAP: maps each run of the layout into out (ptr then points into the file's pages) and
// returns true; false if the source does not map or a tensor is misaligned (then read_unit copies;
// out's earlier mappings may be gone). Counts into stats like read_unit.
bool map_unit(const WeightSource &src, const BlockTensors &bt, const BlockLayout &layout, BlockData &out,
              IoStats *stats);

// What a session streams in one slot: matrices of one unit, consecutive in the order the block
// recipe uses them (loader/block.h: TensorRole order), never larger than the model's largest single
// matrix. Packed expert tensors are in no piece (BlockStreamer::fetch reads the chosen slabs).
struct StreamPiece {
    uint32_t unit = 0;
    BlockLayout layout;
};

class LayerStore {
public:
    LayerStore(const WeightSource &src, const std::vector<BlockTensors> &blocks, const LayerStoreOptions &opt);

    // Keeps the units marked in `keep` ([unit]; missing entries: streamed) resident: frees the others
    // first, then reads and packs the missing ones, so the peak never holds both the old and the new
    // set. The first call also reads every layer's vectors. progress(fraction of the reads) may return
    // false to cancel. Caller holds mutex() exclusively (or no session exists yet).
    void keep_resident(const std::vector<bool> &keep, const std::function<bool(float)> &progress = {});

    // The resident copy of a unit, or nullptr if it must be streamed. Callers hold mutex() shared.
    const BlockData *resident(uint32_t unit) const { return resident_[unit].get(); }
    // The vectors (norms, biases) of a layer: always resident once keep_resident has run.
    const BlockData &vectors(uint32_t layer) const { return vectors_[layer]; }
    const BlockTensors &tensors(uint32_t unit) const { return blocks_[unit / kUnitsPerBlock]; }
    const BlockLayout &layout(uint32_t unit) const { return layouts_[unit]; }
    const WeightSource &source() const { return src_; }
    uint32_t n_layer() const { return static_cast<uint32_t>(blocks_.size()); }
    uint32_t n_units() const { return static_cast<uint32_t>(layouts_.size()); }
    int32_t prefetch_depth() const { return opt_.prefetch_depth; }
    // Streamed pieces and expert slabs are mapped, not copied (CachePolicy::MAP in force).
    bool maps() const { return opt_.cache == CachePolicy::MAP; }

    // Streamed pieces, numbered in the order a forward pass uses them (unit by unit).
    uint32_t n_pieces() const { return static_cast<uint32_t>(pieces_.size()); }
    const StreamPiece &piece(uint32_t i) const { return pieces_[i]; }
    // The piece holding matrix role s of a unit (s present and not a packed expert tensor).
    uint32_t piece_of(uint32_t unit, TensorRole s) const { return piece_of_[unit * ROLE_COUNT + s]; }

    uint64_t max_unit_bytes() const { return max_unit_; }         // largest unit (resident layout)
    uint64_t max_piece_bytes() const { return max_piece_; }       // largest streamed piece: one slot
    uint64_t vector_bytes() const { return vector_bytes_; }       // every layer's vectors
    uint64_t total_block_bytes() const { return total_blocks_; }  // vectors + every unit
    std::vector<uint64_t> unit_bytes() const;                     // each unit's resident bytes, in unit order
    // Each unit's bytes a decoded token reads when it streams: its dense matrices, and of its experts
    // the share `routed` (the experts used per token / the experts).
    std::vector<uint64_t> unit_decode_bytes(double routed) const;
    uint64_t resident_bytes() const;                              // vectors + resident units
    uint32_t n_resident_layers() const;                           // layers with both units resident
    uint32_t n_resident_units() const;
    // Bytes of streaming slots one session needs when any unit is streamed: the ring of pieces, plus
    // for a MoE model a ring of expert slabs (gate, up, down) as deep.
    uint64_t stream_slot_bytes() const;

    std::shared_mutex &mutex() const { return mu_; }

private:
    uint64_t slot_bytes(const BlockLayout &l) const;

    const WeightSource &src_;
    const std::vector<BlockTensors> &blocks_;
    LayerStoreOptions opt_;
    std::vector<BlockLayout> layouts_, vector_layouts_;
    std::vector<StreamPiece> pieces_;
    std::vector<uint32_t> piece_of_;  // [unit][role]
    std::vector<std::unique_ptr<BlockData>> resident_;
    std::vector<BlockData> vectors_;  // [layer]; empty until the first keep_resident
    uint64_t max_unit_ = 0, max_piece_ = 0, vector_bytes_ = 0, total_blocks_ = 0, max_slab_ = 0;
    mutable std::shared_mutex mu_;
};

}  // namespace llm
