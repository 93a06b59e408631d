// AArch64 kernels: baseline Advanced SIMD (every AArch64 CPU).
// Flags in cmake/LlmKernels.cmake; bodies in arm_kernels.inc, arm_iq.inc (grid IQ types) and
// arm_lowbit.inc (low-bit types).
#include "kernels/kernel_isa.h"
#include "kernels/lowbit.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <array>
#include <cmath>
#include <cstring>

#include "kernels/blocks_iq.h"
#include "kernels/iq_codebooks.h"

namespace llm {
namespace {
#include "kernels/arm_kernels.inc"
#include "kernels/arm_iq.inc"
#include "kernels/arm_lowbit.inc"
}  // namespace

void fill_kernels_neon(KernelClaims &k) {
    fill_arm(k);
    fill_arm_iq(k);
    fill_arm_lowbit(k);
}

}  // namespace llm
#endif
