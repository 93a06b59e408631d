#include "kernels/matmul.h"

#include "core/thread_pool.h"
#include "kernels/dequant.h"

namespace llm {

float dot_f32(const float *a, const float *b, int64_t n) {
    // Eight independent accumulators: lets the compiler use vector lanes without -ffast-math.
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
    float tail = 0.0f;
    for (; i < n; ++i) tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

void matmul_rows(const WeightView &w, int64_t r0, int64_t r1, const float *x, int64_t P, float *y,
                 int64_t y_stride) {
    thread_local std::vector<float> row;
    if (w.type != TensorType::F32 && static_cast<int64_t>(row.size()) < w.n_in) row.resize(w.n_in);
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t *src = w.data + static_cast<uint64_t>(r) * w.row_bytes;
        const float *wr;
        if (w.type == TensorType::F32) {
            wr = reinterpret_cast<const float *>(src);
        } else {
            dequantize_row(w.type, src, row.data(), w.n_in);
            wr = row.data();
        }
        for (int64_t p = 0; p < P; ++p) y[p * y_stride + (r - r0)] = dot_f32(wr, x + p * w.n_in, w.n_in);
    }
}

void matmul(const WeightView &w, const float *x, int64_t P, float *y, ThreadPool *pool) {
    auto work = [&](int64_t r0, int64_t r1) { matmul_rows(w, r0, r1, x, P, y + r0, w.n_out); };
    if (pool) {
        pool->parallel_for(w.n_out, work);
    } else {
        work(0, w.n_out);
    }
}

}  // namespace llm
