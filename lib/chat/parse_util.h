// Small text tools the tool-call syntaxes share: finding markers, cutting JSON values out of text,
// converting parameter text by the tool's JSON schema, and Python-like literals.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/tool_parse.h"

namespace llm::chat {

constexpr size_t npos = std::string_view::npos;
constexpr int kMaxDepth = 128;  // nesting of literals we convert ourselves (hostile output stays bounded)

std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
// Removes one leading and one trailing newline (XML-style parameter values put the value on its own lines).
std::string_view strip_one_newline(std::string_view s);

// The length of the JSON value (object, array, string, or scalar) starting at s[0] (after no
// whitespace), or npos when it does not end within s. Strings and escapes are honoured.
size_t json_value_end(std::string_view s);
// Parses s as one JSON value, keeping key order; nullopt when it is not exactly that.
std::optional<ojson> parse_json(std::string_view s);
// Unwraps ```json ... ``` (or ``` ... ```) around s when present.
std::string_view strip_fences(std::string_view s);

// The JSON schema of parameter `key` of tool `name` in the request's tools, or nullptr.
const ojson *param_schema(const ojson &tools, std::string_view name, std::string_view key);
// True when the schema allows a string (its type, or one of its anyOf/oneOf alternatives).
bool admits_string(const ojson *schema, int depth = 0);
// A parameter given as text: a string when its schema says so (or it is not JSON), else the JSON it reads as.
ojson param_value(std::string_view text, const ojson *schema);

// Python-style literal (strings in ' or ", numbers, True/False/None and their JSON spellings, lists,
// dicts) at s[*pos]; advances *pos. nullopt on a syntax error or the end of s.
std::optional<ojson> parse_py_literal(std::string_view s, size_t *pos, int depth = 0);
void skip_space(std::string_view s, size_t *pos);

// A call whose arguments are a JSON value (dumped compactly, keys in their order).
ToolCall make_call(std::string name, const ojson &args, std::string id = {});

}  // namespace llm::chat
