// Shared text tools of the tool-call parsers (see parse_util.h).
#include "chat/parse_util.h"

#include <cctype>

namespace llm::chat {

std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string_view strip_one_newline(std::string_view s) {
    if (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}

void skip_space(std::string_view s, size_t *pos) {
    while (*pos < s.size() && std::isspace(static_cast<unsigned char>(s[*pos]))) ++*pos;
}

size_t json_value_end(std::string_view s) {
    if (s.empty()) return npos;
    if (s[0] != '{' && s[0] != '[' && s[0] != '"') {  // a scalar runs to a delimiter
        size_t i = 0;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) && s[i] != ',' && s[i] != '}' &&
               s[i] != ']')
            ++i;
        return i;
    }
    // Brackets are counted, not matched: parse_json checks the value afterwards.
    size_t depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
                if (depth == 0) return i + 1;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return npos;
            if (--depth == 0) return i + 1;
        }
    }
    return npos;
}

std::optional<ojson> parse_json(std::string_view s) {
    // nlohmann parses iteratively but copies and dumps recursively: deep values are refused here,
    // before a call's arguments are copied or dumped.
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > kMaxDepth) return std::nullopt;
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
    ojson j = ojson::parse(s.begin(), s.end(), nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
}

std::string_view strip_fences(std::string_view s) {
    std::string_view t = trim(s);
    if (!starts_with(t, "```")) return s;
    const size_t nl = t.find('\n');
    if (nl == npos) return s;
    t.remove_prefix(nl + 1);
    const size_t end = t.rfind("```");
    if (end != npos) t = t.substr(0, end);
    return trim(t);
}

const ojson *param_schema(const ojson &tools, std::string_view name, std::string_view key) {
    if (!tools.is_array()) return nullptr;
    for (const auto &t : tools) {
        if (!t.is_object()) continue;
        const ojson &fn = t.contains("function") ? t["function"] : t;
        if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string() || fn["name"] != name) continue;
        if (!fn.contains("parameters") || !fn["parameters"].is_object()) return nullptr;
        const ojson &params = fn["parameters"];
        if (!params.contains("properties") || !params["properties"].is_object()) return nullptr;
        const auto it = params["properties"].find(std::string(key));
        return it == params["properties"].end() ? nullptr : &*it;
    }
    return nullptr;
}

namespace {

// True when the schema's type admits only a string (maybe or null): the text is then taken as is.
bool is_string_schema(const ojson *schema) {
    if (!schema || !schema->is_object() || !schema->contains("type")) return false;
    const ojson &t = (*schema)["type"];
    if (t.is_string()) return t == "string";
    if (!t.is_array()) return false;
    bool any_string = false;
    for (const auto &e : t) {
        if (e == "string")
            any_string = true;
        else if (e != "null")
            return false;
    }
    return any_string;
}

}  // namespace

bool admits_string(const ojson *schema, int depth) {
    if (!schema || !schema->is_object() || depth > kMaxDepth) return false;
    if (const auto t = schema->find("type"); t != schema->end()) {
        if (*t == "string") return true;
        if (t->is_array()) {
            for (const auto &e : *t)
                if (e == "string") return true;
        }
    }
    for (const char *key : {"anyOf", "oneOf"}) {
        const auto alts = schema->find(key);
        if (alts == schema->end() || !alts->is_array()) continue;
        for (const auto &a : *alts)
            if (admits_string(&a, depth + 1)) return true;
    }
    return false;
}

ojson param_value(std::string_view text, const ojson *schema) {
    if (is_string_schema(schema)) return std::string(text);
    if (auto j = parse_json(trim(text))) return *j;
    return std::string(text);
}

namespace {

std::optional<std::string> py_string(std::string_view s, size_t *pos) {
    const char quote = s[*pos];
    std::string out;
    for (size_t i = *pos + 1; i < s.size(); ++i) {
        char c = s[i];
        if (c == quote) {
            *pos = i + 1;
            return out;
        }
        if (c != '\\') {
            out += c;
            continue;
        }
        if (++i >= s.size()) return std::nullopt;
        switch (s[i]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case '0': out += '\0'; break;
        case 'u': {  // \uXXXX as UTF-8 (no surrogate pairs: rare in tool arguments)
            if (i + 4 >= s.size()) return std::nullopt;
            const std::string hex(s.substr(i + 1, 4));
            char *end = nullptr;
            const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
            if (*end) return std::nullopt;
            i += 4;
            if (cp < 0x80) {
                out += static_cast<char>(cp);
            } else if (cp < 0x800) {
                out += static_cast<char>(0xC0 | (cp >> 6));
                out += static_cast<char>(0x80 | (cp & 0x3F));
            } else {
                out += static_cast<char>(0xE0 | (cp >> 12));
                out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                out += static_cast<char>(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: out += s[i]; break;  // \\ \" \' and anything else as itself
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<ojson> parse_py_literal(std::string_view s, size_t *pos, int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    skip_space(s, pos);
    if (*pos >= s.size()) return std::nullopt;
    const char c = s[*pos];
    if (c == '"' || c == '\'') {
        auto str = py_string(s, pos);
        if (!str) return std::nullopt;
        return ojson(std::move(*str));
    }
    if (c == '[' || c == '(') {
        const char close = c == '[' ? ']' : ')';
        ojson arr = ojson::array();
        ++*pos;
        for (;;) {
            skip_space(s, pos);
            if (*pos >= s.size()) return std::nullopt;
            if (s[*pos] == close) {
                ++*pos;
                return arr;
            }
            auto v = parse_py_literal(s, pos, depth + 1);
            if (!v) return std::nullopt;
            arr.push_back(std::move(*v));
            skip_space(s, pos);
            if (*pos < s.size() && s[*pos] == ',') ++*pos;
        }
    }
    if (c == '{') {
        ojson obj = ojson::object();
        ++*pos;
        for (;;) {
            skip_space(s, pos);
            if (*pos >= s.size()) return std::nullopt;
            if (s[*pos] == '}') {
                ++*pos;
                return obj;
            }
            auto k = parse_py_literal(s, pos, depth + 1);
            if (!k || !k->is_string()) return std::nullopt;
            skip_space(s, pos);
            if (*pos >= s.size() || s[*pos] != ':') return std::nullopt;
            ++*pos;
            auto v = parse_py_literal(s, pos, depth + 1);
            if (!v) return std::nullopt;
            obj[k->get<std::string>()] = std::move(*v);
            skip_space(s, pos);
            if (*pos < s.size() && s[*pos] == ',') ++*pos;
        }
    }
    size_t end = *pos;
    while (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '.' || s[end] == '-' ||
                              s[end] == '+' || s[end] == '_'))
        ++end;
    const std::string_view word = s.substr(*pos, end - *pos);
    if (word.empty()) return std::nullopt;
    *pos = end;
    if (word == "True" || word == "true") return ojson(true);
    if (word == "False" || word == "false") return ojson(false);
    if (word == "None" || word == "null") return ojson(nullptr);
    if (auto j = parse_json(word); j && j->is_number()) return *j;
    return std::nullopt;
}

ToolCall make_call(std::string name, const ojson &args, std::string id) {
    return ToolCall{std::move(name), args.dump(-1, ' ', false, ojson::error_handler_t::replace), std::move(id)};
}

}  // namespace llm::chat
