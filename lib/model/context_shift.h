// Context shift: when a session's context is full, positions [keep, keep + discard) are dropped and the
// later ones move down by `discard`. Cached keys carry their position as a RoPE rotation, and a
// rotation by -discard turns a key rotated for position p into the key for p - discard, so the moved
// rows are re-rotated instead of recomputed.
#pragma once

#include <cstdint>

#include "model/forward.h"
#include "model/model.h"

namespace llm {

// True if the model's positions can be shifted in its cache: RoPE (or none at all), not learned
// absolute positions, which are already added into the hidden states the cache was made from.
bool can_shift_context(const Model &m);

// Moves the cache's positions [keep + discard, n_past) to keep.., re-rotating their keys on every
// layer that uses RoPE with that layer's parameters (base, scaling, frequency factors for the
// session's n_ctx).
void shift_context(const Model &m, KvCache &kv, int32_t keep, int32_t discard, int32_t n_past);

// How many positions a shift drops to make room for n_new tokens: half of those after keep, as
// llama.cpp's main does, or more if the new tokens need more. Requires keep + n_new <= n_ctx.
int32_t positions_to_discard(int32_t n_past, int32_t keep, int64_t n_new, int32_t n_ctx);

}  // namespace llm
