// AArch64 kernels: Advanced SIMD + dot product (SDOT; compiled with +dotprod, used when HWCAP_ASIMDDP is set).
// Flags in cmake/LlmKernels.cmake; bodies in arm_kernels.inc.
#include "kernels/vec_dot_isa.h"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace llm {
namespace {
#include "kernels/arm_kernels.inc"
}  // namespace

void vec_dot_fill_dotprod(KernelSlots &k) { fill_arm(k); }

}  // namespace llm
#endif
