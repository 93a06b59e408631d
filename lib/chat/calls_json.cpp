// Tool-call syntaxes whose arguments are JSON: a JSON body between markers (Hermes/Qwen
// <tool_call>, Granite, Command R, Nemotron, Apriel, GigaChat, FireFunction), bare JSON (Llama 3.x),
// Mistral's [TOOL_CALLS], Kimi K2, DeepSeek R1/V3.1, Functionary v3.1 and v3.2.
#include <optional>

#include "chat/formats.h"

namespace llm::chat {
namespace {

const ojson *field(const ojson &obj, std::initializer_list<const char *> names) {
    for (const char *n : names) {
        const auto it = obj.find(n);
        if (it != obj.end()) return &*it;
    }
    return nullptr;
}

std::string text_of(const ojson *j) {
    if (!j || j->is_null()) return {};
    return j->is_string() ? j->get<std::string>() : j->dump();
}

bool call_from_object(const ojson &obj, Message *out) {
    if (!obj.is_object()) return false;
    const ojson *fn = field(obj, {"function"});
    const ojson &src = fn && fn->is_object() ? *fn : obj;
    const ojson *name = field(src, {"name", "tool_name"});
    if (!name || !name->is_string()) return false;
    const ojson *args = field(src, {"arguments", "parameters"});
    ToolCall c;
    c.name = name->get<std::string>();
    if (!args)
        c.arguments = "{}";
    else if (args->is_string())
        c.arguments = args->get<std::string>();
    else
        c.arguments = args->dump(-1, ' ', false, ojson::error_handler_t::replace);
    c.id = text_of(field(obj, {"id", "tool_call_id"}));
    out->calls.push_back(std::move(c));
    return true;
}

// The text after `"key"` and a colon in s (npos when absent), for reading calls cut short.
size_t after_key(std::string_view s, std::string_view key) {
    std::string quoted(1, '"');  // appended, not "\"" + key: GCC 12's -Wrestrict false positive
    quoted.append(key).push_back('"');
    for (size_t at = s.find(quoted); at != npos; at = s.find(quoted, at + 1)) {
        size_t i = at + quoted.size();
        skip_space(s, &i);
        if (i < s.size() && s[i] == ':') {
            ++i;
            skip_space(s, &i);
            return i;
        }
    }
    return npos;
}

// The string value of the first of keys found in s (no escapes: names and ids), or nullopt.
std::optional<std::string> string_field(std::string_view s, std::initializer_list<const char *> keys) {
    for (const char *k : keys) {
        const size_t i = after_key(s, k);
        if (i == npos || i >= s.size() || s[i] != '"') continue;
        const size_t q = s.find('"', i + 1);
        if (q == npos) continue;
        return std::string(s.substr(i + 1, q - i - 1));
    }
    return std::nullopt;
}

// A call cut short: the name (and id) read from what is there, the arguments as seen so far.
bool partial_call(std::string_view body, Message *out) {
    const auto name = string_field(body, {"name", "tool_name"});
    if (!name) return false;
    ToolCall c;
    c.name = *name;
    c.id = string_field(body, {"id", "tool_call_id"}).value_or("");
    for (const char *k : {"arguments", "parameters"}) {
        if (const size_t i = after_key(body, k); i != npos) {
            c.arguments = std::string(body.substr(i));
            break;
        }
    }
    out->calls.push_back(std::move(c));
    return true;
}

// The JSON value at the start of body (after fences and space): calls, or false.
bool calls_from_body(std::string_view body, const ParseParams &p, Message *out) {
    std::string_view t = trim(strip_fences(trim(body)));
    const size_t start = t.find_first_of("{[");
    if (start != npos && trim(t.substr(0, start)).empty()) {
        t = t.substr(start);
        const size_t end = json_value_end(t);
        if (end != npos) {
            if (auto j = parse_json(t.substr(0, end))) return calls_from_json(*j, out);
        }
    }
    return p.partial && partial_call(t, out);
}

}  // namespace

bool calls_from_json(const ojson &j, Message *out) {
    const size_t before = out->calls.size();
    if (j.is_array()) {
        for (const auto &e : j) {
            if (!call_from_object(e, out)) {
                out->calls.resize(before);
                return false;
            }
        }
        return !j.empty();
    }
    return call_from_object(j, out);
}

void calls_tagged_json(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    const std::string_view open = f.open, close = f.close ? f.close : "";
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(open, at);
        if (o == npos) break;
        size_t body_end = close.empty() ? text.size() : text.find(close, o + open.size());
        if (body_end == npos) body_end = text.size();
        Message got;
        if (!calls_from_body(text.substr(o + open.size(), body_end - o - open.size()), p, &got)) break;
        add_content(text.substr(at, o - at), f, out);
        for (auto &c : got.calls) out->calls.push_back(std::move(c));
        at = body_end == text.size() ? body_end : body_end + close.size();
    }
    add_content(text.substr(at), f, out);
}

void calls_bare_json(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    std::string_view t = trim(text);
    if (starts_with(t, "<|python_tag|>")) t = trim(t.substr(14));
    Message got;
    if (!p.tools.empty() && !t.empty() && t[0] == '{' && calls_from_body(t, p, &got)) {
        for (auto &c : got.calls) out->calls.push_back(std::move(c));
        return;
    }
    add_content(text, f, out);
}

void calls_mistral(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kCalls = "[TOOL_CALLS]", kId = "[CALL_ID]", kArgs = "[ARGS]";
    size_t o = text.find(kCalls);
    if (o == npos) return add_content(text, f, out);
    add_content(text.substr(0, o), f, out);
    while (o != npos) {
        size_t at = o + kCalls.size();
        const size_t next = text.find(kCalls, at);
        std::string_view seg = text.substr(at, next == npos ? npos : next - at);
        const std::string_view lead = trim(seg);
        if (!lead.empty() && lead[0] == '[') {  // v3: a JSON array of {name, arguments, id}
            if (!calls_from_body(seg, p, out)) add_content(seg, f, out);
        } else {  // v11+: NAME[CALL_ID]id[ARGS]{...}
            const size_t a = seg.find(kArgs);
            if (a == npos) {
                if (p.partial && !trim(seg).empty())
                    out->calls.push_back({std::string(trim(seg)), "", ""});
                else
                    add_content(seg, f, out);
            } else {
                std::string_view head = seg.substr(0, a);
                std::string id;
                if (const size_t i = head.find(kId); i != npos) {
                    id = std::string(trim(head.substr(i + kId.size())));
                    head = head.substr(0, i);
                }
                std::string_view args = trim(seg.substr(a + kArgs.size()));
                const size_t end = json_value_end(args);
                if (end != npos && parse_json(args.substr(0, end))) {
                    out->calls.push_back({std::string(trim(head)), std::string(args.substr(0, end)), id});
                    add_content(args.substr(end), f, out);
                } else if (p.partial) {
                    out->calls.push_back({std::string(trim(head)), std::string(args), id});
                } else {
                    add_content(seg, f, out);
                }
            }
        }
        o = next;
    }
}

void calls_kimi(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kBegin = "<|tool_call_begin|>", kArg = "<|tool_call_argument_begin|>",
                               kEnd = "<|tool_call_end|>";
    size_t at = 0;
    for (;;) {
        const size_t b = text.find(kBegin, at);
        if (b == npos) break;
        const size_t a = text.find(kArg, b);
        if (a == npos) break;
        size_t e = text.find(kEnd, a);
        const bool closed = e != npos;
        if (!closed && !p.partial) break;
        if (!closed) e = text.size();
        // header: functions.NAME:INDEX, which is also the call's id
        const std::string_view header = trim(text.substr(b + kBegin.size(), a - b - kBegin.size()));
        std::string_view name = header;
        if (const size_t dot = name.find('.'); dot != npos) name = name.substr(dot + 1);
        if (const size_t colon = name.rfind(':'); colon != npos) name = name.substr(0, colon);
        add_content(text.substr(at, b - at), f, out);
        out->calls.push_back({std::string(name), std::string(trim(text.substr(a + kArg.size(), e - a - kArg.size()))),
                              std::string(header)});
        at = closed ? e + kEnd.size() : e;
    }
    add_content(text.substr(at), f, out);
}

void calls_deepseek(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>", kEnd = "<｜tool▁call▁end｜>";
    size_t at = 0;
    for (;;) {
        const size_t b = text.find(kBegin, at);
        if (b == npos) break;
        const size_t s = text.find(kSep, b);
        if (s == npos) break;
        size_t e = text.find(kEnd, s);
        const bool closed = e != npos;
        if (!closed && !p.partial) break;
        if (!closed) e = text.size();
        std::string_view left = trim(text.substr(b + kBegin.size(), s - b - kBegin.size()));
        std::string_view right = text.substr(s + kSep.size(), e - s - kSep.size());
        std::string name(left);
        if (left == "function") {  // R1: function<sep>NAME\n```json\n{...}\n```
            const size_t nl = right.find('\n');
            name = std::string(trim(right.substr(0, nl)));
            right = nl == npos ? std::string_view() : right.substr(nl + 1);
        }
        const std::string_view args = trim(strip_fences(right));
        if (closed && !parse_json(args)) break;
        add_content(text.substr(at, b - at), f, out);
        out->calls.push_back({name, std::string(args), ""});
        at = closed ? e + kEnd.size() : e;
    }
    add_content(text.substr(at), f, out);
}

void calls_functionary_v32(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    // The prompt ends with ">>>": every segment is "RECIPIENT\nBODY", recipient "all" being the user.
    size_t at = 0;
    while (at <= text.size()) {
        size_t next = text.find(">>>", at);
        if (next == npos) next = text.size();
        const std::string_view seg = text.substr(at, next - at);
        const size_t nl = seg.find('\n');
        const std::string_view name = trim(seg.substr(0, nl));
        const std::string_view body = nl == npos ? std::string_view() : seg.substr(nl + 1);
        if (name == "all") {
            add_content(body, f, out);
        } else if (auto j = parse_json(trim(body)); j && !name.empty()) {
            out->calls.push_back(make_call(std::string(name), *j));
        } else if (p.partial && !name.empty() && nl != npos) {
            out->calls.push_back({std::string(name), std::string(trim(body)), ""});
        } else {
            add_content(seg, f, out);
        }
        at = next + 3;
    }
}

void calls_function_tag_json(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    // <function=NAME>{...}</function>
    const std::string_view open = f.open, close = f.close;
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(open, at);
        if (o == npos) break;
        const size_t gt = text.find('>', o + open.size());
        if (gt == npos) break;
        size_t e = text.find(close, gt);
        const bool closed = e != npos;
        if (!closed) e = text.size();
        const std::string_view args = trim(text.substr(gt + 1, e - gt - 1));
        if (!parse_json(args) && !p.partial) break;
        add_content(text.substr(at, o - at), f, out);
        out->calls.push_back({std::string(text.substr(o + open.size(), gt - o - open.size())), std::string(args), ""});
        at = closed ? e + close.size() : e;
    }
    add_content(text.substr(at), f, out);
}

}  // namespace llm::chat
