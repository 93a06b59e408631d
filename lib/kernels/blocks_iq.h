// On-disk block layouts of the grid-quantized IQ types (ggml-common.h's block_iq*), 256 weights
// each; the grids their indices point into are iq_codebooks.h.
#pragma once

#include <cstdint>

#include "kernels/blocks.h"

namespace llm {

#pragma pack(push, 1)
// Per 32 weights: 4 grid bytes, then 4×7 sign bits and a 4-bit scale, in two uint32 (as 4 uint16).
struct BlockIQ2_XXS { uint16_t d; uint16_t qs[QK_K / 8]; };
// Per 8 weights: 9-bit grid index | 7 sign bits << 9; two 4-bit scales per 32 weights.
struct BlockIQ2_XS { uint16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; };
// qs: 32 grid index low bytes, then 32 sign bytes; qh: 2 high index bits per 8 weights.
struct BlockIQ2_S { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; };
// qs: 64 grid indices (4 weights each), then per 32 weights a uint32 of 4×7 sign bits and a 4-bit scale.
struct BlockIQ3_XXS { uint16_t d; uint8_t qs[3 * QK_K / 8]; };
// qs + qh: 9-bit grid indices (4 weights each); one sign byte per 8 weights; a 4-bit scale per 32.
struct BlockIQ3_S { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64]; };
// qs + 3 bits of qh: 11-bit grid indices (8 weights each); qh also holds a 3-bit scale and the delta sign per 32.
struct BlockIQ1_S { uint16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; };
// No d field: the f16 block scale is spread over the top 4 bits of the 4 uint16 of scales.
struct BlockIQ1_M { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; };
#pragma pack(pop)

static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);

}  // namespace llm
