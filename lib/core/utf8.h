// UTF-8 for the whole library: how long a sequence a lead byte announces (the tokenizers split text
// into characters by it, as llama.cpp does), strict decoding, encoding, and validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llm::utf8 {

// Bytes of the sequence `lead` starts, read from its top four bits alone: 1 for ASCII and for a stray
// continuation byte, 2 for C0-DF, 3 for E0-EF, 4 for F0-FF. It does not check the sequence; callers
// clamp it to the bytes left.
inline size_t seq_len(unsigned char lead) {
    static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

// Decodes the code point at byte i of s (i < s.size()) into *cp and its byte length into *len, and
// returns true, if a well-formed sequence starts there (no overlong forms, surrogates or code points
// past U+10FFFF). Otherwise false, with *cp the byte at i and *len 1.
bool decode_at(std::string_view s, size_t i, uint32_t *cp, size_t *len);

// Appends cp (at most U+10FFFF) as UTF-8.
void append(std::string &out, uint32_t cp);

// Offset of the first byte of s that is not part of well-formed UTF-8, or npos.
size_t invalid_at(std::string_view s);

}  // namespace llm::utf8
