// x86 kernels for AVX2 + FMA + F16C (flags in cmake/LlmKernels.cmake; run only when
// kernels/dispatch.cpp has seen the CPU support them). Bodies in x86_kernels.inc.
#include "kernels/vec_dot_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace llm {
namespace {
#include "kernels/x86_kernels.inc"
#include "kernels/x86_gemm.inc"
}  // namespace

void vec_dot_fill_avx2(const KernelSlots &k) {
    fill_table(k.fn);
    fill_gemm(k.fn, k.gemm, k.gemv);
    fill_float_ops(k);
}

}  // namespace llm
#endif
