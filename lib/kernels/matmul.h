// y = W·x for weights kept in their on-disk encoding, computed as llama.cpp's CPU backend does:
// each activation row is converted once to the weight type's vec_dot_type (kernels/kernel_table.h), then
// every weight row is dotted with it by the fastest kernel for this CPU. Rows are walked in tiles
// (the kernel table's rm rows × rn positions) against all P activation rows, so a P-token prefill
// streams W from memory once, and each (row, position) value comes from the same call as in a
// single-token decode: prefill then decode equals token-by-token decode bit for bit, whatever P or
// the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/types.h"

namespace llm {

class ThreadPool;

// A 2-D weight view: n_out rows of n_in elements, row r at data + r * row_bytes.
struct WeightView {
    TensorType type = TensorType::F32;
    const uint8_t *data = nullptr;
    int64_t n_in = 0;
    int64_t n_out = 0;
    uint64_t row_bytes = 0;
    bool packed = false;  // rows stored in groups of kPackRows (kernels/repack.h); n_out a multiple of it
};

float dot_f32(const float *a, const float *b, int64_t n);

// x: [P][n_in] -> y: [P][n_out] (row strides n_in and n_out). Rows of W are split across the
// pool's threads; pool may be null.
void matmul(const WeightView &w, const float *x, int64_t P, float *y, ThreadPool *pool);

// out[g · out_stride + t] = rows[t] · q[g] for t < n_rows, g < n_q (f32 vectors of `dim`; rows and
// q strides in floats), with the F32 kernel of the matmul: each value is the bits a 1-row matmul
// gives. Attention scores of several query heads against the keys they share.
void dot_rows_f32(const float *rows, int64_t row_stride, int64_t n_rows, const float *q, int64_t q_stride, int n_q,
                  int64_t dim, float *out, int64_t out_stride);

// out[g · out_stride + d] = Σ_t w[g · w_stride + t] · rows[t · row_stride + d] for g < n_w, d < dim,
// t < n_rows (strides in floats), by this CPU's fastest kernel; every kernel gives the same bits.
// Attention's probability-weighted sum of the value rows several query heads share, in llama.cpp's
// accumulator order (kernel_isa.h), all rows in one call. A ring that wrapped hands its rows in two runs,
// read in place: rows t >= n_first are at rows2 + (t - n_first)·row_stride (n_first < 0: one run).
void weighted_sum_rows(const float *w, int64_t w_stride, int n_w, const float *rows, int64_t row_stride, int64_t n_rows,
                       int64_t dim, float *out, int64_t out_stride, const float *rows2 = nullptr, int64_t n_first = -1);
// e^x as llama.cpp's vectorised expf computes it (kernel_isa.h's ExpFn), for one value, and for n
// values by this CPU's fastest kernel (the same bits).
float exp_ggml(float x);
void exp_ggml_rows(const float *x, float *y, int64_t n);

// x[i] = f32(f16(x[i])) in place, round to nearest even (fp16.h's bits for every non-NaN), by this
// CPU's fastest f16 conversion: the probabilities an F16 value cache meets.
void round_f16_rows(float *x, int64_t n);
// One token of the gated delta rule on one value head's hd × hd state, by this CPU's fastest kernel
// (kernel_isa.h's DeltaStepFn: every kernel gives the same bits). y null: the state only.
void delta_rule_step(float *S, int64_t hd, const float *q, const float *k, const float *v, float decay, float beta,
                     float scale, float *y);

// The same over f16 rows (an F16 value cache).
void weighted_sum_rows_f16(const float *w, int64_t w_stride, int n_w, const uint16_t *rows, int64_t row_stride,
                           int64_t n_rows, int64_t dim, float *out, int64_t out_stride, const uint16_t *rows2 = nullptr,
                           int64_t n_first = -1);

// Activation rows converted for weights like w, as matmul converts them: n_rows rows of w.n_in f32
// at x (contiguous) -> the form w's kernels read. The result lives in a per-thread buffer until this
// thread's next conversion (or matmul).
struct ActRows {
    const uint8_t *data = nullptr;
    uint64_t stride = 0;
};
ActRows convert_act_rows(const WeightView &w, const float *x, int64_t n_rows);
// out[g · out_stride + r] = row r of w · activation row g (g < n_x), on the calling thread, each the
// bits matmul gives for that pair. Attention scores against a quantized or F16 key cache.
void dot_rows(const WeightView &w, ActRows x, int n_x, float *out, int64_t out_stride);

// Rows [r0, r1) of W only, on the calling thread: y[p][r - r0] for p < P, y row stride = y_stride.
// Only the kernel tests call it (the streamed LM head it was written for now goes through matmul):
// a range starting inside a tile must give the bits of the same slice of the full product.
void matmul_rows(const WeightView &w, int64_t r0, int64_t r1, const float *x, int64_t P, float *y, int64_t y_stride);

}  // namespace llm
