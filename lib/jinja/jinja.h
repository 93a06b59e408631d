// A Jinja2-subset interpreter for the chat templates models ship in GGUF (`tokenizer.chat_template`).
// It renders a template as Python's Jinja2 3.1 does with Hugging Face transformers' settings
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, no autoescape, HF's
// tojson / raise_exception / strftime_now), and refuses what it does not implement instead of guessing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace llm::jinja {

struct Limits {                       // hostile templates end with an error in bounded time/memory
    uint64_t max_steps = 10'000'000;  // evaluated nodes/loop iterations
    uint32_t max_depth = 256;         // nesting of calls/macros/recursion (and parser nesting)
    uint64_t max_output = 64u << 20;  // bytes of output and of any one string value
};

struct Options {
    int64_t now = -1;  // unix seconds for strftime_now (formatted as UTC); -1: the current local time
    Limits limits;
};

// Renders `source` with the variables of `context` (a JSON object: messages, add_generation_prompt,
// bos_token, eos_token, tools, documents, ...; JSON null = Python None). Returns the text, or throws
// an llm::Error (a TemplateError, jinja/value.h, for the template's own failures) with the status: LLM_ERR_FORMAT (template syntax error, or a limit exceeded),
// LLM_ERR_INVALID_ARGUMENT (the template raised: raise_exception(...), or a runtime error Jinja2 would
// raise such as iterating None, calling an undefined function, arithmetic on undefined),
// LLM_ERR_UNSUPPORTED (a construct we do not implement: the message names it and its line), or
// std::bad_alloc if an allocation fails. Thread-safe (no shared state). Never a wrong rendering where
// we are unsure (prefer LLM_ERR_UNSUPPORTED).
std::string render(std::string_view source, const nlohmann::json &context, const Options &opt);
// The same with an ordered_json context: its objects keep their key order, as Python dicts do
// (nlohmann::json sorts keys, which shows in `tojson` or `.items()` of a context dict).
std::string render(std::string_view source, const nlohmann::ordered_json &context, const Options &opt);
// Never throws: LLM_OK and *out, or the status and message status_of() (core/error.h) gives, in *error.
int32_t render(std::string_view source, const nlohmann::json &context, const Options &opt, std::string *out,
               std::string *error) noexcept;
int32_t render(std::string_view source, const nlohmann::ordered_json &context, const Options &opt, std::string *out,
               std::string *error) noexcept;

struct ChatMessage {
    std::string role, content;
};

// The chat-template convenience the C API uses: context = {messages: [{role, content}...],
// add_generation_prompt, bos_token, eos_token, tools: null, documents: null} exactly as
// transformers' apply_chat_template(tokenize=False) passes them. Throws as render(); the second form
// returns the status as the status-returning render() does.
std::string render_chat(std::string_view source, const std::vector<ChatMessage> &msgs, bool add_generation_prompt,
                        const std::string &bos, const std::string &eos, const Options &opt);
int32_t render_chat(std::string_view source, const std::vector<ChatMessage> &msgs, bool add_generation_prompt,
                    const std::string &bos, const std::string &eos, const Options &opt, std::string *out,
                    std::string *error) noexcept;

}  // namespace llm::jinja
