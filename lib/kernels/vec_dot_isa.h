// The seam between the dispatcher and the per-ISA translation units. Those units are compiled with
// their own -m flags, so they include nothing that defines inline functions: a weak inline body
// compiled with AVX-512 could otherwise be picked by the linker for baseline callers.
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
constexpr int F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11,
              Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30;
}

// Each fills fn[type id] for the types it implements and leaves the others untouched. Defined only
// in builds for the matching architecture.
// gemm[type id] likewise, for the types with a tiled kernel.
// gemv[type id]: tiles for a single position (decode), where fewer interleaved rows stream better.
void vec_dot_fill_avx2(VecDotFn *fn, GemmKernel *gemm, GemmKernel *gemv);
void vec_dot_fill_avx512(VecDotFn *fn, GemmKernel *gemm, GemmKernel *gemv);
void vec_dot_fill_neon(VecDotFn *fn, GemmKernel *gemm, GemmKernel *gemv);
void vec_dot_fill_dotprod(VecDotFn *fn, GemmKernel *gemm, GemmKernel *gemv);

}  // namespace llm
