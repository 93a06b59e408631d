// The parse of a model's output: find the template's format, separate the reasoning block (using
// the rendered generation prompt to learn whether the template opened it already), hand the rest to
// the format's call syntax, then add a continued prefill's text.
#include "chat/tool_parse.h"

#include "chat/formats.h"
#include "core/error.h"
#include "core/utf8.h"

namespace llm::chat {
namespace {

bool get_bool(const ojson &j, const char *key, bool dflt) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_boolean()) fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params: \"{}\" must be true or false", key);
    return it->get<bool>();
}

std::string get_string(const ojson &j, const char *key, const char *dflt) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return dflt;
    if (!it->is_string()) fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params: \"{}\" must be a string", key);
    return it->get<std::string>();
}

const ojson *last_message(const ParseParams &p) {
    if (p.messages.empty() || !p.messages.back().is_object()) return nullptr;
    return &p.messages.back();
}

std::string message_text(const ojson *msg, const char *key) {
    if (!msg) return {};
    const auto it = msg->find(key);
    return it != msg->end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The rendered prompt ends inside an open reasoning block: the text from its opening marker on
// (what llama.cpp prepends to the output before parsing), or "" when it does not. *failed when the
// template could not render these params.
std::string open_reasoning_prefix(std::string_view tmpl, const Format &f, const ParseParams &p,
                                  const ChatSpecials &specials, bool *failed) {
    ojson req = ojson::object();
    req["messages"] = p.messages;
    if (!p.tools.empty()) req["tools"] = p.tools;
    req["add_generation_prompt"] = true;
    req["enable_thinking"] = p.enable_thinking;
    std::string prompt;
    try {
        jinja::Options opt;
        opt.now = 0;
        prompt = render_chat_request(tmpl, req, specials, opt);
    } catch (const Error &) {
        *failed = true;
        return {};
    }
    const size_t open = prompt.rfind(f.think_open);
    if (open == npos || prompt.find(f.think_close, open) != npos) return {};
    return prompt.substr(open);
}

std::string trimmed(std::string_view s) { return std::string(trim(s)); }

}  // namespace

ParseParams parse_params(const ojson &j) {
    if (!j.is_object()) fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params must be a JSON object");
    if (json_deeper_than(j, kMaxRequestDepth))
        fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params nest deeper than {} levels", kMaxRequestDepth);
    ParseParams p;
    const std::string rf = get_string(j, "reasoning_format", "auto");
    if (rf == "none")
        p.reasoning = ReasoningFormat::NONE;
    else if (rf == "auto")
        p.reasoning = ReasoningFormat::AUTO;
    else if (rf == "deepseek" || rf == "deepseek-legacy")
        p.reasoning = ReasoningFormat::DEEPSEEK;
    else
        fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params: reasoning_format '{}' is not none, auto or deepseek", rf);
    p.enable_thinking = get_bool(j, "enable_thinking", true);
    p.parallel_tool_calls = get_bool(j, "parallel_tool_calls", false);
    p.partial = get_bool(j, "is_partial", get_bool(j, "partial", false));
    p.tool_choice = get_string(j, "tool_choice", "auto");
    if (p.tool_choice != "auto" && p.tool_choice != "none" && p.tool_choice != "required")
        fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params: tool_choice '{}' is not auto, none or required", p.tool_choice);
    const std::string cont = get_string(j, "continue_final_message", "none");
    if (cont != "none" && cont != "content" && cont != "reasoning")
        fail(LLM_ERR_INVALID_ARGUMENT,
             "chat parse params: continue_final_message '{}' is not none, content or reasoning", cont);
    p.continue_final = cont == "none" ? "" : cont;
    for (const char *key : {"tools", "messages"}) {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null()) continue;
        if (!it->is_array()) fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params: \"{}\" must be an array", key);
        (key[0] == 't' ? p.tools : p.messages) = *it;
    }
    const auto schema = j.find("json_schema");
    p.has_json_schema = schema != j.end() && !schema->is_null();
    return p;
}

std::string detect_format(std::string_view tmpl) {
    const Format *f = find_format(tmpl);
    return f ? f->name : "unknown";
}

ParseResult parse_output(std::string_view tmpl, std::string_view raw, const ParseParams &p,
                         const ChatSpecials &specials) {
    ParseResult r;
    const Format *f = find_format(tmpl);
    r.format = f ? f->name : "unknown";
    r.recognized = f != nullptr;
    Message &m = r.msg;
    std::string text(raw);
    const bool has_think = f && f->think_open;
    const bool extract = has_think && p.reasoning != ReasoningFormat::NONE;
    bool in_reasoning = has_think && p.continue_final == "reasoning";
    bool render_failed = false;
    if (has_think && p.continue_final.empty()) {
        std::string prefix = open_reasoning_prefix(tmpl, *f, p, specials, &render_failed);
        if (!prefix.empty()) text = prefix + text;
    } else if (in_reasoning && !extract) {
        text = f->think_open + text;  // kept inline: the content shows the block as the model wrote it
    }

    std::string rest = text;
    if (extract) {
        const std::string_view open = f->think_open, close = f->think_close;
        std::string_view t = text;
        const std::string_view lead = trim(t);
        size_t body = npos;
        const size_t o = lead.find(open);
        if (in_reasoning) {
            body = 0;
        } else if (o != npos && starts_with(open, lead.substr(0, o))) {
            // the marker, maybe after a stuttered start of itself ("<|channel><|channel>thought")
            body = (lead.data() - t.data()) + o + open.size();
        } else if (starts_with(lead, close)) {
            rest = std::string(lead.substr(close.size()));  // an empty block the prompt left open
        } else if (render_failed && t.find(close) != npos && t.find(open) == npos) {
            body = 0;  // the template could not tell us; a lone closing marker says the prompt opened it
        }
        if (body != npos) {
            size_t end = t.find(close, body);
            size_t after = end == npos ? npos : end + close.size();
            if (end == npos && f->noise) {
                // Unclosed: a tool-call section starts the answer all the same (Kimi, DeepSeek V4).
                for (const char *const *n = f->noise; *n; ++n) {
                    const size_t at = t.find(*n, body);
                    if (at < end) end = after = at;
                }
            }
            m.reasoning = std::string(t.substr(body, end == npos ? npos : end - body));
            rest = end == npos ? std::string() : std::string(t.substr(after));
        }
    }

    if (f && f->calls)
        f->calls(rest, *f, p, &m);
    else
        m.content = rest;

    const ojson *prefill = p.continue_final.empty() ? nullptr : last_message(p);
    if (prefill) {
        m.content = message_text(prefill, "content") + m.content;
        const bool reasons = p.reasoning != ReasoningFormat::NONE && f && (f->think_open || f->calls == calls_harmony);
        if (reasons) m.reasoning = message_text(prefill, "reasoning_content") + m.reasoning;
    }
    if (p.has_json_schema && m.calls.empty()) m.content = std::string(strip_fences(m.content));
    m.content = trimmed(m.content);
    m.reasoning = trimmed(m.reasoning);
    return r;
}

ojson to_json(const ParseResult &r) {
    ojson j = ojson::object();
    j["content"] = r.msg.content;
    j["reasoning_content"] = r.msg.reasoning;
    j["tool_calls"] = ojson::array();
    for (const auto &c : r.msg.calls) {
        ojson jc = ojson::object();
        jc["name"] = c.name;
        jc["arguments"] = c.arguments;
        jc["id"] = c.id;
        j["tool_calls"].push_back(std::move(jc));
    }
    j["format"] = r.format;
    j["parsed"] = r.recognized;
    return j;
}

std::string parse_output_json(std::string_view tmpl, std::string_view raw, std::string_view params_json,
                              const ChatSpecials &specials) {
    if (const size_t at = utf8::invalid_at(raw); at != npos)
        fail(LLM_ERR_INVALID_ARGUMENT, "the output to parse is not valid UTF-8 (byte {})", at);
    if (const size_t at = utf8::invalid_at(tmpl); at != npos)
        fail(LLM_ERR_INVALID_ARGUMENT, "the chat template is not valid UTF-8 (byte {})", at);
    ojson params = ojson::parse(params_json.begin(), params_json.end(), nullptr, false);
    if (params.is_discarded()) fail(LLM_ERR_INVALID_ARGUMENT, "chat parse params are not valid JSON");
    const ParseResult r = parse_output(tmpl, raw, parse_params(params), specials);
    return to_json(r).dump(-1, ' ', false, ojson::error_handler_t::replace);
}

}  // namespace llm::chat
