// The ggml tensor type table: what a GGUF type id means in bytes. Facts from the GGUF spec §6.
#pragma once

#include <cstdint>
#include <string>

namespace llm {

enum class TensorType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

constexpr uint32_t kTensorTypeCount = 43;

struct TypeInfo {
    const char *name;   // nullptr: removed / unknown id
    uint32_t block;     // elements per block
    uint32_t bytes;     // bytes per block
};

// Info for a type id; .name == nullptr for ids that no file may use.
TypeInfo type_info(uint32_t id);
inline TypeInfo type_info(TensorType t) { return type_info(static_cast<uint32_t>(t)); }
std::string type_name(uint32_t id);
inline std::string type_name(TensorType t) { return type_name(static_cast<uint32_t>(t)); }

// Bytes of one row of n elements (n must be a multiple of the block size).
inline uint64_t row_bytes(TensorType t, uint64_t n) {
    TypeInfo ti = type_info(t);
    return n / ti.block * ti.bytes;
}

}  // namespace llm
