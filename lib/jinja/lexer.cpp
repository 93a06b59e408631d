#include "jinja/lexer.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "jinja/text.h"
#include "jinja/value.h"

namespace llm::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's \s at byte position i of UTF-8 text; *len gets the code point's byte length.
bool space_at(std::string_view s, size_t i, size_t *len) { return text::is_space(text::next_cp(s, i, len)); }

size_t skip_space(std::string_view s, size_t i) {
    size_t len;
    while (i < s.size() && space_at(s, i, &len)) i += len;
    return i;
}

std::string rstrip_space(std::string_view s) {
    const auto cps = text::decode(s);
    size_t e = cps.size();
    while (e > 0 && text::is_space(cps[e - 1])) e--;
    return text::encode(cps, 0, e);
}

// The text before the newest line break is whitespace only (at least one character).
bool only_space(std::string_view s) {
    if (s.empty()) return false;
    size_t len;
    for (size_t i = 0; i < s.size(); i += len)
        if (!space_at(s, i, &len)) return false;
    return true;
}

int count_newlines(std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

class Lexer {
public:
    explicit Lexer(std::string src) : src_(std::move(src)) {}

    std::vector<Token> run() {
        while (pos_ < src_.size()) root();
        push(Tok::Eof, "");
        return std::move(out_);
    }

private:
    std::string src_;
    size_t pos_ = 0;
    int line_ = 1;
    bool line_starting_ = true;  // the previous match ended with a newline (lstrip applies at pos 0 of text)
    std::vector<Token> out_;

    void push(Tok t, std::string text) { out_.push_back(Token{t, line_, std::move(text)}); }

    // Where the next tag starts, and which: '{' (variable), '%' (block), '#' (comment); npos if none.
    size_t next_tag(size_t from, char *kind) const {
        for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
                *kind = src_[i + 1];
                return i;
            }
        }
        return std::string::npos;
    }

    // `{% raw %}` (with optional -/+ and spaces) at i; *end gets the position after its `%}`.
    bool raw_begin_at(size_t i, size_t *end) const {
        size_t j = i + 2;
        if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) j++;
        j = skip_space(src_, j);
        if (src_.compare(j, 3, "raw") != 0) return false;
        j = skip_space(src_, j + 3);
        if (src_.compare(j, 3, "-%}") == 0) {
            *end = skip_space(src_, j + 3);
            return true;
        }
        if (src_.compare(j, 2, "%}") == 0) {
            *end = j + 2;
            return true;
        }
        return false;
    }

    // Emits the text before a tag with the tag's whitespace control applied.
    void emit_text(std::string_view text, char sign, bool lstrip_kind) {
        std::string t(text);
        int stripped_lines = 0;
        if (sign == '-') {
            std::string r = rstrip_space(t);
            stripped_lines = count_newlines(std::string_view(t).substr(r.size()));
            t = std::move(r);
        } else if (sign != '+' && lstrip_kind) {
            const size_t nl = t.rfind('\n');
            const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
            if ((l_pos > 0 || line_starting_) && only_space(std::string_view(t).substr(l_pos))) t.resize(l_pos);
        }
        if (!t.empty()) push(Tok::Data, t);
        line_ += count_newlines(t) + stripped_lines;
    }

    void root() {
        char kind = 0;
        const size_t at = next_tag(pos_, &kind);
        if (at == std::string::npos) {
            const std::string rest = src_.substr(pos_);
            push(Tok::Data, rest);
            line_ += count_newlines(rest);
            pos_ = src_.size();
            return;
        }
        const std::string_view before = std::string_view(src_).substr(pos_, at - pos_);
        char sign = at + 2 < src_.size() ? src_[at + 2] : 0;
        if (sign != '-' && sign != '+') sign = 0;
        size_t raw_end;
        if (kind == '%' && raw_begin_at(at, &raw_end)) {
            emit_text(before, sign, true);
            line_ += count_newlines(std::string_view(src_).substr(at, raw_end - at));
            pos_ = raw_end;
            line_starting_ = src_[raw_end - 1] == '\n';
            raw_body();
            return;
        }
        emit_text(before, sign, kind != '{');
        pos_ = at + 2 + (sign ? 1 : 0);
        line_starting_ = false;
        if (kind == '#') return comment();
        push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "");
        tag(kind == '{');
    }

    void raw_body() {
        // Everything up to `{% endraw %}` is text; the endraw tag strips like any block tag.
        for (size_t i = src_.find("{%", pos_); i != std::string::npos; i = src_.find("{%", i + 1)) {
            size_t j = i + 2;
            char sign = 0;
            if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
            j = skip_space(src_, j);
            if (src_.compare(j, 6, "endraw") != 0) continue;
            j = skip_space(src_, j + 6);
            size_t end;
            if (src_.compare(j, 3, "+%}") == 0) {
                end = j + 3;
            } else if (src_.compare(j, 3, "-%}") == 0) {
                end = skip_space(src_, j + 3);
            } else if (src_.compare(j, 2, "%}") == 0) {
                end = j + 2;
                if (end < src_.size() && src_[end] == '\n') end++;
            } else {
                continue;
            }
            emit_text(std::string_view(src_).substr(pos_, i - pos_), sign, true);
            line_ += count_newlines(std::string_view(src_).substr(i, end - i));
            line_starting_ = src_[end - 1] == '\n';
            pos_ = end;
            return;
        }
        fail_syntax(line_, "missing end of raw directive");
    }

    void comment() {
        for (size_t i = src_.find("#}", pos_); i != std::string::npos; i = src_.find("#}", i + 1)) {
            size_t end = i + 2;
            if (i > pos_ && src_[i - 1] == '-') {
                end = skip_space(src_, end);
            } else if (!(i > pos_ && src_[i - 1] == '+')) {
                if (end < src_.size() && src_[end] == '\n') end++;  // trim_blocks
            }
            line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
            line_starting_ = src_[end - 1] == '\n';
            pos_ = end;
            return;
        }
        fail_syntax(line_, "missing end of comment tag");
    }

    // Expression tokens up to the closing `}}` / `%}`; brackets must balance before a closing tag counts.
    void tag(bool variable) {
        std::vector<char> balance;
        const int start_line = line_;
        while (true) {
            if (pos_ >= src_.size())
                fail_syntax(start_line, variable ? "unexpected end of template, expected '}}'"
                                                 : "unexpected end of template, expected '%}'");
            if (balance.empty() && end_tag(variable)) return;
            size_t len;
            if (space_at(src_, pos_, &len)) {
                if (src_[pos_] == '\n') line_++;
                pos_ += len;
                continue;
            }
            const char c = src_[pos_];
            if (number()) continue;
            if (is_name_start(c)) {
                size_t j = pos_;
                while (j < src_.size() && is_name_char(src_[j])) j++;
                push(Tok::Name, src_.substr(pos_, j - pos_));
                pos_ = j;
                continue;
            }
            if (static_cast<unsigned char>(c) >= 0x80) fail_unsupported("non-ASCII identifiers in a tag");
            if (c == '\'' || c == '"') {
                string_literal();
                continue;
            }
            static const char *const ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                              "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
            bool matched = false;
            for (const char *op : ops) {
                const size_t n = std::char_traits<char>::length(op);
                if (src_.compare(pos_, n, op) != 0) continue;
                const char o = op[0];
                if (n == 1 && (o == '(' || o == '[' || o == '{')) {
                    balance.push_back(o == '(' ? ')' : o == '[' ? ']' : '}');
                } else if (n == 1 && (o == ')' || o == ']' || o == '}')) {
                    if (balance.empty()) fail_syntax(line_, "unexpected " + quote(std::string(1, o)));
                    if (balance.back() != o)
                        fail_syntax(line_, "unexpected " + quote(std::string(1, o)) + ", expected " +
                                               quote(std::string(1, balance.back())));
                    balance.pop_back();
                }
                push(Tok::Op, op);
                pos_ += n;
                matched = true;
                break;
            }
            if (!matched) fail_syntax(line_, "unexpected char " + quote(std::string(1, c)));
        }
    }

    bool end_tag(bool variable) {
        const size_t p = pos_;
        size_t end = 0;
        if (variable) {
            if (src_.compare(p, 3, "-}}") == 0) {
                end = skip_space(src_, p + 3);
            } else if (src_.compare(p, 2, "}}") == 0) {
                end = p + 2;
            }
        } else {
            if (src_.compare(p, 3, "+%}") == 0) {
                end = p + 3;
            } else if (src_.compare(p, 3, "-%}") == 0) {
                end = skip_space(src_, p + 3);
            } else if (src_.compare(p, 2, "%}") == 0) {
                end = p + 2;
                if (end < src_.size() && src_[end] == '\n') end++;  // trim_blocks
            }
        }
        if (!end) return false;
        push(variable ? Tok::VarEnd : Tok::BlockEnd, "");
        line_ += count_newlines(std::string_view(src_).substr(p, end - p));
        line_starting_ = src_[end - 1] == '\n';
        pos_ = end;
        return true;
    }

    // digits with single underscores between them, e.g. 1_000
    size_t digits(size_t i) const {
        if (i >= src_.size() || !is_digit(src_[i])) return 0;
        size_t j = i + 1;
        while (j < src_.size()) {
            if (is_digit(src_[j])) {
                j++;
            } else if (src_[j] == '_' && j + 1 < src_.size() && is_digit(src_[j + 1])) {
                j += 2;
            } else {
                break;
            }
        }
        return j - i;
    }

    bool number() {
        const size_t p = pos_;
        if (!is_digit(src_[p])) return false;
        auto clean = [](std::string s) {
            std::string o;
            for (char c : s)
                if (c != '_') o += c;
            return o;
        };
        // float: digits, then a fraction and/or an exponent (not right after a '.')
        if (!(p > 0 && src_[p - 1] == '.')) {
            const size_t int_len = digits(p);
            size_t j = p + int_len;
            bool frac = false;
            if (j < src_.size() && src_[j] == '.' && digits(j + 1)) {
                frac = true;
                j += 1 + digits(j + 1);
            }
            bool expo = false;
            if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
                size_t k = j + 1;
                if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) k++;
                if (const size_t d = digits(k)) {
                    expo = true;
                    j = k + d;
                }
            }
            if (frac || expo) {
                const std::string s = clean(src_.substr(p, j - p));
                Token t{Tok::Float, line_, s};
                t.fval = std::strtod(s.c_str(), nullptr);
                out_.push_back(std::move(t));
                pos_ = j;
                return true;
            }
        }
        // integer: 0b / 0o / 0x prefixes, a decimal without leading zeros, or zeros
        int base = 10;
        size_t j = p;
        std::string body;
        if (src_[p] == '0' && p + 1 < src_.size() && std::string("bBoOxX").find(src_[p + 1]) != std::string::npos) {
            const char k = static_cast<char>(src_[p + 1] | 0x20);
            base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
            auto ok = [&](char c) {
                if (base == 2) return c == '0' || c == '1';
                if (base == 8) return c >= '0' && c <= '7';
                return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
            };
            size_t q = p + 2;
            while (q < src_.size()) {
                if (ok(src_[q])) {
                    body += src_[q++];
                } else if (src_[q] == '_' && q + 1 < src_.size() && ok(src_[q + 1])) {
                    q++;
                } else {
                    break;
                }
            }
            if (!body.empty()) j = q;
        }
        if (j == p) {
            base = 10;
            if (src_[p] == '0') {
                j = p + 1;
                while (j < src_.size() &&
                       (src_[j] == '0' || (src_[j] == '_' && j + 1 < src_.size() && src_[j + 1] == '0')))
                    j++;
                body = std::string(1, '0');
            } else {
                j = p + digits(p);
                body = clean(src_.substr(p, j - p));
            }
        }
        errno = 0;
        const long long v = std::strtoll(body.c_str(), nullptr, base);
        if (errno == ERANGE) fail_unsupported("an integer literal beyond 64 bits");
        Token t{Tok::Int, line_, src_.substr(p, j - p)};
        t.ival = v;
        out_.push_back(std::move(t));
        pos_ = j;
        return true;
    }

    void string_literal() {
        const char q = src_[pos_];
        size_t j = pos_ + 1;
        std::string val;
        while (true) {
            if (j >= src_.size()) fail_syntax(line_, "unexpected char " + quote(std::string(1, q)));
            const char c = src_[j];
            if (c == q) break;
            if (c != '\\') {
                if (c == '\n') line_++;
                val += c;
                j++;
                continue;
            }
            if (j + 1 >= src_.size()) fail_syntax(line_, "unterminated string");
            j = escape(j + 1, &val);
        }
        push(Tok::String, std::move(val));
        pos_ = j + 1;
    }

    // Python's unicode-escape decoding of the escape whose letter is at i; returns the next position.
    size_t escape(size_t i, std::string *val) {
        const char c = src_[i];
        auto hex = [&](size_t n) -> size_t {
            if (i + n >= src_.size()) fail_syntax(line_, "truncated \\x escape");
            uint32_t cp = 0;
            for (size_t k = 1; k <= n; k++) {
                const char h = src_[i + k];
                int d = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
                if (d < 0) fail_syntax(line_, "truncated escape in a string literal");
                cp = cp * 16 + static_cast<uint32_t>(d);
            }
            if (cp > 0x10FFFF) fail_syntax(line_, "illegal Unicode character");
            if (cp >= 0xD800 && cp <= 0xDFFF) fail_unsupported("a surrogate escape in a string literal");
            text::append_utf8(*val, cp);
            return i + n + 1;
        };
        switch (c) {
        case '\n': line_++; return i + 1;
        case '\\': *val += '\\'; return i + 1;
        case '\'': *val += '\''; return i + 1;
        case '"': *val += '"'; return i + 1;
        case 'a': *val += '\a'; return i + 1;
        case 'b': *val += '\b'; return i + 1;
        case 'f': *val += '\f'; return i + 1;
        case 'n': *val += '\n'; return i + 1;
        case 'r': *val += '\r'; return i + 1;
        case 't': *val += '\t'; return i + 1;
        case 'v': *val += '\v'; return i + 1;
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case 'N': fail_unsupported("\\N{...} escapes in a string literal");
        default: break;
        }
        if (c >= '0' && c <= '7') {
            uint32_t cp = 0;
            size_t k = i;
            while (k < i + 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7') cp = cp * 8 + (src_[k++] - '0');
            text::append_utf8(*val, cp);
            return k;
        }
        if (static_cast<unsigned char>(c) >= 0x80) {
            // Jinja escapes non-ASCII as \xNN / \uNNNN first, so this backslash escapes that backslash.
            size_t len;
            const uint32_t cp = text::next_cp(src_, i, &len);
            char buf[16];
            if (cp < 0x100)
                std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
            else if (cp < 0x10000)
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            else
                std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
            *val += buf;
            return i + len;
        }
        *val += '\\';  // an unknown escape stays as written
        *val += c;
        return i + 1;
    }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
    // Jinja reads \r\n and \r as \n everywhere, then drops one trailing newline.
    std::string src;
    src.reserve(source.size());
    for (size_t i = 0; i < source.size(); i++) {
        if (source[i] == '\r') {
            src += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') i++;
        } else {
            src += source[i];
        }
    }
    if (!src.empty() && src.back() == '\n') src.pop_back();
    return Lexer(std::move(src)).run();
}

}  // namespace llm::jinja
