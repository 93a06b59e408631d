// The table of tool-call formats: how a template is recognised, its reasoning markers, and the
// syntax that finds its calls in the text after the reasoning.
#pragma once

#include <string_view>

#include "chat/parse_util.h"

namespace llm::chat {

struct Format;

// Finds the calls in text (the output after reasoning) and appends them to out->calls, the text
// outside them to out->content. A call it cannot read stays in the content.
using CallSyntax = void (*)(std::string_view text, const Format &f, const ParseParams &p, Message *out);

struct Format {
    const char *name;
    const char *markers[3];  // template texts that must all occur (nullptr ends the list)
    const char *think_open;  // reasoning block markers (nullptr: the format has none)
    const char *think_close;
    CallSyntax calls;            // nullptr: content only
    const char *open = nullptr;  // the syntax's own markers (what each one means: see the syntax)
    const char *close = nullptr;
    const char *const *noise = nullptr;  // wrapper texts dropped from the content
};

// The format a template uses, nullptr when none matches.
const Format *find_format(std::string_view tmpl);

// The syntaxes (calls_*.cpp).
void calls_tagged_json(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_bare_json(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_mistral(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_kimi(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_deepseek(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_functionary_v32(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_function_tag_json(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_qwen_xml(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_glm(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_invoke_xml(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_minicpm(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_minimax_m3(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_pythonic(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_gemma4(std::string_view text, const Format &f, const ParseParams &p, Message *out);
void calls_harmony(std::string_view text, const Format &f, const ParseParams &p, Message *out);

// Shared by the syntaxes: calls out of a JSON value (an object or an array of them) with the keys
// name/tool_name/function.name, arguments/parameters, id/tool_call_id. False when it holds none.
bool calls_from_json(const ojson &j, Message *out);
// Appends text to out->content with the format's noise texts removed.
void add_content(std::string_view text, const Format &f, Message *out);

}  // namespace llm::chat
