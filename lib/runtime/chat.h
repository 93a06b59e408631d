// Chat support over a loaded model: its metadata as text, its chat templates, and a conversation
// rendered with a template (lib/jinja) and the model's BOS/EOS token texts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gguf/metadata.h"
#include "jinja/jinja.h"
#include "model/model.h"

namespace llm {

// The value of metadata key `key` as text (meta_scalar_text). Error(LLM_ERR_NOT_FOUND) if absent,
// Error(LLM_ERR_INVALID_ARGUMENT) for an array.
std::string meta_text(const Metadata &meta, const std::string &key);

// tokenizer.chat_template, or tokenizer.chat_template.<name> when name is not empty.
// Error(LLM_ERR_NOT_FOUND) if the file has none (or it is not a string).
std::string chat_template(const Metadata &meta, const std::string &name);

// What a template sees as bos_token and eos_token: the vocabulary's texts of the BOS and EOS ids
// ("" for a token the vocabulary lacks).
struct ChatSpecials {
    std::string bos, eos;
};
ChatSpecials chat_specials(const Model &m);

// Renders msgs with the Jinja template (add_generation_prompt = add_assistant). Every role and
// content must be valid UTF-8 (Error(LLM_ERR_INVALID_ARGUMENT) naming the message otherwise);
// the interpreter's errors become an Error with its status and message.
std::string render_chat(std::string_view tmpl, const std::vector<jinja::ChatMessage> &msgs, bool add_assistant,
                        const ChatSpecials &specials, const jinja::Options &opt = {});

// True when j nests arrays/objects deeper than limit. Iterative: nlohmann's copy and dump recurse,
// so a request is checked before either touches it (hostile nesting would overflow the stack).
bool json_deeper_than(const nlohmann::ordered_json &j, size_t limit);
constexpr size_t kMaxRequestDepth = 256;  // the interpreter's own nesting limit (jinja::Limits)

// Renders a request in Hugging Face's apply_chat_template form: a JSON object with "messages" (an
// array of message objects, passed as given: assistant "tool_calls", role "tool" with
// "tool_call_id"/"name", content null), optional "tools" and "documents" (default None),
// "add_generation_prompt" (default false), and any other key as a template variable (e.g.
// "enable_thinking"), as transformers' **kwargs; bos_token/eos_token come from specials unless the
// request names them. Key order is kept (tojson shows it). Error(LLM_ERR_INVALID_ARGUMENT) for a
// request of the wrong shape; the interpreter's errors as render_chat.
std::string render_chat_request(std::string_view tmpl, const nlohmann::ordered_json &request,
                                const ChatSpecials &specials, const jinja::Options &opt = {});
// The same from the request's JSON text (malformed JSON: Error(LLM_ERR_INVALID_ARGUMENT) with where).
std::string render_chat_request(std::string_view tmpl, std::string_view request_json, const ChatSpecials &specials,
                                const jinja::Options &opt = {});

}  // namespace llm
