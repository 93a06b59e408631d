// The seam between the dispatcher and the per-ISA translation units. Those units are compiled with
// their own -m flags, so they include nothing that defines inline functions with external linkage:
// a weak inline body compiled with AVX-512 could otherwise be picked by the linker for baseline
// callers (blocks.h's helpers have internal linkage for that reason).
#pragma once

#include <cstdint>

#include "kernels/blocks.h"

namespace llm {

// n weight elements (one row, on-disk encoding) · n activations (vec_dot_type form) -> f32.
using VecDotFn = float (*)(int64_t n, const void *w, const void *a);

// A register tile of dot products: y[p·ys + r] = dot(row r of w, row p of a) for r < nr ≤ rm,
// p < np ≤ rn, rows ws and as bytes apart. Each output is bit-identical to the VecDotFn of the
// same table, whatever the tile shape.
using GemmFn = void (*)(int64_t n, const void *w, uint64_t ws, int nr, const void *a, uint64_t as, int np, float *y,
                        int64_t ys);
struct GemmKernel {
    GemmFn fn = nullptr;
    int rm = 1, rn = 1;
};

// Type ids as in GGUF (gguf/types.h), repeated here so ISA units need no other header.
namespace tid {
constexpr int F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
              Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30;
}

// The scalar quantizers (act_quant.cpp), which SIMD units fall back to for blocks they leave to them.
// The _sums form also writes each block's Σq as an int32 at sums + 4·block (if sums is not null).
void quantize_row_q8_0_sums(const float *x, BlockQ8_0 *y, uint8_t *sums, int64_t n);
void quantize_row_q8_K(const float *x, BlockQ8_K *y, int64_t n);

// x: [n] f32 -> dst: one activation row, the exact bytes of quantize_act_row for that format.
using ActFn = void (*)(const float *x, void *dst, int64_t n);

// Attention's probability-weighted sum of value rows:
// out[g·os + d] = Σ_t w[g·ws + t] · v[t·vs + d] for g < ng, d < dim, t < n_rows; each output a chain
// of a rounded product then a rounded add, t ascending from 0, so every path gives the same bits.
using WeightedSumFn = void (*)(const float *w, int64_t ws, int ng, const float *v, int64_t vs, int64_t n_rows,
                               int64_t dim, float *out, int64_t os);

// kernels/repack.h's pack_group for one type: kPackRows rows at src (row_bytes apart) -> dst.
using PackFn = void (*)(const uint8_t *src, uint64_t row_bytes, int64_t n_in, uint8_t *dst);

// What an ISA unit fills, indexed by type id; entries it does not implement stay untouched.
struct KernelSlots {
    VecDotFn *fn;
    GemmKernel *gemm;         // tiles for the types with a tiled kernel
    GemmKernel *gemv;         // tiles for a single position (decode): fewer interleaved rows stream better
    GemmKernel *packed_gemm;  // tiles over weights in the packed layout (kernels/repack.h)
    GemmKernel *packed_gemv;
    PackFn *pack;  // a faster pack_group; must write exactly its bytes
    bool *act_sums;  // the type's tiles want activation rows with block sums (repack.h), packed or not
    ActFn *act;         // indexed by the activation format's type id (F16, Q8_0, ...)
    ActFn *act_packed;  // the same for repack.h's packed activation rows (blocks, then block sums)
    WeightedSumFn *wsum;
};

// Defined only in builds for the matching architecture.
void vec_dot_fill_avx2(const KernelSlots &k);
void vec_dot_fill_avx512(const KernelSlots &k);
void vec_dot_fill_neon(const KernelSlots &k);
void vec_dot_fill_dotprod(const KernelSlots &k);

}  // namespace llm
