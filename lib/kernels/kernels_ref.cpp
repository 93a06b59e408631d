// Scalar reference dot products, one per weight type (QUANTS.md §5.2): the integers of each block
// exactly as llama.cpp forms them, one float scale per block, blocks summed left to right in f32.
// The SIMD paths must produce the same integers; only their float summation order may differ,
// except for F32 and F16, whose order kernel_isa.h fixes for every path (kDotAccs).
#include <cmath>
#include <cstring>

#include "kernels/fp16.h"
#include "kernels/lowbit.h"
#include "kernels/matmul.h"
#include "kernels/ref_iq.h"
#include "kernels/kernel_table.h"

namespace llm {
namespace {

inline float h2f(uint16_t h) { return fp16_to_f32(h); }

float dot_f32_ref(int64_t n, const void *w, const void *a) {
    return dot_f32(static_cast<const float *>(w), static_cast<const float *>(a), n);
}

float dot_f16_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const uint16_t *>(w);
    auto *y = static_cast<const uint16_t *>(a);
    // The F16 order of kernel_isa.h: the products are exact in f32, so each accumulator's chain is of adds.
    float s[kDotAccs] = {};
    int64_t i = 0;
    for (; i + kDotAccs <= n; i += kDotAccs)
        for (int k = 0; k < kDotAccs; ++k) s[k] += h2f(x[i + k]) * h2f(y[i + k]);
    double r = fold_dot_accs(s);
    for (; i < n; ++i) r += static_cast<double>(h2f(x[i]) * h2f(y[i]));
    return static_cast<float>(r);
}

float dot_bf16_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const uint16_t *>(w);
    auto *y = static_cast<const uint16_t *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) acc += bf16_to_f32(x[i]) * bf16_to_f32(y[i]);
    return acc;
}

float dot_q4_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ4_0 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        int isum = 0;
        for (int j = 0; j < QK / 2; ++j) {
            isum += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        acc += static_cast<float>(isum) * h2f(x[i].d) * h2f(y[i].d);
    }
    return acc;
}

float dot_q4_1_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ4_1 *>(w);
    auto *y = static_cast<const BlockQ8_1 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        int isum = 0;
        for (int j = 0; j < QK / 2; ++j) {
            isum += (x[i].qs[j] & 0xF) * y[i].qs[j];
            isum += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        // The min term uses s = d_y·Σq_y, so the block's weights contribute m·Σx without a second dot.
        acc += (h2f(x[i].d) * h2f(y[i].d)) * static_cast<float>(isum) + h2f(x[i].m) * h2f(y[i].s);
    }
    return acc;
}

float dot_q5_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ5_0 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const int lo = ((x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
            const int hi = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        acc += static_cast<float>(isum) * h2f(x[i].d) * h2f(y[i].d);
    }
    return acc;
}

float dot_q5_1_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ5_1 *>(w);
    auto *y = static_cast<const BlockQ8_1 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const int lo = (x[i].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            const int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            isum += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
        }
        acc += (h2f(x[i].d) * h2f(y[i].d)) * static_cast<float>(isum) + h2f(x[i].m) * h2f(y[i].s);
    }
    return acc;
}

float dot_q8_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ8_0 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        int isum = 0;
        for (int j = 0; j < QK; ++j) isum += x[i].qs[j] * y[i].qs[j];
        acc += static_cast<float>(isum) * h2f(x[i].d) * h2f(y[i].d);
    }
    return acc;
}

float dot_iq4_nl_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockIQ4_NL *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK; ++i) {
        int isum = 0;
        for (int j = 0; j < QK / 2; ++j) {
            isum += kIQ4NLValues[x[i].qs[j] & 0xF] * y[i].qs[j];
            isum += kIQ4NLValues[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        acc += static_cast<float>(isum) * h2f(x[i].d) * h2f(y[i].d);
    }
    return acc;
}

// Σ over the 16 groups of 16 activations: min/offset of group g times the activation sum bsums[g].
float dot_q2_k_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ2_K *>(w);
    auto *y = static_cast<const BlockQ8_K *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0, msum = 0;
        for (int g = 0; g < 16; ++g) msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int half = 0; half < 2; ++half) {
                    const int g = 8 * h + 2 * j + half;
                    int s = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l)
                        s += ((x[i].qs[32 * h + l] >> (2 * j)) & 3) * y[i].qs[128 * h + 32 * j + l];
                    isum += (x[i].scales[g] & 0xF) * s;
                }
        acc += (y[i].d * h2f(x[i].d)) * static_cast<float>(isum) - (y[i].d * h2f(x[i].dmin)) * static_cast<float>(msum);
    }
    return acc;
}

float dot_q3_k_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ3_K *>(w);
    auto *y = static_cast<const BlockQ8_K *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sc[16];
        scales_q3_k(x[i].scales, sc);
        int isum = 0;
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int half = 0; half < 2; ++half) {
                    const int g = 8 * h + 2 * j + half;
                    int s = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l) {
                        const int lo = (x[i].qs[32 * h + l] >> (2 * j)) & 3;
                        const int q = lo - ((x[i].hmask[l] & (1 << (4 * h + j))) ? 0 : 4);
                        s += q * y[i].qs[128 * h + 32 * j + l];
                    }
                    isum += sc[g] * s;
                }
        acc += (h2f(x[i].d) * y[i].d) * static_cast<float>(isum);
    }
    return acc;
}

// Q4_K and Q5_K: eight 32-element sub-blocks; q(e) gives the unsigned weight integer of element e.
template <typename Block, typename Q>
float dot_k4_like(const Block *x, const BlockQ8_K *y, int64_t nb, Q q) {
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
        int sc[8], mn[8];
        scales_mins_k4(x[i].scales, sc, mn);
        int isum = 0, msum = 0;
        for (int sb = 0; sb < 8; ++sb) {
            int s = 0;
            for (int l = 0; l < 32; ++l) s += q(x[i], 32 * sb + l) * y[i].qs[32 * sb + l];
            isum += sc[sb] * s;
            msum += mn[sb] * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
        }
        acc += (h2f(x[i].d) * y[i].d) * static_cast<float>(isum) - (h2f(x[i].dmin) * y[i].d) * static_cast<float>(msum);
    }
    return acc;
}

float dot_q4_k_ref(int64_t n, const void *w, const void *a) {
    return dot_k4_like(static_cast<const BlockQ4_K *>(w), static_cast<const BlockQ8_K *>(a), n / QK_K,
                       [](const BlockQ4_K &b, int e) {
                           const int c = e / 64, l = e % 32;
                           return (e % 64) < 32 ? (b.qs[32 * c + l] & 0xF) : (b.qs[32 * c + l] >> 4);
                       });
}

float dot_q5_k_ref(int64_t n, const void *w, const void *a) {
    return dot_k4_like(static_cast<const BlockQ5_K *>(w), static_cast<const BlockQ8_K *>(a), n / QK_K,
                       [](const BlockQ5_K &b, int e) {
                           const int c = e / 64, l = e % 32;
                           const bool lo = (e % 64) < 32;
                           const int q4 = lo ? (b.qs[32 * c + l] & 0xF) : (b.qs[32 * c + l] >> 4);
                           const int bit = lo ? (1 << (2 * c)) : (2 << (2 * c));
                           return q4 + ((b.qh[l] & bit) ? 16 : 0);
                       });
}

float dot_q6_k_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ6_K *>(w);
    auto *y = static_cast<const BlockQ8_K *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int8_t q[QK_K];  // q[e] - 32, in -32..31
        for (int h = 0; h < 2; ++h) {
            const uint8_t *L = x[i].ql + 64 * h;
            const uint8_t *H = x[i].qh + 32 * h;
            int8_t *Q = q + 128 * h;
            for (int l = 0; l < 32; ++l) {
                Q[l] = static_cast<int8_t>(((L[l] & 0xF) | (((H[l] >> 0) & 3) << 4)) - 32);
                Q[l + 32] = static_cast<int8_t>(((L[l + 32] & 0xF) | (((H[l] >> 2) & 3) << 4)) - 32);
                Q[l + 64] = static_cast<int8_t>(((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32);
                Q[l + 96] = static_cast<int8_t>(((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int isum = 0;
        for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += q[16 * g + l] * y[i].qs[16 * g + l];
            isum += x[i].scales[g] * s;
        }
        acc += (h2f(x[i].d) * y[i].d) * static_cast<float>(isum);
    }
    return acc;
}

float dot_iq4_xs_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockIQ4_XS *>(w);
    auto *y = static_cast<const BlockQ8_K *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0;
        for (int sb = 0; sb < 8; ++sb) {
            const uint8_t *qs = x[i].qs + 16 * sb;
            const int8_t *q8 = y[i].qs + 32 * sb;
            int s = 0;
            for (int j = 0; j < 16; ++j) s += kIQ4NLValues[qs[j] & 0xF] * q8[j] + kIQ4NLValues[qs[j] >> 4] * q8[j + 16];
            isum += scale_iq4_xs(x[i], sb) * s;
        }
        acc += (h2f(x[i].d) * y[i].d) * static_cast<float>(isum);
    }
    return acc;
}

// The accumulator order of kernel_isa.h's WeightedSumFn / WeightedSumF16Fn: each accumulator's chain (F32:
// fused multiply-adds; F16: a rounded product, then a rounded add, as this unit is built with
// -ffp-contract=off), then the fold.
template <typename V>
void wsum_accs_ref(const float *w, int64_t ws, int ng, const V *v, int64_t vs, int64_t n_rows, int64_t dim, float *out,
                   int64_t os, const V *v2, int64_t n_first) {
    const int m = static_cast<int>(n_rows < kDotAccs ? n_rows : kDotAccs);
    float s[kDotAccs];
    for (int g = 0; g < ng; ++g)
        for (int64_t d = 0; d < dim; ++d) {
            for (int k = 0; k < m; ++k) {
                float a = 0.0f;
                for (int64_t t = k; t < n_rows; t += kDotAccs) {
                    const V x = t < n_first ? v[t * vs + d] : v2[(t - n_first) * vs + d];
                    if constexpr (sizeof(V) == 2)
                        a += w[g * ws + t] * h2f(x);
                    else
                        a = std::fma(w[g * ws + t], x, a);
                }
                s[k] = a;
            }
            out[g * os + d] = m > 0 ? fold_dot_accs(s, m) : 0.0f;
        }
}

void wsum_ref(const float *w, int64_t ws, int ng, const float *v, int64_t vs, int64_t n_rows, int64_t dim, float *out,
              int64_t os, const float *v2, int64_t n_first) {
    wsum_accs_ref(w, ws, ng, v, vs, n_rows, dim, out, os, v2, n_first);
}

void wsum_f16_ref(const float *w, int64_t ws, int ng, const uint16_t *v, int64_t vs, int64_t n_rows, int64_t dim,
                  float *out, int64_t os, const uint16_t *v2, int64_t n_first) {
    wsum_accs_ref(w, ws, ng, v, vs, n_rows, dim, out, os, v2, n_first);
}

void exp_ref(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = exp_ggml(x[i]);
}

// DeltaStepFn's definition (kernel_isa.h).
void delta_step_ref(float *S, int64_t hd, const float *q, const float *k, const float *v, float decay, float beta,
                    float scale, float *y) {
    for (int64_t jj = 0; jj < hd; ++jj) {
        float *row = S + jj * hd;
        for (int64_t i = 0; i < hd; ++i) row[i] *= decay;
        const float d = (v[jj] - dot_f32(row, k, hd)) * beta;
        for (int64_t i = 0; i < hd; ++i) row[i] = std::fma(k[i], d, row[i]);
        if (y) y[jj] = dot_f32(row, q, hd) * scale;
    }
}

}  // namespace

// The definition of ExpFn's order (kernel_isa.h); this unit is built with -ffp-contract=off, so
// only the spelled-out fmas fuse.
float exp_ggml(float x) {
    const float r = 0x1.8p23f;  // adding it rounds x·log2(e) to an integer
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    if (n != n) return x;  // NaN in, NaN out
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    // b = x - n·ln2 in two parts, as two fused steps.
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j =
        std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                 u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    return std::ldexp(j, static_cast<int>(n));  // one rounding, as scalef
}

const KernelTable &kernels_scalar() {
    static const KernelTable t = [] {
        KernelTable v;
        v.isa = "scalar";
        v.fn[tid::F32] = dot_f32_ref;
        v.fn[tid::F16] = dot_f16_ref;
        v.fn[tid::BF16] = dot_bf16_ref;
        v.fn[tid::Q4_0] = dot_q4_0_ref;
        v.fn[tid::Q4_1] = dot_q4_1_ref;
        v.fn[tid::Q5_0] = dot_q5_0_ref;
        v.fn[tid::Q5_1] = dot_q5_1_ref;
        v.fn[tid::Q8_0] = dot_q8_0_ref;
        v.fn[tid::Q2_K] = dot_q2_k_ref;
        v.fn[tid::Q3_K] = dot_q3_k_ref;
        v.fn[tid::Q4_K] = dot_q4_k_ref;
        v.fn[tid::Q5_K] = dot_q5_k_ref;
        v.fn[tid::Q6_K] = dot_q6_k_ref;
        v.fn[tid::IQ4_NL] = dot_iq4_nl_ref;
        v.fn[tid::IQ4_XS] = dot_iq4_xs_ref;
        fill_iq_grid_refs(v);
        fill_lowbit_ref(v);
        v.wsum = wsum_ref;
        v.wsum_f16 = wsum_f16_ref;
        v.exp = exp_ref;
        v.delta_step = delta_step_ref;
        return v;
    }();
    return t;
}

}  // namespace llm
