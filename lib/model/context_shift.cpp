#include "model/context_shift.h"

#include <algorithm>

#include "model/rope.h"

namespace llm {

bool can_shift_context(const Model &m) { return !m.has_position_embd(); }

void shift_context(const Model &m, KvCache &kv, int32_t keep, int32_t discard, int32_t n_past) {
    const ModelConfig &c = m.config();
    const float *ff = m.rope_factors(kv.n_ctx());
    kv.shift(keep, discard, n_past, [&](uint32_t layer, float *keys, int64_t n) {
        if (!c.uses_rope(layer)) return;  // keys without positions only move
        const float *layer_ff = c.arch->rope_freqs_full_only && c.is_swa(layer) ? nullptr : ff;
        rope_shift(keys, n, c.n_kv(layer), static_cast<int>(c.n_head_kv_of(layer)), static_cast<int>(c.hd(layer)),
                   static_cast<int>(c.n_rot_of(layer)), -discard, c.layer_rope(layer), layer_ff, c.arch->rope);
    });
}

int32_t positions_to_discard(int32_t n_past, int32_t keep, int64_t n_new, int32_t n_ctx) {
    const int64_t half = (n_past - keep) / 2;
    const int64_t needed = static_cast<int64_t>(n_past) + n_new - n_ctx;
    return static_cast<int32_t>(std::max(half, needed));
}

}  // namespace llm
