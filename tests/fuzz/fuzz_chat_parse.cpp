// libFuzzer target over the tool-call parser (lib/chat): the first byte picks a template that
// carries one format's markers (each of the format table's families, and none), the second the
// parameters (partial output, reasoning format, a continued prefill), the rest is the model's
// output. Every parse must end with LLM_OK or LLM_ERR_INVALID_ARGUMENT (output that is not UTF-8),
// in bounded time, without crashing, leaking or reading out of bounds.
//
// Build: cmake -S . -B build-fuzz -DLLM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
//        cmake --build build-fuzz --target fuzz_chat_parse
// Run:   build-fuzz/tests/fuzz/fuzz_chat_parse (no seed corpus needed; tests/fuzz/chat_parse_seeds holds a few)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "llm.h"

namespace {

// Template texts without Jinja tags render as themselves: the markers make find_format pick a row,
// and an unclosed reasoning marker makes the parser treat the output as opened inside reasoning.
const char *const kTemplates[] = {
    "<|channel|><|message|>",
    "<|tool_calls_section_begin|><think>",
    "DSML<think>",
    "]<]minimax[>[<mm:think>",
    "<minimax:tool_call><think>",
    "<|tool_call><|channel>thought",
    "<|tool_list_start|><think>",
    "<seed:tool_call><seed:think>",
    "<function=<parameter=<think>",
    "<arg_key>",
    "<function name=<think>",
    "tool▁calls▁begin<think>",
    "[TOOL_CALLS][THINK]",
    "<|START_ACTION|><|START_THINKING|>",
    "Action:<|CHATBOT_TOKEN|>",
    ">>>all",
    "<function=<|python_tag|>",
    "<TOOLCALL>",
    "<tool_calls>Here are my reasoning steps:<|begin_assistant|>\n",
    "<|tool_call|>",
    "<|function_call|>",
    "role_sep function call",
    "functools",
    "<tool_call><think>",
    "ipython parameters",
    "plain text",
};
constexpr size_t kNumTemplates = sizeof(kTemplates) / sizeof(kTemplates[0]);

const char *const kParams[] = {
    R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"s": {"type": "string"}, "n": {"type": "integer"},
                       "u": {"oneOf": [{"type": "string"}, {"type": "object"}]}}}}}]})",
    R"({"is_partial": true, "tools": [{"type": "function", "function": {"name": "f"}}]})",
    R"({"reasoning_format": "none"})",
    R"({"continue_final_message": "reasoning", "messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "r"}]})",
    R"({"continue_final_message": "content", "json_schema": {}, "messages": [{"role": "assistant", "content": "c"}]})",
    R"({"enable_thinking": false, "reasoning_format": "deepseek"})",
};
constexpr size_t kNumParams = sizeof(kParams) / sizeof(kParams[0]);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *tmpl = kTemplates[data[0] % kNumTemplates];
    const char *params = kParams[data[1] % kNumParams];
    const std::string raw(reinterpret_cast<const char *>(data + 2), size - 2);
    if (raw.find('\0') != std::string::npos) return 0;  // the C API takes NUL-terminated text
    static char buf[1 << 20];
    size_t len = 0;
    const int32_t st = llm_chat_parse(nullptr, tmpl, raw.c_str(), params, buf, sizeof(buf), &len);
    if (st != LLM_OK && st != LLM_ERR_INVALID_ARGUMENT && st != LLM_ERR_BUFFER_TOO_SMALL) {
        std::fprintf(stderr, "unexpected status %d: %s\n", st, llm_last_error());
        std::abort();
    }
    return 0;
}
