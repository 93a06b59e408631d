// The vocabulary the loader and the model share about one transformer block: the roles of its
// tensors (Slot) and what each role is, where a block's tensors sit in the file (BlockTensors) and
// the bytes of one unit in RAM (BlockData). What needs the model's config (tensor names, which slots
// an architecture requires, their shapes) lives in model/weights.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>

#include "core/aligned_buffer.h"
#include "gguf/weight_source.h"
#include "kernels/matmul.h"

namespace llm {

// Roles of the tensors of one transformer block, attention half first (kSlotTraits depends on it;
// the F32 scale slots at the end, which are in no unit, say their half in kSlotTraits).
enum Slot : int {
    ATTN_NORM, ATTN_NORM_B, ATTN_Q, ATTN_K, ATTN_V, ATTN_QKV, ATTN_Q_B, ATTN_K_B, ATTN_V_B, ATTN_QKV_B,
    ATTN_Q_NORM, ATTN_K_NORM, ATTN_OUT, ATTN_OUT_B, ATTN_POST_NORM,
    FFN_NORM, FFN_NORM_B, FFN_GATE, FFN_UP, FFN_DOWN, FFN_GATE_B, FFN_UP_B, FFN_DOWN_B, FFN_POST_NORM,
    FFN_GATE_INP, FFN_GATE_EXPS, FFN_UP_EXPS, FFN_DOWN_EXPS,
    // ModelOpt NVFP4 files: a scale multiplying each matrix's output (<w>.scale), and the activation
    // scale its quantization used (<w>.input_scale: bound, never read, as llama.cpp loads and ignores it).
    ATTN_Q_S, ATTN_K_S, ATTN_V_S, ATTN_OUT_S, FFN_GATE_S, FFN_UP_S, FFN_DOWN_S,
    ATTN_Q_IN_S, ATTN_K_IN_S, ATTN_V_IN_S, ATTN_OUT_IN_S, FFN_GATE_IN_S, FFN_UP_IN_S, FFN_DOWN_IN_S,
    SLOT_COUNT
};

// The unit of residency is half a block: its attention matrices (part 0) or its FFN matrices (part
// 1), numbered unit = 2·layer + part. The unit of streaming is smaller, a piece (LayerStore): one
// matrix, or a few consecutive ones of a half that together are no larger than the model's largest
// matrix, so a streaming slot holds one matrix. The F32 vectors (norms, biases: a few KB a layer)
// stay resident in every mode and belong to no unit.
constexpr uint32_t kUnitsPerBlock = 2;
constexpr uint32_t unit_index(uint32_t layer, uint32_t part) { return layer * kUnitsPerBlock + part; }

struct SlotTraits {
    uint32_t part = 0;    // the half of the block it belongs to: 0 attention, 1 FFN
    bool matrix = false;  // used in a matmul (any supported type, may be packed); else an F32 vector
    bool expert = false;  // packed experts [n_in, n_out, n_expert]: a streamed unit fetches one at a time
};

inline constexpr SlotTraits kSlotTraits[] = {
    /* ATTN_NORM */ {},
    /* ATTN_NORM_B */ {},
    /* ATTN_Q */ {.matrix = true},
    /* ATTN_K */ {.matrix = true},
    /* ATTN_V */ {.matrix = true},
    /* ATTN_QKV */ {.matrix = true},
    /* ATTN_Q_B */ {},
    /* ATTN_K_B */ {},
    /* ATTN_V_B */ {},
    /* ATTN_QKV_B */ {},
    /* ATTN_Q_NORM */ {},
    /* ATTN_K_NORM */ {},
    /* ATTN_OUT */ {.matrix = true},
    /* ATTN_OUT_B */ {},
    /* ATTN_POST_NORM */ {},
    /* FFN_NORM */ {.part = 1},
    /* FFN_NORM_B */ {.part = 1},
    /* FFN_GATE */ {.part = 1, .matrix = true},
    /* FFN_UP */ {.part = 1, .matrix = true},
    /* FFN_DOWN */ {.part = 1, .matrix = true},
    /* FFN_GATE_B */ {.part = 1},
    /* FFN_UP_B */ {.part = 1},
    /* FFN_DOWN_B */ {.part = 1},
    /* FFN_POST_NORM */ {.part = 1},
    /* FFN_GATE_INP */ {.part = 1, .matrix = true},
    /* FFN_GATE_EXPS */ {.part = 1, .matrix = true, .expert = true},
    /* FFN_UP_EXPS */ {.part = 1, .matrix = true, .expert = true},
    /* FFN_DOWN_EXPS */ {.part = 1, .matrix = true, .expert = true},
    /* ATTN_Q_S */ {},
    /* ATTN_K_S */ {},
    /* ATTN_V_S */ {},
    /* ATTN_OUT_S */ {},
    /* FFN_GATE_S */ {.part = 1},
    /* FFN_UP_S */ {.part = 1},
    /* FFN_DOWN_S */ {.part = 1},
    /* ATTN_Q_IN_S */ {},
    /* ATTN_K_IN_S */ {},
    /* ATTN_V_IN_S */ {},
    /* ATTN_OUT_IN_S */ {},
    /* FFN_GATE_IN_S */ {.part = 1},
    /* FFN_UP_IN_S */ {.part = 1},
    /* FFN_DOWN_IN_S */ {.part = 1},
};
// One row per slot, in Slot order: the count, the edge of the two halves and the experts agree.
static_assert(std::size(kSlotTraits) == SLOT_COUNT);
static_assert(kSlotTraits[ATTN_POST_NORM].part == 0 && kSlotTraits[FFN_NORM].part == 1);
static_assert(!kSlotTraits[FFN_GATE_INP].expert && kSlotTraits[FFN_GATE_EXPS].expert && kSlotTraits[FFN_DOWN_EXPS].expert);

// The directory entries of one block (nullptr = optional tensor absent).
struct BlockTensors {
    std::array<const TensorInfo *, SLOT_COUNT> t{};
};

// Reads one expert's slab of a packed expert tensor on demand (streamed MoE units keep only the
// router, so only the experts a token chose are ever read). The pointer stays valid until the next
// fetch for the same slot.
class ExpertFetcher {
public:
    virtual ~ExpertFetcher() = default;
    virtual const uint8_t *fetch(Slot s, const TensorInfo &t, uint32_t e) = 0;
};

// The bytes of one unit (half a block), one streamed piece or one block's vectors in RAM, in their
// on-disk encoding; the slots it does not hold are null.
struct BlockData {
    AlignedBuffer buf;
    std::array<const uint8_t *, SLOT_COUNT> ptr{};
    std::array<bool, SLOT_COUNT> packed{};  // repacked in place after the read (kernels/repack.h)
    const BlockTensors *tensors = nullptr;  // the whole block's
    ExpertFetcher *experts = nullptr;       // set when expert tensors were left out of buf

    WeightView view(Slot s) const;
    // Expert e of a packed 3-D tensor [n_in, n_out, n_expert].
    WeightView expert(Slot s, uint32_t e) const;
    const float *f32(Slot s) const { return reinterpret_cast<const float *>(ptr[s]); }
};

// Packs, in place, the matrices of a unit just read whose type the active kernels take packed.
// Expert slabs stay in file layout (they are fetched one expert at a time).
void pack_block(BlockData &b);

}  // namespace llm
