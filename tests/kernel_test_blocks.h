// Random weight and activation blocks for the kernel tests, shared by the Catch2 suite
// (test_kernels_simd.cpp, test_kernels_iq.cpp, test_kernels_lowbit.cpp) and the bare self-test
// (kernels_selftest.cpp, also cross-built for AArch64): so it needs only lib/kernels and the standard
// library, no Catch2. Where each type keeps its scales is written once here.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"

namespace llm::test {

// Every type with a vec_dot kernel, as the kernel sweeps walk them.
inline constexpr TensorType kKernelTypes[] = {
    TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
    TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
    TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::IQ2_XXS, TensorType::IQ2_XS,
    TensorType::IQ2_S, TensorType::IQ3_XXS, TensorType::IQ3_S, TensorType::IQ1_S, TensorType::IQ1_M,
    // issue 26's low-bit types (their scales: lowbit_scales)
    TensorType::TQ1_0, TensorType::TQ2_0, TensorType::MXFP4, TensorType::NVFP4, TensorType::Q1_0, TensorType::Q2_0};

inline bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

inline void put_u16(uint8_t *p, uint16_t v) { std::memcpy(p, &v, 2); }

// Byte offsets of the f16 scale fields inside one block (random bytes there could be NaN).
inline std::vector<int> f16_fields(TensorType t) {
    switch (t) {
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K: return {0, 2};
    case TensorType::Q2_K: return {80, 82};
    case TensorType::Q3_K: return {108};
    case TensorType::Q6_K: return {208};
    case TensorType::IQ1_M: return {};  // its d is spread over the scales: put_iq1m_d
    case TensorType::TQ1_0: return {52};
    case TensorType::TQ2_0: return {64};
    case TensorType::MXFP4:
    case TensorType::NVFP4: return {};  // byte scales: lowbit_scales
    default: return {0};
    }
}

// IQ1_M keeps its f16 d in the top nibble of each of the 4 uint16 scales at byte 48.
inline void put_iq1m_d(uint8_t *blk, uint16_t h) {
    for (int k = 0; k < 4; ++k) {
        uint16_t v;
        std::memcpy(&v, blk + 48 + 2 * k, 2);
        put_u16(blk + 48 + 2 * k, static_cast<uint16_t>((v & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12)));
    }
}

// MXFP4's E8M0 and NVFP4's E4M3 block scales: 1 when exact (the E2M1 values, doubled, are then
// small integers), else random within a few powers of two of it.
inline void lowbit_scales(TensorType t, uint8_t *blk, bool exact, std::mt19937 &g) {
    std::uniform_int_distribution<int> e8(122, 130), e4(0x28, 0x50);
    if (t == TensorType::MXFP4) blk[0] = exact ? 128 : static_cast<uint8_t>(e8(g));
    if (t == TensorType::NVFP4)
        for (int s = 0; s < 4; ++s) blk[s] = exact ? 0x40 : static_cast<uint8_t>(e4(g));
}

// Float values of a row in the given 2-byte/4-byte float encoding.
inline void put_float(TensorType t, uint8_t *row, int64_t i, float v) {
    if (t == TensorType::F32)
        std::memcpy(row + 4 * i, &v, 4);
    else
        put_u16(row + 2 * i, t == TensorType::F16 ? f32_to_fp16(v) : f32_to_bf16(v));
}

// A weight row of n elements: random bytes with every scale field set. exact: all scales 1 and
// weights small, so every partial sum is an integer below 2^24 and any float summation order gives
// the same bits as the scalar reference. Otherwise each f16 scale is random_d(g) (a caller's
// distribution, as an f16); float rows are N(0, 1).
template <class RandomD>
std::vector<uint8_t> make_weights(TensorType t, int64_t n, std::mt19937 &g, bool exact, RandomD random_d) {
    std::vector<uint8_t> row(row_bytes(t, n));
    std::uniform_int_distribution<int> byte(0, 255);
    if (is_float(t)) {
        std::uniform_int_distribution<int> small(-8, 8);
        std::normal_distribution<float> N(0.0f, 1.0f);
        for (int64_t i = 0; i < n; ++i) put_float(t, row.data(), i, exact ? static_cast<float>(small(g)) : N(g));
        return row;
    }
    for (auto &b : row) b = static_cast<uint8_t>(byte(g));
    const TypeInfo ti = type_info(t);
    std::uniform_int_distribution<int> sc6(-16, 16);
    for (uint64_t b = 0; b < row.size() / ti.bytes; ++b) {
        uint8_t *blk = row.data() + b * ti.bytes;
        for (int off : f16_fields(t)) put_u16(blk + off, exact ? 0x3C00 : random_d(g));
        if (t == TensorType::IQ1_M) put_iq1m_d(blk, exact ? 0x3C00 : random_d(g));
        lowbit_scales(t, blk, exact, g);
        if (exact && t == TensorType::Q6_K)
            for (int k = 0; k < 16; ++k) blk[192 + k] = static_cast<uint8_t>(static_cast<int8_t>(sc6(g)));
    }
    return row;
}

// An activation row in vec_dot_type(t) form with d = 1: quants over the full -127..127 (so the SIMD
// paths meet their saturation corner cases), floats small integers.
inline std::vector<uint8_t> make_exact_acts(TensorType t, int64_t n, std::mt19937 &g) {
    const TensorType vdt = vec_dot_type(t);
    std::vector<uint8_t> a(act_row_bytes(vdt, n));
    std::uniform_int_distribution<int> q(-127, 127);
    if (is_float(vdt)) {
        for (int64_t i = 0; i < n; ++i) put_float(vdt, a.data(), i, static_cast<float>(q(g) / 8));
    } else if (vdt == TensorType::Q8_0) {
        auto *b = reinterpret_cast<BlockQ8_0 *>(a.data());
        for (int64_t i = 0; i < n / QK; ++i) {
            b[i].d = 0x3C00;
            for (auto &v : b[i].qs) v = static_cast<int8_t>(q(g));
        }
    } else if (vdt == TensorType::Q8_1) {
        auto *b = reinterpret_cast<BlockQ8_1 *>(a.data());
        for (int64_t i = 0; i < n / QK; ++i) {
            int s = 0;
            for (auto &v : b[i].qs) s += v = static_cast<int8_t>(q(g));
            b[i].d = 0x3C00;
            b[i].s = f32_to_fp16(static_cast<float>(s));
        }
    } else {
        auto *b = reinterpret_cast<BlockQ8_K *>(a.data());
        for (int64_t i = 0; i < n / QK_K; ++i) {
            b[i].d = 1.0f;
            for (auto &v : b[i].qs) v = static_cast<int8_t>(q(g));
            for (int k = 0; k < 16; ++k) {
                int s = 0;
                for (int j = 0; j < 16; ++j) s += b[i].qs[16 * k + j];
                b[i].bsums[k] = static_cast<int16_t>(s);
            }
        }
    }
    return a;
}

}  // namespace llm::test
