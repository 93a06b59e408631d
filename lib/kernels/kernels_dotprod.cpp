// AArch64 kernels: Advanced SIMD + dot product (SDOT; compiled with +dotprod, used when HWCAP_ASIMDDP is set).
// Flags in cmake/LlmKernels.cmake; bodies in arm_kernels.inc.
#include "kernels/kernel_isa.h"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace llm {
namespace {
#include "kernels/arm_kernels.inc"
}  // namespace

void fill_kernels_dotprod(KernelClaims &k) { fill_arm(k); }

}  // namespace llm
#endif
