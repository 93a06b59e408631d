// Kernel tests. The dequantizers are checked against blocks built by hand: scale bytes written as
// explicit fp16 bits and quants packed by the test from the QUANTS.md layouts, with the expected
// values derived independently here (the test packs, the library unpacks). fp16/bf16 conversions are
// checked exhaustively; matmul against a double-precision reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"

using namespace llm;

namespace {

const int kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IEEE binary16 -> float from the definition, independent of fp16.h.
float half_ref(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    double v;
    if (exp == 0x1F) {
        v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    } else if (exp == 0) {
        v = std::ldexp(static_cast<double>(man), -24);
    } else {
        v = std::ldexp(static_cast<double>(1024 + man), exp - 25);
    }
    return static_cast<float>(sign ? -v : v);
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

void put16(std::vector<uint8_t> &b, size_t off, uint16_t v) {
    b[off] = static_cast<uint8_t>(v);
    b[off + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> dequant(TensorType t, const std::vector<uint8_t> &src, int64_t n) {
    std::vector<float> y(n, -12345.0f);
    dequantize_row(t, src.data(), y.data(), n);
    return y;
}

// Exact comparison, bit for bit (so -0 vs +0 and NaN payloads count).
void check_exact(const std::vector<float> &got, const std::vector<float> &want) {
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (bits(got[i]) != bits(want[i]) && !(std::isnan(got[i]) && std::isnan(want[i]))) {
            if (++bad <= 5) FAIL_CHECK("element " << i << ": got " << got[i] << ", want " << want[i]);
        }
    }
    CHECK(bad == 0);
}

// Random finite fp16 scales of moderate size, both signs, so products stay normal floats.
struct Rng {
    std::mt19937 g{12345};
    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }
    uint16_t scale() {
        return static_cast<uint16_t>((uniform(0, 1) << 15) | (uniform(8, 20) << 10) | uniform(0, 1023));
    }
    float real() { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(g); }
};

constexpr int NB = 3;  // blocks per row in the randomized checks

}  // namespace

// ---- fp16 / bf16 ----------------------------------------------------------------------------------

TEST_CASE("fp16 -> f32 is exact for every half", "[kernels]") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float got = fp16_to_f32(static_cast<uint16_t>(h)), want = half_ref(static_cast<uint16_t>(h));
        if (std::isnan(want)) {
            if (!std::isnan(got) || std::signbit(got) != std::signbit(want)) FAIL("half " << h << " NaN");
        } else if (bits(got) != bits(want)) {
            FAIL("half " << h << ": got " << got << ", want " << want);
        }
    }
    CHECK(fp16_to_f32(0x3C00) == 1.0f);
    CHECK(fp16_to_f32(0x3800) == 0.5f);
    CHECK(fp16_to_f32(0xC000) == -2.0f);
    CHECK(fp16_to_f32(0x7BFF) == 65504.0f);
    CHECK(fp16_to_f32(0x0001) == std::ldexp(1.0f, -24));
    CHECK(fp16_to_f32(0x03FF) == std::ldexp(1023.0f, -24));
    CHECK(fp16_to_f32(0x0400) == std::ldexp(1.0f, -14));
    CHECK(bits(fp16_to_f32(0x8000)) == 0x80000000u);
    CHECK(fp16_to_f32(0x7C00) == std::numeric_limits<float>::infinity());
    CHECK(fp16_to_f32(0xFC00) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("f32 -> fp16 rounds to nearest even", "[kernels]") {
    // Every non-NaN half survives the round trip.
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        if (nan) continue;
        if (f32_to_fp16(half_ref(static_cast<uint16_t>(h))) != h) FAIL("half " << h << " does not round-trip");
    }
    // Halfway between two adjacent halves (subnormal and normal): ties go to the even one, and one
    // float ulp either side decides. mid is exact: halves have 11 significant bits, floats 24.
    for (uint32_t h = 0; h < 0x7BFF; ++h) {
        for (uint32_t sign : {0u, 0x8000u}) {
            const float lo = half_ref(static_cast<uint16_t>(h | sign)),
                        hi = half_ref(static_cast<uint16_t>((h + 1) | sign));
            const float mid = (lo + hi) / 2;
            const uint32_t even = (h & 1) ? h + 1 : h;
            if (f32_to_fp16(mid) != (even | sign)) FAIL("tie after half " << h << " sign " << sign);
            if (f32_to_fp16(std::nextafter(mid, lo)) != (h | sign)) FAIL("below tie after half " << h);
            if (f32_to_fp16(std::nextafter(mid, hi)) != ((h + 1) | sign)) FAIL("above tie after half " << h);
        }
    }
    // Overflow: 65520 is the tie between 65504 (odd mantissa) and 2^16, so it rounds to infinity.
    CHECK(f32_to_fp16(65520.0f) == 0x7C00);
    CHECK(f32_to_fp16(std::nextafter(65520.0f, 0.0f)) == 0x7BFF);
    CHECK(f32_to_fp16(-65520.0f) == 0xFC00);
    CHECK(f32_to_fp16(1e10f) == 0x7C00);
    CHECK(f32_to_fp16(std::numeric_limits<float>::max()) == 0x7C00);
    CHECK(f32_to_fp16(std::numeric_limits<float>::infinity()) == 0x7C00);
    CHECK(f32_to_fp16(-std::numeric_limits<float>::infinity()) == 0xFC00);
    // Underflow: half of the smallest subnormal is a tie with 0 (even); a bit more rounds up.
    CHECK(f32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);
    CHECK(f32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
    CHECK(f32_to_fp16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp: tie between 1 and 2 -> 2
    CHECK(f32_to_fp16(1e-30f) == 0x0000);
    CHECK(f32_to_fp16(-1e-30f) == 0x8000);
    CHECK(f32_to_fp16(std::numeric_limits<float>::denorm_min()) == 0x0000);
    CHECK(f32_to_fp16(-0.0f) == 0x8000);
    CHECK(f32_to_fp16(1.0f) == 0x3C00);
    CHECK(f32_to_fp16(0.5f) == 0x3800);
    CHECK(f32_to_fp16(1.0f / 3.0f) == 0x3555);
    // The largest subnormal / smallest normal boundary.
    CHECK(f32_to_fp16(std::ldexp(1023.5f, -24)) == 0x0400);  // tie, 1023 odd -> 1024 = smallest normal
    for (float nan : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                      from_bits(0x7F800001), from_bits(0x7FBFFFFF)}) {
        const uint16_t h = f32_to_fp16(nan);
        CHECK((h & 0x7C00) == 0x7C00);
        CHECK((h & 0x3FF) != 0);
        CHECK((h >> 15) == (bits(nan) >> 31));
    }
    // Random floats in range land on a nearest half.
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
        // Float exponents 100..142: from below the smallest half subnormal up to 2^16.
        const uint32_t e = 100 + rng() % 43;
        const float x = from_bits((rng() & 0x807FFFFFu) | (e << 23));
        if (std::fabs(x) >= 65504.0f) continue;
        const uint16_t h = f32_to_fp16(x);
        const double err = std::fabs(static_cast<double>(x) - half_ref(h));
        for (int d : {-1, 1}) {
            const int m = (h & 0x7FFF) + d;
            if (m < 0 || m > 0x7BFF) continue;
            const double other = std::fabs(static_cast<double>(x) - half_ref(static_cast<uint16_t>((h & 0x8000) | m)));
            if (err > other) FAIL("x = " << x << " rounded to " << h << " but a neighbour is nearer");
        }
    }
}

TEST_CASE("bf16 conversions", "[kernels]") {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        const float f = bf16_to_f32(static_cast<uint16_t>(b));
        if (bits(f) != b << 16) FAIL("bf16 " << b);
        const bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
        if (!nan && f32_to_bf16(f) != b) FAIL("bf16 " << b << " does not round-trip");
    }
    CHECK(bf16_to_f32(0x3F80) == 1.0f);
    CHECK(bf16_to_f32(0xC040) == -3.0f);
    CHECK(bf16_to_f32(0x0001) == std::ldexp(1.0f, -133));  // smallest bf16 subnormal
    // Ties to even on the 16 dropped bits, and one ulp either side.
    for (uint32_t b = 0; b < 0x7F7F; b += 37) {
        for (uint32_t sign : {0u, 0x8000u}) {
            const uint32_t base = (b | sign) << 16;
            const uint32_t even = ((b & 1) ? b + 1 : b) | sign;
            CHECK(f32_to_bf16(from_bits(base | 0x8000)) == even);
            CHECK(f32_to_bf16(from_bits(base | 0x7FFF)) == (b | sign));
            CHECK(f32_to_bf16(from_bits(base | 0x8001)) == ((b + 1) | sign));
        }
    }
    CHECK(f32_to_bf16(from_bits(0x3F808000)) == 0x3F80);
    CHECK(f32_to_bf16(from_bits(0x3F818000)) == 0x3F82);
    CHECK(f32_to_bf16(from_bits(0x7F7FFFFF)) == 0x7F80);  // FLT_MAX rounds up to infinity
    CHECK(f32_to_bf16(from_bits(0x00008000)) == 0x0000);  // subnormal tie -> even (0)
    CHECK(f32_to_bf16(from_bits(0x00018000)) == 0x0002);
    CHECK(f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
    CHECK(f32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
    CHECK(f32_to_bf16(-0.0f) == 0x8000);
    // NaN stays NaN and is made quiet, even when only low payload bits are set (which truncation
    // alone would turn into infinity).
    CHECK(f32_to_bf16(from_bits(0x7F800001)) == 0x7FC0);
    CHECK(f32_to_bf16(from_bits(0xFF800001)) == 0xFFC0);
    CHECK(f32_to_bf16(from_bits(0x7FC00000)) == 0x7FC0);
    CHECK(f32_to_bf16(from_bits(0x7FFFFFFF)) == 0x7FFF);
}

// ---- dequantization: plain floats and legacy blocks, literally by hand -----------------------------

TEST_CASE("dequantize F32 / F16 / BF16", "[kernels]") {
    std::vector<uint8_t> f32(4 * 3);
    const float vals[3] = {1.5f, -0.0f, 3e-40f};
    std::memcpy(f32.data(), vals, sizeof vals);
    check_exact(dequant(TensorType::F32, f32, 3), {1.5f, -0.0f, 3e-40f});

    std::vector<uint8_t> f16(2 * 8);
    const uint16_t hb[8] = {0x3C00, 0x3800, 0xC000, 0x0001, 0x7BFF, 0x8000, 0x7C00, 0x0400};
    for (int i = 0; i < 8; ++i) put16(f16, 2 * i, hb[i]);
    check_exact(dequant(TensorType::F16, f16, 8), {1.0f, 0.5f, -2.0f, std::ldexp(1.0f, -24), 65504.0f, -0.0f,
                                                   std::numeric_limits<float>::infinity(), std::ldexp(1.0f, -14)});

    std::vector<uint8_t> bf(2 * 5);
    const uint16_t bb[5] = {0x3F80, 0xC040, 0x0001, 0x7F80, 0x4049};
    for (int i = 0; i < 5; ++i) put16(bf, 2 * i, bb[i]);
    check_exact(dequant(TensorType::BF16, bf, 5),
                {1.0f, -3.0f, std::ldexp(1.0f, -133), std::numeric_limits<float>::infinity(), 3.140625f});
}

TEST_CASE("dequantize Q4_0 by hand", "[kernels]") {
    // d = 0.5; byte j holds element j (low nibble = j) and element j+16 (high nibble = 15-j).
    std::vector<uint8_t> b(18);
    put16(b, 0, 0x3800);
    for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    auto y = dequant(TensorType::Q4_0, b, 32);
    CHECK(y[0] == -4.0f);   // (0 - 8) * 0.5
    CHECK(y[8] == 0.0f);    // (8 - 8) * 0.5
    CHECK(y[15] == 3.5f);   // (15 - 8) * 0.5
    CHECK(y[16] == 3.5f);   // high nibble of byte 0 = 15
    CHECK(y[31] == -4.0f);  // high nibble of byte 15 = 0
    std::vector<float> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = (j - 8) * 0.5f;
        want[j + 16] = (7 - j) * 0.5f;
    }
    check_exact(y, want);
}

TEST_CASE("dequantize Q4_1 by hand", "[kernels]") {
    // d = 1, m = -1
    std::vector<uint8_t> b(20);
    put16(b, 0, 0x3C00);
    put16(b, 2, 0xBC00);
    for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    auto y = dequant(TensorType::Q4_1, b, 32);
    CHECK(y[0] == -1.0f);
    CHECK(y[15] == 14.0f);
    CHECK(y[16] == 14.0f);
    std::vector<float> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = j - 1.0f;
        want[j + 16] = 14.0f - j;
    }
    check_exact(y, want);
}

TEST_CASE("dequantize Q5_0 by hand", "[kernels]") {
    // d = 2; qh = 0xAAAA5555: elements 0,2,..,14 and 17,19,..,31 have the 5th bit.
    std::vector<uint8_t> b(22);
    put16(b, 0, 0x4000);
    const uint32_t qh = 0xAAAA5555u;
    for (int i = 0; i < 4; ++i) b[2 + i] = static_cast<uint8_t>(qh >> (8 * i));
    for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    auto y = dequant(TensorType::Q5_0, b, 32);
    CHECK(y[0] == 0.0f);    // (0 | 16) - 16 = 0
    CHECK(y[1] == -30.0f);  // 1 - 16 = -15, * 2
    CHECK(y[16] == -2.0f);  // 15 - 16
    CHECK(y[17] == 28.0f);  // (14 | 16) - 16 = 14
    std::vector<float> want(32);
    for (int j = 0; j < 32; ++j) {
        const int lo4 = j < 16 ? j : 15 - (j - 16);
        const int q = lo4 | (((qh >> j) & 1) << 4);
        want[j] = (q - 16) * 2.0f;
    }
    check_exact(y, want);
}

TEST_CASE("dequantize Q5_1 by hand", "[kernels]") {
    // d = 0.5, m = 1; qh = 0xFFFF0000: only elements 16..31 have the 5th bit.
    std::vector<uint8_t> b(24);
    put16(b, 0, 0x3800);
    put16(b, 2, 0x3C00);
    const uint32_t qh = 0xFFFF0000u;
    for (int i = 0; i < 4; ++i) b[4 + i] = static_cast<uint8_t>(qh >> (8 * i));
    for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    auto y = dequant(TensorType::Q5_1, b, 32);
    CHECK(y[0] == 1.0f);
    CHECK(y[15] == 8.5f);   // 15 * 0.5 + 1
    CHECK(y[16] == 16.5f);  // (15 + 16) * 0.5 + 1
    CHECK(y[31] == 9.0f);   // (0 + 16) * 0.5 + 1
    std::vector<float> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = j * 0.5f + 1.0f;
        want[j + 16] = (31 - j) * 0.5f + 1.0f;
    }
    check_exact(y, want);
}

TEST_CASE("dequantize Q8_0 by hand", "[kernels]") {
    // d = 0.25, qs = -128, -120, ..., 120
    std::vector<uint8_t> b(34);
    put16(b, 0, 0x3400);
    for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(8 * j - 128));
    auto y = dequant(TensorType::Q8_0, b, 32);
    CHECK(y[0] == -32.0f);
    CHECK(y[16] == 0.0f);
    CHECK(y[31] == 30.0f);
    std::vector<float> want(32);
    for (int j = 0; j < 32; ++j) want[j] = (8 * j - 128) * 0.25f;
    check_exact(y, want);
}

TEST_CASE("dequantize IQ4_NL by hand", "[kernels]") {
    std::vector<uint8_t> b(18);
    put16(b, 0, 0x3C00);  // d = 1: outputs are the table entries themselves
    for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    auto y = dequant(TensorType::IQ4_NL, b, 32);
    CHECK(y[0] == -127.0f);
    CHECK(y[8] == 1.0f);
    CHECK(y[15] == 113.0f);
    CHECK(y[16] == 113.0f);
    std::vector<float> want(32);
    for (int j = 0; j < 16; ++j) {
        want[j] = static_cast<float>(kIQ4NL[j]);
        want[j + 16] = static_cast<float>(kIQ4NL[15 - j]);
    }
    check_exact(y, want);
    put16(b, 0, 0xB800);  // d = -0.5
    y = dequant(TensorType::IQ4_NL, b, 32);
    CHECK(y[0] == 63.5f);
    CHECK(y[8] == -0.5f);
}

// ---- dequantization: random blocks packed by the test -----------------------------------------------

TEST_CASE("dequantize legacy blocks with random scales and quants", "[kernels]") {
    Rng r;
    for (int rep = 0; rep < 20; ++rep) {
        {  // Q4_0 / Q4_1 / IQ4_NL
            for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::IQ4_NL}) {
                const bool has_min = t == TensorType::Q4_1;
                const size_t bs = has_min ? 20 : 18, qoff = has_min ? 4 : 2;
                std::vector<uint8_t> b(bs * NB);
                std::vector<float> want(32 * NB);
                for (int i = 0; i < NB; ++i) {
                    const uint16_t d = r.scale(), m = r.scale();
                    put16(b, bs * i, d);
                    if (has_min) put16(b, bs * i + 2, m);
                    int q[32];
                    for (int &x : q) x = r.uniform(0, 15);
                    for (int j = 0; j < 16; ++j) b[bs * i + qoff + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
                    for (int e = 0; e < 32; ++e) {
                        float &w = want[32 * i + e];
                        if (t == TensorType::Q4_0) w = static_cast<float>(q[e] - 8) * half_ref(d);
                        if (t == TensorType::Q4_1) w = static_cast<float>(q[e]) * half_ref(d) + half_ref(m);
                        if (t == TensorType::IQ4_NL) w = half_ref(d) * static_cast<float>(kIQ4NL[q[e]]);
                    }
                }
                INFO(type_name(t));
                check_exact(dequant(t, b, 32 * NB), want);
            }
        }
        {  // Q5_0 / Q5_1
            for (TensorType t : {TensorType::Q5_0, TensorType::Q5_1}) {
                const bool has_min = t == TensorType::Q5_1;
                const size_t bs = has_min ? 24 : 22, hoff = has_min ? 4 : 2, qoff = hoff + 4;
                std::vector<uint8_t> b(bs * NB);
                std::vector<float> want(32 * NB);
                for (int i = 0; i < NB; ++i) {
                    const uint16_t d = r.scale(), m = r.scale();
                    put16(b, bs * i, d);
                    if (has_min) put16(b, bs * i + 2, m);
                    int q[32];
                    uint32_t qh = 0;
                    for (int e = 0; e < 32; ++e) {
                        q[e] = r.uniform(0, 31);
                        qh |= static_cast<uint32_t>(q[e] >> 4) << e;
                    }
                    for (int k = 0; k < 4; ++k) b[bs * i + hoff + k] = static_cast<uint8_t>(qh >> (8 * k));
                    for (int j = 0; j < 16; ++j) {
                        b[bs * i + qoff + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
                    }
                    for (int e = 0; e < 32; ++e) {
                        want[32 * i + e] = has_min ? static_cast<float>(q[e]) * half_ref(d) + half_ref(m)
                                                   : static_cast<float>(q[e] - 16) * half_ref(d);
                    }
                }
                INFO(type_name(t));
                check_exact(dequant(t, b, 32 * NB), want);
            }
        }
        {  // Q8_0
            std::vector<uint8_t> b(34 * NB);
            std::vector<float> want(32 * NB);
            for (int i = 0; i < NB; ++i) {
                const uint16_t d = r.scale();
                put16(b, 34 * i, d);
                for (int e = 0; e < 32; ++e) {
                    const int q = r.uniform(-128, 127);
                    b[34 * i + 2 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
                    want[32 * i + e] = static_cast<float>(q) * half_ref(d);
                }
            }
            check_exact(dequant(TensorType::Q8_0, b, 32 * NB), want);
        }
    }
}

TEST_CASE("dequantize Q2_K", "[kernels]") {
    Rng r;
    // 84 bytes: scales[16] @0 (low nibble scale, high nibble min), qs[64] @16, d @80, dmin @82.
    std::vector<uint8_t> b(84 * NB, 0);
    std::vector<float> want(256 * NB);
    for (int i = 0; i < NB; ++i) {
        uint8_t *blk = b.data() + 84 * i;
        const uint16_t d = r.scale(), dmin = r.scale();
        put16(b, 84 * i + 80, d);
        put16(b, 84 * i + 82, dmin);
        int sc[16], mn[16];
        for (int s = 0; s < 16; ++s) {
            sc[s] = r.uniform(0, 15);
            mn[s] = r.uniform(0, 15);
            blk[s] = static_cast<uint8_t>(sc[s] | (mn[s] << 4));
        }
        for (int e = 0; e < 256; ++e) {
            // element e = 128h + 32j + l sits in qs[32h + l] at bits 2j; its sub-block is e / 16
            const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
            const int q = r.uniform(0, 3);
            blk[16 + 32 * h + l] |= static_cast<uint8_t>(q << (2 * j));
            want[256 * i + e] = (half_ref(d) * static_cast<float>(sc[s])) * static_cast<float>(q) -
                                half_ref(dmin) * static_cast<float>(mn[s]);
        }
    }
    check_exact(dequant(TensorType::Q2_K, b, 256 * NB), want);
}

TEST_CASE("dequantize Q3_K", "[kernels]") {
    Rng r;
    // 110 bytes: hmask[32] @0, qs[64] @32, scales[12] @96, d @108.
    std::vector<uint8_t> b(110 * NB, 0);
    std::vector<float> want(256 * NB);
    for (int i = 0; i < NB; ++i) {
        uint8_t *blk = b.data() + 110 * i;
        const uint16_t d = r.scale();
        put16(b, 110 * i + 108, d);
        int sc[16];
        for (int s = 0; s < 16; ++s) {
            sc[s] = r.uniform(-32, 31);
            const int u = sc[s] + 32;  // 6 bits: low 4 in a nibble, high 2 in bytes 8..11
            if (s < 8) {
                blk[96 + s] |= static_cast<uint8_t>(u & 0xF);
            } else {
                blk[96 + s - 8] |= static_cast<uint8_t>((u & 0xF) << 4);
            }
            blk[96 + 8 + s % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (s / 4)));
        }
        for (int e = 0; e < 256; ++e) {
            const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
            const int q = r.uniform(-4, 3);
            // q >= 0 is stored with the high bit set, q < 0 as q + 4 with it clear
            const int lo = q >= 0 ? q : q + 4;
            blk[32 + 32 * h + l] |= static_cast<uint8_t>(lo << (2 * j));
            if (q >= 0) blk[l] |= static_cast<uint8_t>(1 << (4 * h + j));
            want[256 * i + e] = (half_ref(d) * static_cast<float>(sc[s])) * static_cast<float>(q);
        }
    }
    check_exact(dequant(TensorType::Q3_K, b, 256 * NB), want);
}

namespace {

// The 12-byte packing of eight 6-bit (scale, min) pairs shared by Q4_K and Q5_K, written forwards.
void pack_k4_scales(uint8_t *a, const int *sc, const int *mn) {
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            a[j] |= static_cast<uint8_t>(sc[j]);
            a[j + 4] |= static_cast<uint8_t>(mn[j]);
        } else {
            a[j + 4] |= static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
            a[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
            a[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
        }
    }
}

void check_q45_k(bool five) {
    Rng r;
    const size_t bs = five ? 176 : 144, qoff = five ? 48 : 16;
    std::vector<uint8_t> b(bs * NB, 0);
    std::vector<float> want(256 * NB);
    for (int i = 0; i < NB; ++i) {
        uint8_t *blk = b.data() + bs * i;
        const uint16_t d = r.scale(), dmin = r.scale();
        put16(b, bs * i, d);
        put16(b, bs * i + 2, dmin);
        int sc[8], mn[8];
        for (int j = 0; j < 8; ++j) {
            sc[j] = r.uniform(0, 63);
            mn[j] = r.uniform(0, 63);
        }
        // Extremes too, so every bit of the packing is exercised.
        if (i == 0) {
            sc[5] = mn[6] = 63;
            sc[4] = mn[7] = 0;
        }
        pack_k4_scales(blk + 4, sc, mn);
        for (int e = 0; e < 256; ++e) {
            // Sub-block j = e / 32; chunk c = e / 64 keeps sub-block 2c in low nibbles, 2c+1 in high.
            const int j = e / 32, c = e / 64, l = e % 32;
            const int q = r.uniform(0, five ? 31 : 15);
            blk[qoff + 32 * c + l] |= static_cast<uint8_t>((q & 0xF) << (j % 2 ? 4 : 0));
            if (five && (q & 16)) blk[16 + l] |= static_cast<uint8_t>(1 << j);
            want[256 * i + e] = (half_ref(d) * static_cast<float>(sc[j])) * static_cast<float>(q) -
                                half_ref(dmin) * static_cast<float>(mn[j]);
        }
    }
    check_exact(dequant(five ? TensorType::Q5_K : TensorType::Q4_K, b, 256 * NB), want);
}

}  // namespace

TEST_CASE("dequantize Q4_K", "[kernels]") { check_q45_k(false); }
TEST_CASE("dequantize Q5_K", "[kernels]") { check_q45_k(true); }

TEST_CASE("dequantize Q6_K", "[kernels]") {
    Rng r;
    // 210 bytes: ql[128] @0, qh[64] @128, scales[16] int8 @192, d @208.
    std::vector<uint8_t> b(210 * NB, 0);
    std::vector<float> want(256 * NB);
    for (int i = 0; i < NB; ++i) {
        uint8_t *blk = b.data() + 210 * i;
        const uint16_t d = r.scale();
        put16(b, 210 * i + 208, d);
        int sc[16];
        for (int s = 0; s < 16; ++s) {
            sc[s] = r.uniform(-128, 127);
            blk[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(sc[s]));
        }
        for (int e = 0; e < 256; ++e) {
            // Half h = e / 128; in it group g = (e % 128) / 32 takes its low 4 bits from
            // ql[64h + l + 32 (g odd)] (low nibble for g < 2, high for g >= 2) and its high 2 bits
            // from qh[32h + l] at bits 2g. Scale index = e / 16.
            const int h = e / 128, g = (e % 128) / 32, l = e % 32;
            const int q = r.uniform(-32, 31), u = q + 32;
            blk[64 * h + l + (g % 2 ? 32 : 0)] |= static_cast<uint8_t>((u & 0xF) << (g >= 2 ? 4 : 0));
            blk[128 + 32 * h + l] |= static_cast<uint8_t>((u >> 4) << (2 * g));
            want[256 * i + e] = (half_ref(d) * static_cast<float>(sc[e / 16])) * static_cast<float>(q);
        }
    }
    check_exact(dequant(TensorType::Q6_K, b, 256 * NB), want);
}

TEST_CASE("dequantize IQ4_XS", "[kernels]") {
    Rng r;
    // 136 bytes: d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8.
    std::vector<uint8_t> b(136 * NB, 0);
    std::vector<float> want(256 * NB);
    for (int i = 0; i < NB; ++i) {
        uint8_t *blk = b.data() + 136 * i;
        const uint16_t d = r.scale();
        put16(b, 136 * i, d);
        int ls[8];
        uint16_t scales_h = 0;
        for (int s = 0; s < 8; ++s) {
            ls[s] = r.uniform(0, 63);
            blk[4 + s / 2] |= static_cast<uint8_t>((ls[s] & 0xF) << (4 * (s % 2)));
            scales_h |= static_cast<uint16_t>((ls[s] >> 4) << (2 * s));
        }
        put16(b, 136 * i + 2, scales_h);
        for (int e = 0; e < 256; ++e) {
            const int s = e / 32, k = e % 32;
            const int q = r.uniform(0, 15);
            blk[8 + 16 * s + k % 16] |= static_cast<uint8_t>(q << (k < 16 ? 0 : 4));
            const float dl = half_ref(d) * static_cast<float>(ls[s] - 32);
            want[256 * i + e] = dl * static_cast<float>(kIQ4NL[q]);
        }
    }
    check_exact(dequant(TensorType::IQ4_XS, b, 256 * NB), want);
}

TEST_CASE("dequantize_row rejects types it cannot decode", "[kernels]") {
    std::vector<uint8_t> b(1024);
    std::vector<float> y(256);
    for (TensorType t : {TensorType::Q8_1, TensorType::Q8_K, TensorType::I32}) {
        INFO(type_name(t));
        CHECK_FALSE(type_supported(t));
        try {
            dequantize_row(t, b.data(), y.data(), 256);
            FAIL("no error");
        } catch (const Error &e) {
            CHECK(e.status() == LLM_ERR_UNSUPPORTED);
        }
    }
    CHECK(type_supported(TensorType::Q6_K));
    CHECK(type_supported(TensorType::BF16));
}

// ---- matmul -------------------------------------------------------------------------------------------

namespace {

// A weight in its encoded form plus the exact values it decodes to (computed here, not by dequant).
struct TestWeight {
    TensorType type;
    int64_t n_in, n_out;
    uint64_t row_bytes;
    std::vector<uint8_t> data;
    std::vector<float> values;  // [n_out][n_in]

    WeightView view() const { return {type, data.data(), n_in, n_out, row_bytes}; }
};

// Simple per-block quantizers (not llama.cpp's): what matters is that values[] is what they encode.
TestWeight make_weight(TensorType t, int64_t n_in, int64_t n_out, uint32_t seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    TestWeight w{t, n_in, n_out, row_bytes(t, n_in), {}, {}};
    w.data.resize(w.row_bytes * n_out);
    w.values.resize(n_in * n_out);
    for (int64_t o = 0; o < n_out; ++o) {
        uint8_t *row = w.data.data() + o * w.row_bytes;
        float *val = w.values.data() + o * n_in;
        std::vector<float> src(n_in);
        for (float &x : src) x = U(g);
        if (t == TensorType::F32) {
            std::memcpy(row, src.data(), n_in * 4);
            std::memcpy(val, src.data(), n_in * 4);
        } else if (t == TensorType::F16) {
            for (int64_t k = 0; k < n_in; ++k) {
                const uint16_t h = f32_to_fp16(src[k]);
                std::memcpy(row + 2 * k, &h, 2);
                val[k] = half_ref(h);
            }
        } else if (t == TensorType::Q8_0 || t == TensorType::Q4_0) {
            const bool q8 = t == TensorType::Q8_0;
            const size_t bs = q8 ? 34 : 18;
            for (int64_t blk = 0; blk < n_in / 32; ++blk) {
                const float *x = src.data() + 32 * blk;
                uint8_t *out = row + bs * blk;
                float amax = 0, vmax = 0;
                for (int k = 0; k < 32; ++k) {
                    if (std::fabs(x[k]) > amax) amax = std::fabs(x[k]), vmax = x[k];
                }
                const uint16_t dh = f32_to_fp16(q8 ? amax / 127 : vmax / -8);
                const float d = half_ref(dh);
                std::memcpy(out, &dh, 2);
                for (int k = 0; k < 32; ++k) {
                    if (q8) {
                        const int q = static_cast<int>(std::lround(std::clamp(x[k] / d, -127.0f, 127.0f)));
                        out[2 + k] = static_cast<uint8_t>(static_cast<int8_t>(q));
                        val[32 * blk + k] = static_cast<float>(q) * d;
                    } else {
                        const int q = std::clamp(static_cast<int>(std::lround(x[k] / d)) + 8, 0, 15);
                        out[2 + k % 16] |= static_cast<uint8_t>(q << (k < 16 ? 0 : 4));
                        val[32 * blk + k] = static_cast<float>(q - 8) * d;
                    }
                }
            }
        }
    }
    return w;
}

}  // namespace

TEST_CASE("matmul matches a double-precision reference; batched rows match single rows", "[kernels]") {
    const TensorType t = GENERATE(TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_0);
    // 4128: F16 rows long enough that the tiles read repacked copies (matmul.cpp), with a 32-element tail.
    const int64_t n_in = GENERATE(32, 96, 1024, 4128);
    const int64_t n_out = 13;
    INFO(type_name(t) << " n_in " << n_in);
    const TestWeight w = make_weight(t, n_in, n_out, 99 + static_cast<uint32_t>(n_in));

    // The decoded weight values are what dequantize_row produces, exactly.
    std::vector<float> row(n_in);
    for (int64_t o = 0; o < n_out; ++o) {
        dequantize_row(t, w.data.data() + o * w.row_bytes, row.data(), n_in);
        REQUIRE(std::memcmp(row.data(), w.values.data() + o * n_in, n_in * 4) == 0);
    }

    constexpr int64_t P = 3;
    std::mt19937 g(5);
    std::uniform_real_distribution<float> U(-2.0f, 2.0f);
    std::vector<float> x(P * n_in);
    for (float &v : x) v = U(g);

    std::vector<float> y(P * n_out, -1.0f);
    matmul(w.view(), x.data(), P, y.data(), nullptr);

    // matmul works like llama.cpp's CPU backend (QUANTS.md §5): x is first converted to the weight's
    // vec_dot_type — kept as f32 for F32, rounded to f16 for F16, quantized to Q8_0 blocks for Q8_0 and
    // Q4_0. The bound below holds for any correct conversion (whichever rounding variant is used):
    // f16 rounding moves each x by at most 2^-11 relative; a Q8_0 block with scale d = amax/127 moves
    // each x by at most d/2, plus up to 127·|d - fp16(d)| <= 127·d·2^-11 because the stored scale is
    // rounded to f16 after the quants were computed.
    for (int64_t p = 0; p < P; ++p) {
        const float *xp = x.data() + p * n_in;
        std::vector<double> x_err(n_in, 0.0);  // the largest conversion error of each x
        for (int64_t k = 0; k < n_in; ++k) {
            if (t == TensorType::F16) x_err[k] = std::fabs(xp[k]) * std::ldexp(1.0, -11);
        }
        if (t == TensorType::Q8_0 || t == TensorType::Q4_0) {
            for (int64_t b = 0; b < n_in / 32; ++b) {
                double amax = 0;
                for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(static_cast<double>(xp[32 * b + k])));
                const double d = amax / 127;
                for (int k = 0; k < 32; ++k) x_err[32 * b + k] = d * (0.5 + 127 * std::ldexp(1.0, -11)) * 1.001;
            }
        }
        for (int64_t o = 0; o < n_out; ++o) {
            double ref = 0, mag = 0, conv = 0;
            for (int64_t k = 0; k < n_in; ++k) {
                const double wk = w.values[o * n_in + k];
                ref += wk * xp[k];
                mag += std::fabs(wk * xp[k]);
                conv += std::fabs(wk) * x_err[k];
            }
            // f32 accumulation: the error grows at most ~ n * eps relative to sum |w x|.
            const double tol = 1e-7 * static_cast<double>(n_in) * (mag + conv) + conv + 1e-30;
            if (std::fabs(y[p * n_out + o] - ref) > tol) {
                FAIL_CHECK("p " << p << " o " << o << ": " << y[p * n_out + o] << " vs " << ref << " (tolerance " << tol
                                << ")");
            }
        }
    }

    // Each activation row alone (P = 1) gives exactly the batched result.
    for (int64_t p = 0; p < P; ++p) {
        std::vector<float> y1(n_out, -1.0f);
        matmul(w.view(), x.data() + p * n_in, 1, y1.data(), nullptr);
        CHECK(std::memcmp(y1.data(), y.data() + p * n_out, n_out * 4) == 0);
    }

    // Threads split the rows; the values do not change.
    ThreadPool pool(3);
    std::vector<float> yt(P * n_out, -1.0f);
    matmul(w.view(), x.data(), P, yt.data(), &pool);
    CHECK(std::memcmp(yt.data(), y.data(), y.size() * 4) == 0);

    // A row range (the streamed LM head) equals the same slice of the full product.
    const int64_t r0 = 4, r1 = 11;
    std::vector<float> ys(P * (r1 - r0), -1.0f);
    matmul_rows(w.view(), r0, r1, x.data(), P, ys.data(), r1 - r0);
    for (int64_t p = 0; p < P; ++p) {
        CHECK(std::memcmp(ys.data() + p * (r1 - r0), y.data() + p * n_out + r0, (r1 - r0) * 4) == 0);
    }
}

TEST_CASE("packed weights: matmul gives the bits of the file layout, any P, any threads", "[kernels]") {
    const int64_t n_in = GENERATE(96, 1024);
    const int64_t n_out = 80;  // five groups: uneven across 3 threads
    INFO("n_in " << n_in);
    const TestWeight w = make_weight(TensorType::Q4_0, n_in, n_out, 7 + static_cast<uint32_t>(n_in));
    if (!packable(TensorType::Q4_0, n_in, n_out)) {
        SUCCEED("the active kernels have no packed Q4_0");
        return;
    }
    std::vector<uint8_t> data = w.data;
    REQUIRE(pack_weights(TensorType::Q4_0, data.data(), n_in, n_out));
    REQUIRE(data != w.data);
    REQUIRE(data.size() == w.data.size());
    WeightView pv = w.view();
    pv.data = data.data();
    pv.packed = true;
    CHECK_FALSE(pack_weights(TensorType::Q4_0, data.data(), n_in, n_out - 8));  // not whole groups: left alone

    std::mt19937 g(11);
    std::uniform_real_distribution<float> U(-2.0f, 2.0f);
    ThreadPool pool(3);
    for (int64_t P : {1, 2, 13, 40}) {
        INFO("P " << P);
        std::vector<float> x(P * n_in);
        for (float &v : x) v = U(g);
        std::vector<float> want(P * n_out), got(P * n_out, -1.0f), got_t(P * n_out, -1.0f);
        // The file layout row by row, one position at a time: the decode path of an unpacked tensor.
        for (int64_t p = 0; p < P; ++p) matmul(w.view(), x.data() + p * n_in, 1, want.data() + p * n_out, nullptr);
        matmul(pv, x.data(), P, got.data(), nullptr);
        matmul(pv, x.data(), P, got_t.data(), &pool);
        CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
        CHECK(std::memcmp(got_t.data(), want.data(), want.size() * 4) == 0);
    }
}

TEST_CASE("dot_f32 against double", "[kernels]") {
    std::mt19937 g(3);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 1000}) {
        std::vector<float> a(n), b(n);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            a[i] = U(g);
            b[i] = U(g);
            ref += static_cast<double>(a[i]) * b[i];
            mag += std::fabs(static_cast<double>(a[i]) * b[i]);
        }
        INFO("n " << n);
        CHECK(std::fabs(dot_f32(a.data(), b.data(), n) - ref) <= 1e-7 * static_cast<double>(n) * mag);
    }
}
