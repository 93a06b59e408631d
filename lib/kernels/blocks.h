// On-disk block layouts (QUANTS.md). Packed structs so a row of bytes read from the file can be
// viewed as an array of blocks; sizes are checked against the GGUF type table.
#pragma once

#include <cstdint>

namespace llm {

constexpr int QK = 32;    // legacy block
constexpr int QK_K = 256; // k-quant super-block

#pragma pack(push, 1)
struct BlockQ4_0 { uint16_t d; uint8_t qs[QK / 2]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[QK / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[QK]; };
struct BlockQ2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct BlockQ6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[QK / 2]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
// Activation-side formats (never in model files): what x is converted to before the integer dots.
struct BlockQ8_1 { uint16_t d, s; int8_t qs[QK]; };  // s = fp16(d * sum(qs)), d unrounded
struct BlockQ8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ8_K) == 292);

// The 16 non-linear levels of IQ4_NL / IQ4_XS.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Packed sub-block scales, decoded once here for the dequantizers, the reference dot products and
// every SIMD path (T: whatever integer type the caller's arithmetic wants). Internal linkage: the
// per-ISA units include this header under their own -m flags, and a shared inline body could let
// the linker hand an AVX-512 build of it to baseline callers (see kernel_isa.h).
namespace {

// Q4_K / Q5_K: the 6-bit scale and min of each of the 8 sub-blocks, from the 12 scale bytes.
template <typename T>
inline void scales_mins_k4(const uint8_t *a, T sc[8], T mn[8]) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = static_cast<T>(a[j] & 63);
        mn[j] = static_cast<T>(a[j + 4] & 63);
        sc[j + 4] = static_cast<T>((a[j + 8] & 0xF) | ((a[j] >> 6) << 4));
        mn[j + 4] = static_cast<T>((a[j + 8] >> 4) | ((a[j + 4] >> 6) << 4));
    }
}

// Q3_K: the signed scale (6 bits, minus 32) of each of the 16 groups of 16 weights.
template <typename T>
inline void scales_q3_k(const uint8_t *a, T sc[16]) {
    for (int g = 0; g < 16; ++g) {
        const int low4 = g < 8 ? (a[g] & 0xF) : (a[g - 8] >> 4);
        const int high2 = (a[8 + g % 4] >> (2 * (g / 4))) & 3;
        sc[g] = static_cast<T>((low4 | (high2 << 4)) - 32);
    }
}

// IQ4_XS: the signed scale (6 bits, minus 32) of 32-weight sub-block sb.
inline int scale_iq4_xs(const BlockIQ4_XS &b, int sb) {
    return (((b.scales_l[sb / 2] >> (4 * (sb % 2))) & 0xF) | (((b.scales_h >> (2 * sb)) & 3) << 4)) - 32;
}

}  // namespace

}  // namespace llm
