// AArch64 kernels: baseline Advanced SIMD (every AArch64 CPU).
// Flags in cmake/LlmKernels.cmake; bodies in arm_kernels.inc.
#include "kernels/vec_dot_isa.h"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace llm {
namespace {
#include "kernels/arm_kernels.inc"
}  // namespace

void vec_dot_fill_neon(KernelSlots &k) { fill_arm(k); }

}  // namespace llm
#endif
