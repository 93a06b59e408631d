// Scalar dequantizers and reference dot products of the low-bit types (lowbit.h): the integers of
// each block exactly as llama.cpp's generic CPU code forms them (ggml-cpu/quants.c), and its float
// steps in its order. Built with -ffp-contract=off: the only fused multiply-adds are spelled out.
//
// Where llama.cpp's x86 build (the goldens') differs in float order:
// - Q2_0 has no x86 body: the generic C code runs, and a compiler targeting FMA fuses its two
//   `acc += scale * sum` steps, so the reference fuses them too (std::fma).
// - TQ1_0, TQ2_0, MXFP4, NVFP4 and Q1_0 have AVX2 bodies that keep 8 float lanes (each lane the
//   integer sum of a fixed set of 4-element groups, scaled per block), folded at the end by
//   hsum_float_8; MXFP4's pairs blocks into two such accumulators. Same integers, another order.
#include <cmath>

#include "gguf/types.h"
#include "kernels/fp16.h"
#include "kernels/lowbit.h"
#include "kernels/kernel_table.h"

namespace llm {
namespace {

// Every trit of a TQ1_0 block in llama.cpp's element order, as 0..2 (weight = trit - 1).
void tq1_trits(const BlockTQ1_0 &b, int t[QK_K]) {
    int o = 0;
    for (int n = 0; n < 5; ++n)  // bytes 0..31: five rows of 32
        for (int m = 0; m < 32; ++m) t[o++] = tq1_trit(b.qs[m], n);
    for (int n = 0; n < 5; ++n)  // bytes 32..47: five rows of 16
        for (int m = 0; m < 16; ++m) t[o++] = tq1_trit(b.qs[32 + m], n);
    for (int n = 0; n < 4; ++n)  // qh: four rows of 4
        for (int m = 0; m < 4; ++m) t[o++] = tq1_trit(b.qh[m], n);
}

// TQ2_0 element e: byte (e / 128)·32 + e % 32, bits 2·((e / 32) % 4), as 0..2 (3 is not written).
inline int tq2_q(const BlockTQ2_0 &b, int e) { return (b.qs[(e / 128) * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 3; }

float dot_tq1_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockTQ1_0 *>(w);
    auto *y = static_cast<const BlockQ8_K *>(a);
    float acc = 0.0f;
    int t[QK_K];
    for (int64_t i = 0; i < n / QK_K; ++i) {
        tq1_trits(x[i], t);
        int sum = 0;
        for (int e = 0; e < QK_K; ++e) sum += (t[e] - 1) * y[i].qs[e];
        acc += static_cast<float>(sum) * (fp16_to_f32(x[i].d) * y[i].d);
    }
    return acc;
}

float dot_tq2_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockTQ2_0 *>(w);
    auto *y = static_cast<const BlockQ8_K *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sum = 0;
        for (int e = 0; e < QK_K; ++e) sum += (tq2_q(x[i], e) - 1) * y[i].qs[e];
        acc += static_cast<float>(sum) * (y[i].d * fp16_to_f32(x[i].d));
    }
    return acc;
}

float dot_mxfp4_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockMXFP4 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
        const float d = fp16_to_f32(y[i].d) * e8m0_half(x[i].e);
        int lo = 0, hi = 0;
        for (int j = 0; j < QK_MXFP4 / 2; ++j) {
            lo += y[i].qs[j] * kFP4Values[x[i].qs[j] & 0xF];
            hi += y[i].qs[j + 16] * kFP4Values[x[i].qs[j] >> 4];
        }
        acc += d * static_cast<float>(lo + hi);
    }
    return acc;
}

// Sub-block s of an NVFP4 block meets half s % 2 of Q8_0 block s / 2 of its pair.
float dot_nvfp4_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockNVFP4 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK_NVFP4; ++i) {
        for (int s = 0; s < 4; ++s) {
            const BlockQ8_0 &yb = y[2 * i + s / 2];
            const int8_t *q8 = yb.qs + 16 * (s % 2);
            const uint8_t *q4 = x[i].qs + 8 * s;
            int lo = 0, hi = 0;
            for (int j = 0; j < 8; ++j) {
                lo += q8[j] * kFP4Values[q4[j] & 0xF];
                hi += q8[j + 8] * kFP4Values[q4[j] >> 4];
            }
            acc += fp16_to_f32(yb.d) * ue4m3_half(x[i].d[s]) * static_cast<float>(lo + hi);
        }
    }
    return acc;
}

// One Q1_0 block spans four Q8_0 blocks: a float sum of their scaled integer sums, then times d.
float dot_q1_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ1_0 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK1_0; ++i) {
        float part = 0.0f;
        for (int k = 0; k < 4; ++k) {
            const BlockQ8_0 &yb = y[4 * i + k];
            int sum = 0;
            for (int e = 0; e < QK; ++e) {
                const bool set = (x[i].qs[4 * k + e / 8] >> (e % 8)) & 1;
                sum += set ? yb.qs[e] : -yb.qs[e];
            }
            part += fp16_to_f32(yb.d) * static_cast<float>(sum);
        }
        acc += fp16_to_f32(x[i].d) * part;
    }
    return acc;
}

// One Q2_0 block spans two Q8_0 blocks; both accumulations fused, as the goldens' build ran them.
float dot_q2_0_ref(int64_t n, const void *w, const void *a) {
    auto *x = static_cast<const BlockQ2_0 *>(w);
    auto *y = static_cast<const BlockQ8_0 *>(a);
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK2_0; ++i) {
        float part = 0.0f;
        for (int k = 0; k < 2; ++k) {
            const BlockQ8_0 &yb = y[2 * i + k];
            int sum = 0;
            for (int e = 0; e < QK; ++e) sum += (((x[i].qs[8 * k + e / 4] >> (2 * (e % 4))) & 3) - 1) * yb.qs[e];
            part = std::fma(fp16_to_f32(yb.d), static_cast<float>(sum), part);
        }
        acc = std::fma(fp16_to_f32(x[i].d), part, acc);
    }
    return acc;
}

}  // namespace

void fill_lowbit_ref(KernelTable &t) {
    t.fn[static_cast<int>(TensorType::TQ1_0)] = dot_tq1_0_ref;
    t.fn[static_cast<int>(TensorType::TQ2_0)] = dot_tq2_0_ref;
    t.fn[static_cast<int>(TensorType::MXFP4)] = dot_mxfp4_ref;
    t.fn[static_cast<int>(TensorType::NVFP4)] = dot_nvfp4_ref;
    t.fn[static_cast<int>(TensorType::Q1_0)] = dot_q1_0_ref;
    t.fn[static_cast<int>(TensorType::Q2_0)] = dot_q2_0_ref;
}

bool dequantize_lowbit(int t, const void *src, float *y, int64_t nb) {
    switch (static_cast<TensorType>(t)) {
    case TensorType::TQ1_0: {
        auto *b = static_cast<const BlockTQ1_0 *>(src);
        int q[QK_K];
        for (int64_t i = 0; i < nb; ++i, y += QK_K) {
            const float d = fp16_to_f32(b[i].d);
            tq1_trits(b[i], q);
            for (int e = 0; e < QK_K; ++e) y[e] = static_cast<float>(q[e] - 1) * d;
        }
        return true;
    }
    case TensorType::TQ2_0: {
        auto *b = static_cast<const BlockTQ2_0 *>(src);
        for (int64_t i = 0; i < nb; ++i, y += QK_K) {
            const float d = fp16_to_f32(b[i].d);
            for (int e = 0; e < QK_K; ++e) y[e] = static_cast<float>(tq2_q(b[i], e) - 1) * d;
        }
        return true;
    }
    case TensorType::MXFP4: {
        auto *b = static_cast<const BlockMXFP4 *>(src);
        for (int64_t i = 0; i < nb; ++i, y += QK_MXFP4) {
            const float d = e8m0_half(b[i].e);
            for (int j = 0; j < 16; ++j) {
                y[j] = static_cast<float>(kFP4Values[b[i].qs[j] & 0xF]) * d;
                y[j + 16] = static_cast<float>(kFP4Values[b[i].qs[j] >> 4]) * d;
            }
        }
        return true;
    }
    case TensorType::NVFP4: {
        auto *b = static_cast<const BlockNVFP4 *>(src);
        for (int64_t i = 0; i < nb; ++i, y += QK_NVFP4) {
            for (int s = 0; s < 4; ++s) {
                const float d = ue4m3_half(b[i].d[s]);
                for (int j = 0; j < 8; ++j) {
                    y[16 * s + j] = static_cast<float>(kFP4Values[b[i].qs[8 * s + j] & 0xF]) * d;
                    y[16 * s + j + 8] = static_cast<float>(kFP4Values[b[i].qs[8 * s + j] >> 4]) * d;
                }
            }
        }
        return true;
    }
    case TensorType::Q1_0: {
        auto *b = static_cast<const BlockQ1_0 *>(src);
        for (int64_t i = 0; i < nb; ++i, y += QK1_0) {
            const float d = fp16_to_f32(b[i].d);
            for (int e = 0; e < QK1_0; ++e) y[e] = (b[i].qs[e / 8] >> (e % 8)) & 1 ? d : -d;
        }
        return true;
    }
    case TensorType::Q2_0: {
        auto *b = static_cast<const BlockQ2_0 *>(src);
        for (int64_t i = 0; i < nb; ++i, y += QK2_0) {
            const float d = fp16_to_f32(b[i].d);
            for (int e = 0; e < QK2_0; ++e) y[e] = static_cast<float>(((b[i].qs[e / 4] >> (2 * (e % 4))) & 3) - 1) * d;
        }
        return true;
    }
    default: return false;
    }
}

}  // namespace llm
