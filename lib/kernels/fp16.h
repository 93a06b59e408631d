// Half and bfloat16 conversions, bit-exact with ggml (round-to-nearest-even, subnormals, NaN).
#pragma once

#include <cstdint>
#include <cstring>

namespace llm {

inline float bits_to_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float fp16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) return bits_to_f32(sign | 0x7F800000 | (man << 13));  // inf / nan
    if (exp == 0) {
        if (man == 0) return bits_to_f32(sign);
        // subnormal: value = man * 2^-24
        float v = static_cast<float>(man) * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_fp16(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7FFFFFFF;
    if (absx >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (absx > 0x7F800000 ? 0x200 : 0));
    if (absx >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to inf
    if (absx < 0x38800000) {
        // subnormal or zero in half: round absx * 2^24 to an integer, ties to even
        float v = bits_to_f32(absx) * 16777216.0f;
        uint32_t m = static_cast<uint32_t>(v);
        float rem = v - static_cast<float>(m);
        if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
        return static_cast<uint16_t>(sign | m);
    }
    uint32_t mant = absx & 0x7FFFFF;
    uint32_t exp = (absx >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_f32(uint16_t b) { return bits_to_f32(static_cast<uint32_t>(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);
    return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

}  // namespace llm
