// Turning a model's raw output into the message an OpenAI-style API returns: content, reasoning
// content and tool calls {name, arguments (JSON text), id}. The tool-call syntax is a property of
// the model's chat template, so the template text decides the format (formats.cpp holds the table);
// a template we do not recognise gives the text back as content and says so.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/chat.h"

namespace llm::chat {

using ojson = nlohmann::ordered_json;

struct ToolCall {
    std::string name, arguments, id;  // arguments: JSON text (partial output: as much as was seen)
};

struct Message {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
};

enum class ReasoningFormat { NONE, AUTO, DEEPSEEK };

// The request's parameters that shape parsing (the object llm_chat_parse takes, llama.cpp's
// common_chat_templates_inputs as JSON).
struct ParseParams {
    ReasoningFormat reasoning = ReasoningFormat::AUTO;
    bool enable_thinking = true;
    bool parallel_tool_calls = false;
    bool partial = false;          // the output stops mid-way: unfinished calls are kept
    bool has_json_schema = false;  // a response format: fenced JSON is unwrapped
    std::string tool_choice = "auto";
    std::string continue_final;  // "", "content" or "reasoning": the last message is a prefill
    ojson tools = ojson::array();
    ojson messages = ojson::array();
};

// Reads params from its JSON object; Error(LLM_ERR_INVALID_ARGUMENT) naming a field of the wrong type.
ParseParams parse_params(const ojson &j);

struct ParseResult {
    Message msg;
    std::string format;  // the format's name, "unknown" when the template's was not recognised
    bool recognized = false;
};

// The name of the tool-call format the template uses ("unknown" if none of the table's).
std::string detect_format(std::string_view tmpl);

// Parses raw (the text generated after the prompt). specials: the BOS/EOS texts the template sees
// when parsing renders the generation prompt (to learn whether it opened a reasoning block).
ParseResult parse_output(std::string_view tmpl, std::string_view raw, const ParseParams &p,
                         const ChatSpecials &specials);

// The same as one JSON object {"content", "reasoning_content", "tool_calls", "format", "parsed"};
// params_json is parse_params' object. Bad JSON or non-UTF-8 raw: Error(LLM_ERR_INVALID_ARGUMENT).
std::string parse_output_json(std::string_view tmpl, std::string_view raw, std::string_view params_json,
                              const ChatSpecials &specials);
ojson to_json(const ParseResult &r);

}  // namespace llm::chat
