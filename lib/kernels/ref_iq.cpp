// Scalar reference of the grid-quantized IQ types (ref_iq.h). Each block is first decoded into one
// signed grid value per weight, a 4-bit (IQ1: 3-bit) scale field per 16 weights and, for IQ1_S /
// IQ1_M, the sign of the ±1/8 shift per 8 weights; the dequantizer and the dot product both read
// that form.
//
// Dot order: the goldens come from llama.cpp's x86 build, whose AVX2 kernels (the ones an AVX-512
// build runs for these types) keep 8 int32 lanes per block, lane k summing weights 4k..4k+3 of every
// 32 times their scale, convert them to float and fuse them into 8 float accumulators with the
// block's d (d = d_w·d_x), then fold the 8 lanes as hsum_float_8 does: (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
// The integers are exact, so any grouping of them is; this file spells out the float side, which
// is the order every SIMD path must reproduce. IQ1_S / IQ1_M carry their shift term separately:
// IQ1_S in one scalar fused accumulator, IQ1_M in a second set of 8 lanes; the final ×1/8 is exact.
// Only the std::fma calls fuse (and every other a·b+c here multiplies by a power of two), so
// the bits do not depend on -ffp-contract.
#include "kernels/ref_iq.h"

#include <cmath>
#include <cstring>

#include "kernels/blocks_iq.h"
#include "kernels/fp16.h"
#include "kernels/iq_codebooks.h"

namespace llm {
namespace {

struct IqBlock {
    float d = 0.0f;    // the block's f16 scale, widened
    int8_t q[QK_K];    // signed grid value of each weight
    uint8_t s[16];     // scale field of each 16 weights: integer scale 2·s + 1
    int8_t delta[32];  // IQ1_*: sign (±1) of the shift of each 8 weights; else unused
};

// Weights e0..e0+7 from a grid entry of 8 bytes; bit j of signs set = weight j negative.
void put8(IqBlock &o, int e0, uint64_t grid, unsigned signs) {
    for (int j = 0; j < 8; ++j) {
        const int v = static_cast<int8_t>(grid >> (8 * j));
        o.q[e0 + j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
    }
}

// Weights e0..e0+3 from a grid entry of 4 bytes; bit j of signs = weight j.
void put4(IqBlock &o, int e0, uint32_t grid, unsigned signs) {
    for (int j = 0; j < 4; ++j) {
        const int v = (grid >> (8 * j)) & 0xFF;
        o.q[e0 + j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
    }
}

void decode_iq2_xxs(const BlockIQ2_XXS &b, IqBlock &o) {
    o.d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
        uint32_t idx, sg;  // 4 grid indices; 4×7 sign bits and the scale in the top 4 bits
        std::memcpy(&idx, b.qs + 4 * ib, 4);
        std::memcpy(&sg, b.qs + 4 * ib + 2, 4);
        for (int l = 0; l < 4; ++l)
            put8(o, 32 * ib + 8 * l, kIQ2XXSGrid[(idx >> (8 * l)) & 0xFF], kIQSigns[(sg >> (7 * l)) & 127]);
        o.s[2 * ib] = o.s[2 * ib + 1] = static_cast<uint8_t>(sg >> 28);
    }
}

void decode_iq2_xs(const BlockIQ2_XS &b, IqBlock &o) {
    o.d = fp16_to_f32(b.d);
    for (int g = 0; g < 32; ++g) put8(o, 8 * g, kIQ2XSGrid[b.qs[g] & 511], kIQSigns[b.qs[g] >> 9]);
    for (int ib = 0; ib < 8; ++ib) {
        o.s[2 * ib] = b.scales[ib] & 0xF;
        o.s[2 * ib + 1] = b.scales[ib] >> 4;
    }
}

void decode_iq2_s(const BlockIQ2_S &b, IqBlock &o) {
    o.d = fp16_to_f32(b.d);
    const uint8_t *signs = b.qs + QK_K / 8;
    for (int g = 0; g < 32; ++g) {
        const int ib = g / 4, l = g % 4;
        const int idx = b.qs[g] | ((b.qh[ib] << (8 - 2 * l)) & 0x300);
        put8(o, 8 * g, kIQ2SGrid[idx], signs[g]);
    }
    for (int ib = 0; ib < 8; ++ib) {
        o.s[2 * ib] = b.scales[ib] & 0xF;
        o.s[2 * ib + 1] = b.scales[ib] >> 4;
    }
}

void decode_iq3_xxs(const BlockIQ3_XXS &b, IqBlock &o) {
    o.d = fp16_to_f32(b.d);
    const uint8_t *sgs = b.qs + QK_K / 4;
    for (int ib = 0; ib < 8; ++ib) {
        uint32_t sg;
        std::memcpy(&sg, sgs + 4 * ib, 4);
        for (int l = 0; l < 4; ++l) {
            const unsigned signs = kIQSigns[(sg >> (7 * l)) & 127];
            const int e0 = 32 * ib + 8 * l;
            put4(o, e0, kIQ3XXSGrid[b.qs[8 * ib + 2 * l]], signs);
            put4(o, e0 + 4, kIQ3XXSGrid[b.qs[8 * ib + 2 * l + 1]], signs >> 4);
        }
        o.s[2 * ib] = o.s[2 * ib + 1] = static_cast<uint8_t>(sg >> 28);
    }
}

void decode_iq3_s(const BlockIQ3_S &b, IqBlock &o) {
    o.d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
        const uint8_t *qs = b.qs + 8 * ib;
        for (int l = 0; l < 4; ++l) {
            const int i1 = qs[2 * l] | ((b.qh[ib] << (8 - 2 * l)) & 256);
            const int i2 = qs[2 * l + 1] | ((b.qh[ib] << (7 - 2 * l)) & 256);
            const unsigned signs = b.signs[4 * ib + l];
            put4(o, 32 * ib + 8 * l, kIQ3SGrid[i1], signs);
            put4(o, 32 * ib + 8 * l + 4, kIQ3SGrid[i2], signs >> 4);
        }
        o.s[2 * ib] = o.s[2 * ib + 1] = static_cast<uint8_t>((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF);
    }
}

void decode_iq1_s(const BlockIQ1_S &b, IqBlock &o) {
    o.d = fp16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
        const unsigned h = b.qh[ib];
        for (int l = 0; l < 4; ++l)
            put8(o, 32 * ib + 8 * l, kIQ1SGrid[b.qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8)], 0);
        o.s[2 * ib] = o.s[2 * ib + 1] = static_cast<uint8_t>((h >> 12) & 7);
        for (int l = 0; l < 4; ++l) o.delta[4 * ib + l] = (h & 0x8000) ? -1 : 1;
    }
}

void decode_iq1_m(const BlockIQ1_M &b, IqBlock &o) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, 8);
    const uint16_t d16 =
        static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    o.d = fp16_to_f32(d16);
    for (int ib = 0; ib < 8; ++ib) {
        for (int l = 0; l < 4; ++l) {
            const unsigned h = b.qh[2 * ib + l / 2] >> (4 * (l % 2));  // this group's nibble
            put8(o, 32 * ib + 8 * l, kIQ1SGrid[b.qs[4 * ib + l] | ((h & 7) << 8)], 0);
            o.delta[4 * ib + l] = (h & 8) ? -1 : 1;
        }
        o.s[2 * ib] = static_cast<uint8_t>((sc[ib / 2] >> (6 * (ib % 2))) & 7);
        o.s[2 * ib + 1] = static_cast<uint8_t>((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7);
    }
}

// Block i of a row of type t.
void decode(TensorType t, const void *row, int64_t i, IqBlock &o) {
    switch (t) {
    case TensorType::IQ2_XXS: decode_iq2_xxs(static_cast<const BlockIQ2_XXS *>(row)[i], o); break;
    case TensorType::IQ2_XS: decode_iq2_xs(static_cast<const BlockIQ2_XS *>(row)[i], o); break;
    case TensorType::IQ2_S: decode_iq2_s(static_cast<const BlockIQ2_S *>(row)[i], o); break;
    case TensorType::IQ3_XXS: decode_iq3_xxs(static_cast<const BlockIQ3_XXS *>(row)[i], o); break;
    case TensorType::IQ3_S: decode_iq3_s(static_cast<const BlockIQ3_S *>(row)[i], o); break;
    case TensorType::IQ1_S: decode_iq1_s(static_cast<const BlockIQ1_S *>(row)[i], o); break;
    case TensorType::IQ1_M: decode_iq1_m(static_cast<const BlockIQ1_M *>(row)[i], o); break;
    default: break;
    }
}

constexpr bool is_iq1(TensorType t) { return t == TensorType::IQ1_S || t == TensorType::IQ1_M; }

// hsum_float_8's fold.
float fold8(const float a[8]) {
    const float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r2) + (r1 + r3);
}

template <TensorType T>
float dot_ref(int64_t n, const void *w, const void *a) {
    const auto *y = static_cast<const BlockQ8_K *>(a);
    float acc[8] = {}, acc_shift[8] = {}, acc1 = 0.0f;
    IqBlock b;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        decode(T, w, i, b);
        const int8_t *q8 = y[i].qs;
        int32_t lane[8] = {}, lane_shift[8] = {};
        for (int sb = 0; sb < 8; ++sb)
            for (int k = 0; k < 8; ++k) {
                const int e0 = 32 * sb + 4 * k;
                int s = 0, sx = 0;
                for (int j = 0; j < 4; ++j) {
                    s += b.q[e0 + j] * q8[e0 + j];
                    sx += q8[e0 + j];
                }
                const int ls = 2 * b.s[e0 / 16] + 1;
                lane[k] += ls * s;
                if constexpr (is_iq1(T)) lane_shift[k] += ls * b.delta[e0 / 8] * sx;
            }
        const float d = b.d * y[i].d;
        for (int k = 0; k < 8; ++k) acc[k] = std::fma(d, static_cast<float>(lane[k]), acc[k]);
        if constexpr (T == TensorType::IQ1_M)
            for (int k = 0; k < 8; ++k) acc_shift[k] = std::fma(d, static_cast<float>(lane_shift[k]), acc_shift[k]);
        if constexpr (T == TensorType::IQ1_S) {
            int32_t s1 = 0;
            for (int k = 0; k < 8; ++k) s1 += lane_shift[k];
            acc1 = std::fma(d, static_cast<float>(s1), acc1);
        }
    }
    switch (T) {
    case TensorType::IQ3_XXS: return 0.25f * fold8(acc);
    case TensorType::IQ3_S: return fold8(acc);
    case TensorType::IQ1_S: return fold8(acc) + kIQ1Delta * acc1;
    case TensorType::IQ1_M: return fold8(acc) + kIQ1Delta * fold8(acc_shift);
    default: return 0.125f * fold8(acc);  // IQ2_*
    }
}

}  // namespace

bool is_iq_grid_type(TensorType t) {
    switch (t) {
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S:
    case TensorType::IQ1_S:
    case TensorType::IQ1_M: return true;
    default: return false;
    }
}

void dequantize_iq_grid(TensorType t, const void *src, float *dst, int64_t nb) {
    IqBlock b;
    for (int64_t i = 0; i < nb; ++i, dst += QK_K) {
        decode(t, src, i, b);
        for (int g = 0; g < 16; ++g) {
            // llama.cpp's per-type scale expressions, each rounded where it rounds them.
            const int s = b.s[g];
            float dl;
            switch (t) {
            case TensorType::IQ3_XXS: dl = b.d * (0.5f + static_cast<float>(s)) * 0.5f; break;
            case TensorType::IQ3_S:
            case TensorType::IQ1_S:
            case TensorType::IQ1_M: dl = b.d * static_cast<float>(2 * s + 1); break;
            default: dl = b.d * (0.5f + static_cast<float>(s)) * 0.25f; break;  // IQ2_*
            }
            for (int j = 0; j < 16; ++j) {
                const int e = 16 * g + j;
                if (is_iq1(t))
                    dst[e] = dl * (static_cast<float>(b.q[e]) + (b.delta[e / 8] < 0 ? -kIQ1Delta : kIQ1Delta));
                else
                    dst[e] = dl * static_cast<float>(b.q[e]);
            }
        }
    }
}

void fill_iq_grid_refs(KernelTable &v) {
    v.fn[static_cast<int>(TensorType::IQ2_XXS)] = dot_ref<TensorType::IQ2_XXS>;
    v.fn[static_cast<int>(TensorType::IQ2_XS)] = dot_ref<TensorType::IQ2_XS>;
    v.fn[static_cast<int>(TensorType::IQ2_S)] = dot_ref<TensorType::IQ2_S>;
    v.fn[static_cast<int>(TensorType::IQ3_XXS)] = dot_ref<TensorType::IQ3_XXS>;
    v.fn[static_cast<int>(TensorType::IQ3_S)] = dot_ref<TensorType::IQ3_S>;
    v.fn[static_cast<int>(TensorType::IQ1_S)] = dot_ref<TensorType::IQ1_S>;
    v.fn[static_cast<int>(TensorType::IQ1_M)] = dot_ref<TensorType::IQ1_M>;
}

}  // namespace llm
