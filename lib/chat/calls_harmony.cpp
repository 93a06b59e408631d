// gpt-oss's harmony format: messages "<|start|>assistant<|channel|>CHANNEL[ to=RECIPIENT]
// [<|constrain|>json]<|message|>BODY<|end|>"; the analysis channel is reasoning, final (and
// commentary to no one) is content, a message to functions.NAME is a call. The prompt ends with
// "<|start|>assistant", so the output opens with the first message's header.
#include "chat/formats.h"

namespace llm::chat {
namespace {

// The word after `key` in a header, up to a space or the next special token.
std::string_view header_word(std::string_view header, std::string_view key) {
    const size_t k = header.rfind(key);
    if (k == npos) return {};
    size_t e = k + key.size();
    while (e < header.size() && header[e] != ' ' && header[e] != '<') ++e;
    return header.substr(k + key.size(), e - k - key.size());
}

}  // namespace

void calls_harmony(std::string_view text, const Format &f, const ParseParams &p, Message *out) {
    constexpr std::string_view kStart = "<|start|>assistant", kMessage = "<|message|>";
    size_t at = 0;
    bool first = true;
    while (at < text.size()) {
        size_t next = text.find(kStart, at);
        if (next == npos) next = text.size();
        std::string_view msg = text.substr(at, next - at);
        at = next == text.size() ? next : next + kStart.size();
        for (std::string_view end : {"<|end|>", "<|call|>", "<|return|>"}) {
            if (const size_t e = msg.find(end); e != npos) msg = msg.substr(0, e);
        }
        const size_t m = msg.find(kMessage);
        std::string_view header, body;
        if (m == npos) {
            // No header: the continuation of a reasoning prefill, or a message cut in its header.
            if (!(first && p.continue_final == "reasoning")) {
                first = false;
                continue;
            }
            header = "<|channel|>analysis";
            body = msg;
        } else {
            header = msg.substr(0, m);
            body = msg.substr(m + kMessage.size());
        }
        first = false;
        const std::string_view to = header_word(header, "to=");
        const std::string_view channel = header_word(header, "<|channel|>");
        if (starts_with(to, "functions.")) {
            out->calls.push_back({std::string(to.substr(10)), std::string(trim(body)), ""});
        } else if (!to.empty() && to != "assistant") {
            continue;  // a built-in tool (browser, python, container): not a function call
        } else if (channel == "analysis") {
            if (p.reasoning == ReasoningFormat::NONE)
                add_content(body, f, out);
            else
                out->reasoning += body;
        } else {
            add_content(body, f, out);
        }
    }
}

}  // namespace llm::chat
