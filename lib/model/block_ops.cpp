#include "model/block_ops.h"

#include <vector>

#include "kernels/matmul.h"

namespace llm {

void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / n);
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (!w) {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
        return;
    }
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void layer_norm(const float *x, const float *w, const float *b, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const float mean = static_cast<float>(sum / n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float d = x[i] - mean;
        y[i] = d;
        var += static_cast<double>(d) * d;
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(var / n) + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = (y[i] * scale) * w[i] + (b ? b[i] : 0.0f);
}

void norm_rows(const ModelConfig &c, const float *x, const float *w, const float *b, float *y, int64_t P, int64_t n) {
    for (int64_t p = 0; p < P; ++p) {
        if (c.arch->norm == NormKind::RMS) {
            rms_norm(x + p * n, w, y + p * n, n, c.norm_eps);
        } else {
            layer_norm(x + p * n, w, b, y + p * n, n, c.norm_eps);
        }
    }
}

void add_bias(float *y, const float *b, int64_t P, int64_t n) {
    for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < n; ++i) y[p * n + i] += b[i];
}

void scale_output(const HalfWeights &w, TensorRole ws, float *y, int64_t P, int64_t n) {
    const int s = kOutputScaleOf[ws];
    if (s < 0 || !w.has(static_cast<TensorRole>(s))) return;
    const float k = w.f32(static_cast<TensorRole>(s))[0];
    for (int64_t i = 0; i < P * n; ++i) y[i] *= k;
}

void project(const HalfWeights &w, TensorRole ws, const float *x, int64_t n_in, int64_t P, float *y, int64_t n_out,
             ThreadPool *pool) {
    const BlockStreamer::Lease l = w.lease(ws);
    sub_batches(P, [&](int64_t b0, int64_t n) { matmul(l.view(ws), x + b0 * n_in, n, y + b0 * n_out, pool); });
    scale_output(w, ws, y, P, n_out);
}

void project(const HalfWeights &w, TensorRole ws, TensorRole bias, const float *x, int64_t n_in, int64_t P, float *y,
             int64_t n_out, ThreadPool *pool) {
    project(w, ws, x, n_in, P, y, n_out, pool);
    if (w.has(bias)) add_bias(y, w.f32(bias), P, n_out);
}

void head_norm(float *x, int64_t n_heads, int64_t hd, const float *w, float eps) {
    for (int64_t h = 0; h < n_heads; ++h) rms_norm(x + h * hd, w, x + h * hd, hd, eps);
}

void silu_row(float *x, int64_t n) {
    const int64_t nv = n - n % 16;
    thread_local std::vector<float> e;
    e.resize(static_cast<size_t>(nv));
    for (int64_t i = 0; i < nv; ++i) e[i] = -x[i];
    exp_ggml_rows(e.data(), e.data(), nv);
    for (int64_t i = 0; i < nv; ++i) x[i] = x[i] / (1.0f + e[i]);
    for (int64_t i = nv; i < n; ++i) x[i] = silu(x[i]);
}

}  // namespace llm
