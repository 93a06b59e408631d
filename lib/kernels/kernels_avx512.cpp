// x86 kernels for AVX-512 F/BW/VL/DQ + VNNI: VNNI int8 dots on 256-bit lanes, 512-bit float dots,
// wide tiles that keep two weight rows in one zmm, and Q4_0 / Q4_K in row groups (flags in
// cmake/LlmKernels.cmake; run only when kernels/dispatch.cpp has seen the CPU support them). Bodies
// in the x86_*.inc files; which one serves each type is fill_kernels_avx512 below.
#include "kernels/kernel_isa.h"
#include "kernels/lowbit.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 headers seed masked builtins with _mm512_undefined_*(), which its own
// -Wuninitialized flags at every inlined call site: silence that false positive in this unit only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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
#include "kernels/x86_packed.inc"

// Tile shapes for 32 vector registers: a 4×4 tile of accumulators leaves room for the unpacked operands.
constexpr int kRowsQ = 4, kColsQ = 8;    // 32-element blocks (rows go in pairs: 2 × 8 zmm accumulators)
constexpr int kRowsQ8 = 6, kColsQ8 = 8;  // Q8_0: 3 × 8 zmm accumulators (a few spill; still the fastest shape measured)
constexpr int kRowsK = 4, kColsK = 4;    // 256-element k-quant blocks (an int and a float sum per output)
constexpr int kRowsIQ4XS = 3, kColsIQ4XS = 3;  // a zmm int and a ymm float sum per output
constexpr int kRowsF = 4, kColsF = 4;    // float types
constexpr int kRowsF16 = 5, kColsF16 = 5;  // F16 prefill over split activations: 25 accumulators, 5 + 1 operands
// Grid IQ types: two positions per zmm; the costly grid decode of a row is shared by the tile's
// positions, so wide tiles pay even with a few accumulators spilled (2×16 and IQ1_M's 1×16 measured best).
constexpr int kRowsIQ = 2, kColsIQ = 16;
constexpr int kRowsIQ1M = 1, kColsIQ1M = 16;  // two int and two float sums per output
constexpr int kGroupColsQ4_0 = 8, kGroupColsQ4_K = 4;  // positions per row-group tile (x86_packed.inc)
}  // namespace

// Each (kind, type) once; a type not named here keeps the scalar kernel. The single dots are the
// 256-bit 1×1 tiles; the wide tiles (…Z) give each output the same bits.
void fill_kernels_avx512(KernelClaims &k) {
    // low-bit types (x86_lowbit.inc). Tiles: the ternary types' 8 chunk sums per output fill 16
    // registers at 4×4; the others, one chunk per sum and paired rows, measured fastest at 8×4.
    constexpr int kRowsLB = 4, kColsLB = 4, kRowsLB32 = 8, kColsLB32 = 4;
    constexpr int kGemvRowsLB = 8;  // decode: rows per tile, sharing the activation and the float steps
    k.dot(tid::TQ1_0, dot_tq1_0);
    k.gemm(tid::TQ1_0, tiles<TileTQ1_0, kRowsLB, kColsLB>());
    k.gemv(tid::TQ1_0, tiles<TileTQ1_0, 1, 1>());  // one stream (4 rows measured 0.9x of it)
    k.packed_gemm(tid::TQ1_0, {group_tile<PackedBody, TQ1_0Kind, kGroupColsQ4_K>, 16, kGroupColsQ4_K});
    k.packed_gemv(tid::TQ1_0, {group_tile<PackedBody, TQ1_0Kind, 1>, 64, 1});
    k.dot(tid::TQ2_0, dot_tq2_0);
    k.gemm(tid::TQ2_0, tiles<TileTQ2_0, kRowsLB, kColsLB>());
    k.gemv(tid::TQ2_0, tiles<TileTQ2_0, 1, 1>());  // one stream: 8 rows' streams measured 0.6x
    k.dot(tid::MXFP4, dot_mxfp4);
    k.gemm(tid::MXFP4, tiles<TileMXFP4, kRowsLB32, kColsLB32>());
    k.gemv(tid::MXFP4, tiles<TileMXFP4, 1, 1>());  // one stream per row: TileMXFP4::row_steps
    // Resident MXFP4 in groups of 16 rows (x86_packed.inc): 16 rows' sums in one zmm, each lane its
    // row's chain of adds; the file-layout tiles above (streamed blocks) give the same bits.
    k.packed_gemm(tid::MXFP4, {group_tile<PackedBody, MXFP4Kind, kGroupColsQ4_0>, 16, kGroupColsQ4_0});
    k.packed_gemv(tid::MXFP4, {group_tile<PackedBody, MXFP4Kind, 1>, 64, 1});
    k.pack(tid::MXFP4, pack_mxfp4);
    k.dot(tid::NVFP4, dot_nvfp4);
    k.gemm(tid::NVFP4, tiles<TileNVFP4, kRowsLB32, kColsLB32>());
    k.gemv(tid::NVFP4, tiles<TileNVFP4, kGemvRowsLB, 1>());
    k.packed_gemm(tid::NVFP4, {group_tile<PackedBody, NVFP4Kind, kGroupColsQ4_K>, 16, kGroupColsQ4_K});
    k.packed_gemv(tid::NVFP4, {group_tile<PackedBody, NVFP4Kind, 1>, 64, 1});
    k.pack(tid::NVFP4, pack_nvfp4);
    k.dot(tid::Q1_0, dot_q1_0);
    k.gemm(tid::Q1_0, tiles<TileQ1_0, kRowsLB32, kColsLB32>());
    k.gemv(tid::Q1_0, tiles<TileQ1_0, kGemvRowsLB, 1>());
    k.dot(tid::Q2_0, dot_q2_0);
    k.gemm(tid::Q2_0, tiles<TileQ2_0, kRowsLB32, kColsLB32>());
    k.gemv(tid::Q2_0, tiles<TileQ2_0, kGemvRowsLB, 1>());

    // 32-element blocks (x86_q8_0.inc)
    k.dot(tid::Q8_0, dot_q8_0);
    k.gemm(tid::Q8_0, tiles<TileQ8_0Z<WideShiftedY<KQ8_0>, KQ8_0>::T, kRowsQ8, kColsQ8>());
    k.gemv(tid::Q8_0, gemv_tiles<TileQ8_0<KQ8_0>::T>());
    k.dot(tid::Q5_0, dot_q5_0);
    k.gemm(tid::Q5_0, tiles<TileQ8_0Z<WideOffset<KQ5_0>, KQ5_0>::T, kRowsQ, kColsQ>());
    k.gemv(tid::Q5_0, gemv_tiles<TileQ8_0<KQ5_0>::T>());
    k.dot(tid::IQ4_NL, dot_iq4_nl);
    k.gemm(tid::IQ4_NL, tiles<TileQ8_0Z<WideSigned<KIQ4_NL>, KIQ4_NL>::T, kRowsQ, kColsQ>());
    k.gemv(tid::IQ4_NL, gemv_tiles<TileQ8_0<KIQ4_NL>::T>());
    k.dot(tid::Q4_1, dot_q4_1);
    k.gemm(tid::Q4_1, tiles<TileQ8_1<BlockQ4_1, UnpackQ4_1>::T, kRowsQ, kColsQ>());
    k.dot(tid::Q5_1, dot_q5_1);
    k.gemm(tid::Q5_1, tiles<TileQ8_1<BlockQ5_1, UnpackQ5_1>::T, kRowsQ, kColsQ>());

    // Q4_0 in groups of 16 rows (x86_packed.inc): packed weights, and file-layout rows packed on the
    // fly by the same tiles; the single dot has their arithmetic.
    k.act_sums(tid::Q4_0);
    claim_groups<Q4_0Kind, kGroupColsQ4_0>(k, tid::Q4_0, dot_q4_0, {group_tile<FileBody, Q4_0Kind, 1>, 16, 1}, pack_q4_0);

    // k-quants (x86_kquant.inc; Q4_K as Q4_0 above, x86_packed.inc)
    k.dot(tid::Q2_K, dot_q2_k);
    k.dot(tid::Q3_K, dot_q3_k);
    claim_groups<Q4_KKind, kGroupColsQ4_K>(k, tid::Q4_K, dot_q4_k, {group_tile<FileBody, Q4_KKind, 1>, 16, 1}, pack_q4_k);
    k.dot(tid::Q5_K, dot_q5_k);
    k.gemm(tid::Q5_K, tiles<TileQ5_KZ::T, kRowsK, kColsK>());
    k.gemv(tid::Q5_K, gemv_tiles<TileQ5_K::T>());
    k.dot(tid::Q6_K, dot_q6_k);
    k.gemm(tid::Q6_K, tiles<TileQ6_KZ::T, kRowsK, kColsK>());
    k.gemv(tid::Q6_K, gemv_tiles<TileQ6_K::T>());
    k.dot(tid::IQ4_XS, dot_1x1<TileIQ4XSZ::T>);
    k.gemm(tid::IQ4_XS, tiles<TileIQ4XSZ::T, kRowsIQ4XS, kColsIQ4XS>());
    k.gemv(tid::IQ4_XS, gemv_tiles<TileIQ4XSZ::T>());

    // grid-quantized IQ types (x86_iq.inc)
    k.dot(tid::IQ2_XXS, dot_iq2_xxs);
    k.gemm(tid::IQ2_XXS, tiles<TileGridZ<KIQ2XXS>::T, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ3_S, dot_iq3_s);
    k.gemm(tid::IQ3_S, tiles<TileGridZ<KIQ3S>::T, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ2_XS, dot_iq2_xs);
    k.gemm(tid::IQ2_XS, tiles<TileGridZ<KIQ2XS>::T, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ2_S, dot_iq2_s);
    k.gemm(tid::IQ2_S, tiles<TileGridZ<KIQ2S>::T, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ3_XXS, dot_iq3_xxs);
    k.gemm(tid::IQ3_XXS, tiles<TileGridZ<KIQ3XXS>::T, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ1_S, dot_iq1_s);
    k.gemm(tid::IQ1_S, tiles<TileIQ1SZ, kRowsIQ, kColsIQ>());
    k.dot(tid::IQ1_M, dot_iq1_m);
    k.gemm(tid::IQ1_M, tiles<TileIQ1MZ, kRowsIQ1M, kColsIQ1M>());

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
