// AArch64 kernels: Advanced SIMD + dot product (SDOT; compiled with +dotprod, used when HWCAP_ASIMDDP is set).
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

void fill_kernels_dotprod(KernelClaims &k) {
    fill_arm(k);
    fill_arm_iq(k);

    // low-bit types (arm_lowbit.inc)
    k.dot(tid::TQ1_0, dot_tq1_0);
    k.dot(tid::TQ2_0, dot_tq2_0);
    k.dot(tid::MXFP4, dot_mxfp4);
    k.dot(tid::NVFP4, dot_nvfp4);
    k.dot(tid::Q1_0, dot_q1_0);
    k.dot(tid::Q2_0, dot_q2_0);
}

}  // namespace llm
#endif
