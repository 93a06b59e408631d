// Codebooks of llama.cpp's grid-quantized types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S): a block stores, per group of 8 (IQ3: 4) weights, an index into a grid of allowed magnitude
// patterns plus separate signs. The grids are the byte patterns llama.cpp's kernels read (one byte per
// weight, little-endian), so every kernel and the reference can load an entry as one integer.
#pragma once

#include <array>
#include <cstdint>

namespace llm {

// Bytes 8, 25 or 43 (magnitudes; the sign comes from the block).
extern const std::array<uint64_t, 256> kIQ2XXSGrid;
extern const std::array<uint64_t, 512> kIQ2XSGrid;
extern const std::array<uint64_t, 1024> kIQ2SGrid;
// Bytes 4, 12, ..., 62 (IQ3_XXS) and 1, 3, ..., 15 (IQ3_S): four weights per entry.
extern const std::array<uint32_t, 256> kIQ3XXSGrid;
extern const std::array<uint32_t, 512> kIQ3SGrid;
// IQ1_S and IQ1_M: signed bytes -1, 0 or 1 (0xFF, 0x00, 0x01).
extern const std::array<uint64_t, 2048> kIQ1SGrid;
// IQ2_XXS / IQ2_XS / IQ3_XXS store 7 sign bits per 8 weights: the 8th makes the count of negative
// weights even. Entry s: bit j set = weight j negative.
extern const std::array<uint8_t, 128> kIQSigns;

// IQ1_S / IQ1_M: every weight is shifted by ±delta (the sign stored per group) before scaling.
inline constexpr float kIQ1Delta = 0.125f;

}  // namespace llm
