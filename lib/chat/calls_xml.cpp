// Tool-call syntaxes that spell calls as XML-like tags with one tag per parameter: Qwen3-Coder /
// Seed-OSS / Nemotron 3 (<function=NAME><parameter=KEY>), GLM (<arg_key>/<arg_value>), MiniMax M2
// and DeepSeek V3.2 (<invoke name=...><parameter name=...>), MiniCPM 5 (<function name=...><param
// name=...>, CDATA), MiniMax M3 (tags behind its ]<]minimax[>[ separator, nested values).
// Parameter text becomes JSON by the tool's schema (param_value).
#include "chat/formats.h"

namespace llm::chat {
namespace {

// Text between open and close starting the search at *at; advances *at past close. nullopt when
// open is not there; a missing close takes the rest (the output was cut short) and sets *cut.
std::optional<std::string_view> between(std::string_view s, std::string_view open, std::string_view close, size_t *at,
                                        bool *cut) {
    const size_t o = s.find(open, *at);
    if (o == npos) return std::nullopt;
    const size_t start = o + open.size();
    const size_t e = s.find(close, start);
    if (e == npos) {
        *cut = true;
        *at = s.size();
        return s.substr(start);
    }
    *at = e + close.size();
    return s.substr(start, e - start);
}

// A parameter given as an attribute value: name="..." up to its quote.
std::string_view attr(std::string_view s, std::string_view key) {
    const std::string k = std::string(key) + "=\"";
    const size_t i = s.find(k);
    if (i == npos) return {};
    const size_t q = s.find('"', i + k.size());
    return s.substr(i + k.size(), q == npos ? npos : q - i - k.size());
}

}  // namespace

void calls_qwen_xml(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kFn = "<function=", kFnEnd = "</function>",
                               kParam = "<parameter=", kParamEnd = "</parameter>";
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(kFn, at);
        if (o == npos) break;
        const size_t gt = text.find('>', o);
        if (gt == npos) break;
        size_t e = text.find(kFnEnd, gt);
        const bool closed = e != npos;
        if (!closed && !p.partial) break;
        if (!closed) e = text.size();
        const std::string name(trim(text.substr(o + kFn.size(), gt - o - kFn.size())));
        const std::string_view body = text.substr(gt + 1, e - gt - 1);
        ojson args = ojson::object();
        size_t close_at = 0;  // the next </parameter> (npos once there is none: no rescans)
        for (size_t b = body.find(kParam); b != npos;) {
            const size_t kgt = body.find('>', b);
            if (kgt == npos) break;
            const std::string key(body.substr(b + kParam.size(), kgt - b - kParam.size()));
            if (close_at != npos && close_at < kgt) close_at = body.find(kParamEnd, kgt);
            size_t ve = close_at;
            const size_t next = body.find(kParam, kgt);
            if (ve == npos || (next != npos && next < ve)) ve = next == npos ? body.size() : next;
            const std::string_view value = strip_one_newline(body.substr(kgt + 1, ve - kgt - 1));
            args[key] = param_value(value, param_schema(p.tools, name, key));
            b = next;
        }
        add_content(text.substr(at, o - at), f, out);
        out->calls.push_back(make_call(name, args));
        at = closed ? e + kFnEnd.size() : e;
    }
    add_content(text.substr(at), f, out);
}

void calls_glm(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
    size_t at = 0;
    for (;;) {
        size_t next = at;
        bool cut = false;
        const size_t o = text.find(kOpen, at);
        const auto body = between(text, kOpen, kClose, &next, &cut);
        if (!body || (cut && !p.partial)) break;
        const size_t k = body->find("<arg_key>");
        const std::string name(trim(body->substr(0, k)));
        ojson args = ojson::object();
        size_t b = 0;
        bool cut_arg = false;
        while (auto key = between(*body, "<arg_key>", "</arg_key>", &b, &cut_arg)) {
            const auto value = between(*body, "<arg_value>", "</arg_value>", &b, &cut_arg);
            const std::string kname(trim(*key));
            args[kname] = param_value(value ? *value : std::string_view(), param_schema(p.tools, name, kname));
        }
        add_content(text.substr(at, o - at), f, out);
        out->calls.push_back(make_call(name, args));
        at = next;
    }
    add_content(text.substr(at), f, out);
}

void calls_invoke_xml(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    // f.open is the tag namespace: "" (MiniMax M2) or "｜DSML｜" (DeepSeek V3.2, whose parameters
    // say string="true|false" instead of leaving it to the schema).
    const std::string ns = f.open ? f.open : "";
    const std::string open = "<" + ns + "invoke name=\"", close = "</" + ns + "invoke>";
    const std::string popen = "<" + ns + "parameter name=\"", pclose = "</" + ns + "parameter>";
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(open, at);
        if (o == npos) break;
        const size_t q = text.find('"', o + open.size());
        if (q == npos) break;
        size_t e = text.find(close, q);
        const bool closed = e != npos;
        if (!closed && !p.partial) break;
        if (!closed) e = text.size();
        const std::string name(text.substr(o + open.size(), q - o - open.size()));
        const std::string_view body = text.substr(q, e - q);
        ojson args = ojson::object();
        for (size_t b = body.find(popen); b != npos; b = body.find(popen, b)) {
            const size_t kq = body.find('"', b + popen.size());
            const size_t gt = kq == npos ? npos : body.find('>', kq);
            if (gt == npos) break;
            const std::string key(body.substr(b + popen.size(), kq - b - popen.size()));
            const std::string_view attrs = body.substr(kq, gt - kq);
            size_t ve = body.find(pclose, gt);
            if (ve == npos) ve = body.size();
            const std::string_view value = body.substr(gt + 1, ve - gt - 1);
            const std::string_view is_string = attr(attrs, "string");
            if (is_string == "true")
                args[key] = std::string(value);
            else if (is_string == "false")
                args[key] = param_value(value, nullptr);
            else
                args[key] = param_value(strip_one_newline(value), param_schema(p.tools, name, key));
            b = ve;
        }
        add_content(text.substr(at, o - at), f, out);
        out->calls.push_back(make_call(name, args));
        at = closed ? e + close.size() : e;
    }
    add_content(text.substr(at), f, out);
}

void calls_minicpm(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kFn = "<function name=\"", kFnEnd = "</function>", kParam = "<param name=\"",
                               kParamEnd = "</param>", kCdata = "<![CDATA[", kCdataEnd = "]]>";
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(kFn, at);
        if (o == npos) break;
        const size_t q = text.find('"', o + kFn.size());
        const size_t gt = q == npos ? npos : text.find('>', q);
        if (gt == npos) break;
        const std::string name(text.substr(o + kFn.size(), q - o - kFn.size()));
        ojson args = ojson::object();
        size_t b = gt + 1;
        bool ok = true;
        for (;;) {
            size_t i = b;
            skip_space(text, &i);
            if (text.substr(i, kParam.size()) != kParam) break;
            const size_t kq = text.find('"', i + kParam.size());
            const size_t pgt = kq == npos ? npos : text.find('>', kq);
            if (pgt == npos) {
                ok = false;
                break;
            }
            const std::string key(text.substr(i + kParam.size(), kq - i - kParam.size()));
            size_t vs = pgt + 1, ve;
            std::string_view value;
            if (text.substr(vs, kCdata.size()) == kCdata) {  // CDATA may hold "</param>" itself
                const size_t ce = text.find(kCdataEnd, vs);
                if (ce == npos) {
                    ok = false;
                    break;
                }
                value = text.substr(vs + kCdata.size(), ce - vs - kCdata.size());
                ve = text.find(kParamEnd, ce);
                args[key] = std::string(value);
            } else {
                ve = text.find(kParamEnd, vs);
                if (ve == npos) {
                    ok = false;
                    break;
                }
                value = text.substr(vs, ve - vs);
                args[key] = param_value(value, param_schema(p.tools, name, key));
            }
            if (ve == npos) {
                ok = false;
                break;
            }
            b = ve + kParamEnd.size();
        }
        size_t e = text.find(kFnEnd, b);
        if (!ok || (e == npos && !p.partial)) break;
        add_content(text.substr(at, o - at), f, out);
        out->calls.push_back(make_call(name, args));
        at = e == npos ? text.size() : e + kFnEnd.size();
    }
    add_content(text.substr(at), f, out);
}

namespace {

constexpr std::string_view kM3 = "]<]minimax[>[";

// MiniMax M3 elements: SEP<key>value SEP</key>, repeated; a value holding elements of its own is
// an array (all named item) or an object, unless the schema says string.
ojson m3_value(std::string_view raw, const ojson *schema, int depth);

std::optional<ojson> m3_elements(std::string_view s, int depth, bool *all_items, const ojson *schema) {
    if (depth > kMaxDepth) return std::nullopt;
    ojson obj = ojson::object();
    ojson arr = ojson::array();
    *all_items = true;
    size_t at = 0;
    bool any = false;
    for (;;) {
        const size_t o = s.find(std::string(kM3) + "<", at);
        if (o == npos) break;
        const size_t ks = o + kM3.size() + 1;
        const size_t gt = s.find('>', ks);
        if (gt == npos || s[ks] == '/') return std::nullopt;
        const std::string key(s.substr(ks, gt - ks));
        const std::string close = std::string(kM3) + "</" + key + ">";
        const size_t e = s.find(close, gt);
        if (e == npos) return std::nullopt;
        const std::string_view inner = s.substr(gt + 1, e - gt - 1);
        const ojson *sub = nullptr;
        if (schema && schema->is_object() && schema->contains("properties") && (*schema)["properties"].contains(key))
            sub = &(*schema)["properties"][key];
        ojson v = m3_value(inner, sub, depth + 1);
        if (key != "item") *all_items = false;
        arr.push_back(v);
        obj[key] = std::move(v);
        any = true;
        at = e + close.size();
    }
    if (!any) return std::nullopt;
    return *all_items ? arr : obj;
}

ojson m3_value(std::string_view raw, const ojson *schema, int depth) {
    if (admits_string(schema)) return std::string(raw);  // text that looks like elements stays text
    if (raw.find(kM3) != npos) {
        bool items = false;
        if (auto v = m3_elements(raw, depth, &items, schema)) return *v;
    }
    return param_value(raw, schema);
}

}  // namespace

void calls_minimax_m3(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    const std::string open = std::string(kM3) + "<tool_call>", close = std::string(kM3) + "</tool_call>";
    const std::string inv = std::string(kM3) + "<invoke name=\"", inv_end = std::string(kM3) + "</invoke>";
    size_t at = 0;
    for (;;) {
        const size_t o = text.find(open, at);
        if (o == npos) break;
        size_t e = text.find(close, o);
        const bool closed = e != npos;
        if (!closed && !p.partial) break;
        if (!closed) e = text.size();
        const std::string_view block = text.substr(o + open.size(), e - o - open.size());
        Message got;
        for (size_t b = block.find(inv); b != npos; b = block.find(inv, b)) {
            const size_t q = block.find('"', b + inv.size());
            const size_t gt = q == npos ? npos : block.find('>', q);
            if (gt == npos) break;
            const std::string name(block.substr(b + inv.size(), q - b - inv.size()));
            size_t ie = block.find(inv_end, gt);
            if (ie == npos) ie = block.size();
            const std::string_view body = block.substr(gt + 1, ie - gt - 1);
            ojson args = ojson::object();
            size_t at2 = 0;
            for (;;) {  // top-level parameters: their schemas come from the tool
                const size_t po = body.find(std::string(kM3) + "<", at2);
                if (po == npos) break;
                const size_t ks = po + kM3.size() + 1;
                const size_t pgt = body.find('>', ks);
                if (pgt == npos || body[ks] == '/') break;
                const std::string key(body.substr(ks, pgt - ks));
                const std::string pclose = std::string(kM3) + "</" + key + ">";
                const size_t pe = body.find(pclose, pgt);
                if (pe == npos) break;
                args[key] = m3_value(body.substr(pgt + 1, pe - pgt - 1), param_schema(p.tools, name, key), 0);
                at2 = pe + pclose.size();
            }
            got.calls.push_back(make_call(name, args));
            b = ie;
        }
        if (got.calls.empty()) break;
        add_content(text.substr(at, o - at), f, out);
        for (auto &c : got.calls) out->calls.push_back(std::move(c));
        at = closed ? e + close.size() : e;
    }
    add_content(text.substr(at), f, out);
}

}  // namespace llm::chat
