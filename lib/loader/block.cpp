#include "loader/block.h"

#include "kernels/repack.h"

namespace llm {

WeightView BlockData::expert(TensorRole s, uint32_t e) const {
    const TensorInfo *t = tensors->t[s];
    const uint64_t rb = t->row_bytes();
    const uint8_t *slab = ptr[s] ? ptr[s] + static_cast<uint64_t>(e) * t->ne[1] * rb : experts->fetch(s, *t, e);
    // A resident expert tensor may be packed (pack_block); a fetched slab is in file layout.
    return {t->type, slab, static_cast<int64_t>(t->ne[0]), static_cast<int64_t>(t->ne[1]), rb,
            ptr[s] != nullptr && packed[s]};
}

WeightView BlockData::view(TensorRole s) const {
    const TensorInfo *t = tensors->t[s];
    return {t->type, ptr[s], static_cast<int64_t>(t->ne[0]), static_cast<int64_t>(t->ne[1]), t->row_bytes(), packed[s]};
}

void pack_block(BlockData &b) {
    for (int s = 0; s < ROLE_COUNT; ++s) {
        b.packed[s] = false;
        const TensorInfo *t = b.tensors->t[s];
        if (!t || !b.ptr[s] || !kRoleTraits[s].matrix || t->ne[3] != 1) continue;
        // An expert tensor packs as ne[1]·ne[2] rows when no group of rows straddles two experts: each
        // expert's slab is then a packed matrix of its own at its file-layout offset.
        if (t->ne[2] != 1 && (!kRoleTraits[s].expert || t->ne[1] % kPackRows != 0)) continue;
        // ptr is const for the forward pass; the buffer is this unit's own, just read.
        b.packed[s] = pack_weights(t->type, const_cast<uint8_t *>(b.ptr[s]), static_cast<int64_t>(t->ne[0]),
                                   static_cast<int64_t>(t->ne[1] * t->ne[2]));
    }
}

}  // namespace llm
