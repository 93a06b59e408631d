// Tool-call syntaxes that write calls as code-like literals: LFM2's Python calls
// ([name(key=value, ...), ...]) and Gemma 4's call:NAME{key:value} with <|"|> around strings.
#include <cctype>

#include "chat/formats.h"

namespace llm::chat {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

// [name(k=v, ...), ...] -> calls; false on any syntax error.
bool python_calls(std::string_view s, Message *out) {
    size_t i = 0;
    skip_space(s, &i);
    if (i >= s.size() || s[i] != '[') return false;
    ++i;
    for (;;) {
        skip_space(s, &i);
        if (i >= s.size()) return false;
        if (s[i] == ']') return true;
        const size_t n0 = i;
        while (i < s.size() && name_char(s[i])) ++i;
        if (i == n0 || i >= s.size() || s[i] != '(') return false;
        const std::string name(s.substr(n0, i - n0));
        ++i;
        ojson args = ojson::object();
        for (;;) {
            skip_space(s, &i);
            if (i >= s.size()) return false;
            if (s[i] == ')') {
                ++i;
                break;
            }
            const size_t k0 = i;
            while (i < s.size() && name_char(s[i])) ++i;
            const std::string key(s.substr(k0, i - k0));
            skip_space(s, &i);
            if (key.empty() || i >= s.size() || s[i] != '=') return false;
            ++i;
            auto v = parse_py_literal(s, &i);
            if (!v) return false;
            args[key] = std::move(*v);
            skip_space(s, &i);
            if (i < s.size() && s[i] == ',') ++i;
        }
        out->calls.push_back(make_call(name, args));
        skip_space(s, &i);
        if (i < s.size() && s[i] == ',') ++i;
    }
}

constexpr std::string_view kQuote = "<|\"|>";

// Gemma 4 values: {key:value,...}, [v,...], <|"|>text<|"|>, numbers, true/false/null.
std::optional<ojson> gemma_value(std::string_view s, size_t *i, int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    skip_space(s, i);
    if (*i >= s.size()) return std::nullopt;
    if (s.substr(*i, kQuote.size()) == kQuote) {
        const size_t start = *i + kQuote.size();
        const size_t e = s.find(kQuote, start);
        if (e == npos) return std::nullopt;
        *i = e + kQuote.size();
        return ojson(std::string(s.substr(start, e - start)));
    }
    if (s[*i] == '{') {
        ojson obj = ojson::object();
        ++*i;
        for (;;) {
            skip_space(s, i);
            if (*i >= s.size()) return std::nullopt;
            if (s[*i] == '}') {
                ++*i;
                return obj;
            }
            const size_t colon = s.find(':', *i);
            if (colon == npos) return std::nullopt;
            std::string key(trim(s.substr(*i, colon - *i)));
            if (starts_with(key, kQuote) && key.size() >= 2 * kQuote.size())
                key = key.substr(kQuote.size(), key.size() - 2 * kQuote.size());
            *i = colon + 1;
            auto v = gemma_value(s, i, depth + 1);
            if (!v) return std::nullopt;
            obj[key] = std::move(*v);
            skip_space(s, i);
            if (*i < s.size() && s[*i] == ',') ++*i;
        }
    }
    if (s[*i] == '[') {
        ojson arr = ojson::array();
        ++*i;
        for (;;) {
            skip_space(s, i);
            if (*i >= s.size()) return std::nullopt;
            if (s[*i] == ']') {
                ++*i;
                return arr;
            }
            auto v = gemma_value(s, i, depth + 1);
            if (!v) return std::nullopt;
            arr.push_back(std::move(*v));
            skip_space(s, i);
            if (*i < s.size() && s[*i] == ',') ++*i;
        }
    }
    size_t e = *i;
    while (e < s.size() && s[e] != ',' && s[e] != '}' && s[e] != ']') ++e;
    const std::string_view word = trim(s.substr(*i, e - *i));
    if (word.empty()) return std::nullopt;  // a stray '}' or ']': no value, and no progress either
    *i = e;
    if (auto j = parse_json(word)) return *j;
    return ojson(std::string(word));
}

}  // namespace

void calls_pythonic(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    const std::string_view open = f.open, close = f.close;
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(open, at);
        if (o == npos) break;
        size_t e = text.find(close, o + open.size());
        const bool closed = e != npos;
        if (!closed) e = text.size();
        const std::string_view body = text.substr(o + open.size(), e - o - open.size());
        Message got;
        if (!python_calls(body, &got)) {
            if (!p.partial) break;
            // cut short: the first call's name, the arguments as far as they go
            size_t i = 0;
            skip_space(body, &i);
            if (i < body.size() && body[i] == '[') ++i;
            const size_t n0 = i;
            while (i < body.size() && name_char(body[i])) ++i;
            if (i == n0) break;
            got.calls.push_back({std::string(body.substr(n0, i - n0)), std::string(body.substr(i)), ""});
        }
        add_content(text.substr(at, o - at), f, out);
        for (auto &c : got.calls) out->calls.push_back(std::move(c));
        at = closed ? e + close.size() : e;
    }
    add_content(text.substr(at), f, out);
}

void calls_gemma4(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    const std::string_view open = f.open, close = f.close;
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(open, at);
        if (o == npos) break;
        size_t e = text.find(close, o + open.size());
        const bool closed = e != npos;
        if (!closed && !p.partial) break;
        if (!closed) e = text.size();
        std::string_view body = trim(text.substr(o + open.size(), e - o - open.size()));
        if (!starts_with(body, "call:")) break;
        body.remove_prefix(5);
        const size_t brace = body.find('{');
        if (brace == npos) break;
        size_t i = brace;
        auto args = gemma_value(body, &i, 0);
        if (!args && !p.partial) break;
        add_content(text.substr(at, o - at), f, out);
        const std::string name(trim(body.substr(0, brace)));
        if (args)
            out->calls.push_back(make_call(name, *args));
        else
            out->calls.push_back({name, std::string(body.substr(brace)), ""});
        at = closed ? e + close.size() : e;
    }
    add_content(text.substr(at), f, out);
}

}  // namespace llm::chat
