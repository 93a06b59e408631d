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
    void (*fill)(const KernelSlots &);
};

#if defined(__x86_64__)
// F16C is CPUID leaf 1, ECX bit 29. Read directly: clang 14 rejects __builtin_cpu_supports("f16c").
bool has_f16c() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c(); }
// The AVX-512 unit uses VNNI for the int8 dots and BW/VL for byte shuffles on 256-bit lanes.
bool has_avx512() {
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
// Best last.
const Isa kIsas[] = {{"avx2", has_avx2, vec_dot_fill_avx2}, {"avx512", has_avx512, vec_dot_fill_avx512}};
#elif defined(__aarch64__)
bool has_neon() { return true; }  // Advanced SIMD is part of the AArch64 baseline.
bool has_dotprod() {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
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
            if (kIsas[k].supported())
                kIsas[k].fill({tables[k].fn, tables[k].gemm, tables[k].gemv, tables[k].packed_gemm, tables[k].packed_gemv,
                                tables[k].pack, tables[k].act_sums, tables[k].act, tables[k].act_packed, &tables[k].wsum});
        }
        return true;
    }();
    (void)built;
    return &tables[i];
}

}  // namespace

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
