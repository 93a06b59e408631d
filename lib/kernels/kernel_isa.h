// The seam between the dispatcher and the per-ISA translation units. Those units are compiled with
// their own -m flags, so they include nothing that defines inline functions with external linkage:
// a weak inline body compiled with AVX-512 could otherwise be picked by the linker for baseline
// callers (blocks.h's helpers have internal linkage for that reason).
#pragma once

#include <cstdint>

#include "kernels/blocks.h"

namespace llm {

// The order of every F32 and F16 dot product (llama.cpp's CPU order on AVX-512, whose F16 rounding
// of KV cache entries is discontinuous: a 1-ulp difference upstream flips f16 roundings, so the
// dots must give its bits, not just its accuracy). Element i of the first n - n % 64 goes to accumulator
// i % 64, each accumulator a chain of fused multiply-adds from 0 in ascending i; the 64 accumulators fold by
// halving (s[k] += s[k + h] for h = 32, 16, ..., 1); the tail elements then follow one at a time:
// F32 as GCC builds ggml's leftover loop (dot_tail_f32 below), F16 as exact products summed in
// double and rounded to float once. Every path (scalar, AVX2, AVX-512, NEON, tiles) gives these bits, whatever
// its vector width: a width of w lanes holds the accumulators in 64/w registers, which fold in the same
// tree. (F16 products are exact in f32, so their multiply-add is a plain add.)
constexpr int kDotAccs = 64;

// The fold of the 64 accumulators, in place, of which only the first m (≥ 1) may be nonzero (the others are
// not read: adding their zeros would change nothing); internal linkage (see above).
static inline float fold_dot_accs(float *s, int m = kDotAccs) {
    for (int h = kDotAccs / 2; h >= 1; h /= 2) {
        for (int k = 0; k < h && k + h < m; ++k) s[k] += s[k + h];
        if (m > h) m = h;
    }
    return s[0];
}

// x·y rounded to f32 on its own: the empty asm hides the product from the compiler, which could
// otherwise fuse it into the add that follows (GCC does on aarch64, and in -mfma units).
static inline float mul_unfused(float x, float y) {
    float p = x * y;
#if defined(__x86_64__)
    __asm__("" : "+x"(p));
#elif defined(__aarch64__)
    __asm__("" : "+w"(p));
#else
    volatile float v = p;
    p = v;
#endif
    return p;
}

// The F32 tail of n_tail < 64 elements after the folded accumulators s. ggml's leftover loop is
// `sum += x[i]*y[i]`, which GCC (-O3 -march=native, as the goldens were built) vectorises as
// products in 16- and then 8-lane registers added to sum one lane at a time, leaving the last
// n_tail % 8 to scalar fused multiply-adds: so the first n_tail & ~7 elements add rounded
// products, the rest fuse.
static inline float dot_tail_f32(float s, const float *x, const float *y, int64_t n_tail) {
    const int64_t n_unfused = n_tail & ~int64_t{7};
    int64_t i = 0;
    for (; i < n_unfused; ++i) s += mul_unfused(x[i], y[i]);
    for (; i < n_tail; ++i) s = __builtin_fmaf(x[i], y[i], s);
    return s;
}

// n weight elements (one row, on-disk encoding) · n activations (vec_dot_type form) -> f32.
using VecDotFn = float (*)(int64_t n, const void *w, const void *a);

// A register tile of dot products: y[p·ys + r] = dot(row r of w, row p of a) for r < nr ≤ rm,
// p < np ≤ rn, rows ws and as bytes apart. Each output is bit-identical to the VecDotFn of the
// same table, whatever the tile shape.
using GemmFn = void (*)(int64_t n, const void *w, uint64_t ws, int nr, const void *a, uint64_t as, int np, float *y,
                        int64_t ys);
// x: [n] f32 -> dst: one activation row, the exact bytes of quantize_act_row for that format (or,
// as a GemmKernel's act, those bytes in the order its tiles read).
using ActFn = void (*)(const float *x, void *dst, int64_t n);
// One weight row of n elements, reordered from src into dst.
using WeightRowFn = void (*)(const void *src, void *dst, int64_t n);

struct GemmKernel {
    GemmFn fn = nullptr;
    int rm = 1, rn = 1;
    // Set when the tiles read their activation rows in an order of their own (same bytes per row):
    // the matmul converts the activations it hands fn with this instead of the type's act (F16's
    // prefill, AVX2's IQ4_XS). Only fn reads that order; the single dot reads the type's.
    ActFn act = nullptr;
    // Set for tiles whose passes read a weight row in strides (F16's, one chunk in every kDotAccs
    // elements): when one register tile's rows outgrow L1 (matmul.cpp, kRepackTileBytes), the matmul copies
    // each tile's rows with `repack` into the order act writes, and fn_repacked reads them in sequence.
    // The same elements meet in the same accumulators: the bits do not change.
    WeightRowFn repack = nullptr;
    GemmFn fn_repacked = nullptr;
    // Bytes of converted activation rows per panel: the positions a thread's weight rows pass over
    // while the panel stays in L2 (matmul.cpp).
    uint32_t panel_bytes = 256 << 10;
};

// Type ids as in GGUF (gguf/types.h), repeated here so ISA units need no other header.
namespace tid {
constexpr int F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
              Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30;
constexpr int IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ3_S = 21, IQ2_S = 22, IQ1_M = 29;  // ref_iq.cpp
}  // namespace tid

// The scalar quantizers (act_quant.cpp), which SIMD units fall back to for blocks they leave to them.
// The _sums form also writes each block's Σq as an int32 at sums + 4·block (if sums is not null).
void quantize_row_q8_0_sums(const float *x, BlockQ8_0 *y, uint8_t *sums, int64_t n);
void quantize_row_q8_K(const float *x, BlockQ8_K *y, int64_t n);
// ExpFn's scalar definition (kernels_ref.cpp), for lanes a SIMD unit leaves to it.
float exp_ggml(float x);

// Attention's probability-weighted sum of value rows:
// out[g·os + d] = Σ_t w[g·ws + t] · v[t·vs + d] for g < ng, d < dim, t < n_rows, each output the F32
// dot order above over its column, as llama.cpp's V·P runs ggml_vec_dot_f32 over its transposed
// values: term t goes to accumulator t % 64 as a fused multiply-add, and the accumulators fold by halving.
// llama.cpp pads its rows to a multiple of 64 with zero weights, which add nothing: no tail. The
// rows may come in two runs, read in place (a ring that wrapped): row t is at v + t·vs for
// t < n_first, else at v2 + (t - n_first)·vs (n_first = n_rows: one run, v2 unused).
using WeightedSumFn = void (*)(const float *w, int64_t ws, int ng, const float *v, int64_t vs, int64_t n_rows,
                               int64_t dim, float *out, int64_t os, const float *v2, int64_t n_first);
// The same over f16 value rows (an F16 KV cache), each element widened exactly to f32, in the F16
// dot order above (llama.cpp's V·P over its transposed f16 values, the weights being the
// probabilities rounded to f16): term t of an output goes to accumulator t % 64 as a rounded product then
// a rounded add (an exact product when w holds f16 values), and the accumulators fold by halving.
using WeightedSumF16Fn = void (*)(const float *w, int64_t ws, int ng, const uint16_t *v, int64_t vs, int64_t n_rows,
                                  int64_t dim, float *out, int64_t os, const uint16_t *v2, int64_t n_first);

// y[i] = e^x[i] as llama.cpp's AVX-512 ggml_v_expf evaluates it (its softmax and SiLU run it on
// 16-element chunks): a polynomial of fused multiply-adds on the reduced argument, then an exact
// scaling by 2^n; 0 below and +inf above its range. Every path gives the scalar bits.
using ExpFn = void (*)(const float *x, float *y, int64_t n);

// One token of the gated delta rule on one value head (model/mixer_gated_delta_net.cpp). S: the
// head's hd × hd state stored by value index (row jj holds S[·][jj], contiguous); q, k, v: [hd]. Row
// by row: row *= decay; d = (v[jj] - row·k)·beta; row += k·d (each a fused multiply-add);
// y[jj] = (row·q)·scale, the dots in the F32 order above. Rows are independent, so this is llama.cpp's
// order (scale all, dot all, update all, dot all) bit for bit; every path gives the scalar bits.
// y null: the state only (a replay).
using DeltaStepFn = void (*)(float *S, int64_t hd, const float *q, const float *k, const float *v, float decay,
                             float beta, float scale, float *y);

// kernels/repack.h's pack_group for one type: kPackRows rows at src (row_bytes apart) -> dst.
using PackFn = void (*)(const uint8_t *src, uint64_t row_bytes, int64_t n_in, uint8_t *dst);

struct KernelTable;  // kernels/kernel_table.h

// An ISA unit's way into its table, which starts as a copy of the scalar one (kernels_scalar()).
// Each (kind, type) is claimed once: a claim must find the entry still holding the scalar default,
// else the table keeps the first claim and counts a clash (KernelTable::clashes, which the kernel
// tests require to be 0), so no later registration silently replaces an earlier one. The members
// are defined in dispatch.cpp, compiled for the baseline ISA: nothing here is inline.
class KernelClaims {
public:
    explicit KernelClaims(KernelTable &table);
    void dot(int type, VecDotFn f);     // fn[type]: the single dot product
    void gemm(int type, GemmKernel g);  // tiles for several positions (prefill)
    void gemv(int type, GemmKernel g);  // tiles for a single position (decode): fewer interleaved rows stream better
    void packed_gemm(int type, GemmKernel g);  // tiles over weights in the packed layout (kernels/repack.h)
    void packed_gemv(int type, GemmKernel g);
    void pack(int type, PackFn f);  // a faster pack_group; must write exactly its bytes
    void act_sums(int type);        // the type's tiles want activation rows with block sums (repack.h), packed or not
    void act(int format, ActFn f);  // activation conversion, by the format's type id (F16, Q8_0, ...)
    void act_packed(int format, ActFn f);  // the same for repack.h's packed activation rows (blocks, then block sums)
    void wsum(WeightedSumFn f);
    void wsum_f16(WeightedSumF16Fn f);
    void exp(ExpFn f);
    void delta_step(DeltaStepFn f);

private:
    KernelTable &t_;
};

// Defined only in builds for the matching architecture.
void fill_kernels_avx2(KernelClaims &k);
void fill_kernels_avx512(KernelClaims &k);
void fill_kernels_neon(KernelClaims &k);
void fill_kernels_dotprod(KernelClaims &k);

}  // namespace llm
