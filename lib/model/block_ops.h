// What every mixer and FFN recipe of the forward pass shares (model/forward.cpp, model/mixer_*.cpp):
// the weights of a half-block as a recipe leases them, the rows of a chunk that belong to one
// sequence, and the elementwise steps computed as llama.cpp's CPU backend computes them (its bits,
// where the goldens can see them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "loader/block.h"
#include "loader/streamer.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/limits.h"

namespace llm {

class ThreadPool;

// The weights of one half-block as the recipe uses them: each matrix is leased from the
// BlockStreamer only while its matmul runs over the chunk (one read, when its unit is streamed);
// the vectors (norms, biases) are always resident.
struct HalfWeights {
    BlockStreamer &bs;
    const BlockTensors &t;
    uint32_t layer, unit;
    bool has(TensorRole s) const { return t.t[s] != nullptr; }
    const float *f32(TensorRole s) const { return bs.vectors(layer).f32(s); }
    BlockStreamer::Lease lease(TensorRole s) const { return bs.acquire(unit, s); }
};

// Rows of the P that belong to one segment of a batched pass (row: first of them within the P;
// pos0: its position), so each meets its own cache; a single sequence is one run over all P.
struct RowRun {
    KvCache *kv;
    int64_t row, n;
    int32_t pos0;
};

// f(b0, n) over the positions [0, P) of a chunk, kSubBatch at a time.
template <class F>
void sub_batches(int64_t P, F f) {
    for (int64_t b0 = 0; b0 < P; b0 += kSubBatch) f(b0, std::min(kSubBatch, P - b0));
}

// y [P][n] *= the F32 scale of matrix ws's output, if the file has one (ModelOpt NVFP4 files);
// llama.cpp multiplies the matmul's result by it before adding a bias.
void scale_output(const HalfWeights &w, TensorRole ws, float *y, int64_t P, int64_t n);

// y = W·x (+ bias) for the P rows of the chunk: [P][n_in] -> [P][n_out]. W is held for the whole
// chunk and released on return; its matmul runs a sub-batch at a time, which bounds the matmul's
// activation conversion buffer.
void project(const HalfWeights &w, TensorRole ws, TensorRole bias, const float *x, int64_t n_in, int64_t P, float *y,
             int64_t n_out, ThreadPool *pool);
// The same for a matrix that has no bias.
void project(const HalfWeights &w, TensorRole ws, const float *x, int64_t n_in, int64_t P, float *y, int64_t n_out,
             ThreadPool *pool);

// RMSNorm as ggml computes it: the f32 squares summed in double, then x * (1/sqrt(mean + eps)), then * w
// (w null: no weight).
void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps);
// LayerNorm: mean and population variance (double sums, as ggml), then * w + b.
void layer_norm(const float *x, const float *w, const float *b, float *y, int64_t n, float eps);
// The architecture's norm over P rows of n.
void norm_rows(const ModelConfig &c, const float *x, const float *w, const float *b, float *y, int64_t P, int64_t n);
// Per-head RMSNorm of n_heads heads of hd values, in place.
void head_norm(float *x, int64_t n_heads, int64_t hd, const float *w, float eps);
void add_bias(float *y, const float *b, int64_t P, int64_t n);

// std::exp with its overflow and underflow answered here: glibc's expf takes a slow path there
// (errno, ~10x a normal call), which random-weight and long-context scores hit often. Same results:
// e^x rounds to +0 below -104 and overflows above 88.73.
inline float exp_f(float x) {
    if (x < -105.0f) return 0.0f;
    if (x > 89.0f) return INFINITY;
    return std::exp(x);
}

inline float silu(float x) { return x / (1.0f + exp_f(-x)); }
// ggml's sigmoid op (a plain expf per value).
inline float sigmoid(float x) { return 1.0f / (1.0f + exp_f(-x)); }
// ggml's silu op over a row of n, in place: whole 16-value chunks take its vectorised expf, the rest
// libm's expf.
void silu_row(float *x, int64_t n);

}  // namespace llm
