// Strict UTF-8 decoding and encoding (the Unicode standard's table of well-formed byte sequences).
#include "core/utf8.h"

namespace llm::utf8 {

bool decode_at(std::string_view s, size_t i, uint32_t *cp, size_t *len) {
    const auto c = static_cast<unsigned char>(s[i]);
    *cp = c;
    *len = 1;
    if (c < 0x80) return true;
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    uint32_t v = 0;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
        if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, v = c & 0x07;
        if (c == 0xF0) lo = 0x90;  // overlong below U+10000
        if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
        return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return false;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    *len = n;
    return true;
}

void append(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

size_t invalid_at(std::string_view s) {
    uint32_t cp;
    size_t len;
    for (size_t i = 0; i < s.size(); i += len) {
        if (!decode_at(s, i, &cp, &len)) return i;
    }
    return std::string_view::npos;
}

}  // namespace llm::utf8
