// Kernel self-test without Catch2 or the rest of the library, so it also builds with a bare cross
// toolchain (AArch64 under qemu, see run_neon_selftest.sh). For every vec_dot table this CPU can run:
// integer-exact agreement with the scalar reference, the activation quantizers' hand-checked
// values, and matmul's batched == single == threaded invariant. Exit 0 on success.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"
#include "kernels/ref_iq.h"
#include "kernels/kernel_table.h"
#include "kernel_test_blocks.h"

using namespace llm;

namespace {

int g_failures = 0;

#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            ++g_failures;                                                          \
            std::fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                     \
            std::fprintf(stderr, "\n");                                            \
        }                                                                          \
    } while (0)

using test::is_float;
using test::kKernelTypes;
using test::make_exact_acts;
using test::put_float;

// Random f16 scales near 0.02 (test::make_weights).
std::vector<uint8_t> make_weights(TensorType t, int64_t n, std::mt19937 &g, bool exact) {
    std::normal_distribution<float> N(0.0f, 1.0f);
    return test::make_weights(t, n, g, exact, [&](std::mt19937 &r) { return f32_to_fp16(0.02f * N(r)); });
}

void check_exact_dots(const KernelTable &isa) {
    const KernelTable &ref = kernels_scalar();
    for (TensorType t : kKernelTypes) {
        const auto id = static_cast<uint32_t>(t);
        EXPECT(isa.fn[id] != nullptr, "%s %s has no kernel", isa.isa, type_name(t).c_str());
        if (!isa.fn[id]) continue;
        std::mt19937 g(17 + id);
        for (int64_t n : {256, 512}) {
            for (int rep = 0; rep < 20; ++rep) {
                const int64_t nn = is_float(t) ? n - 1 - rep : n;  // odd lengths exercise the tails
                // The IQ grid types' reference fixes their float order: random d tests that order too.
                const auto w = make_weights(t, nn, g, !is_iq_grid_type(t));
                const auto a = make_exact_acts(t, nn, g);
                const float r = ref.fn[id](nn, w.data(), a.data());
                const float s = isa.fn[id](nn, w.data(), a.data());
                EXPECT(is_iq_grid_type(t) || (std::fabs(r) < 4e6f && r == std::nearbyint(r)),
                       "%s: test data not integral (%g)", type_name(t).c_str(), r);
                EXPECT(f32_to_bits(r) == f32_to_bits(s), "%s %s n %lld: %.9g vs scalar %.9g", isa.isa,
                       type_name(t).c_str(), static_cast<long long>(nn), s, r);
            }
        }
    }
}

void check_quantizers() {
    float x[32] = {127.0f, 63.5f, -63.5f, 62.5f, 0.5f, 1.5f, -2.5f, -0.5f, 2.4f, -126.6f, 3.5f};
    BlockQ8_0 b;
    quantize_row_q8_0(x, &b, 32);
    const int want[11] = {127, 64, -64, 62, 0, 2, -2, 0, 2, -127, 4};
    EXPECT(b.d == 0x3C00, "q8_0 d %04x", b.d);
    for (int j = 0; j < 11; ++j) EXPECT(b.qs[j] == want[j], "q8_0 q[%d] = %d, want %d", j, b.qs[j], want[j]);

    std::vector<float> k(256, 0.0f);
    k[0] = 2.5f;
    k[1] = -3.5f;
    k[3] = 127.0f;
    k[4] = -127.0f;
    BlockQ8_K bk;
    quantize_row_q8_K(k.data(), &bk, 256);
    EXPECT(bk.d == -1.0f, "q8_K d %g", bk.d);
    EXPECT(bk.qs[0] == -2 && bk.qs[1] == 4 && bk.qs[3] == -127 && bk.qs[4] == 127, "q8_K quants %d %d %d %d", bk.qs[0],
           bk.qs[1], bk.qs[3], bk.qs[4]);
    EXPECT(bk.bsums[0] == 2, "q8_K bsums[0] %d", bk.bsums[0]);
}

// Each table's SIMD activation converters write exactly the scalar quantizers' bytes.
void check_act(const KernelTable &isa) {
    std::mt19937 g(9);
    std::normal_distribution<float> N(0.0f, 1.0f);
    std::vector<float> x(1024);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(N(g), static_cast<int>(i % 40) - 28);
    const uint32_t special[] = {0x3F801000u, 0x3F803000u, 0x477FEFFFu, 0x477FF000u, 0x33000001u,
                                0x387FC000u, 0x00000001u, 0x80000000u, 0x7F800000u, 0xFF800000u};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; ++i) std::memcpy(&x[3 + 7 * i], &special[i], 4);
    x[600] = std::nanf("");
    for (TensorType vdt : {TensorType::F16, TensorType::Q8_0, TensorType::Q8_K}) {
        const ActFn f = isa.act[static_cast<uint32_t>(vdt)];
        if (!f) continue;
        const int64_t n = static_cast<int64_t>(x.size()) - (vdt == TensorType::F16 ? 5 : 0);  // a tail too
        std::vector<uint8_t> want(act_row_bytes(vdt, n)), got(want.size(), 0xA5);
        quantize_act_row(vdt, x.data(), want.data(), n);
        f(x.data(), got.data(), n);
        if (vdt == TensorType::F16) {  // NaN payloads may differ by path; NaN must stay NaN
            uint16_t h;
            std::memcpy(&h, &got[2 * 600], 2);
            EXPECT((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0, "%s f16 NaN -> %04x", isa.isa, h);
            std::memcpy(&got[2 * 600], &want[2 * 600], 2);
        }
        EXPECT(got == want, "%s %s activations differ from the scalar quantizer", isa.isa, type_name(vdt).c_str());
    }
}

void check_matmul() {
    ThreadPool pool(3);
    for (TensorType t : kKernelTypes) {
        const int64_t n_in = 512, n_out = 21;
        std::mt19937 g(5 + static_cast<uint32_t>(t));
        std::vector<uint8_t> data;
        for (int64_t o = 0; o < n_out; ++o) {
            const auto r = make_weights(t, n_in, g, false);
            data.insert(data.end(), r.begin(), r.end());
        }
        const WeightView w{t, data.data(), n_in, n_out, row_bytes(t, n_in)};
        const int64_t P = 17;
        std::normal_distribution<float> N(0.0f, 1.0f);
        std::vector<float> x(P * n_in), y(P * n_out), yt(P * n_out), y1(n_out);
        for (float &v : x) v = N(g);
        matmul(w, x.data(), P, y.data(), nullptr);
        matmul(w, x.data(), P, yt.data(), &pool);
        EXPECT(std::memcmp(y.data(), yt.data(), y.size() * 4) == 0, "%s threaded != single-threaded",
               type_name(t).c_str());
        for (int64_t p = 0; p < P; ++p) {
            matmul(w, x.data() + p * n_in, 1, y1.data(), nullptr);
            EXPECT(std::memcmp(y1.data(), y.data() + p * n_out, n_out * 4) == 0, "%s P=1 != batched at p %lld",
                   type_name(t).c_str(), static_cast<long long>(p));
        }
    }
}
// F32 and F16 dots, exp and the F16 weighted sum have one order on every path (kernel_isa.h): the
// scalar bits on random, non-integral data too (an F16 KV cache would round any difference).
void check_float_order(const KernelTable &isa) {
    const KernelTable &ref = kernels_scalar();
    std::mt19937 g(99);
    std::normal_distribution<float> N(0.0f, 1.0f);
    for (TensorType t : {TensorType::F32, TensorType::F16}) {
        const auto id = static_cast<uint32_t>(t);
        for (int64_t n : {8, 63, 64, 172, 300}) {
            const auto w = make_weights(t, n, g, false);
            std::vector<uint8_t> a(w.size());
            for (int64_t i = 0; i < n; ++i) put_float(t, a.data(), i, N(g));
            const float r = ref.fn[id](n, w.data(), a.data()), s = isa.fn[id](n, w.data(), a.data());
            EXPECT(f32_to_bits(r) == f32_to_bits(s), "%s %s n %lld: %.9g vs scalar %.9g", isa.isa, type_name(t).c_str(),
                   static_cast<long long>(n), s, r);
        }
    }
    std::vector<float> x(203), e0(x.size()), e1(x.size());
    for (float &v : x) v = 20.0f * N(g);
    ref.exp(x.data(), e0.data(), static_cast<int64_t>(x.size()));
    isa.exp(x.data(), e1.data(), static_cast<int64_t>(x.size()));
    EXPECT(std::memcmp(e0.data(), e1.data(), x.size() * 4) == 0, "%s: exp differs from scalar", isa.isa);
    const int ng = 3;
    const int64_t rows = 150, dim = 40;
    std::vector<float> w(ng * rows), o0(ng * dim), o1(ng * dim);
    std::vector<uint16_t> v(rows * dim);
    for (float &f : w) f = fp16_to_f32(f32_to_fp16(std::fabs(N(g))));
    for (uint16_t &h : v) h = f32_to_fp16(N(g));
    ref.wsum_f16(w.data(), rows, ng, v.data(), dim, rows, dim, o0.data(), dim, nullptr, rows);
    isa.wsum_f16(w.data(), rows, ng, v.data(), dim, rows, dim, o1.data(), dim, nullptr, rows);
    EXPECT(std::memcmp(o0.data(), o1.data(), o0.size() * 4) == 0, "%s: F16 weighted sum differs from scalar", isa.isa);
}

}  // namespace

int main() {
    for (const KernelTable *isa : kernels_available()) {
        std::printf("kernels_selftest: checking %s\n", isa->isa);
        EXPECT(isa->clashes == 0, "%s: %d kernel slots claimed twice", isa->isa, isa->clashes);
        check_exact_dots(*isa);
        check_float_order(*isa);
        check_act(*isa);
    }
    std::printf("kernels_selftest: matmul uses %s\n", kernels_active().isa);
    check_quantizers();
    check_matmul();
    if (g_failures) {
        std::printf("kernels_selftest: %d failure(s)\n", g_failures);
        return 1;
    }
    std::printf("kernels_selftest: all passed\n");
    return 0;
}
