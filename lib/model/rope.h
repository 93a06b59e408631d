// Rotary position embedding of q and k heads, with llama.cpp's scalings: frequency factors
// (llama 3's rope_freqs, LongRoPE's long/short tables), linear interpolation, YaRN.
#pragma once

#include <cstdint>

#include "model/arch.h"
#include "model/config.h"

namespace llm {

// x: [n_heads][hd], the first n_rot values of each head rotated in place for position pos.
// ff: n_rot/2 frequency divisors, or nullptr.
void rope(float *x, int n_heads, int hd, int n_rot, int32_t pos, const RopeParams &p, const float *ff, RopeKind kind);

// Context shift: moves n_rows already-rotated rows (row_stride floats apart) by delta positions, a pure
// rotation by the angles of position delta (without rope()'s magnitude factors, which the rows
// already carry once).
void rope_shift(float *x, int64_t n_rows, int64_t row_stride, int n_heads, int hd, int n_rot, int32_t delta,
                const RopeParams &p, const float *ff, RopeKind kind);

}  // namespace llm
