// Every vec_dot path this CPU can run against the scalar reference, the activation quantizers
// against hand-checked values, and matmul's batching/threading invariants.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/dequant.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"
#include "kernels/ref_iq.h"
#include "kernels/repack.h"
#include "kernels/kernel_table.h"
#include "kernel_test_blocks.h"

using namespace llm;

namespace {

using test::is_float;
using test::kKernelTypes;
using test::put_float;

// Random f16 scales of either sign, 0.001 to 0.05 in magnitude (test::make_weights).
std::vector<uint8_t> make_weights(TensorType t, int64_t n, std::mt19937 &g, bool exact) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> U(0.001f, 0.05f);
    return test::make_weights(t, n, g, exact,
                              [&](std::mt19937 &r) { return f32_to_fp16(U(r) * (byte(r) & 1 ? 1 : -1)); });
}

// An activation row in vec_dot_type(t) form: exact, test::make_exact_acts; else N(0, 1) quantized.
std::vector<uint8_t> make_acts(TensorType t, int64_t n, std::mt19937 &g, bool exact) {
    if (exact) return test::make_exact_acts(t, n, g);
    const TensorType vdt = vec_dot_type(t);
    std::vector<uint8_t> a(act_row_bytes(vdt, n));
    std::normal_distribution<float> N(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float &v : x) v = N(g);
    quantize_act_row(vdt, x.data(), a.data(), n);
    return a;
}

// Σ |w_e|·|x_e| + max|w|·Σ|x_e|: the scale of the float rounding in any summation order (the second
// term covers the min/offset parts of Q4_1/Q5_1/K-quants, which cancel against the scaled quants).
double magnitude(TensorType t, const uint8_t *w, const uint8_t *a, int64_t n) {
    std::vector<float> wf(n), xf(n);
    dequantize_row(t, w, wf.data(), n);
    const TensorType vdt = vec_dot_type(t);
    if (vdt == TensorType::Q8_1) {
        auto *b = reinterpret_cast<const BlockQ8_1 *>(a);
        for (int64_t i = 0; i < n; ++i) xf[i] = fp16_to_f32(b[i / QK].d) * b[i / QK].qs[i % QK];
    } else if (vdt == TensorType::Q8_K) {
        auto *b = reinterpret_cast<const BlockQ8_K *>(a);
        for (int64_t i = 0; i < n; ++i) xf[i] = b[i / QK_K].d * b[i / QK_K].qs[i % QK_K];
    } else {
        dequantize_row(vdt, a, xf.data(), n);
    }
    double s = 0, wmax = 0, xs = 0;
    for (int64_t i = 0; i < n; ++i) {
        s += std::fabs(static_cast<double>(wf[i]) * xf[i]);
        wmax = std::max(wmax, static_cast<double>(std::fabs(wf[i])));
        xs += std::fabs(xf[i]);
    }
    return s + wmax * xs;
}

std::vector<int64_t> shapes(TensorType t) {
    if (is_float(t)) return {1, 7, 32, 33, 100, 256, 1000, 4096};
    if (type_info(t).block == 32) return {32, 96, 256, 4096};
    return {256, 512, 4096};
}

float bits_f(uint32_t u) { return bits_to_f32(u); }

}  // namespace

TEST_CASE("kernel tables: each ISA claims every (kind, type) once", "[kernels]") {
    for (const KernelTable *isa : kernels_available()) {
        INFO(isa->isa);
        CHECK(isa->clashes == 0);
    }

    // The check itself: a second claim of an entry keeps the first and counts a clash.
    KernelTable t = kernels_scalar();
    KernelClaims k(t);
    const GemmFn first = [](int64_t, const void *, uint64_t, int, const void *, uint64_t, int, float *, int64_t) {};
    const GemmFn second = [](int64_t, const void *, uint64_t, int, const void *, uint64_t, int, float *, int64_t) {};
    k.gemm(tid::Q8_0, {first, 2, 2});
    CHECK(t.clashes == 0);
    k.gemm(tid::Q8_0, {second, 4, 4});
    CHECK(t.clashes == 1);
    CHECK(t.gemm[tid::Q8_0].fn == first);
    CHECK(t.gemm[tid::Q8_0].rm == 2);
    const VecDotFn dot = [](int64_t, const void *, const void *) { return 0.0f; };
    k.dot(tid::Q4_K, dot);  // the scalar default is still there: a first claim
    CHECK(t.clashes == 1);
    k.dot(tid::Q4_K, dot);
    k.act_sums(tid::Q4_0);
    k.act_sums(tid::Q4_0);
    CHECK(t.clashes == 3);
    k.dot(kTensorTypeCount, dot);  // out of range: counted, not written
    CHECK(t.clashes == 4);
    // A repack without the tiles that read its order: counted, not written.
    const WeightRowFn repack = [](const void *, void *, int64_t) {};
    k.gemm(tid::F16, {first, 2, 2, nullptr, repack, nullptr});
    CHECK(t.clashes == 5);
    CHECK(t.gemm[tid::F16].fn == kernels_scalar().gemm[tid::F16].fn);
    k.gemm(tid::F16, {first, 2, 2, nullptr, nullptr, second});
    CHECK(t.clashes == 6);
    k.gemm(tid::F16, {first, 2, 2, nullptr, repack, second});
    CHECK(t.clashes == 6);
    CHECK(t.gemm[tid::F16].repack == repack);
    // The same check for every kind of tile claim.
    k.gemv(tid::F16, {first, 2, 2, nullptr, repack, nullptr});
    k.packed_gemm(tid::Q4_0, {first, 2, 2, nullptr, nullptr, second});
    k.packed_gemv(tid::Q4_0, {first, 2, 2, nullptr, repack, nullptr});
    CHECK(t.clashes == 9);
    CHECK(t.gemv[tid::F16].fn == kernels_scalar().gemv[tid::F16].fn);
    CHECK(t.packed_gemm[tid::Q4_0].fn == kernels_scalar().packed_gemm[tid::Q4_0].fn);
    CHECK(t.packed_gemv[tid::Q4_0].fn == kernels_scalar().packed_gemv[tid::Q4_0].fn);
}

TEST_CASE("vec_dot paths: integer parts agree exactly with the scalar reference", "[kernels]") {
    const KernelTable &ref = kernels_scalar();
    for (const KernelTable *isa : kernels_available()) {
        for (TensorType t : kKernelTypes) {
            const int64_t n = is_float(t) ? 999 : 256;
            INFO(isa->isa << " " << type_name(t));
            REQUIRE(isa->fn[static_cast<uint32_t>(t)] != nullptr);
            std::mt19937 g(17 + static_cast<uint32_t>(t));
            for (int rep = 0; rep < 20; ++rep) {
                const auto w = make_weights(t, n, g, true);
                const auto a = make_acts(t, n, g, true);
                const float r = ref.fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                const float s = isa->fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                // The test data keeps every partial sum an integer well below 2^24 (the IQ grid types'
                // sums may not be: their reference fixes the float order, test_kernels_iq.cpp).
                if (!is_iq_grid_type(t)) {
                    REQUIRE(r == std::nearbyint(r));
                    REQUIRE(std::fabs(r) < 4e6f);
                }
                CHECK(f32_to_bits(s) == f32_to_bits(r));
            }
        }
    }
}

TEST_CASE("vec_dot paths match the scalar reference on random data", "[kernels]") {
    const KernelTable &ref = kernels_scalar();
    for (const KernelTable *isa : kernels_available()) {
        for (TensorType t : kKernelTypes) {
            for (int64_t n : shapes(t)) {
                INFO(isa->isa << " " << type_name(t) << " n " << n);
                std::mt19937 g(1000 + static_cast<uint32_t>(n) + static_cast<uint32_t>(t));
                for (int rep = 0; rep < 5; ++rep) {
                    const auto w = make_weights(t, n, g, false);
                    const auto a = make_acts(t, n, g, false);
                    const double r = ref.fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                    const double s = isa->fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                    const double tol = 1e-5 * magnitude(t, w.data(), a.data(), n) + 1e-30;
                    if (std::fabs(s - r) > tol) FAIL_CHECK(s << " vs " << r << " (tol " << tol << ")");
                }
            }
        }
    }
}

TEST_CASE("F32 and F16 dots: every path gives the scalar bits (llama.cpp's 64-accumulator order)", "[kernels]") {
    // The order is defined once (kernel_isa.h, kDotAccs) and is independent of the vector width:
    // F16 KV cache entries round what these dots give, so an ulp would flip roundings downstream.
    const KernelTable &ref = kernels_scalar();
    for (const KernelTable *isa : kernels_available())
        for (TensorType t : {TensorType::F32, TensorType::F16})
            for (int64_t n : {1, 8, 63, 64, 65, 172, 200, 256, 1000}) {
                INFO(isa->isa << " " << type_name(t) << " n " << n);
                std::mt19937 g(77 + static_cast<uint32_t>(n));
                for (int rep = 0; rep < 5; ++rep) {
                    const auto w = make_weights(t, n, g, false);
                    const auto a = make_acts(t, n, g, false);
                    const float r = ref.fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                    const float s = isa->fn[static_cast<uint32_t>(t)](n, w.data(), a.data());
                    CHECK(f32_to_bits(s) == f32_to_bits(r));
                }
            }
}

TEST_CASE("exp kernel: every path gives the scalar bits, which stay within 2 ulp of e^x", "[kernels]") {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-110.0f, 95.0f);
    std::vector<float> x(1000);
    for (float &v : x) v = u(rng);
    // Edges: the range limits of the polynomial path, the reduction's ±192 cut, zeros, infinities.
    const float edges[] = {0.0f,  -0.0f,   -87.0f, -87.5f,  -88.0f, -89.5f,    -103.0f,  -104.0f, 88.0f, 88.7f,
                           89.0f, -140.0f, 140.0f, -300.0f, 300.0f, -INFINITY, INFINITY, 1e-8f,   -1e-8f};
    x.insert(x.begin() + 37, std::begin(edges), std::end(edges));
    // A dense run through the subnormal results (e^x below 2^-126 from x ≈ -87.3, zero below ≈ -103.9
    // and up to n = -192): each one rounding, as ldexp's.
    for (int k = 0; k <= 4000; ++k) x.push_back(-80.0f - 0.03f * static_cast<float>(k));
    std::vector<float> want(x.size()), got(x.size());
    kernels_scalar().exp(x.data(), want.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        INFO("x " << x[i]);
        const double e = std::exp(static_cast<double>(x[i]));
        if (e < 1.2e-38 || e > 3.4e38) continue;  // subnormal and overflowing results: checked by bits below
        const float f = static_cast<float>(e);
        const double ulp = static_cast<double>(std::nextafter(f, INFINITY)) - f;
        CHECK(std::fabs(want[i] - e) <= 2.5 * ulp);
    }
    CHECK(want[37 + 15] == 0.0f);
    CHECK(want[37 + 16] == INFINITY);
    for (const KernelTable *isa : kernels_available())
        for (const int64_t off : {0, 3}) {
            INFO(isa->isa << " off " << off);
            const int64_t n = static_cast<int64_t>(x.size()) - off;
            isa->exp(x.data() + off, got.data(), n);
            CHECK(std::memcmp(got.data(), want.data() + off, static_cast<size_t>(n) * 4) == 0);
        }
}

TEST_CASE("delta-rule step: ggml's order, and every path gives the scalar bits", "[kernels]") {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 0.3f);
    for (const int64_t hd : {int64_t{128}, int64_t{32}, int64_t{20}}) {
        std::vector<float> S0(static_cast<size_t>(hd * hd)), q(hd), k(hd), v(hd);
        for (float &x : S0) x = nd(rng);
        for (int64_t i = 0; i < hd; ++i) q[i] = nd(rng), k[i] = nd(rng), v[i] = nd(rng);
        const float decay = 0.93f, beta = 0.61f, scale = 1.0f / std::sqrt(static_cast<float>(hd));
        // llama.cpp's order, pass by pass over the whole matrix (ggml_compute_forward_gated_delta_net).
        std::vector<float> S = S0, delta(hd), want_y(hd);
        for (float &x : S) x *= decay;
        for (int64_t jj = 0; jj < hd; ++jj) delta[jj] = (v[jj] - dot_f32(&S[jj * hd], k.data(), hd)) * beta;
        for (int64_t jj = 0; jj < hd; ++jj)
            for (int64_t i = 0; i < hd; ++i) S[jj * hd + i] = std::fma(k[i], delta[jj], S[jj * hd + i]);
        for (int64_t jj = 0; jj < hd; ++jj) want_y[jj] = dot_f32(&S[jj * hd], q.data(), hd) * scale;
        for (const KernelTable *isa : kernels_available()) {
            INFO(isa->isa << " hd " << hd);
            std::vector<float> got = S0, y(hd), state_only = S0;
            isa->delta_step(got.data(), hd, q.data(), k.data(), v.data(), decay, beta, scale, y.data());
            CHECK(std::memcmp(got.data(), S.data(), S.size() * 4) == 0);
            CHECK(std::memcmp(y.data(), want_y.data(), y.size() * 4) == 0);
            isa->delta_step(state_only.data(), hd, q.data(), k.data(), v.data(), decay, beta, scale, nullptr);
            CHECK(std::memcmp(state_only.data(), S.data(), S.size() * 4) == 0);
        }
    }
}

namespace {

// Runs the tile for nr = step, 2·step, ... ≤ rm rows and every np ≤ rn positions over w (rows as
// the tile reads them, ws apart) and a (arb apart, in the tile's order). Each output must have the
// bits of the single dot on the same row as plain_w holds it (pws apart) against the activation row
// as plain_a holds it (arb apart; a itself if null), and nothing past the tile's rows may be written.
// Returns the number of shapes checked.
int check_tile_shapes(const GemmKernel &gk, VecDotFn dot, int64_t n, const uint8_t *w, uint64_t ws,
                      const uint8_t *plain_w, uint64_t pws, const uint8_t *a, uint64_t arb, int step,
                      const uint8_t *plain_a = nullptr) {
    if (!plain_a) plain_a = a;
    int shapes_checked = 0;
    for (int nr = step; nr <= gk.rm; nr += step)
        for (int np = 1; np <= gk.rn; ++np) {
            const int64_t ys = nr + 3;
            std::vector<float> y(static_cast<size_t>(ys * np), -1.0f);
            gk.fn(n, w, ws, nr, a, arb, np, y.data(), ys);
            for (int p = 0; p < np; ++p)
                for (int r = 0; r < nr; ++r) {
                    const float want = dot(n, plain_w + r * pws, plain_a + p * arb);
                    INFO("nr " << nr << " np " << np << " r " << r << " p " << p);
                    CHECK(f32_to_bits(y[p * ys + r]) == f32_to_bits(want));
                }
            for (int p = 0; p < np; ++p)
                for (int64_t r = nr; r < ys; ++r) CHECK(y[p * ys + r] == -1.0f);
            ++shapes_checked;
        }
    return shapes_checked;
}

}  // namespace

TEST_CASE("gemm and gemv tiles: every tile shape gives each output the bits of the table's single dot", "[kernels]") {
    for (const KernelTable *isa : kernels_available()) {
        for (TensorType t : kKernelTypes)
            for (const GemmKernel *kind : {isa->gemm, isa->gemv}) {
                const GemmKernel &gk = kind[static_cast<uint32_t>(t)];
                if (!gk.fn) continue;
                const VecDotFn dot = isa->fn[static_cast<uint32_t>(t)];
                for (int64_t n : shapes(t)) {
                    INFO(isa->isa << " " << type_name(t) << " n " << n << " tile " << gk.rm << "x" << gk.rn);
                    std::mt19937 g(77 + static_cast<uint32_t>(n) + static_cast<uint32_t>(t));
                    // rm weight rows and rn activation rows, each in its own padded slot so strides
                    // differ from the row sizes.
                    const bool sums = isa->act_sums[static_cast<uint32_t>(t)];
                    const uint64_t wrb = row_bytes(t, n) + 64,
                                   arb = (sums ? packed_act_row_bytes(t, n) : act_row_bytes(vec_dot_type(t), n)) + 32;
                    std::vector<uint8_t> W(wrb * gk.rm), A(arb * gk.rn), A_tile(A.size());
                    for (int r = 0; r < gk.rm; ++r) {
                        const auto w = make_weights(t, n, g, false);
                        std::memcpy(W.data() + r * wrb, w.data(), w.size());
                    }
                    for (int p = 0; p < gk.rn; ++p) {
                        std::vector<float> x;  // the floats gk.act converts, when the tiles have their own order
                        if (gk.act && vec_dot_type(t) != TensorType::F16) {
                            // a quantizing act: the reference row quantized from the same floats
                            REQUIRE(!sums);
                            std::normal_distribution<float> N(0.0f, 1.0f);
                            x.resize(n);
                            for (float &v : x) v = N(g);
                            quantize_act_row(vec_dot_type(t), x.data(), A.data() + p * arb, n);
                        } else {
                            const auto a = make_acts(t, n, g, false);
                            std::memcpy(A.data() + p * arb, a.data(), a.size());
                            if (sums) packed_act_sums(t, A.data() + p * arb, n);
                            if (gk.act) {  // f16 values, exact in f32
                                x.resize(n);
                                dequantize_row(TensorType::F16, a.data(), x.data(), n);
                            }
                        }
                        if (gk.act) gk.act(x.data(), A_tile.data() + p * arb, n);  // the same values in the tile's order
                    }
                    if (gk.act && n >= 256) REQUIRE(A_tile != A);  // rows of several blocks: the order differs
                    check_tile_shapes(gk, dot, n, W.data(), wrb, W.data(), wrb, gk.act ? A_tile.data() : A.data(), arb, 1,
                                      A.data());
                    if (gk.repack) {  // the same tiles over weight rows repacked as long rows are
                        REQUIRE(gk.fn_repacked);
                        std::vector<uint8_t> W_tile(W.size());
                        for (int r = 0; r < gk.rm; ++r) gk.repack(W.data() + r * wrb, W_tile.data() + r * wrb, n);
                        if (n >= 256) REQUIRE(W_tile != W);
                        GemmKernel repacked = gk;
                        repacked.fn = gk.fn_repacked;
                        check_tile_shapes(repacked, dot, n, W_tile.data(), wrb, W.data(), wrb,
                                          gk.act ? A_tile.data() : A.data(), arb, 1, A.data());
                    }
                }
            }
    }
}

TEST_CASE("packed tiles: every output has the bits of the table's single dot on the unpacked row", "[kernels]") {
    int checked = 0;
    for (const KernelTable *isa : kernels_available()) {
        for (TensorType t : kKernelTypes)
            for (const GemmKernel *kind : {isa->packed_gemm, isa->packed_gemv}) {
                const GemmKernel &gk = kind[static_cast<uint32_t>(t)];
                if (!gk.fn) continue;
                REQUIRE(gk.rm % kPackRows == 0);
                const VecDotFn dot = isa->fn[static_cast<uint32_t>(t)];
                for (int64_t n : shapes(t)) {
                    INFO(isa->isa << " " << type_name(t) << " n " << n << " tile " << gk.rm << "x" << gk.rn);
                    std::mt19937 g(91 + static_cast<uint32_t>(n) + static_cast<uint32_t>(t));
                    const uint64_t rb = row_bytes(t, n);
                    std::vector<uint8_t> rows(rb * gk.rm), packed(rb * gk.rm);
                    for (int r = 0; r < gk.rm; ++r) {
                        const auto w = make_weights(t, n, g, false);
                        std::memcpy(rows.data() + r * rb, w.data(), rb);
                    }
                    for (int grp = 0; grp < gk.rm / kPackRows; ++grp)
                        pack_group(t, rows.data() + grp * kPackRows * rb, rb, n, packed.data() + grp * kPackRows * rb);
                    REQUIRE(packed != rows);
                    if (const PackFn fast = isa->pack[static_cast<uint32_t>(t)]) {  // the table's own pack, same bytes
                        std::vector<uint8_t> again(packed.size(), 0xAB);
                        for (int grp = 0; grp < gk.rm / kPackRows; ++grp)
                            fast(rows.data() + grp * kPackRows * rb, rb, n, again.data() + grp * kPackRows * rb);
                        REQUIRE(again == packed);
                    }
                    // Activation rows with their block sums, in padded slots.
                    const uint64_t arb = packed_act_row_bytes(t, n) + 32;
                    std::vector<uint8_t> A(arb * gk.rn);
                    for (int p = 0; p < gk.rn; ++p) {
                        const auto a = make_acts(t, n, g, false);
                        std::memcpy(A.data() + p * arb, a.data(), a.size());
                        packed_act_sums(t, A.data() + p * arb, n);
                    }
                    checked +=
                        check_tile_shapes(gk, dot, n, packed.data(), rb, rows.data(), rb, A.data(), arb, kPackRows);
                }
            }
    }
    if (checked == 0) SUCCEED("this CPU has no packed kernels");
}

TEST_CASE("packed Q4_K layout: each byte lands where repack.h says", "[kernels]") {
    constexpr int64_t n = 512;  // two super-block columns
    const uint64_t rb = row_bytes(TensorType::Q4_K, n);
    std::vector<uint8_t> rows(rb * kPackRows), packed(rb * kPackRows);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint8_t>(i * 13 + 5);
    pack_group(TensorType::Q4_K, rows.data(), rb, n, packed.data());
    for (int b = 0; b < 2; ++b)
        for (int r = 0; r < kPackRows; ++r) {
            const uint8_t *blk = rows.data() + r * rb + b * 144;
            const uint8_t *col = packed.data() + b * 2304;
            CHECK(std::memcmp(col + 2 * r, blk, 2) == 0);           // d
            CHECK(std::memcmp(col + 32 + 2 * r, blk + 2, 2) == 0);  // dmin
            for (int i = 0; i < 12; ++i) CHECK(col[64 + 16 * i + r] == blk[4 + i]);
            for (int c = 0; c < 4; ++c)
                for (int k = 0; k < 8; ++k)
                    for (int t = 0; t < 4; ++t)
                        CHECK(col[256 + 512 * c + 64 * k + 4 * r + t] == blk[16 + 32 * c + 4 * k + t]);
        }
}

TEST_CASE("packed Q4_0 layout: each byte lands where repack.h says", "[kernels]") {
    constexpr int64_t n = 64;  // two block columns
    const uint64_t rb = row_bytes(TensorType::Q4_0, n);
    std::vector<uint8_t> rows(rb * kPackRows), packed(rb * kPackRows);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint8_t>(i * 7 + 3);
    pack_group(TensorType::Q4_0, rows.data(), rb, n, packed.data());
    for (int b = 0; b < 2; ++b)
        for (int r = 0; r < kPackRows; ++r) {
            const uint8_t *blk = rows.data() + r * rb + b * 18;
            const uint8_t *col = packed.data() + b * 288;
            CHECK(std::memcmp(col + 2 * r, blk, 2) == 0);  // d
            for (int c = 0; c < 4; ++c)
                for (int k = 0; k < 4; ++k) CHECK(col[32 + 64 * c + 4 * r + k] == blk[2 + 4 * c + k]);
        }
}

TEST_CASE("unpack_row gives back each file-layout row of a packed group", "[kernels]") {
    // The tied token table is read by rows out of the packed resident head (Model::embed).
    for (TensorType t : {TensorType::Q4_0, TensorType::Q4_K, TensorType::MXFP4, TensorType::NVFP4, TensorType::TQ1_0}) {
        INFO(type_name(t));
        const int64_t n = 3 * type_info(t).block;
        const uint64_t rb = row_bytes(t, n);
        std::vector<uint8_t> rows(rb * kPackRows), packed(rb * kPackRows), row(rb);
        std::mt19937 g(5 + static_cast<uint32_t>(t));
        for (uint8_t &b : rows) b = static_cast<uint8_t>(g());
        pack_group(t, rows.data(), rb, n, packed.data());
        REQUIRE(packed != rows);
        for (int r = 0; r < kPackRows; ++r) {
            std::fill(row.begin(), row.end(), uint8_t{0xA5});
            unpack_row(t, packed.data(), n, r, row.data());
            CHECK(std::memcmp(row.data(), rows.data() + r * rb, rb) == 0);
        }
    }
}

TEST_CASE("packed MXFP4, NVFP4 and TQ1_0 layouts: each byte lands where repack.h says", "[kernels]") {
    for (TensorType t : {TensorType::MXFP4, TensorType::NVFP4, TensorType::TQ1_0}) {
        INFO(type_name(t));
        const TypeInfo ti = type_info(t);
        const int64_t n = 2 * ti.block;  // two block columns
        const uint64_t rb = row_bytes(t, n), col = kPackRows * ti.bytes;
        std::vector<uint8_t> rows(rb * kPackRows), packed(rb * kPackRows);
        for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint8_t>(i * 7 + 3);
        pack_group(t, rows.data(), rb, n, packed.data());
        for (int b = 0; b < 2; ++b)
            for (int r = 0; r < kPackRows; ++r) {
                const uint8_t *blk = rows.data() + r * rb + b * ti.bytes, *c = packed.data() + b * col;
                if (t == TensorType::MXFP4) {  // e, qs[16]
                    CHECK(c[r] == blk[0]);
                    for (int j = 0; j < 16; ++j) CHECK(c[16 + 64 * (j / 4) + 4 * r + j % 4] == blk[1 + j]);
                } else if (t == TensorType::NVFP4) {  // d[4], qs[32]
                    for (int k = 0; k < 4; ++k) CHECK(c[16 * k + r] == blk[k]);
                    for (int j = 0; j < 32; ++j) CHECK(c[64 + 64 * (j / 4) + 4 * r + j % 4] == blk[4 + j]);
                } else {  // qs[48], qh[4], d
                    CHECK(std::memcmp(c + 2 * r, blk + 52, 2) == 0);
                    for (int j = 0; j < 52; ++j) CHECK(c[32 + 64 * (j / 4) + 4 * r + j % 4] == blk[j]);
                }
            }
    }
}

TEST_CASE("Q8_0 activations: d = amax/127 in f16, q = round-half-even(x·127/amax)", "[kernels]") {
    // amax = 127 makes 127/amax exactly 1, so q = round-half-even(x).
    float x[32] = {127.0f, 63.5f, -63.5f, 62.5f, 0.5f, 1.5f, -2.5f, -0.5f, 2.4f, -126.6f, 3.5f};
    BlockQ8_0 b;
    quantize_row_q8_0(x, &b, 32);
    CHECK(b.d == 0x3C00);  // 1.0
    const int want[11] = {127, 64, -64, 62, 0, 2, -2, 0, 2, -127, 4};
    for (int j = 0; j < 11; ++j) CHECK(b.qs[j] == want[j]);
    for (int j = 11; j < 32; ++j) CHECK(b.qs[j] == 0);

    // d keeps f16 rounding of amax/127 (= 0.1 -> 0x2E66), while q uses the exact 127/amax.
    float y[32] = {};
    y[0] = 12.7f;
    y[1] = -6.35f;
    quantize_row_q8_0(y, &b, 32);
    CHECK(b.d == f32_to_fp16(12.7f / 127.0f));
    CHECK(b.qs[0] == 127);
    CHECK(b.qs[1] == static_cast<int>(std::nearbyint(-6.35f * (127.0f / 12.7f))));

    float z[32] = {};
    quantize_row_q8_0(z, &b, 32);
    CHECK(b.d == 0);
    for (int8_t q : b.qs) CHECK(q == 0);
}

TEST_CASE("packed activation rows: sums taken while quantizing equal sums of the finished blocks", "[kernels]") {
    std::mt19937 rng(13);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (const TensorType t : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::F16}) {
        const int64_t n = 512;
        std::vector<float> x(n);
        for (float &v : x) v = nd(rng);
        const uint64_t rb = packed_act_row_bytes(t, n);
        std::vector<uint8_t> one(rb, 0xAB), two(rb, 0xCD);
        quantize_packed_act_row(t, x.data(), one.data(), n);
        quantize_act_row(vec_dot_type(t), x.data(), two.data(), n);
        packed_act_sums(t, two.data(), n);
        INFO(type_name(t));
        CHECK(one == two);
    }
}

TEST_CASE("Q8_1 activations: s = fp16(d · Σq) with the unrounded d", "[kernels]") {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) * 0.37f - 3.0f;
    BlockQ8_1 b;
    quantize_row_q8_1(x, &b, 32);
    BlockQ8_0 b0;
    quantize_row_q8_0(x, &b0, 32);
    CHECK(b.d == b0.d);
    CHECK(std::memcmp(b.qs, b0.qs, 32) == 0);
    int sum = 0;
    for (int8_t q : b.qs) sum += q;
    const float amax = std::fabs(31 * 0.37f - 3.0f);
    CHECK(b.s == f32_to_fp16((amax / 127.0f) * static_cast<float>(sum)));
}

TEST_CASE("Q8_K activations: signed max maps to -127, d = 1/iscale in f32, bsums", "[kernels]") {
    std::vector<float> x(256, 0.0f);
    x[0] = 2.5f;     // with v = 127, iscale = -1: q = round-half-even(-x)
    x[1] = -3.5f;    // -> 4
    x[2] = 0.5f;     // -> 0
    x[3] = 127.0f;   // the largest: -127
    x[4] = -127.0f;  // same magnitude, later: not the max; -> 127
    x[17] = 1.49f;
    BlockQ8_K b;
    quantize_row_q8_K(x.data(), &b, 256);
    CHECK(b.d == -1.0f);
    CHECK(b.qs[0] == -2);
    CHECK(b.qs[1] == 4);
    CHECK(b.qs[2] == 0);
    CHECK(b.qs[3] == -127);
    CHECK(b.qs[4] == 127);
    CHECK(b.qs[17] == -1);
    CHECK(b.bsums[0] == -2 + 4 + 0 - 127 + 127);
    CHECK(b.bsums[1] == -1);
    for (int g = 2; g < 16; ++g) CHECK(b.bsums[g] == 0);

    // A negative max gives a positive d; d is 1/iscale, not max/127.
    x.assign(256, 0.0f);
    x[9] = -0.3f;
    x[10] = 0.1f;
    quantize_row_q8_K(x.data(), &b, 256);
    const float iscale = -127.0f / -0.3f;
    CHECK(b.d == 1.0f / iscale);
    CHECK(b.qs[9] == -127);
    CHECK(b.qs[10] == static_cast<int>(std::nearbyint(0.1f * iscale)));

    x.assign(256, 0.0f);
    quantize_row_q8_K(x.data(), &b, 256);
    CHECK(b.d == 0.0f);
    for (int16_t s : b.bsums) CHECK(s == 0);
}

TEST_CASE("F16 and BF16 activations round to nearest even", "[kernels]") {
    const float xs[4] = {bits_f(0x3F801000), bits_f(0x3F803000), bits_f(0x3F808000), bits_f(0x3F818000)};
    uint16_t h[4];
    quantize_act_row(TensorType::F16, xs, h, 4);
    CHECK(h[0] == 0x3C00);  // 1 + 2^-11: tie, down to even
    CHECK(h[1] == 0x3C02);  // 1 + 3·2^-11: tie, up to even
    quantize_act_row(TensorType::BF16, xs, h, 4);
    CHECK(h[2] == 0x3F80);  // 1 + 2^-8: tie, down to even
    CHECK(h[3] == 0x3F82);  // 1 + 3·2^-8: tie, up to even
}

TEST_CASE("SIMD activation conversion writes quantize_act_row's bytes", "[kernels]") {
    // Magnitudes from f16 subnormals to past its overflow, exact ties, signed zeros and infinities.
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x;
    for (int e = -30; e <= 18; e += 2)
        for (int k = 0; k < 40; ++k) x.push_back(std::ldexp(nd(rng), e));
    for (uint32_t b :
         {0x3F801000u, 0x3F803000u, 0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x33800000u, 0x33000000u, 0x33000001u,
          0x387FC000u, 0x38800000u, 0x00000001u, 0x80000000u, 0x00000000u, 0x7F800000u, 0xFF800000u, 0xC77FF000u})
        x.push_back(bits_f(b));
    for (const int64_t n :
         {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{15}, int64_t{16}, int64_t{33}, static_cast<int64_t>(x.size())}) {
        std::vector<uint16_t> want(n), got(n);
        quantize_act_row(TensorType::F16, x.data() + x.size() - n, want.data(), n);
        for (const KernelTable *isa : kernels_available()) {
            const ActFn f = isa->act[static_cast<uint32_t>(TensorType::F16)];
            if (!f) continue;
            INFO(isa->isa << " n=" << n);
            std::fill(got.begin(), got.end(), 0xDEAD);
            f(x.data() + x.size() - n, got.data(), n);
            CHECK(got == want);
        }
    }
    // NaN stays NaN (payload bits may differ by path).
    const float nan = std::nanf("");
    for (const KernelTable *isa : kernels_available()) {
        const ActFn f = isa->act[static_cast<uint32_t>(TensorType::F16)];
        if (!f) continue;
        uint16_t h = 0;
        f(&nan, &h, 1);
        CHECK(std::isnan(fp16_to_f32(h)));
    }
}

TEST_CASE("round_f16_rows: each value becomes f32(f16(x)) with fp16.h's bits, across its chunks", "[kernels]") {
    std::mt19937 rng(12);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x;
    for (int e = -30; e <= 18; e += 2)  // f16 subnormals to past its overflow; 25·40 values, four chunks
        for (int k = 0; k < 40; ++k) x.push_back(std::ldexp(nd(rng), e));
    for (uint32_t b : {0x3F801000u, 0x3F803000u, 0x477FF000u, 0x33000000u, 0x33000001u, 0x80000000u, 0x7F800000u})
        x.push_back(bits_f(b));
    std::vector<float> got = x;
    round_f16_rows(got.data(), static_cast<int64_t>(got.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        INFO(i << " x " << x[i]);
        const float want = fp16_to_f32(f32_to_fp16(x[i]));
        CHECK(std::memcmp(&got[i], &want, 4) == 0);
    }
}

TEST_CASE("SIMD Q8_0 and Q8_K activation quantizers write quantize_act_row's bytes", "[kernels]") {
    std::mt19937 rng(14);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // 8 super-blocks of 256: plain Gaussian at several scales, an all-zero block, a block whose largest
    // magnitude appears first negative then positive (and the reverse), one with subnormals, one with
    // values on exact rounding ties, one with NaNs and one with an infinity.
    const int64_t n = 8 * 256;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::ldexp(nd(rng), static_cast<int>(i / 256) * 3 - 9);
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
    x[512 + 17] = -40.0f, x[512 + 200] = 40.0f;
    x[768 + 3] = 40.0f, x[768 + 100] = -40.0f;
    for (int64_t i = 1024; i < 1280; ++i) x[i] = bits_f(static_cast<uint32_t>(i * 7919) & 0x807FFFFFu);
    for (int64_t i = 1280; i < 1536; ++i) x[i] = (static_cast<float>(i % 254) - 127.0f) + 0.5f;
    // Non-finite values, not at the block's maximum: a NaN after the max in its lane, an infinity.
    x[1536 + 0] = 100.0f, x[1536 + 8] = std::nanf(""), x[1536 + 16] = std::nanf(""), x[1536 + 40] = -1e30f;
    x[1792 + 70] = INFINITY, x[1792 + 3] = -3.0f;
    for (const TensorType vdt : {TensorType::Q8_0, TensorType::Q8_K}) {
        const uint64_t rb = act_row_bytes(vdt, n);
        std::vector<uint8_t> want(rb), got(rb);
        quantize_act_row(vdt, x.data(), want.data(), n);
        int checked = 0;
        for (const KernelTable *isa : kernels_available()) {
            const ActFn f = isa->act[static_cast<uint32_t>(vdt)];
            if (!f) continue;
            INFO(isa->isa << " " << type_name(vdt));
            std::fill(got.begin(), got.end(), 0xA5);
            f(x.data(), got.data(), n);
            size_t first_diff = 0;
            while (first_diff < rb && got[first_diff] == want[first_diff]) ++first_diff;
            INFO("first differing byte " << first_diff << " of " << rb);
            CHECK(got == want);
            ++checked;
        }
        if (checked == 0) SUCCEED("no SIMD quantizer for " << type_name(vdt) << " on this CPU");
    }
    // Packed activation rows (blocks, then block sums) for the weight types that use them.
    for (const TensorType t : {TensorType::Q4_0, TensorType::Q4_K}) {
        const uint64_t rb = packed_act_row_bytes(t, n);
        std::vector<uint8_t> want(rb), got(rb);
        quantize_packed_act_row(t, x.data(), want.data(), n);
        for (const KernelTable *isa : kernels_available()) {
            const ActFn f = isa->act_packed[static_cast<uint32_t>(vec_dot_type(t))];
            if (!f) continue;
            INFO(isa->isa << " packed rows for " << type_name(t));
            std::fill(got.begin(), got.end(), 0xA5);
            f(x.data(), got.data(), n);
            CHECK(got == want);
        }
    }
}

TEST_CASE("weighted sum of value rows: every path gives the bits of the F32 dot over zero-padded columns",
          "[kernels][kv]") {
    // llama.cpp's V·P over an F32 cache is ggml_vec_dot_f32 per output over its transposed values,
    // padded to a multiple of 64 rows with zero weights: the scalar F32 dot over such padded columns
    // is the reference (and is close to the exact sum).
    std::mt19937 rng(12);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const WeightedSumFn ref = kernels_scalar().wsum;
    REQUIRE(ref);
    for (const int ng : {1, 2, 3, 4, 5, 8, 9})
        for (const int64_t dim : {1, 7, 16, 24, 64, 80, 96, 128, 256})
            for (const int64_t n_rows : {1, 5, 33, 64, 70, 200}) {
                const int64_t ws = n_rows + 3, vs = dim + 5, os = dim + 2;
                const int64_t padded = (n_rows + 63) / 64 * 64;
                std::vector<float> w(ng * ws), v(n_rows * vs), want(ng * os, -7.0f), got(ng * os, -7.0f);
                std::vector<float> wcol(padded), vcol(padded);
                for (float &f : w) f = u(rng);
                for (float &f : v) f = u(rng);
                for (int g = 0; g < ng; ++g)
                    for (int64_t d = 0; d < dim; ++d) {
                        double e = 0.0;
                        for (int64_t t = 0; t < padded; ++t) {
                            wcol[t] = t < n_rows ? w[g * ws + t] : 0.0f;
                            vcol[t] = t < n_rows ? v[t * vs + d] : 0.0f;
                            e += static_cast<double>(wcol[t]) * vcol[t];
                        }
                        want[g * os + d] = dot_f32(wcol.data(), vcol.data(), padded);
                        REQUIRE(std::fabs(want[g * os + d] - e) <=
                                1e-5 * (1.0 + std::sqrt(static_cast<double>(n_rows))));
                    }
                ref(w.data(), ws, ng, v.data(), vs, n_rows, dim, got.data(), os, nullptr, n_rows);
                REQUIRE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
                // A ring's two runs read in place: rows from n_first on live in another buffer.
                const int64_t n_first = n_rows / 3;
                const std::vector<float> v2(v.begin() + n_first * vs, v.end());
                for (const KernelTable *isa : kernels_available()) {
                    INFO(isa->isa << " ng=" << ng << " dim=" << dim << " rows=" << n_rows);
                    got = std::vector<float>(ng * os, -7.0f);  // gaps between output rows stay untouched
                    isa->wsum(w.data(), ws, ng, v.data(), vs, n_rows, dim, got.data(), os, nullptr, n_rows);
                    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
                    got = std::vector<float>(ng * os, -7.0f);
                    isa->wsum(w.data(), ws, ng, v.data(), vs, n_rows, dim, got.data(), os, v2.data(), n_first);
                    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
                }
            }
}

TEST_CASE("weighted sum over f16 rows: every path gives the bits of the F16 dot over zero-padded columns",
          "[kernels][kv]") {
    // llama.cpp's V·P is an F16 dot per output over its transposed values, padded to a multiple of
    // 64 rows with zero weights: the scalar F16 dot over such padded columns is the reference.
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const WeightedSumF16Fn ref = kernels_scalar().wsum_f16;
    const VecDotFn dot16 = kernels_scalar().fn[static_cast<uint32_t>(TensorType::F16)];
    REQUIRE(ref);
    for (const int ng : {1, 3, 4, 8})
        for (const int64_t dim : {7, 64, 80})
            for (const int64_t n_rows : {1, 33, 64, 70, 200}) {
                const int64_t ws = n_rows + 3, vs = dim + 5, os = dim + 2;
                const int64_t padded = (n_rows + 63) / 64 * 64;
                std::vector<float> w(ng * ws), want(ng * os, -7.0f), got(ng * os, -7.0f);
                std::vector<uint16_t> vh(n_rows * vs), wh(ng * ws), wcol(padded), vcol(padded);
                for (size_t i = 0; i < w.size(); ++i) w[i] = fp16_to_f32(wh[i] = f32_to_fp16(u(rng)));
                for (uint16_t &h : vh) h = f32_to_fp16(u(rng));
                for (int g = 0; g < ng; ++g)
                    for (int64_t d = 0; d < dim; ++d) {
                        for (int64_t t = 0; t < padded; ++t) {
                            wcol[t] = t < n_rows ? wh[g * ws + t] : 0;
                            vcol[t] = t < n_rows ? vh[t * vs + d] : 0;
                        }
                        want[g * os + d] = dot16(padded, wcol.data(), vcol.data());
                    }
                ref(w.data(), ws, ng, vh.data(), vs, n_rows, dim, got.data(), os, nullptr, n_rows);
                REQUIRE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
                const int64_t n_first = n_rows / 3;
                const std::vector<uint16_t> v2(vh.begin() + n_first * vs, vh.end());
                for (const KernelTable *isa : kernels_available()) {
                    INFO(isa->isa << " ng=" << ng << " dim=" << dim << " rows=" << n_rows);
                    got = std::vector<float>(ng * os, -7.0f);
                    isa->wsum_f16(w.data(), ws, ng, vh.data(), vs, n_rows, dim, got.data(), os, nullptr, n_rows);
                    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
                    got = std::vector<float>(ng * os, -7.0f);
                    isa->wsum_f16(w.data(), ws, ng, vh.data(), vs, n_rows, dim, got.data(), os, v2.data(), n_first);
                    CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
                }
            }
}

TEST_CASE("matmul: one quantization per activation row; batched, threaded and row-range results are bitwise equal",
          "[kernels]") {
    const TensorType t = GENERATE(from_range(std::begin(kKernelTypes), std::end(kKernelTypes)));
    const int64_t n_in = 512, n_out = 37;
    std::mt19937 g(7 + static_cast<uint32_t>(t));
    std::vector<uint8_t> data;
    for (int64_t o = 0; o < n_out; ++o) {
        const auto r = make_weights(t, n_in, g, false);
        data.insert(data.end(), r.begin(), r.end());
    }
    const WeightView w{t, data.data(), n_in, n_out, row_bytes(t, n_in)};
    const VecDotFn dot = kernels_active().fn[static_cast<uint32_t>(t)];
    const VecDotFn ref = kernels_scalar().fn[static_cast<uint32_t>(t)];
    ThreadPool pool(3);
    for (int64_t P : {1, 3, 17}) {
        INFO(type_name(t) << " P " << P << " isa " << kernels_active().isa);
        std::normal_distribution<float> N(0.0f, 1.0f);
        std::vector<float> x(P * n_in);
        for (float &v : x) v = N(g);
        std::vector<float> y(P * n_out, -1.0f), yt(P * n_out, -2.0f);
        matmul(w, x.data(), P, y.data(), nullptr);
        matmul(w, x.data(), P, yt.data(), &pool);
        CHECK(std::memcmp(y.data(), yt.data(), y.size() * 4) == 0);

        std::vector<uint8_t> xq(act_row_bytes(vec_dot_type(t), n_in));
        for (int64_t p = 0; p < P; ++p) {
            quantize_act_row(vec_dot_type(t), x.data() + p * n_in, xq.data(), n_in);
            std::vector<float> y1(n_out, -3.0f);
            matmul(w, x.data() + p * n_in, 1, y1.data(), &pool);
            CHECK(std::memcmp(y1.data(), y.data() + p * n_out, n_out * 4) == 0);
            for (int64_t o = 0; o < n_out; ++o) {
                const uint8_t *row = data.data() + o * w.row_bytes;
                const float want = dot(n_in, row, xq.data());
                CHECK(f32_to_bits(y[p * n_out + o]) == f32_to_bits(want));
                const double tol = 1e-5 * magnitude(t, row, xq.data(), n_in);
                CHECK(std::fabs(static_cast<double>(y[p * n_out + o]) - ref(n_in, row, xq.data())) <= tol);
            }
        }

        const int64_t r0 = 5, r1 = 30;
        std::vector<float> ys(P * (r1 - r0), -4.0f);
        matmul_rows(w, r0, r1, x.data(), P, ys.data(), r1 - r0);
        for (int64_t p = 0; p < P; ++p)
            CHECK(std::memcmp(ys.data() + p * (r1 - r0), y.data() + p * n_out + r0, (r1 - r0) * 4) == 0);
    }
}

TEST_CASE("thread pool: every index once, exceptions reach the caller, back-to-back jobs", "[kernels]") {
    ThreadPool pool(3);
    for (int64_t n : {0, 1, 2, 3, 5, 100, 1001}) {
        std::vector<int> hits(n, 0);
        for (int rep = 0; rep < 200; ++rep)
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) ++hits[i];
            });
        for (int64_t i = 0; i < n; ++i) CHECK(hits[i] == 200);
    }
    CHECK_THROWS_AS(pool.parallel_for(10,
                                      [](int64_t b, int64_t) {
                                          if (b > 0) throw std::runtime_error("worker failed");
                                      }),
                    std::runtime_error);
    int64_t total = 0;
    pool.parallel_for(3, [&](int64_t b, int64_t e) { __atomic_add_fetch(&total, e - b, __ATOMIC_RELAXED); });
    CHECK(total == 3);
}

TEST_CASE("thread pool: back-to-back jobs of alternating sizes run each index exactly once", "[kernels]") {
    // A job with more chunks right after one with fewer: a worker still looking at the finished
    // job must not claim a chunk of the new one under the old state (it then ran twice and the
    // caller's done-count overshot, hanging it).
    ThreadPool pool(3);
    std::vector<std::atomic<int>> hits(64);
    for (int rep = 0; rep < 20000; ++rep) {
        const int64_t n = rep % 2 ? 64 : 2;
        for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
        });
        for (int64_t i = 0; i < n; ++i)
            if (hits[i].load() != 1) FAIL("job " << rep << ": index " << i << " ran " << hits[i].load() << " times");
    }
}

TEST_CASE("thread pool: shutdown right after construction or one job never hangs", "[kernels]") {
    // Workers may start after the caller already ran every chunk itself, or after shutdown began.
    for (int rep = 0; rep < 200; ++rep) {
        ThreadPool idle(4);
        ThreadPool one(4);
        int64_t total = 0;
        one.parallel_for(1000, [&](int64_t b, int64_t e) { __atomic_add_fetch(&total, e - b, __ATOMIC_RELAXED); });
        CHECK(total == 1000);
    }
}
