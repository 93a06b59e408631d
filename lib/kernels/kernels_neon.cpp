// AArch64 kernels: baseline Advanced SIMD (every AArch64 CPU).
// Flags in cmake/LlmKernels.cmake; bodies in arm_kernels.inc.
#include "kernels/kernel_isa.h"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace llm {
namespace {
#include "kernels/arm_kernels.inc"
}  // namespace

void fill_kernels_neon(KernelClaims &k) { fill_arm(k); }

}  // namespace llm
#endif
