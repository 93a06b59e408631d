// W·x the way llama.cpp's CPU backend computes it (QUANTS.md §5): the activation row is converted
// once to the weight type's "vec_dot_type", then every weight row is dotted with it in integers per
// block with one float scale per block. These numerics, not an f32 dot of dequantized weights, are
// what the golden logits were produced with.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/types.h"
#include "kernels/kernel_isa.h"

namespace llm {

// The format x is converted to before meeting rows of weight type t: F32, F16, BF16, Q8_0, Q8_1, Q8_K.
TensorType vec_dot_type(TensorType t);

// Bytes of one converted activation row of n elements.
uint64_t act_row_bytes(TensorType vdt, int64_t n);

// x: [n] f32 -> dst: one row in format vdt (n a multiple of its block). Bit-exact with llama.cpp's
// x86 quantizers (round half to even, d from the unrounded amax); the same bytes on every ISA.
void quantize_act_row(TensorType vdt, const float *x, void *dst, int64_t n);

void quantize_row_q8_0(const float *x, BlockQ8_0 *y, int64_t n);
void quantize_row_q8_1(const float *x, BlockQ8_1 *y, int64_t n);
void quantize_row_q8_K(const float *x, BlockQ8_K *y, int64_t n);

// One dot product per (weight type): fn[type id] takes n elements of a weight row in its on-disk
// encoding and n activations in vec_dot_type(type) form. nullptr for types we cannot compute.
struct KernelTable {
    const char *isa = "scalar";
    VecDotFn fn[kTensorTypeCount] = {};
    GemmKernel gemm[kTensorTypeCount] = {};  // fn == nullptr: the matmul calls fn pair by pair
    GemmKernel gemv[kTensorTypeCount] = {};  // for a single position (decode); fn == nullptr: fn row by row
    // Over weights repacked into row groups (kernels/repack.h); a type without them is never packed.
    // Each output has the bits of fn on the same row in its file layout.
    GemmKernel packed_gemm[kTensorTypeCount] = {};
    GemmKernel packed_gemv[kTensorTypeCount] = {};
    PackFn pack[kTensorTypeCount] = {};  // nullptr: repack.cpp's portable pack_group
    // The type's gemm/gemv tiles (not fn) read activation rows in packed_act_row_bytes form
    // (blocks, then int32 block sums), as the packed tiles always do.
    bool act_sums[kTensorTypeCount] = {};
    // Activation conversion by format type id; nullptr: quantize_act_row (the reference).
    ActFn act[kTensorTypeCount] = {};
    ActFn act_packed[kTensorTypeCount] = {};  // nullptr: repack.h's quantize_packed_act_row
    WeightedSumFn wsum = nullptr;
    WeightedSumF16Fn wsum_f16 = nullptr;
    ExpFn exp = nullptr;
    DeltaStepFn delta_step = nullptr;
    // Claims that found their entry already taken, or were malformed (KernelClaims): a bug in a fill function.
    int clashes = 0;
};

// The scalar reference every SIMD path is tested against.
const KernelTable &kernels_scalar();

// The fastest table this CPU can run, chosen on first use. LLM_KERNELS=scalar|avx2|avx512|neon|dotprod
// in the environment forces a path (falls back to the best one if the CPU lacks it).
const KernelTable &kernels_active();

// Every table this CPU can run, scalar first (for tests and benchmarks).
std::vector<const KernelTable *> kernels_available();

}  // namespace llm
