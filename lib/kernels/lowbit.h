// Block layouts and scale decoders of the low-bit types llama.cpp added after the k-quants
// (issue 26): ternary TQ1_0 / TQ2_0, the microscaling MXFP4 and NVFP4, and the sign/2-bit Q1_0 /
// Q2_0. Kept apart from blocks.h so the IQ grid types can grow there independently.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"

namespace llm {

// Their type ids (gguf/types.h), for the ISA units, which see only kernel headers.
namespace tid {
constexpr int TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42;
}

constexpr int QK_MXFP4 = 32;
constexpr int QK_NVFP4 = 64;  // four 16-element sub-blocks, each with its own UE4M3 scale
constexpr int QK1_0 = 128;
constexpr int QK2_0 = 64;

// clang-format off
#pragma pack(push, 1)
// TQ1_0: 240 trits packed five per byte (base 3, most significant first), 16 more four per byte.
struct BlockTQ1_0 { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; };
// TQ2_0: 2 bits per weight holding trit + 1.
struct BlockTQ2_0 { uint8_t qs[QK_K / 4]; uint16_t d; };
struct BlockMXFP4 { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; };  // e: E8M0 exponent
struct BlockNVFP4 { uint8_t d[4]; uint8_t qs[QK_NVFP4 / 2]; };  // d: UE4M3 per 16 weights
struct BlockQ1_0 { uint16_t d; uint8_t qs[QK1_0 / 8]; };  // bit set: +d, clear: -d
struct BlockQ2_0 { uint16_t d; uint8_t qs[QK2_0 / 4]; };  // q in 0..3 means (q - 1)·d
#pragma pack(pop)
// clang-format on

static_assert(sizeof(BlockTQ1_0) == 54);
static_assert(sizeof(BlockTQ2_0) == 66);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockNVFP4) == 36);
static_assert(sizeof(BlockQ1_0) == 18);
static_assert(sizeof(BlockQ2_0) == 18);

// E2M1 values times two (so they are integers), shared by MXFP4 and NVFP4; each block's scale
// is halved to compensate (ggml-common.h's kvalues_fp4).
inline constexpr int8_t kFP4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Internal linkage for the reason blocks.h gives (per-ISA units include this too).
namespace {

// Half of 2^(e - 127), the MXFP4 block scale paired with the doubled E2M1 values. e = 0 and 1
// give the subnormals 2^-128 and 2^-127; no NaN handling (llama.cpp has none either).
inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Half of an unsigned E4M3 value (bias 7, subnormals man·2^-9), the NVFP4 sub-block scale. The top
// bit is ignored, and 0x7F (E4M3's NaN) reads as 0, as llama.cpp decodes them. Every result is
// exact in f32, so building it from integers gives llama.cpp's bits.
inline float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const int exp = (x >> 3) & 0xF, man = x & 7;
    // raw = man·2^-9 (exp 0) or (8 + man)·2^(exp - 10); halved: one more power of two.
    const float m = static_cast<float>(exp == 0 ? man : 8 + man);
    const int shift = exp == 0 ? -10 : exp - 11;
    uint32_t pbits = static_cast<uint32_t>(127 + shift) << 23;  // 2^shift, shift in -11..4: normal
    float p;
    std::memcpy(&p, &pbits, 4);
    return m * p;
}

// TQ1_0: trit n (0 = most significant) of a byte packed in base 3 with the fixed-point scaling
// llama.cpp uses (byte·3^n mod 256, times 3, top bits), as 0..2.
inline int tq1_trit(uint8_t byte, int n) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
    return (static_cast<uint16_t>(q) * 3) >> 8;
}

}  // namespace

struct KernelTable;
// The scalar reference dot products of these types into t (ref_lowbit.cpp).
void fill_lowbit_ref(KernelTable &t);
// Dequantizes nb blocks of type id t into y; false if t is not one of these types.
bool dequantize_lowbit(int t, const void *src, float *y, int64_t nb);

}  // namespace llm
