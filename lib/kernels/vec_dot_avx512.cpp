// x86 kernels for AVX-512 F/BW/VL/DQ + VNNI: VNNI int8 dots on 256-bit lanes, 512-bit float dots (flags in cmake/LlmKernels.cmake; run only when
// kernels/dispatch.cpp has seen the CPU support them). Bodies in x86_kernels.inc.
#include "kernels/vec_dot_isa.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers seed masked builtins with _mm512_undefined_*(), which its own
// -Wuninitialized flags at every inlined call site: silence that false positive in this unit only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

namespace llm {
namespace {
#include "kernels/x86_kernels.inc"
#include "kernels/x86_gemm.inc"
#include "kernels/x86_packed.inc"
}  // namespace

void vec_dot_fill_avx512(const KernelSlots &k) {
    fill_table(k.fn);
    fill_gemm(k.fn, k.gemm, k.gemv);
    fill_float_ops(k);
    fill_packed(k);
}

}  // namespace llm
#endif
