// Activation conversion (QUANTS.md §5.1, fixtures README "Notes"). Compiled with -ffp-contract=off:
// a fused x*id+magic would round differently from llama.cpp's separate multiply. Throws only
// std::invalid_argument (callers check type_supported first) so this unit builds without spdlog.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/fp16.h"
#include "kernels/kernel_table.h"

namespace llm {
namespace {

// Round half to even for |v| < 2^22 (ggml's nearest_int): adding 1.5·2^23 leaves the integer in the
// low mantissa bits under the FPU's default round-to-nearest-even.
inline int round_even(float v) {
    float t = v + 12582912.0f;
    int32_t i;
    std::memcpy(&i, &t, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

// One 32-value block the x86 way: d = amax/127 (stored f16), id = 127/amax, q = round_even(x·id).
// Returns the unrounded d and the sum of the quants (for Q8_1).
inline float q8_block(const float *x, int8_t *qs, int *sum) {
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int s = 0;
    for (int j = 0; j < QK; ++j) {
        const int q = round_even(x[j] * id);
        qs[j] = static_cast<int8_t>(q);
        s += q;
    }
    *sum = s;
    return d;
}

}  // namespace

TensorType vec_dot_type(TensorType t) {
    switch (t) {
    case TensorType::F32: return TensorType::F32;
    case TensorType::F16: return TensorType::F16;
    case TensorType::BF16: return TensorType::BF16;
    case TensorType::Q4_0:
    case TensorType::Q5_0:
    case TensorType::Q8_0:
    case TensorType::IQ4_NL: return TensorType::Q8_0;
    case TensorType::Q4_1:
    case TensorType::Q5_1: return TensorType::Q8_1;
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::IQ4_XS: return TensorType::Q8_K;
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S:
    case TensorType::IQ1_S:
    case TensorType::IQ1_M: return TensorType::Q8_K;  // as llama.cpp
    case TensorType::MXFP4:
    case TensorType::NVFP4:
    case TensorType::Q1_0:
    case TensorType::Q2_0: return TensorType::Q8_0;
    case TensorType::TQ1_0:
    case TensorType::TQ2_0: return TensorType::Q8_K;
    default: throw std::invalid_argument("no dot product for tensor type " + type_name(t));
    }
}

uint64_t act_row_bytes(TensorType vdt, int64_t n) {
    switch (vdt) {
    case TensorType::F32: return static_cast<uint64_t>(n) * 4;
    case TensorType::F16:
    case TensorType::BF16: return static_cast<uint64_t>(n) * 2;
    case TensorType::Q8_0: return static_cast<uint64_t>(n / QK) * sizeof(BlockQ8_0);
    case TensorType::Q8_1: return static_cast<uint64_t>(n / QK) * sizeof(BlockQ8_1);
    case TensorType::Q8_K: return static_cast<uint64_t>(n / QK_K) * sizeof(BlockQ8_K);
    default: throw std::invalid_argument(type_name(vdt) + " is not an activation format");
    }
}

void quantize_row_q8_0(const float *x, BlockQ8_0 *y, int64_t n) { quantize_row_q8_0_sums(x, y, nullptr, n); }

void quantize_row_q8_0_sums(const float *x, BlockQ8_0 *y, uint8_t *sums, int64_t n) {
    for (int64_t i = 0; i < n / QK; ++i, x += QK) {
        int sum;
        y[i].d = f32_to_fp16(q8_block(x, y[i].qs, &sum));
        if (sums) {
            const int32_t s = sum;
            std::memcpy(sums + 4 * i, &s, 4);
        }
    }
}

void quantize_row_q8_1(const float *x, BlockQ8_1 *y, int64_t n) {
    for (int64_t i = 0; i < n / QK; ++i, x += QK) {
        int sum;
        const float d = q8_block(x, y[i].qs, &sum);
        y[i].d = f32_to_fp16(d);
        y[i].s = f32_to_fp16(d * static_cast<float>(sum));
    }
}

void quantize_row_q8_K(const float *x, BlockQ8_K *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        // The element of largest magnitude keeps its sign: it maps to -127, so d is negative when
        // that element is positive. The first of equal magnitudes wins.
        float amax = 0.0f, vmax = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            const float a = std::fabs(x[j]);
            if (a > amax) {
                amax = a;
                vmax = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        const float iscale = -127.0f / vmax;
        for (int j = 0; j < QK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, round_even(iscale * x[j])));
        for (int g = 0; g < QK_K / 16; ++g) {
            int s = 0;
            for (int j = 0; j < 16; ++j) s += y[i].qs[16 * g + j];
            y[i].bsums[g] = static_cast<int16_t>(s);
        }
        y[i].d = 1.0f / iscale;
    }
}

void quantize_act_row(TensorType vdt, const float *x, void *dst, int64_t n) {
    switch (vdt) {
    case TensorType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); break;
    case TensorType::F16: {
        auto *h = static_cast<uint16_t *>(dst);
        for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(x[i]);
        break;
    }
    case TensorType::BF16: {
        auto *h = static_cast<uint16_t *>(dst);
        for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
        break;
    }
    case TensorType::Q8_0: quantize_row_q8_0(x, static_cast<BlockQ8_0 *>(dst), n); break;
    case TensorType::Q8_1: quantize_row_q8_1(x, static_cast<BlockQ8_1 *>(dst), n); break;
    case TensorType::Q8_K: quantize_row_q8_K(x, static_cast<BlockQ8_K *>(dst), n); break;
    default: throw std::invalid_argument(type_name(vdt) + " is not an activation format");
    }
}

}  // namespace llm
