// The format table. Each template family is recognised by texts its template writes around tool
// calls (the way llama.cpp's chat code tells them apart); the first row whose markers all occur
// wins, so the more specific rows come first.
#include "chat/formats.h"

namespace llm::chat {
namespace {

constexpr const char *kThink = "<think>";
constexpr const char *kThinkEnd = "</think>";

const char *const kNoToolCall[] = {"<tool_call>", "</tool_call>", nullptr};
const char *const kNoSeed[] = {"<seed:tool_call>", "</seed:tool_call>", nullptr};
const char *const kNoDsml[] = {"<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "<｜DSML｜tool_calls>",
                               "</｜DSML｜tool_calls>", nullptr};
const char *const kNoMinimax[] = {"<minimax:tool_call>", "</minimax:tool_call>", nullptr};
const char *const kNoDeepseek[] = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", nullptr};
const char *const kNoKimi[] = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", nullptr};
const char *const kNoCohere[] = {"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>", nullptr};
const char *const kNoCommandR[] = {"<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", nullptr};
const char *const kNoGigachat[] = {"<|message_sep|>", nullptr};
const char *const kNoPythonTag[] = {"<|python_tag|>", nullptr};

// One row per line, read as a table.
// clang-format off
const Format kFormats[] = {
    {"gpt_oss", {"<|channel|>", "<|message|>"}, nullptr, nullptr, calls_harmony},
    {"kimi_k2", {"<|tool_calls_section_begin|>"}, kThink, kThinkEnd, calls_kimi, nullptr, nullptr, kNoKimi},
    {"deepseek_v3_2", {"DSML"}, kThink, kThinkEnd, calls_invoke_xml, "｜DSML｜", nullptr, kNoDsml},
    {"minimax_m3", {"]<]minimax[>["}, "<mm:think>", "</mm:think>", calls_minimax_m3},
    {"minimax_m2", {"<minimax:tool_call>"}, kThink, kThinkEnd, calls_invoke_xml, "", nullptr, kNoMinimax},
    {"gemma4", {"<|tool_call>"}, "<|channel>thought", "<channel|>", calls_gemma4, "<|tool_call>", "<tool_call|>"},
    {"lfm2", {"<|tool_list_start|>"}, kThink, kThinkEnd, calls_pythonic, "<|tool_call_start|>", "<|tool_call_end|>"},
    {"lfm2", {"<|tool_call_start|>"}, kThink, kThinkEnd, calls_pythonic, "<|tool_call_start|>", "<|tool_call_end|>"},
    {"lfm2", {"List of tools", "<|im_start|>"}, kThink, kThinkEnd, calls_pythonic, "<|tool_call_start|>",
     "<|tool_call_end|>"},
    {"seed_oss", {"<seed:tool_call>"}, "<seed:think>", "</seed:think>", calls_qwen_xml, nullptr, nullptr, kNoSeed},
    {"qwen3_coder", {"<function=", "<parameter="}, kThink, kThinkEnd, calls_qwen_xml, nullptr, nullptr, kNoToolCall},
    {"glm", {"<arg_key>"}, kThink, kThinkEnd, calls_glm},
    {"minicpm5", {"<function name="}, kThink, kThinkEnd, calls_minicpm},
    {"deepseek_r1", {"tool▁calls▁begin"}, kThink, kThinkEnd, calls_deepseek, nullptr, nullptr, kNoDeepseek},
    {"mistral", {"[TOOL_CALLS]"}, "[THINK]", "[/THINK]", calls_mistral},
    {"command_r7b", {"<|START_ACTION|>"}, "<|START_THINKING|>", "<|END_THINKING|>", calls_tagged_json,
     "<|START_ACTION|>", "<|END_ACTION|>", kNoCohere},
    {"command_r_plus", {"Action:", "<|CHATBOT_TOKEN|>"}, nullptr, nullptr, calls_tagged_json, "Action:", nullptr,
     kNoCommandR},
    {"functionary_v3_2", {">>>", "all"}, nullptr, nullptr, calls_functionary_v32},
    {"functionary_v3_1", {"<function=", "<|python_tag|>"}, nullptr, nullptr, calls_function_tag_json, "<function=",
     "</function>", kNoPythonTag},
    {"nemotron_v2", {"<TOOLCALL>"}, kThink, kThinkEnd, calls_tagged_json, "<TOOLCALL>", "</TOOLCALL>"},
    // Apriel 1.6 opens the assistant turn with its reasoning preamble, which belongs to the reasoning.
    {"apriel", {"<tool_calls>", "Here are my reasoning steps:"}, "<|begin_assistant|>\n", "[BEGIN FINAL RESPONSE]",
     calls_tagged_json, "<tool_calls>", "</tool_calls>"},
    {"apriel", {"<tool_calls>"}, nullptr, nullptr, calls_tagged_json, "<tool_calls>", "</tool_calls>"},
    {"granite", {"<|tool_call|>"}, kThink, kThinkEnd, calls_tagged_json, "<|tool_call|>", nullptr},
    {"gigachat_v3_1", {"<|function_call|>"}, nullptr, nullptr, calls_tagged_json, "<|function_call|>", nullptr},
    {"gigachat_v3", {"role_sep", "function call"}, nullptr, nullptr, calls_tagged_json, "function call<|role_sep|>",
     nullptr, kNoGigachat},
    {"firefunction_v2", {"functools"}, nullptr, nullptr, calls_tagged_json, "functools", nullptr},
    {"hermes", {"<tool_call>"}, kThink, kThinkEnd, calls_tagged_json, "<tool_call>", "</tool_call>"},
    {"llama3", {"ipython", "parameters"}, nullptr, nullptr, calls_bare_json, nullptr, nullptr, kNoPythonTag},
    {"llama3", {"<|python_tag|>"}, nullptr, nullptr, calls_bare_json, nullptr, nullptr, kNoPythonTag},
};
// clang-format on

}  // namespace

const Format *find_format(std::string_view tmpl) {
    for (const Format &f : kFormats) {
        bool all = true;
        for (const char *m : f.markers) {
            if (m && tmpl.find(m) == npos) all = false;
        }
        if (all) return &f;
    }
    return nullptr;
}

void add_content(std::string_view text, const Format &f, Message *out) {
    if (!f.noise) {
        out->content.append(text);
        return;
    }
    std::string s(text);
    for (const char *const *n = f.noise; *n; ++n) {
        const std::string_view noise = *n;
        for (size_t at = s.find(noise); at != npos; at = s.find(noise, at)) s.erase(at, noise.size());
    }
    out->content += s;
}

}  // namespace llm::chat
