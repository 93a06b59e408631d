// The grid-quantized IQ types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): every ISA's dot
// against the scalar reference bit for bit (the reference fixes the float order, ref_iq.cpp), on
// random blocks and on the corners: zero scales, every index/sign/scale bit set, negative-zero d,
// activations at ±127; and the dequantizer against the dot (an independent decode of the scales).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/kernel_table.h"
#include "kernel_test_blocks.h"

using namespace llm;

namespace {

const TensorType kIqTypes[] = {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
                               TensorType::IQ3_S,   TensorType::IQ1_S,  TensorType::IQ1_M};

// Sets a block's f16 scale: the first two bytes, except IQ1_M's (test::put_iq1m_d).
void set_d(TensorType t, uint8_t *blk, uint16_t h) {
    if (t == TensorType::IQ1_M)
        test::put_iq1m_d(blk, h);
    else
        test::put_u16(blk, h);
}

// Subnormal: d_w·d_x = 2^-149, so every product by 1/8 (IQ1's shift term) rounds: a kernel that fuses
// it into the final add where the reference rounds it first gives other bits.
enum class Corner { Random, ZeroScales, AllBits, NegZero, Subnormal };

std::vector<uint8_t> make_row(TensorType t, int64_t n, std::mt19937 &g, Corner c) {
    const TypeInfo ti = type_info(t);
    std::vector<uint8_t> row(row_bytes(t, n));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> U(0.001f, 0.05f);
    for (auto &b : row) b = static_cast<uint8_t>(c == Corner::AllBits ? 0xFF : byte(g));
    for (uint64_t b = 0; b < row.size() / ti.bytes; ++b) {
        uint8_t *blk = row.data() + b * ti.bytes;
        uint16_t d = f32_to_fp16(U(g) * (byte(g) & 1 ? 1.0f : -1.0f));
        if (c == Corner::NegZero) d = 0x8000;
        if (c == Corner::Subnormal) d = 0x0001;  // 2^-24
        if (c == Corner::AllBits) d = 0x3C00;
        if (c == Corner::ZeroScales) {
            // d = 0 and every sub-block scale field 0 (integer scale 1): only the products' signs remain.
            d = 0;
            if (t == TensorType::IQ2_XS || t == TensorType::IQ2_S) std::memset(blk + ti.bytes - 8, 0, 8);
            if (t == TensorType::IQ3_S) std::memset(blk + ti.bytes - 4, 0, 4);
            if (t == TensorType::IQ1_M) std::memset(blk + 48, 0, 8);
        }
        set_d(t, blk, d);
    }
    return row;
}

std::vector<uint8_t> make_q8k(int64_t n, std::mt19937 &g, bool extreme) {
    std::vector<uint8_t> a(act_row_bytes(TensorType::Q8_K, n));
    std::normal_distribution<float> N(0.0f, 1.0f);
    std::vector<float> x(n);
    std::bernoulli_distribution coin(0.5);
    for (float &v : x) v = extreme ? (coin(g) ? 1.0f : -1.0f) : N(g);  // extreme: every quant ±127
    quantize_act_row(TensorType::Q8_K, x.data(), a.data(), n);
    return a;
}

}  // namespace

TEST_CASE("IQ grid types: every ISA's dot gives the scalar reference's bits", "[kernels]") {
    const KernelTable &ref = kernels_scalar();
    for (const KernelTable *isa : kernels_available())
        for (TensorType t : kIqTypes)
            for (int64_t n : {256, 512, 4096})
                for (Corner c :
                     {Corner::Random, Corner::ZeroScales, Corner::AllBits, Corner::NegZero, Corner::Subnormal}) {
                    INFO(isa->isa << " " << type_name(t) << " n " << n << " corner " << static_cast<int>(c));
                    const auto fn = isa->fn[static_cast<uint32_t>(t)];
                    REQUIRE(fn != nullptr);
                    std::mt19937 g(31 + static_cast<uint32_t>(n) + 7 * static_cast<uint32_t>(t) +
                                   static_cast<uint32_t>(c));
                    // Subnormal: the IQ1 kernels differ from a fused final add only on a tie (~1 row in 16).
                    const int reps = c == Corner::Subnormal ? 32 : 4;
                    for (int rep = 0; rep < reps; ++rep) {
                        const auto w = make_row(t, n, g, c);
                        auto a = make_q8k(n, g, rep % 2 == 1);
                        if (c == Corner::Subnormal)
                            for (int64_t b = 0; b < n / QK_K; ++b) {
                                const float d = std::ldexp(1.0f, -125);
                                std::memcpy(a.data() + b * sizeof(BlockQ8_K), &d, 4);
                            }
                        const float r = ref.fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                        const float s = fn(n, w.data(), a.data());
                        CHECK(std::isfinite(r));
                        CHECK(f32_to_bits(s) == f32_to_bits(r));
                    }
                }
}

TEST_CASE("IQ grid types: dequantized weights dot to the reference dot", "[kernels]") {
    const KernelTable &ref = kernels_scalar();
    for (TensorType t : kIqTypes)
        for (Corner c : {Corner::Random, Corner::AllBits}) {
            INFO(type_name(t) << " corner " << static_cast<int>(c));
            std::mt19937 g(5 + static_cast<uint32_t>(t));
            const int64_t n = 1024;
            const auto w = make_row(t, n, g, c);
            const auto a = make_q8k(n, g, false);
            std::vector<float> wf(n);
            dequantize_row(t, w.data(), wf.data(), n);
            const auto *y = reinterpret_cast<const BlockQ8_K *>(a.data());
            double want = 0, mag = 0;
            for (int64_t e = 0; e < n; ++e) {
                const double x = static_cast<double>(y[e / QK_K].d) * y[e / QK_K].qs[e % QK_K];
                want += wf[e] * x;
                mag += std::fabs(wf[e] * x);
            }
            const double got = ref.fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
            CHECK(std::fabs(got - want) <= 1e-5 * mag + 1e-30);
            CHECK(mag > 0);
        }
}

TEST_CASE("IQ grid types: dequantize one block by hand", "[kernels]") {
    // IQ2_XXS block: d = 1, sub-block 0: grid indices 0 (all 8s) and 255, sign bits of group 0 = 1
    // (weight 0 negative, and the parity bit makes weight 7 negative), scale field 3 -> d·3.5/4.
    uint8_t b[66] = {};
    const uint16_t one = 0x3C00;
    std::memcpy(b, &one, 2);
    b[2] = 0;    // group 0: index 0
    b[3] = 255;  // group 1: index 255 (bytes 08 19 08 08 19 2b 2b 2b)
    const uint32_t sg = 1u | (3u << 28);
    std::memcpy(b + 6, &sg, 4);
    std::vector<float> y(256);
    dequantize_row(TensorType::IQ2_XXS, b, y.data(), 256);
    const float db = 3.5f / 4.0f;
    CHECK(y[0] == -8 * db);
    CHECK(y[1] == 8 * db);
    CHECK(y[7] == -8 * db);
    CHECK(y[8] == 8 * db);
    CHECK(y[9] == 25 * db);
    CHECK(y[15] == 43 * db);
    CHECK(y[32] == 8 * (0.5f / 4.0f));  // sub-block 1: all-zero fields, index 0, scale field 0
}
