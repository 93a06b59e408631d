// y = W·x for weights kept in their on-disk encoding. Each weight row is decoded once into scratch
// and dotted with every activation row of the batch, so a P-token prefill reads W once and the
// per-position arithmetic is identical to a single-token decode.
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
};

float dot_f32(const float *a, const float *b, int64_t n);

// x: [P][n_in] -> y: [P][n_out] (row strides n_in and n_out). Rows of W are split across the
// pool's threads; pool may be null.
void matmul(const WeightView &w, const float *x, int64_t P, float *y, ThreadPool *pool);

// Rows [r0, r1) of W only: y[p][r - r0] for p < P, y row stride = (r1 - r0). For the streamed LM head.
void matmul_rows(const WeightView &w, int64_t r0, int64_t r1, const float *x, int64_t P, float *y,
                 int64_t y_stride);

}  // namespace llm
