// x86 kernels for AVX2 + FMA + F16C (flags in cmake/LlmKernels.cmake; run only when
// kernels/dispatch.cpp has seen the CPU support them). Bodies in the x86_*.inc files; which one
// serves each type is fill_kernels_avx2 below.
#include "kernels/kernel_isa.h"
#include "kernels/lowbit.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/blocks_iq.h"
#include "kernels/iq_codebooks.h"

namespace llm {
namespace {
#include "kernels/x86_common.inc"
#include "kernels/x86_q8_0.inc"
#include "kernels/x86_kquant.inc"
#include "kernels/x86_iq.inc"
#include "kernels/x86_lowbit.inc"
#include "kernels/x86_float.inc"
#include "kernels/x86_groups.inc"
#include "kernels/x86_packed_avx2.inc"
#include "kernels/x86_rows_avx2.inc"


// Tile shapes for 16 vector registers: the accumulators leave room for the unpacked operands.
constexpr int kRowsQ = 2, kColsQ = 4;    // 32-element blocks
// Q8_0: 4×4 spills accumulators yet beat 2×4 (matmul-bench -P 64, best of 30: 131-134 against
// 123-124 GFLOP/s): each activation block loaded from L2 now serves four rows (llama.cpp's shape).
constexpr int kRowsQ8_0 = 4, kColsQ8_0 = 4;
constexpr int kRowsK = 2, kColsK = 2;    // 256-element k-quant blocks (an int and a float sum per output)
constexpr int kRowsF = 2, kColsF = 4;    // float types
// F16 prefill (one accumulator register per output and pass, x86_float.inc): 12 accumulators, three
// weight rows and one activation fill the 16 registers. matmul-bench -P 64, best of 20, three
// rounds: 3×4 161-168 GFLOP/s, 2×6 155-157, 2×4 (before) 126-159, 4×3 81-95.
constexpr int kRowsF16 = 3, kColsF16 = 4;
// Grid IQ types (x86_iq.inc): an int and a float sum per output; one row, so the costly grid decode
// serves 8 positions (1×8 measured faster than 2×2, 2×4, 2×8 and 1×16).
constexpr int kRowsIQ = 1, kColsIQ = 8;
constexpr int kGroupColsQ4_0 = 4, kGroupColsQ4_K = 4;  // positions per row-group tile (x86_packed_avx2.inc)
constexpr int kGemvRowsQ4_0 = 4, kGemvRowsQ4_K = 4;    // file-layout decode tiles (x86_groups.inc)
}  // namespace

// Each (kind, type) once; a type not named here keeps the scalar kernel.
void fill_kernels_avx2(KernelClaims &k) {
    // low-bit types (x86_lowbit.inc); tiles of 8 outputs, one float register per step
    constexpr int kRowsLB = 2, kColsLB = 4;
    constexpr int kGemvRowsLB = 4;  // decode: rows per tile, sharing the activation and the float steps
    k.dot(tid::TQ1_0, dot_tq1_0);
    k.gemm(tid::TQ1_0, tiles<TileTQ1_0, kRowsLB, kColsLB>());
    k.gemv(tid::TQ1_0, tiles<TileTQ1_0, kGemvRowsLB, 1>());
    k.dot(tid::TQ2_0, dot_tq2_0);
    k.gemm(tid::TQ2_0, tiles<TileTQ2_0, kRowsLB, kColsLB>());
    k.gemv(tid::TQ2_0, tiles<TileTQ2_0, 1, 1>());  // one stream: 8 rows' streams measured 0.6x
    k.dot(tid::MXFP4, dot_mxfp4);
    k.gemm(tid::MXFP4, tiles<TileMXFP4, kRowsLB, kColsLB>());
    k.gemv(tid::MXFP4, tiles<TileMXFP4, 1, 1>());  // one stream per row: TileMXFP4::row_steps
    k.dot(tid::NVFP4, dot_nvfp4);
    k.gemm(tid::NVFP4, tiles<TileNVFP4, kRowsLB, kColsLB>());
    k.gemv(tid::NVFP4, tiles<TileNVFP4, kGemvRowsLB, 1>());
    k.dot(tid::Q1_0, dot_q1_0);
    k.gemm(tid::Q1_0, tiles<TileQ1_0, kRowsLB, kColsLB>());
    k.gemv(tid::Q1_0, tiles<TileQ1_0, kGemvRowsLB, 1>());
    k.dot(tid::Q2_0, dot_q2_0);
    k.gemm(tid::Q2_0, tiles<TileQ2_0, kRowsLB, kColsLB>());
    k.gemv(tid::Q2_0, tiles<TileQ2_0, kGemvRowsLB, 1>());

    // 32-element blocks (x86_q8_0.inc)
    k.dot(tid::Q8_0, dot_q8_0);
    k.gemm(tid::Q8_0, tiles<TileQ8_0<KQ8_0>::T, kRowsQ8_0, kColsQ8_0>());
    k.gemv(tid::Q8_0, tiles<TileQ8_0<KQ8_0>::T, 4, 1>());
    // Q4_0 in groups of 16 rows (x86_groups.inc, x86_packed_avx2.inc): packed weights and, for
    // prefill, file-layout rows packed on the fly; decode of file-layout rows in 4-row tiles. The
    // AVX-512 unit's arithmetic throughout, so the same bits.
    k.act_sums(tid::Q4_0);
    claim_groups<Q4_0KindY, kGroupColsQ4_0>(k, tid::Q4_0, dot_q4_0, tiles<TileQ4_0Rows::T, kGemvRowsQ4_0, 1>(), pack_q4_0);
    k.dot(tid::Q5_0, dot_q5_0);
    k.gemm(tid::Q5_0, tiles<TileQ8_0<KQ5_0>::T, kRowsQ, kColsQ>());
    k.gemv(tid::Q5_0, gemv_tiles<TileQ8_0<KQ5_0>::T>());
    k.dot(tid::IQ4_NL, dot_iq4_nl);
    k.gemm(tid::IQ4_NL, tiles<TileQ8_0<KIQ4_NL>::T, kRowsQ, kColsQ>());
    k.gemv(tid::IQ4_NL, gemv_tiles<TileQ8_0<KIQ4_NL>::T>());
    k.dot(tid::Q4_1, dot_q4_1);
    k.gemm(tid::Q4_1, tiles<TileQ8_1<BlockQ4_1, UnpackQ4_1>::T, kRowsQ, kColsQ>());
    k.dot(tid::Q5_1, dot_q5_1);
    k.gemm(tid::Q5_1, tiles<TileQ8_1<BlockQ5_1, UnpackQ5_1>::T, kRowsQ, kColsQ>());

    // k-quants (x86_kquant.inc)
    k.dot(tid::Q2_K, dot_q2_k);
    k.dot(tid::Q3_K, dot_q3_k);
    // Q4_K as Q4_0 above (x86_groups.inc, x86_packed_avx2.inc)
    claim_groups<Q4_KKindY, kGroupColsQ4_K>(k, tid::Q4_K, dot_q4_k, tiles<TileQ4_KRows::T, kGemvRowsQ4_K, 1>(), pack_q4_k);
    k.dot(tid::Q5_K, dot_q5_k);
    k.gemm(tid::Q5_K, tiles<TileQ5_K::T, kRowsK, kColsK>());
    k.gemv(tid::Q5_K, tiles<TileQ5_K::T, 4, 1>());
    k.dot(tid::Q6_K, dot_q6_k);
    k.gemm(tid::Q6_K, tiles<TileQ6_K::T, kRowsK, kColsK>());
    k.gemv(tid::Q6_K, tiles<TileQ6_K::T, 2, 1>());
    k.dot(tid::IQ4_XS, dot_1x1<TileIQ4XS<>::T>);
    k.gemm(tid::IQ4_XS, tiles<TileIQ4XS<true>::T, kRowsK, kColsK>(act_q8_k_paired));
    k.gemv(tid::IQ4_XS, tiles<TileIQ4XS<true>::T, 2, 1>(act_q8_k_paired));

    // grid-quantized IQ types (x86_iq.inc)
    k.dot(tid::IQ2_XXS, dot_iq2_xxs);
    k.gemm(tid::IQ2_XXS, tiles<TileIQ2XXS, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ3_S, dot_iq3_s);
    k.gemm(tid::IQ3_S, tiles<TileIQ3S, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ2_XS, dot_iq2_xs);
    k.gemm(tid::IQ2_XS, tiles<TileIQ2XS, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ2_S, dot_iq2_s);
    k.gemm(tid::IQ2_S, tiles<TileIQ2S, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ3_XXS, dot_iq3_xxs);
    k.gemm(tid::IQ3_XXS, tiles<TileIQ3XXS, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ1_S, dot_iq1_s);
    k.gemm(tid::IQ1_S, tiles<TileIQ1S, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ1_M, dot_iq1_m);
    k.gemm(tid::IQ1_M, tiles<TileIQ1M, kRowsIQ, kColsIQ>());

    // Float types, attention's weighted sum, activation conversion (x86_float.inc)
    k.dot(tid::F32, dot_f32);
    k.gemm(tid::F32, tiles<TileAccs<kF32>::T, kRowsF, kColsF>());
    k.dot(tid::F16, dot_f16);
    k.gemm(tid::F16, split_tiles<TileAccs<kF16, true>::T, TileAccs<kF16, true, true>::T, kRowsF16, kColsF16>(
                         act_f16_split, repack_f16_split));
    k.dot(tid::BF16, dot_bf16);
    k.gemm(tid::BF16, tiles<TileFloat<kBF16>::T, kRowsF, kColsF>());
    k.wsum(wsum);
    k.wsum_f16(wsum_f16);
    k.exp(exp_rows);
    k.delta_step(delta_step);
    k.act(tid::F16, act_f16);
    k.act(tid::Q8_0, act_q8_0<false>);
    k.act_packed(tid::Q8_0, act_q8_0<true>);
    k.act(tid::Q8_K, act_q8_k);
    k.act_packed(tid::Q8_K, act_q8_k);  // Q8_K blocks carry their own sums
}

}  // namespace llm
#endif
