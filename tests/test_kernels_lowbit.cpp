// The low-bit types of issue 26 (TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0): dequantizers against
// blocks built by hand from the formats' definitions (OCP MX E2M1 values, E8M0 and E4M3 scales,
// base-3 trits as llama.cpp's quantizer packs them), and every ISA's dot against the scalar
// reference bit for bit on blocks of extreme values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/lowbit.h"
#include "kernels/matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/repack.h"
#include "kernel_test_blocks.h"

using namespace llm;

namespace {

// E2M1 (OCP MX v1.0, table 2): sign, 2 exponent bits, 1 mantissa bit; -0 (code 8) reads as +0,
// as llama.cpp's integer table has it.
const float kE2M1[16] = {0.0f, 0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                         0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

std::vector<float> dequant(TensorType t, const std::vector<uint8_t> &src, int64_t n) {
    std::vector<float> y(n, -12345.0f);
    dequantize_row(t, src.data(), y.data(), n);
    return y;
}

void check_bits(const std::vector<float> &got, const std::vector<float> &want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": " << got[i] << " vs " << want[i]);
        CHECK(f32_to_bits(got[i]) == f32_to_bits(want[i]));
    }
}

// llama.cpp's TQ1_0 packing of five trits (0..2, most significant first): the base-3 number scaled
// to a byte, rounded up, so that multiplying by 3^n and taking the top bits of ×3 reads trit n.
uint8_t pack_trits(const int *t, int count) {
    int v = 0;
    for (int i = 0; i < count; ++i) v = 3 * v + t[i];
    for (int i = count; i < 5; ++i) v *= 3;
    return static_cast<uint8_t>((v * 256 + 242) / 243);
}

}  // namespace

TEST_CASE("dequantize Q1_0 and Q2_0 by hand", "[kernels]") {
    std::vector<uint8_t> b(18);
    b[0] = 0x00, b[1] = 0x38;  // d = 0.5
    for (int i = 0; i < 16; ++i) b[2 + i] = static_cast<uint8_t>(0x5A ^ i);
    std::vector<float> want(128);
    for (int e = 0; e < 128; ++e) want[e] = ((0x5A ^ (e / 8)) >> (e % 8)) & 1 ? 0.5f : -0.5f;
    check_bits(dequant(TensorType::Q1_0, b, 128), want);

    b[0] = 0x00, b[1] = 0x40;                                     // d = 2
    for (int i = 0; i < 16; ++i) b[2 + i] = i % 2 ? 0xE4 : 0x1B;  // q 0,1,2,3 / 3,2,1,0 per byte
    want.assign(64, 0.0f);
    for (int e = 0; e < 64; ++e) {
        const int q = (e / 4) % 2 ? e % 4 : 3 - e % 4;
        want[e] = 2.0f * static_cast<float>(q - 1);
    }
    check_bits(dequant(TensorType::Q2_0, b, 64), want);
}

TEST_CASE("dequantize TQ1_0 and TQ2_0 by hand", "[kernels]") {
    std::mt19937 g(3);
    std::uniform_int_distribution<int> trit(0, 2);
    std::vector<int> t(256);
    for (int &v : t) v = trit(g);
    t[0] = t[32] = t[64] = t[96] = t[128] = 2;  // byte 0 = 22222 in base 3: the largest byte, 255
    // Element order: bytes 0..31 hold elements m + 32·n (n = trit position), bytes 32..47 hold
    // 160 + m + 16·n, the 4 qh bytes 240 + m + 4·n (four trits, the fifth zero).
    std::vector<uint8_t> b(54);
    auto pack = [&](int first, int stride, int count) {
        int d[5];
        for (int n = 0; n < count; ++n) d[n] = t[first + stride * n];
        return pack_trits(d, count);
    };
    for (int m = 0; m < 32; ++m) b[m] = pack(m, 32, 5);
    for (int m = 0; m < 16; ++m) b[32 + m] = pack(160 + m, 16, 5);
    for (int m = 0; m < 4; ++m) b[48 + m] = pack(240 + m, 4, 4);
    b[52] = 0x00, b[53] = 0xBC;  // d = -1
    CHECK(b[0] == 255);
    std::vector<float> want(256);
    for (int e = 0; e < 256; ++e) want[e] = -static_cast<float>(t[e] - 1);
    check_bits(dequant(TensorType::TQ1_0, b, 256), want);

    // TQ2_0: element 128·h + 32·l + m is bits 2l of byte 32·h + m, as trit + 1; 3 reads as +2.
    std::vector<uint8_t> c(66, 0);
    for (int e = 0; e < 256; ++e) {
        const int q = e == 7 ? 3 : t[e];
        c[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q << (2 * ((e / 32) % 4)));
    }
    c[64] = 0x00, c[65] = 0x34;  // d = 0.25
    for (int e = 0; e < 256; ++e) want[e] = 0.25f * static_cast<float>((e == 7 ? 3 : t[e]) - 1);
    check_bits(dequant(TensorType::TQ2_0, c, 256), want);
}

TEST_CASE("dequantize MXFP4 by hand: E2M1 values times 2^(e - 127)", "[kernels]") {
    for (int e : {0, 1, 2, 100, 127, 128, 140, 254}) {
        INFO("e " << e);
        std::vector<uint8_t> b(17);
        b[0] = static_cast<uint8_t>(e);
        for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
        std::vector<float> want(32);
        const double scale = std::ldexp(1.0, e - 127);  // E8M0: 2^(e - 127), e = 0 included
        for (int j = 0; j < 16; ++j) {
            want[j] = static_cast<float>(kE2M1[j] * scale);
            want[j + 16] = static_cast<float>(kE2M1[15 - j] * scale);
        }
        check_bits(dequant(TensorType::MXFP4, b, 32), want);
    }
}

TEST_CASE("dequantize NVFP4 by hand: E2M1 values times an unsigned E4M3 scale per 16", "[kernels]") {
    // E4M3 (bias 7): 0x38 = 1, 0x3C = 1.5, 0x01 = 2^-9 (subnormal), 0x7E = 448 (the largest);
    // 0x00 and 0x7F (NaN in E4M3) read as 0, and the sign bit is ignored.
    struct Case {
        uint8_t byte;
        double value;
    };
    const Case cases[] = {{0x38, 1.0},
                          {0x3C, 1.5},
                          {0x01, std::ldexp(1.0, -9)},
                          {0x07, 7 * std::ldexp(1.0, -9)},
                          {0x08, std::ldexp(1.0, -6)},
                          {0x7E, 448.0},
                          {0x00, 0.0},
                          {0x7F, 0.0},
                          {0xB8, 1.0}};
    for (const Case &k : cases) {
        INFO("scale byte " << int(k.byte));
        std::vector<uint8_t> b(36);
        const uint8_t others[4] = {0x38, 0x40, 0x30, 0x48};  // 1, 2, 0.5, 4 on the other sub-blocks
        for (int s = 0; s < 4; ++s) b[s] = s == 2 ? k.byte : others[s];
        for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<uint8_t>((j % 16) | ((15 - j % 16) << 4));
        std::vector<float> want(64);
        for (int s = 0; s < 4; ++s) {
            const double d = s == 2 ? k.value : std::ldexp(1.0, s == 0 ? 0 : s == 1 ? 1 : 2);
            for (int j = 0; j < 8; ++j) {
                const int q = (8 * s + j) % 16;
                want[16 * s + j] = static_cast<float>(kE2M1[q] * d);
                want[16 * s + j + 8] = static_cast<float>(kE2M1[15 - q] * d);
            }
        }
        check_bits(dequant(TensorType::NVFP4, b, 64), want);
    }
}

TEST_CASE("low-bit dots: every ISA gives the scalar bits on extreme blocks", "[kernels]") {
    const TensorType types[] = {TensorType::TQ1_0, TensorType::TQ2_0, TensorType::MXFP4,
                                TensorType::NVFP4, TensorType::Q1_0,  TensorType::Q2_0};
    const KernelTable &ref = kernels_scalar();
    for (TensorType t : types) {
        const TypeInfo ti = type_info(t);
        const int64_t n = 1024;
        const uint64_t nb = n / ti.block;
        std::mt19937 g(11 + static_cast<uint32_t>(t));
        std::uniform_int_distribution<int> byte(0, 255);
        std::normal_distribution<float> N(0.0f, 1.0f);
        // The scale fields: where they are, and the extremes of each encoding.
        const std::vector<int> f16_at = test::f16_fields(t);  // MXFP4 and NVFP4: byte scales, below
        const uint16_t f16_extremes[] = {0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF, 0x3C00};
        const uint8_t e8m0_extremes[] = {0, 1, 2, 127, 200, 254, 255};
        const uint8_t ue4m3_extremes[] = {0x00, 0x7F, 0x80, 0xFF, 0x01, 0x7E, 0x38};
        for (int variant = 0; variant < 4; ++variant) {
            // 0: random quants; 1: every quant byte 0xFF (max indices, TQ2_0's unused 3); 2: 0x88
            // (E2M1 negative zeros); 3: zeros. Each block's scales cycle through the extremes.
            std::vector<uint8_t> w(nb * ti.bytes);
            for (auto &v : w)
                v = variant == 0 ? static_cast<uint8_t>(byte(g)) : variant == 1 ? 0xFF : variant == 2 ? 0x88 : 0;
            for (uint64_t b = 0; b < nb; ++b) {
                uint8_t *blk = w.data() + b * ti.bytes;
                if (t == TensorType::MXFP4) {
                    blk[0] = e8m0_extremes[(b + variant) % std::size(e8m0_extremes)];
                } else if (t == TensorType::NVFP4) {
                    for (int s = 0; s < 4; ++s)
                        blk[s] = ue4m3_extremes[(4 * b + s + variant) % std::size(ue4m3_extremes)];
                } else {
                    const uint16_t h = f16_extremes[(b + variant) % std::size(f16_extremes)];
                    for (int at : f16_at) test::put_u16(blk + at, h);
                }
            }
            std::vector<float> x(n);
            for (float &v : x) v = N(g);
            if (variant == 3) x.assign(n, 0.0f);  // all-zero activations: d = 0 blocks
            std::vector<uint8_t> a(act_row_bytes(vec_dot_type(t), n));
            quantize_act_row(vec_dot_type(t), x.data(), a.data(), n);
            const float r = ref.fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
            for (const KernelTable *isa : kernels_available()) {
                INFO(isa->isa << " " << type_name(t) << " variant " << variant << ": " << r);
                REQUIRE(isa->fn[static_cast<uint32_t>(t)] != nullptr);
                const float s = isa->fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                if (std::isnan(r))
                    CHECK(std::isnan(s));
                else
                    CHECK(f32_to_bits(s) == f32_to_bits(r));
            }
        }
    }
}

TEST_CASE("low-bit tiles: every ISA's gemm and gemv tiles give the single dot's bits on extreme blocks", "[kernels]") {
    const TensorType types[] = {TensorType::TQ1_0, TensorType::TQ2_0, TensorType::MXFP4,
                                TensorType::NVFP4, TensorType::Q1_0,  TensorType::Q2_0};
    const int64_t n = 1024;
    // 16 rows: one packed group. With n = 1024, every E8M0 and UE4M3 scale byte occurs in some row.
    constexpr int kRows = kPackRows;
    int checked = 0;
    for (TensorType t : types) {
        const TypeInfo ti = type_info(t);
        const uint64_t nb = n / ti.block, rb = nb * ti.bytes;
        std::mt19937 g(23 + static_cast<uint32_t>(t));
        std::uniform_int_distribution<int> byte(0, 255);
        std::normal_distribution<float> N(0.0f, 1.0f);
        const int f16_at = t == TensorType::TQ1_0 ? 52 : t == TensorType::TQ2_0 ? 64 : 0;
        const uint16_t f16_extremes[] = {0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF, 0x3C00, 0x0400, 0x2E66};
        for (int variant = 0; variant < 4; ++variant) {
            // Quants as in the single-dot test above; each row's scales walk through every encoding.
            std::vector<uint8_t> w(rb * kRows);
            for (auto &v : w)
                v = variant == 0 ? static_cast<uint8_t>(byte(g)) : variant == 1 ? 0xFF : variant == 2 ? 0x88 : 0;
            for (int r = 0; r < kRows; ++r)
                for (uint64_t b = 0; b < nb; ++b) {
                    uint8_t *blk = w.data() + r * rb + b * ti.bytes;
                    if (t == TensorType::MXFP4) {
                        blk[0] = static_cast<uint8_t>(32 * r + b + variant);
                    } else if (t == TensorType::NVFP4) {
                        for (int s = 0; s < 4; ++s) blk[s] = static_cast<uint8_t>(64 * r + 4 * b + s + variant);
                    } else {
                        const uint16_t h = f16_extremes[(r + b + variant) % std::size(f16_extremes)];
                        std::memcpy(blk + f16_at, &h, 2);
                    }
                }
            // The same rows in the packed layout (repack.h), for the tables with packed tiles.
            std::vector<uint8_t> packed(w.size());
            pack_group(t, w.data(), rb, n, packed.data());
            for (const KernelTable *isa : kernels_available())
                for (const GemmKernel *kind : {isa->gemm, isa->gemv, isa->packed_gemm, isa->packed_gemv}) {
                    const GemmKernel &gk = kind[static_cast<uint32_t>(t)];
                    const bool on_packed = kind == isa->packed_gemm || kind == isa->packed_gemv;
                    if (!gk.fn || (!on_packed && isa->act_sums[static_cast<uint32_t>(t)])) continue;
                    const VecDotFn dot = isa->fn[static_cast<uint32_t>(t)];
                    const uint64_t ab =
                        on_packed ? packed_act_row_bytes(t, n) : act_row_bytes(vec_dot_type(t), n);
                    std::vector<uint8_t> a(ab * gk.rn);
                    std::vector<float> x(n);
                    for (int p = 0; p < gk.rn; ++p) {
                        for (float &v : x) v = variant == 3 ? 0.0f : N(g);
                        quantize_act_row(vec_dot_type(t), x.data(), a.data() + p * ab, n);
                        if (on_packed) packed_act_sums(t, a.data() + p * ab, n);
                    }
                    // All rows, rm at a time (the last tile may be a narrower edge tile).
                    std::vector<float> y(static_cast<size_t>(kRows) * gk.rn, -1.0f);
                    for (int r0 = 0; r0 < kRows; r0 += gk.rm)
                        gk.fn(n, (on_packed ? packed : w).data() + r0 * rb, rb, std::min(gk.rm, kRows - r0), a.data(), ab, gk.rn,
                              y.data() + r0, kRows);
                    for (int r = 0; r < kRows; ++r)
                        for (int p = 0; p < gk.rn; ++p) {
                            const float want = dot(n, w.data() + r * rb, a.data() + p * ab), got = y[p * kRows + r];
                            INFO(isa->isa << " " << type_name(t) << " variant " << variant << " tile " << gk.rm << "x"
                                          << gk.rn << " row " << r << " position " << p << ": " << want);
                            if (std::isnan(want))
                                CHECK(std::isnan(got));
                            else
                                CHECK(f32_to_bits(got) == f32_to_bits(want));
                            ++checked;
                        }
                }
        }
    }
    if (checked == 0) SUCCEED("this CPU has no low-bit tiles");
}
