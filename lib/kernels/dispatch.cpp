// Picks the vec_dot table once: the best ISA this CPU supports, each table starting as a copy of
// the scalar one so a type without a SIMD body still works.
#include <cstdlib>
#include <cstring>

#include "kernels/vec_dot.h"

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
    void (*fill)(KernelSlots &);
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
// vec_dot_avx2.cpp: -mavx2 -mfma -mf16c.
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c(); }
// vec_dot_avx512.cpp: the AVX2 unit's flags and -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
// (VNNI for the int8 dots, BW/VL for byte shuffles on 256-bit lanes, DQ for 256-bit halves of zmm).
bool has_avx512() {
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}
// Best last.
const Isa kIsas[] = {{"avx2", has_avx2, vec_dot_fill_avx2}, {"avx512", has_avx512, vec_dot_fill_avx512}};
#elif defined(__aarch64__)
bool has_neon() { return true; }  // Advanced SIMD is part of the AArch64 baseline.
// vec_dot_dotprod.cpp: -march=armv8.2-a+dotprod (GCC's arm_neon.h wants Armv8.2 for vdotq_s32). Besides
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
const Isa kIsas[] = {{"neon", has_neon, vec_dot_fill_neon}, {"dotprod", has_dotprod, vec_dot_fill_dotprod}};
#else
bool no_isa() { return false; }
const Isa kIsas[] = {{"none", no_isa, nullptr}};
#endif

constexpr int kIsaCount = sizeof(kIsas) / sizeof(Isa);

const VecDotTable *isa_table(int i) {
    // One table per ISA, built on first use (magic statics are thread-safe).
    static VecDotTable tables[kIsaCount];
    static const bool built = [] {
        for (int k = 0; k < kIsaCount; ++k) {
            tables[k] = vec_dot_scalar();
            tables[k].isa = kIsas[k].name;
            if (kIsas[k].supported()) {
                KernelSlots slots(tables[k]);
                kIsas[k].fill(slots);
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

// Writes value into slots[type] if that still holds the scalar table's entry; else counts a clash.
template <typename V>
void claim(VecDotTable &t, V (&slots)[kTensorTypeCount], const V (&scalar)[kTensorTypeCount], int type, V value) {
    if (type < 0 || static_cast<uint32_t>(type) >= kTensorTypeCount || !same(slots[type], scalar[type])) {
        ++t.clashes;
        return;
    }
    slots[type] = value;
}

}  // namespace

KernelSlots::KernelSlots(VecDotTable &table) : t_(table) {}
void KernelSlots::dot(int type, VecDotFn f) { claim(t_, t_.fn, vec_dot_scalar().fn, type, f); }
void KernelSlots::gemm(int type, GemmKernel g) { claim(t_, t_.gemm, vec_dot_scalar().gemm, type, g); }
void KernelSlots::gemv(int type, GemmKernel g) { claim(t_, t_.gemv, vec_dot_scalar().gemv, type, g); }
void KernelSlots::packed_gemm(int type, GemmKernel g) {
    claim(t_, t_.packed_gemm, vec_dot_scalar().packed_gemm, type, g);
}
void KernelSlots::packed_gemv(int type, GemmKernel g) {
    claim(t_, t_.packed_gemv, vec_dot_scalar().packed_gemv, type, g);
}
void KernelSlots::pack(int type, PackFn f) { claim(t_, t_.pack, vec_dot_scalar().pack, type, f); }
void KernelSlots::act_sums(int type) { claim(t_, t_.act_sums, vec_dot_scalar().act_sums, type, true); }
void KernelSlots::act(int format, ActFn f) { claim(t_, t_.act, vec_dot_scalar().act, format, f); }
void KernelSlots::act_packed(int format, ActFn f) { claim(t_, t_.act_packed, vec_dot_scalar().act_packed, format, f); }
void KernelSlots::wsum(WeightedSumFn f) {
    if (t_.wsum != vec_dot_scalar().wsum)
        ++t_.clashes;
    else
        t_.wsum = f;
}
void KernelSlots::wsum_f16(WeightedSumF16Fn f) {
    if (t_.wsum_f16 != vec_dot_scalar().wsum_f16)
        ++t_.clashes;
    else
        t_.wsum_f16 = f;
}

void KernelSlots::exp(ExpFn f) {
    if (t_.exp != vec_dot_scalar().exp)
        ++t_.clashes;
    else
        t_.exp = f;
}

std::vector<const VecDotTable *> vec_dot_available() {
    std::vector<const VecDotTable *> out{&vec_dot_scalar()};
    for (int k = 0; k < kIsaCount; ++k)
        if (kIsas[k].supported()) out.push_back(isa_table(k));
    return out;
}

const VecDotTable &vec_dot_active() {
    static const VecDotTable *active = [] {
        const std::vector<const VecDotTable *> all = vec_dot_available();
        const char *want = std::getenv("LLM_KERNELS");
        if (want)
            for (const VecDotTable *t : all)
                if (std::strcmp(t->isa, want) == 0) return t;
        return all.back();
    }();
    return *active;
}

}  // namespace llm
