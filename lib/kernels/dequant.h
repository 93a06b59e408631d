// Scalar reference dequantizers: one row of a weight in its on-disk encoding -> f32. These are the
// oracle every faster path is tested against; they reproduce ggml's values bit for bit.
#pragma once

#include <cstdint>

#include "gguf/types.h"

namespace llm {

// True if we can compute with tensors of this type.
bool type_supported(TensorType t);

// Decodes n elements (a multiple of the type's block size) from src into dst.
void dequantize_row(TensorType t, const void *src, float *dst, int64_t n);

}  // namespace llm
