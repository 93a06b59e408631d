#include "jinja/text.h"

#include <algorithm>
#include <cstdio>

#include "core/utf8.h"
#include "jinja/value.h"

namespace llm::jinja::text {

uint32_t next_cp(std::string_view s, size_t i, size_t *len) {
    uint32_t cp;
    if (!utf8::decode_at(s, i, &cp, len)) return 0xDC00 + cp;  // one invalid byte, kept as itself on encoding
    return cp;
}

std::vector<uint32_t> decode(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    size_t len;
    for (size_t i = 0; i < s.size(); i += len) out.push_back(next_cp(s, i, &len));
    return out;
}

void append_utf8(std::string &out, uint32_t cp) {
    if (cp >= 0xDC80 && cp <= 0xDCFF) {
        out += static_cast<char>(cp - 0xDC00);  // surrogateescape: the invalid byte itself
    } else {
        utf8::append(out, cp);
    }
}

std::string encode(const std::vector<uint32_t> &cps, size_t begin, size_t end) {
    std::string out;
    out.reserve(end - begin);
    for (size_t i = begin; i < end; i++) append_utf8(out, cps[i]);
    return out;
}

bool is_ascii(std::string_view s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

size_t length(std::string_view s) {
    size_t n = 0, len;
    for (size_t i = 0; i < s.size(); i += len, n++) next_cp(s, i, &len);
    return n;
}

bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string> &chars, bool left, bool right) {
    const auto cps = decode(s);
    std::vector<uint32_t> set;
    if (chars) set = decode(*chars);
    auto drop = [&](uint32_t c) { return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c); };
    size_t b = 0, e = cps.size();
    if (left)
        while (b < e && drop(cps[b])) b++;
    if (right)
        while (e > b && drop(cps[e - 1])) e--;
    return encode(cps, b, e);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string> &sep, int64_t maxsplit,
                               bool from_right, size_t max_parts) {
    std::vector<std::string> out;
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (sep) {
        if (sep->empty()) fail_runtime("ValueError: empty separator");
        if (!from_right) {
            size_t pos = 0;
            while (maxsplit-- > 0) {
                const size_t hit = s.find(*sep, pos);
                if (hit == std::string_view::npos) break;
                if (max_parts && out.size() >= max_parts)
                    fail_limit("a list of more than " + std::to_string(max_parts) + " items");
                out.emplace_back(s.substr(pos, hit - pos));
                pos = hit + sep->size();
            }
            out.emplace_back(s.substr(pos));
        } else {
            size_t end = s.size();
            while (maxsplit-- > 0 && end >= sep->size()) {
                const size_t hit = s.rfind(*sep, end - sep->size());
                if (hit == std::string_view::npos) break;
                if (max_parts && out.size() >= max_parts)
                    fail_limit("a list of more than " + std::to_string(max_parts) + " items");
                out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
                end = hit;
            }
            out.emplace_back(s.substr(0, end));
            std::reverse(out.begin(), out.end());
        }
        return out;
    }
    // Runs of non-whitespace as byte spans, scanning code points in place.
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0, len;
    while (i < s.size()) {
        while (i < s.size() && is_space(next_cp(s, i, &len))) i += len;
        if (i == s.size()) break;
        const size_t start = i;
        while (i < s.size() && !is_space(next_cp(s, i, &len))) i += len;
        words.emplace_back(start, i);
        if (max_parts && words.size() > max_parts)
            fail_limit("a list of more than " + std::to_string(max_parts) + " items");
    }
    if (words.empty()) return out;
    const auto nwords = static_cast<int64_t>(words.size());
    if (maxsplit >= nwords) {
        for (const auto &[b, e] : words) out.emplace_back(s.substr(b, e - b));
    } else if (!from_right) {
        // maxsplit words, then the rest from the next word on, trailing whitespace kept
        for (int64_t k = 0; k < maxsplit; k++)
            out.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
        out.emplace_back(s.substr(words[static_cast<size_t>(maxsplit)].first));
    } else {
        // the rest up to the end of its last word, leading whitespace kept, then the last maxsplit words
        const size_t keep = static_cast<size_t>(nwords - maxsplit);
        out.emplace_back(s.substr(0, words[keep - 1].second));
        for (size_t k = keep; k < words.size(); k++)
            out.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
    return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
    const auto cps = decode(s);
    std::vector<std::string> out;
    size_t start = 0, i = 0;
    while (i < cps.size()) {
        const uint32_t c = cps[i];
        const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                         c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) {
            i++;
            continue;
        }
        size_t end = i + 1;
        if (c == '\r' && end < cps.size() && cps[end] == '\n') end++;
        out.push_back(encode(cps, start, keepends ? end : i));
        start = i = end;
    }
    if (start < cps.size()) out.push_back(encode(cps, start, cps.size()));
    return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
    if (count < 0) count = INT64_MAX;
    std::string out;
    if (old.empty()) {
        const auto cps = decode(s);
        for (size_t i = 0; i <= cps.size(); i++) {
            if (count > 0) {
                out += with;
                count--;
            }
            if (i < cps.size()) append_utf8(out, cps[i]);
        }
        return out;
    }
    size_t pos = 0;
    while (count > 0) {
        const size_t hit = s.find(old, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.substr(pos, hit - pos));
        out.append(with);
        pos = hit + old.size();
        count--;
    }
    out.append(s.substr(pos));
    return out;
}

int64_t count(std::string_view s, std::string_view sub) {
    if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) n++;
    return n;
}

int64_t find(std::string_view s, std::string_view sub, bool from_right) {
    const size_t hit = from_right ? s.rfind(sub) : s.find(sub);
    if (hit == std::string_view::npos) return -1;
    return static_cast<int64_t>(length(s.substr(0, hit)));
}

// ---- case mapping ----------------------------------------------------------------------------------
namespace {

// Code points with no case at all: the mapping is the identity and they never count as cased.
bool caseless(uint32_t c) {
    static const uint32_t ranges[][2] = {
        {0x00, 0x40},       {0x5B, 0x60},       {0x7B, 0xA9},       {0xAB, 0xB4},     {0xB6, 0xB9},
        {0xBB, 0xBF},       {0xD7, 0xD7},       {0xF7, 0xF7},       {0x0300, 0x0344}, {0x0346, 0x036F},
        {0x0591, 0x05FF},   {0x0600, 0x08FF},   {0x0900, 0x0DFF},   {0x0E00, 0x0FFF}, {0x1000, 0x109F},
        {0x1100, 0x11FF},   {0x2000, 0x206F},   {0x20A0, 0x20FF},   {0x2190, 0x245F}, {0x2460, 0x24B5},
        {0x24EA, 0x2BFF},   {0x2E00, 0x2E7F},   {0x2E80, 0x2FFF},   {0x3000, 0x303F}, {0x3040, 0x30FF},
        {0x3100, 0x31FF},   {0x3200, 0x33FF},   {0x3400, 0x4DBF},   {0x4DC0, 0x4DFF}, {0x4E00, 0x9FFF},
        {0xA000, 0xA4CF},   {0xAC00, 0xD7AF},   {0xDC80, 0xDCFF},   {0xE000, 0xF8FF}, {0xF900, 0xFAFF},
        {0xFE00, 0xFEFF},   {0xFF00, 0xFF20},   {0xFF3B, 0xFF40},   {0xFF5B, 0xFFFF}, {0x1F000, 0x1F12F},
        {0x1F18A, 0x1FAFF}, {0x20000, 0x3FFFF}, {0xE0000, 0xE007F},
    };
    for (const auto &r : ranges)
        if (c >= r[0] && c <= r[1]) return true;
    return false;
}

// Simple one-to-one upper/lower pairs; returns false for a code point outside what we carry.
bool simple_case(uint32_t c, uint32_t *up, uint32_t *lo) {
    auto pair_even_upper = [&](uint32_t base) {  // base is an uppercase letter, base+1 its lowercase
        *up = c - ((c - base) & 1), *lo = *up + 1;
    };
    if (c >= 'A' && c <= 'Z') return *up = c, *lo = c + 32, true;
    if (c >= 'a' && c <= 'z') return *up = c - 32, *lo = c, true;
    if ((c >= 0xC0 && c <= 0xDE) && c != 0xD7) return *up = c, *lo = c + 32, true;
    if ((c >= 0xE0 && c <= 0xFE) && c != 0xF7) return *up = c - 32, *lo = c, true;
    if (c == 0xFF) return *up = 0x178, *lo = c, true;
    if (c == 0x178) return *up = c, *lo = 0xFF, true;
    if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
        return pair_even_upper(c & ~1u), true;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) {
        *up = (c & 1) ? c : c - 1, *lo = *up + 1;
        return true;
    }
    if (c == 0x138) return *up = c, *lo = c, true;  // kra: lowercase with no uppercase
    // Greek without accents (final sigma handled by the callers)
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return *up = c, *lo = c + 32, true;
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return *up = c - 32, *lo = c, true;
    if (c == 0x3AA || c == 0x3AB) return *up = c, *lo = c + 32, true;
    if (c == 0x3CA || c == 0x3CB) return *up = c - 32, *lo = c, true;
    if (c == 0x386) return *up = c, *lo = 0x3AC, true;
    if (c == 0x3AC) return *up = 0x386, *lo = c, true;
    if (c >= 0x388 && c <= 0x38A) return *up = c, *lo = c + 37, true;
    if (c >= 0x3AD && c <= 0x3AF) return *up = c - 37, *lo = c, true;
    if (c == 0x38C) return *up = c, *lo = 0x3CC, true;
    if (c == 0x3CC) return *up = 0x38C, *lo = c, true;
    if (c == 0x38E || c == 0x38F) return *up = c, *lo = c + 63, true;
    if (c == 0x3CD || c == 0x3CE) return *up = c - 63, *lo = c, true;
    // Cyrillic
    if (c >= 0x410 && c <= 0x42F) return *up = c, *lo = c + 32, true;
    if (c >= 0x430 && c <= 0x44F) return *up = c - 32, *lo = c, true;
    if (c >= 0x400 && c <= 0x40F) return *up = c, *lo = c + 80, true;
    if (c >= 0x450 && c <= 0x45F) return *up = c - 80, *lo = c, true;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F))
        return pair_even_upper(c & ~1u), true;
    if (c >= 0x4C1 && c <= 0x4CE) {
        *up = (c & 1) ? c : c - 1, *lo = *up + 1;
        return true;
    }
    if (c == 0x4C0) return *up = c, *lo = 0x4CF, true;
    if (c == 0x4CF) return *up = 0x4C0, *lo = c, true;
    // Armenian
    if (c >= 0x531 && c <= 0x556) return *up = c, *lo = c + 48, true;
    if (c >= 0x561 && c <= 0x586) return *up = c - 48, *lo = c, true;
    // Fullwidth Latin
    if (c >= 0xFF21 && c <= 0xFF3A) return *up = c, *lo = c + 32, true;
    if (c >= 0xFF41 && c <= 0xFF5A) return *up = c - 32, *lo = c, true;
    return false;
}

[[noreturn]] void unknown_case(uint32_t c) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
    fail_unsupported(std::string("case mapping of ") + buf);
}

void to_upper(std::string &out, uint32_t c) {
    uint32_t up, lo;
    if (c < 0x80 || caseless(c)) {
        if (c >= 'a' && c <= 'z') c -= 32;
        return append_utf8(out, c);
    }
    if (c == 0xDF) return void(out += "SS");
    if (c == 0xB5) return append_utf8(out, 0x39C);
    if (c == 0x131) return void(out += 'I');
    if (c == 0x17F) return void(out += 'S');
    if (c == 0x3C2) return append_utf8(out, 0x3A3);
    if (!simple_case(c, &up, &lo)) unknown_case(c);
    append_utf8(out, up);
}

void to_lower(std::string &out, uint32_t c) {
    uint32_t up, lo;
    if (c < 0x80 || caseless(c)) {
        if (c >= 'A' && c <= 'Z') c += 32;
        return append_utf8(out, c);
    }
    if (c == 0xDF || c == 0xB5 || c == 0x131 || c == 0x17F || c == 0x3C2) return append_utf8(out, c);
    if (c == 0x130) return void(out += "i\xCC\x87");
    if (c == 0x3A3) fail_unsupported("lower-casing a Greek capital sigma");  // Python picks final sigma by context
    if (!simple_case(c, &up, &lo)) unknown_case(c);
    append_utf8(out, lo);
}

}  // namespace

bool is_cased(uint32_t c) {
    uint32_t up, lo;
    if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (caseless(c)) return false;
    if (c == 0xDF || c == 0xB5 || c == 0x131 || c == 0x17F || c == 0x3C2 || c == 0x130 || c == 0x3A3) return true;
    if (!simple_case(c, &up, &lo)) unknown_case(c);
    return true;
}

static bool is_upper_cp(uint32_t c) {
    uint32_t up, lo;
    if (c < 0x80) return c >= 'A' && c <= 'Z';
    if (c == 0x130 || c == 0x3A3) return true;
    if (!is_cased(c)) return false;
    if (c == 0xDF || c == 0xB5 || c == 0x131 || c == 0x17F || c == 0x3C2) return false;
    simple_case(c, &up, &lo);
    return up == c && lo != c;
}

std::string upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (uint32_t c : decode(s)) to_upper(out, c);
    return out;
}

std::string lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (uint32_t c : decode(s)) to_lower(out, c);
    return out;
}

std::string capitalize(std::string_view s) {
    const auto cps = decode(s);
    std::string out;
    for (size_t i = 0; i < cps.size(); i++) {
        if (i == 0) {
            // Python uses the titlecase form; for the letters we carry it equals the uppercase one
            // except the ligature-like special cases, which upper() would expand differently.
            if (cps[0] == 0xDF) fail_unsupported("title-casing U+00DF");
            to_upper(out, cps[0]);
        } else {
            to_lower(out, cps[i]);
        }
    }
    return out;
}

std::string py_title(std::string_view s) {
    std::string out;
    bool prev_cased = false;
    for (uint32_t c : decode(s)) {
        if (prev_cased) {
            to_lower(out, c);
        } else {
            if (c == 0xDF) fail_unsupported("title-casing U+00DF");
            to_upper(out, c);
        }
        prev_cased = is_cased(c);
    }
    return out;
}

std::string title_words(std::string_view s) {
    // Jinja: re.split(r"([-\s({\[<]+)") and each piece's first character upper-cased, the rest lowered.
    const auto cps = decode(s);
    auto is_sep = [](uint32_t c) { return is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
    std::string out;
    bool at_start = true;
    for (uint32_t c : cps) {
        if (is_sep(c)) {
            append_utf8(out, c);
            at_start = true;
            continue;
        }
        if (at_start) {
            if (c == 0xDF) fail_unsupported("title-casing U+00DF");
            to_upper(out, c);
        } else {
            to_lower(out, c);
        }
        at_start = false;
    }
    return out;
}

bool all_cased_match(std::string_view s, bool want_upper) {
    bool any = false;
    for (uint32_t c : decode(s)) {
        if (!is_cased(c)) continue;
        if (is_upper_cp(c) != want_upper) return false;
        any = true;
    }
    return any;
}

// ---- repr / escape ----------------------------------------------------------------------------------
static bool printable(uint32_t c) {
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
    if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) ||
        (c >= 0x2066 && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE ||
        c == 0xFFFF)
        return false;
    if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
    if ((c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) || c >= 0xE0000) return false;
    return true;
}

std::string repr(std::string_view s) {
    const auto cps = decode(s);
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char q = has_single && !has_double ? '"' : '\'';
    std::string out(1, q);
    for (uint32_t c : cps) {
        if (c == static_cast<uint32_t>(q) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c >= 0xDC80 && c <= 0xDCFF) {
            // an invalid UTF-8 byte; Python could not have held it in a str
            fail_unsupported("repr() of a string holding invalid UTF-8");
        } else if (!printable(c)) {
            char buf[16];
            if (c < 0x100)
                std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
            else if (c < 0x10000)
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            else
                std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
            out += buf;
        } else {
            append_utf8(out, c);
        }
    }
    out += q;
    return out;
}

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

}  // namespace llm::jinja::text
