// The packed weight layout: kPackRows consecutive rows of a matrix stored as one group, block column
// by block column, so one SIMD register holds the same block of every row of the group, and a decode
// streams one sequential run per group instead of kPackRows interleaved ones (which this hardware's
// prefetchers keep up with badly: four GGUF rows at a time made decode 2x slower than one).
//
// A group occupies exactly the bytes of the rows it replaces and starts where its first row did, so
// it is not a second copy: views over whole groups and RAM budgets are unchanged. Resident blocks
// are packed in place once, when loaded; stream slots keep the file layout (packing every block
// for every token would cost the I/O thread about as much as reading it), and the file-layout tiles
// of a packed type pack a few columns of 16 rows at a time on the stack and run the packed kernel
// on them. Either way the same kernel computes every output, so all residency modes give the same
// bits. Only types whose active kernel table has packed tiles are packed (today Q4_0, Q4_K, MXFP4,
// NVFP4 and TQ1_0 on AVX-512 VNNI; Q4_0 and Q4_K on AVX2). For the low-bit types, whose reference adds block by block in
// order, the layout is also what lets decode keep 16 independent chains of adds in flight on one
// sequential stream (one lane per row).
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
//   Q4_K, per super-block column b at dst + 2304·b: d[16], dmin[16] (f16), scales with byte
//   16i + r = row r's scales[i] (i < 12), then qs with byte 512c + 64k + 4r + t = row r's
//   qs[32c + 4k + t] (c < 4, k < 8, t < 4).
//   MXFP4, per block column b at dst + 272·b: e[16] (row r's scale byte), then qs[256] as Q4_0's.
//   NVFP4, per block column b at dst + 576·b: byte 16k + r = row r's d[k] (k < 4), then qs[512]
//   with byte 64 + 64c + 4r + t = row r's qs[4c + t] (c < 8, t < 4).
//   TQ1_0, per block column b at dst + 864·b: d[16] (f16), then byte 32 + 64c + 4r + t = row r's
//   qs[4c + t] (c < 12) or qh[t] (c = 12).
void pack_group(TensorType t, const uint8_t *src, uint64_t row_bytes, int64_t n_in, uint8_t *dst);

// Row r (< kPackRows) of a packed group back in file layout: row_bytes(t, n_in) bytes at dst. (A packed
// matrix that is also read by rows: the tied token table when the LM head is resident.)
void unpack_row(TensorType t, const uint8_t *group, int64_t n_in, int r, uint8_t *dst);

// An activation row for the packed kernels of weight type t: vec_dot_type(t) blocks of n values,
// then, for Q8_0, one int32 Σq per block (the kernels fold the weights' zero point in with it,
// exactly). Q8_K rows carry their own sums.
uint64_t packed_act_row_bytes(TensorType t, int64_t n);
// x: [n] f32 -> row in that form, the sums taken while quantizing.
void quantize_packed_act_row(TensorType t, const float *x, void *row, int64_t n);
// Appends the sums to a row whose blocks are already there (tests build rows from random blocks).
void packed_act_sums(TensorType t, void *row, int64_t n);

}  // namespace llm
