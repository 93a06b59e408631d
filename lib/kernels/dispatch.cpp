// Picks the vec_dot table once: the best ISA this CPU supports, each table starting as a copy of
// the scalar one so a type without a SIMD body still works.
#include <cstdlib>
#include <cstring>

#include "kernels/kernel_table.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace llm {
namespace {

struct Isa {
    const char *name;
    bool (*supported)();
    void (*fill)(KernelClaims &);
};

#if defined(__x86_64__)
// Each check covers every -m flag its unit is compiled with (cmake/LlmKernels.cmake): the compiler
// may use any of them anywhere in the unit. (GCC's and clang's __builtin_cpu_supports also require
// the OS to save the wider registers.)
// F16C is CPUID leaf 1, ECX bit 29. Read directly: clang 14 rejects __builtin_cpu_supports("f16c").
bool has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
// kernels_avx2.cpp: -mavx2 -mfma -mf16c.
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c(); }
// kernels_avx512.cpp: the AVX2 unit's flags and -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
// (VNNI for the int8 dots, BW/VL for byte shuffles on 256-bit lanes, DQ for 256-bit halves of zmm).
bool has_avx512() {
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}
// Best last.
const Isa kIsas[] = {{"avx2", has_avx2, fill_kernels_avx2}, {"avx512", has_avx512, fill_kernels_avx512}};
#elif defined(__aarch64__)
bool has_neon() { return true; }  // Advanced SIMD is part of the AArch64 baseline.
// kernels_dotprod.cpp: -march=armv8.2-a+dotprod (GCC's arm_neon.h wants Armv8.2 for vdotq_s32). Besides
// SDOT that lets the compiler use what Armv8.1 made mandatory: LSE atomics, RDM and CRC32. A CPU
// with dot product implements Armv8.2 and so has them, but check each rather than rely on that.
bool has_dotprod() {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    const unsigned long want = HWCAP_ASIMDDP | HWCAP_ATOMICS | HWCAP_ASIMDRDM | HWCAP_CRC32;
    return (getauxval(AT_HWCAP) & want) == want;
#else
    return false;
#endif
}
const Isa kIsas[] = {{"neon", has_neon, fill_kernels_neon}, {"dotprod", has_dotprod, fill_kernels_dotprod}};
#else
bool no_isa() { return false; }
const Isa kIsas[] = {{"none", no_isa, nullptr}};
#endif

constexpr int kIsaCount = sizeof(kIsas) / sizeof(Isa);

const KernelTable *isa_table(int i) {
    // One table per ISA, built on first use (magic statics are thread-safe).
    static KernelTable tables[kIsaCount];
    static const bool built = [] {
        for (int k = 0; k < kIsaCount; ++k) {
            tables[k] = kernels_scalar();
            tables[k].isa = kIsas[k].name;
            if (kIsas[k].supported()) {
                KernelClaims claims(tables[k]);
                kIsas[k].fill(claims);
            }
        }
        return true;
    }();
    (void)built;
    return &tables[i];
}

template <typename V>
bool same(const V &a, const V &b) {
    return a == b;
}
bool same(const GemmKernel &a, const GemmKernel &b) { return a.fn == b.fn && a.rm == b.rm && a.rn == b.rn; }

// Whether a value may be claimed at all. A GemmKernel with a repack but no tiles that read its order
// (or the reverse) would be used half: a malformed claim, whichever kind it is claimed as.
template <typename V>
bool well_formed(const V &) {
    return true;
}
bool well_formed(const GemmKernel &g) { return !g.repack == !g.fn_repacked; }

// Writes value into entries[type] if that still holds the scalar table's entry and the value is well
// formed; else counts a clash.
template <typename V>
void claim(KernelTable &t, V (&entries)[kTensorTypeCount], const V (&scalar)[kTensorTypeCount], int type, V value) {
    if (type < 0 || static_cast<uint32_t>(type) >= kTensorTypeCount || !same(entries[type], scalar[type]) ||
        !well_formed(value)) {
        ++t.clashes;
        return;
    }
    entries[type] = value;
}

}  // namespace

KernelClaims::KernelClaims(KernelTable &table) : t_(table) {}
void KernelClaims::dot(int type, VecDotFn f) { claim(t_, t_.fn, kernels_scalar().fn, type, f); }
void KernelClaims::gemm(int type, GemmKernel g) { claim(t_, t_.gemm, kernels_scalar().gemm, type, g); }
void KernelClaims::gemv(int type, GemmKernel g) { claim(t_, t_.gemv, kernels_scalar().gemv, type, g); }
void KernelClaims::packed_gemm(int type, GemmKernel g) {
    claim(t_, t_.packed_gemm, kernels_scalar().packed_gemm, type, g);
}
void KernelClaims::packed_gemv(int type, GemmKernel g) {
    claim(t_, t_.packed_gemv, kernels_scalar().packed_gemv, type, g);
}
void KernelClaims::pack(int type, PackFn f) { claim(t_, t_.pack, kernels_scalar().pack, type, f); }
void KernelClaims::act_sums(int type) { claim(t_, t_.act_sums, kernels_scalar().act_sums, type, true); }
void KernelClaims::act(int format, ActFn f) { claim(t_, t_.act, kernels_scalar().act, format, f); }
void KernelClaims::act_packed(int format, ActFn f) { claim(t_, t_.act_packed, kernels_scalar().act_packed, format, f); }
void KernelClaims::wsum(WeightedSumFn f) {
    if (t_.wsum != kernels_scalar().wsum)
        ++t_.clashes;
    else
        t_.wsum = f;
}
void KernelClaims::wsum_f16(WeightedSumF16Fn f) {
    if (t_.wsum_f16 != kernels_scalar().wsum_f16)
        ++t_.clashes;
    else
        t_.wsum_f16 = f;
}

void KernelClaims::exp(ExpFn f) {
    if (t_.exp != kernels_scalar().exp)
        ++t_.clashes;
    else
        t_.exp = f;
}

void KernelClaims::delta_step(DeltaStepFn f) {
    if (t_.delta_step != kernels_scalar().delta_step)
        ++t_.clashes;
    else
        t_.delta_step = f;
}

std::vector<const KernelTable *> kernels_available() {
    std::vector<const KernelTable *> out{&kernels_scalar()};
    for (int k = 0; k < kIsaCount; ++k)
        if (kIsas[k].supported()) out.push_back(isa_table(k));
    return out;
}

const KernelTable &kernels_active() {
    static const KernelTable *active = [] {
        const std::vector<const KernelTable *> all = kernels_available();
        const char *want = std::getenv("LLM_KERNELS");
        if (want)
            for (const KernelTable *t : all)
                if (std::strcmp(t->isa, want) == 0) return t;
        return all.back();
    }();
    return *active;
}

}  // namespace llm
