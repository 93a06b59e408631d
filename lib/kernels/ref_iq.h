// Scalar reference of the grid-quantized IQ types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S): dequantizer and dot product with Q8_K activations, the oracle of their SIMD kernels.
#pragma once

#include <cstdint>

#include "gguf/types.h"
#include "kernels/kernel_table.h"

namespace llm {

// True for the seven types this file decodes.
bool is_iq_grid_type(TensorType t);

// nb blocks of type t -> 256·nb floats, with the roundings of llama.cpp's dequantize_row_iq*.
void dequantize_iq_grid(TensorType t, const void *src, float *dst, int64_t nb);

// Puts the seven reference dot products into v (called by kernels_scalar()).
void fill_iq_grid_refs(KernelTable &v);

}  // namespace llm
