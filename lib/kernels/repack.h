// The packed weight layout: kPackRows consecutive rows of a matrix stored as one group, block column
// by block column, so one SIMD register holds the same block of every row of the group, and a decode
// streams one sequential run per group instead of kPackRows interleaved ones (which this hardware's
// prefetchers keep up with badly: four GGUF rows at a time made decode 2x slower than one).
//
// A group occupies exactly the bytes of the rows it replaces and starts where its first row did, so
// it is not a second copy: views over whole groups, streaming slots and RAM budgets are unchanged.
// A block is packed in place right after it is read (resident load, stream slot or budget
// admission alike), only when the active kernel table has packed tiles for the type (today Q4_0 on
// AVX-512 VNNI), so every mode computes with the same kernels and gives the same bits.
#pragma once

#include <cstdint>

#include "gguf/types.h"

namespace llm {

constexpr int kPackRows = 16;

// True if a [n_out][n_in] matrix of type t can be packed for the active kernels.
bool packable(TensorType t, int64_t n_in, int64_t n_out);

// Packs the matrix in place; false (data untouched) if !packable.
bool pack_weights(TensorType t, uint8_t *data, int64_t n_in, int64_t n_out);

// One group: kPackRows rows at src, row_bytes apart -> dst (kPackRows · row_bytes bytes).
//   Q4_0, per block column b at dst + 288·b: d[16] (f16, row r's scale), then qs[256] with
//   byte 64c + 4r + t = row r's qs[4c + t] (c < 4, t < 4): one 64-byte load holds elements
//   4c..4c+3 (low nibbles) and 16+4c..16+4c+3 (high nibbles) of all 16 rows, four per i32 lane.
void pack_group(TensorType t, const uint8_t *src, uint64_t row_bytes, int64_t n_in, uint8_t *dst);

// An activation row for the packed kernels of weight type t: vec_dot_type(t) blocks of n values,
// then one int32 Σq per block (the kernels fold the weights' zero point in with it, exactly).
uint64_t packed_act_row_bytes(TensorType t, int64_t n);
void packed_act_sums(TensorType t, void *row, int64_t n);

}  // namespace llm
