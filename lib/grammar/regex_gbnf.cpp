#include "grammar/regex_gbnf.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"

namespace llm::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code point ranges

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kLineEnds = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

[[noreturn]] void refuse(std::string_view pattern, const std::string &what) {
    fail(LLM_ERR_UNSUPPORTED, "JSON schema: pattern '{}': {} is not supported", pattern, what);
}

Ranges complement(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    uint32_t next = 0;
    for (const auto &[a, b] : r) {
        if (a > next) out.push_back({next, a - 1});
        next = std::max(next, b + 1);
    }
    if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
    return out;
}

bool contains(const Ranges &r, uint32_t cp) {
    return std::any_of(r.begin(), r.end(), [&](const auto &x) { return x.first <= cp && cp <= x.second; });
}

// One code point inside a GBNF class.
std::string class_item(uint32_t cp) {
    if (cp < 0x20 || cp == '"' || cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == 0x7F)
        return fmt::format("\\x{:02X}", cp);
    std::string s;
    utf8::append(s, cp);
    return s;
}

// The JSON text of one character in `set`: raw characters, then the escapes of the ones that need one.
std::string json_chars(const Ranges &set) {
    // Raw: the set minus control characters, '"', '\\' and DEL (written escaped, or rejected).
    const Ranges allowed = complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}});
    Ranges raw;
    for (const auto &[a, b] : set)
        for (const auto &[x, y] : allowed)
            if (std::max(a, x) <= std::min(b, y)) raw.push_back({std::max(a, x), std::min(b, y)});
    std::string alts;
    if (!raw.empty()) {
        std::string cls = "[";
        for (const auto &[a, b] : raw) cls += a == b ? class_item(a) : class_item(a) + "-" + class_item(b);
        alts = cls + "]";
    }
    const auto add = [&](const std::string &x) { alts += (alts.empty() ? "" : " | ") + x; };
    if (contains(set, '"')) add(R"("\\\"")");
    if (contains(set, '\\')) add(R"("\\\\")");
    for (uint32_t c = 0; c < 0x20; ++c) {
        if (!contains(set, c)) continue;
        switch (c) {
            case '\n': add(R"("\\n")"); break;
            case '\t': add(R"("\\t")"); break;
            case '\r': add(R"("\\r")"); break;
            case '\b': add(R"("\\b")"); break;
            case '\f': add(R"("\\f")"); break;
            default: add(fmt::format(R"("\\u{:04x}")", c));
        }
    }
    if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // matches nothing
    return "(" + alts + ")";
}

class RegexParser {
public:
    RegexParser(std::string_view p) : p_(p) {}

    std::string parse(const std::string &char_rule) {
        bool start = false, end = false;
        std::string_view body = p_;
        if (!body.empty() && body[0] == '^') {
            start = true;
            body.remove_prefix(1);
        }
        if (!body.empty() && body.back() == '$') {
            size_t bs = 0;
            for (size_t i = body.size() - 1; i-- > 0 && body[i] == '\\';) ++bs;
            if (bs % 2 == 0) {
                end = true;
                body.remove_suffix(1);
            }
        }
        s_ = body;
        i_ = 0;
        size_t branches = 0;
        const std::string re = alternation(&branches);
        if (i_ != s_.size()) refuse(p_, fmt::format("'{}' here", s_[i_]));
        if ((start || end) && branches > 1) refuse(p_, "an anchor beside a top-level '|'");
        const std::string any = char_rule + "*";
        return "\"\\\"\" " + (start ? std::string() : any + " ") + "(" + re + ")" + (end ? "" : " " + any) + " \"\\\"\"";
    }

private:
    bool more() const { return i_ < s_.size(); }
    char peek() const { return more() ? s_[i_] : '\0'; }

    uint32_t next_cp() {
        uint32_t cp = 0;
        size_t len = 0;
        if (!utf8::decode_at(s_, i_, &cp, &len)) refuse(p_, "malformed UTF-8");
        i_ += len;
        return cp;
    }

    std::string alternation(size_t *branches) {
        std::string out = sequence();
        *branches = 1;
        while (peek() == '|') {
            ++i_;
            out += " | " + sequence();
            ++*branches;
        }
        return out;
    }

    std::string sequence() {
        std::string out;
        while (more() && peek() != '|' && peek() != ')') {
            std::string a = atom();
            a = quantified(a);
            out += (out.empty() ? "" : " ") + a;
        }
        return out.empty() ? "\"\"" : out;
    }

    uint64_t number() {
        uint64_t v = 0;
        const size_t start = i_;
        while (more() && peek() >= '0' && peek() <= '9') v = std::min<uint64_t>(v * 10 + (s_[i_++] - '0'), 1u << 20);
        if (i_ == start) refuse(p_, "a '{' that is not a {m,n} quantifier");
        return v;
    }

    std::string quantified(const std::string &a) {
        std::string q;
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') {
            ++i_;
            q = std::string(1, c);
        } else if (c == '{') {
            ++i_;
            const uint64_t m = number();
            std::string rep = std::to_string(m);
            uint64_t n = m;
            if (peek() == ',') {
                ++i_;
                rep += ",";
                if (peek() != '}') {
                    n = number();
                    rep += std::to_string(n);
                } else {
                    n = 0;
                }
            }
            if (peek() != '}') refuse(p_, "an unclosed {m,n}");
            ++i_;
            if (m > 1000 || n > 1000) refuse(p_, "a repetition count above 1000");
            q = "{" + rep + "}";
        } else {
            return a;
        }
        if (peek() == '?') ++i_;  // lazy: the same strings
        if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') refuse(p_, "a quantifier after a quantifier");
        return "(" + a + ")" + q;
    }

    // An escape after '\' as a set of code points (in_class: \b is backspace there).
    Ranges escape(bool in_class) {
        if (!more()) refuse(p_, "a trailing '\\'");
        const char c = s_[i_++];
        switch (c) {
            case 'd': return kDigit;
            case 'D': return complement(kDigit);
            case 'w': return kWord;
            case 'W': return complement(kWord);
            case 's': return kSpace;
            case 'S': return complement(kSpace);
            case 't': return {{'\t', '\t'}};
            case 'n': return {{'\n', '\n'}};
            case 'r': return {{'\r', '\r'}};
            case 'f': return {{'\f', '\f'}};
            case 'v': return {{'\v', '\v'}};
            case '0': return {{0, 0}};
            case 'c': {
                const char l = peek();
                if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) refuse(p_, "\\c without a letter");
                ++i_;
                const uint32_t v = static_cast<uint32_t>(l) % 32;
                return {{v, v}};
            }
            case 'x':
            case 'u': {
                const int digits = c == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (int k = 0; k < digits; ++k) {
                    const char h = peek();
                    int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0) refuse(p_, fmt::format("\\{} without {} hex digits", c, digits));
                    v = v * 16 + static_cast<uint32_t>(d);
                    ++i_;
                }
                return {{v, v}};
            }
            case 'b':
                if (in_class) return {{'\b', '\b'}};
                refuse(p_, "the word boundary \\b");
            default:
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                    refuse(p_, fmt::format("the escape \\{}", c));
                return {{static_cast<unsigned char>(c), static_cast<unsigned char>(c)}};
        }
    }

    std::string char_class() {
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++i_;
        }
        Ranges set;
        while (more() && peek() != ']') {
            Ranges lo_set;
            if (peek() == '\\') {
                ++i_;
                lo_set = escape(true);
            } else {
                const uint32_t cp = next_cp();
                lo_set = {{cp, cp}};
            }
            if (peek() == '-' && i_ + 1 < s_.size() && s_[i_ + 1] != ']') {
                ++i_;
                Ranges hi_set;
                if (peek() == '\\') {
                    ++i_;
                    hi_set = escape(true);
                } else {
                    const uint32_t cp = next_cp();
                    hi_set = {{cp, cp}};
                }
                if (lo_set.size() != 1 || hi_set.size() != 1 || lo_set[0].first != lo_set[0].second ||
                    hi_set[0].first != hi_set[0].second || lo_set[0].first > hi_set[0].first)
                    refuse(p_, "a class range that is not between two characters in order");
                set.push_back({lo_set[0].first, hi_set[0].first});
            } else {
                set.insert(set.end(), lo_set.begin(), lo_set.end());
            }
        }
        if (!more()) refuse(p_, "an unclosed '['");
        ++i_;  // ]
        return json_chars(negated ? complement(set) : set);
    }

    std::string atom() {
        const char c = peek();
        if (c == '(') {
            ++i_;
            if (peek() == '?') {
                if (i_ + 1 < s_.size() && s_[i_ + 1] == ':') {
                    i_ += 2;
                } else {
                    refuse(p_, "lookaround and named groups");
                }
            }
            size_t b = 0;
            const std::string inner = alternation(&b);
            if (peek() != ')') refuse(p_, "an unclosed '('");
            ++i_;
            return "(" + inner + ")";
        }
        if (c == '[') {
            ++i_;
            return char_class();
        }
        if (c == '.') {
            ++i_;
            return json_chars(complement(kLineEnds));
        }
        if (c == '\\') {
            ++i_;
            if (more() && (peek() == 'p' || peek() == 'P')) refuse(p_, "Unicode property classes (\\p{...})");
            if (more() && peek() >= '1' && peek() <= '9') refuse(p_, "backreferences");
            return json_chars(escape(false));
        }
        if (c == '^' || c == '$') refuse(p_, fmt::format("the anchor '{}' inside the pattern", c));
        if (c == '*' || c == '+' || c == '?' || c == '{') refuse(p_, fmt::format("'{}' with nothing to repeat", c));
        const uint32_t cp = next_cp();
        return json_chars({{cp, cp}});
    }

    std::string_view p_, s_;
    size_t i_ = 0;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, const std::string &char_rule) {
    return RegexParser(pattern).parse(char_rule);
}

}  // namespace llm::grammar
