// Metadata text and chat templates of a model, and rendering a conversation with one (checked as UTF-8 first).
#include "runtime/chat.h"

#include "core/error.h"
#include "core/utf8.h"

#include <nlohmann/json.hpp>

namespace llm {

std::string meta_text(const Metadata &meta, const std::string &key) {
    const MetaValue *v = meta.find(key);
    if (!v) fail(LLM_ERR_NOT_FOUND, "the model has no metadata key '{}'", key);
    std::optional<std::string> text = meta_scalar_text(*v);
    if (!text) {
        fail(LLM_ERR_INVALID_ARGUMENT, "metadata key '{}' is an array of {} {} (see llm_model_info_json)", key,
             v->count, name(v->elem_type));
    }
    return std::move(*text);
}

std::string chat_template(const Metadata &meta, const std::string &name) {
    const std::string key = name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + name;
    const MetaValue *v = meta.find(key);
    if (!v || v->type != MetaType::STRING) {
        if (name.empty()) fail(LLM_ERR_NOT_FOUND, "the model has no chat template ('{}')", key);
        fail(LLM_ERR_NOT_FOUND, "the model has no chat template named '{}' ('{}')", name, key);
    }
    return v->str;
}

ChatSpecials chat_specials(const Model &m) {
    const Tokenizer &tok = m.tokenizer();
    auto text = [&](int32_t id) { return id >= 0 && id < tok.n_vocab() ? tok.token_text(id) : std::string(); };
    return ChatSpecials{text(tok.bos()), text(tok.eos())};
}

std::string render_chat(std::string_view tmpl, const std::vector<jinja::ChatMessage> &msgs, bool add_assistant,
                        const ChatSpecials &specials, const jinja::Options &opt) {
    if (utf8::invalid_at(tmpl) != std::string_view::npos) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the chat template is not valid UTF-8 (byte {})", utf8::invalid_at(tmpl));
    }
    for (size_t i = 0; i < msgs.size(); ++i) {
        // Jinja works on Unicode text; the interpreter may assume it gets some.
        for (const auto &[field, text] : {std::pair{"role", &msgs[i].role}, std::pair{"content", &msgs[i].content}}) {
            const size_t at = utf8::invalid_at(*text);
            if (at != std::string_view::npos) {
                fail(LLM_ERR_INVALID_ARGUMENT, "message {}: {} is not valid UTF-8 (byte {})", i, field, at);
            }
        }
    }
    try {
        return jinja::render_chat(tmpl, msgs, add_assistant, specials.bos, specials.eos, opt);
    } catch (const Error &e) {
        fail(e.status(), "chat template: {}", e.what());  // the same error, saying where it comes from
    }
}

namespace {

void check_template_utf8(std::string_view tmpl) {
    if (utf8::invalid_at(tmpl) != std::string_view::npos) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the chat template is not valid UTF-8 (byte {})", utf8::invalid_at(tmpl));
    }
}

}  // namespace

bool json_deeper_than(const nlohmann::ordered_json &j, size_t limit) {
    std::vector<std::pair<const nlohmann::ordered_json *, size_t>> todo{{&j, 0}};
    while (!todo.empty()) {
        const auto [v, depth] = todo.back();
        todo.pop_back();
        if (!v->is_structured()) continue;
        if (depth >= limit) return true;
        for (const auto &child : *v) todo.emplace_back(&child, depth + 1);
    }
    return false;
}

std::string render_chat_request(std::string_view tmpl, const nlohmann::ordered_json &request,
                                const ChatSpecials &specials, const jinja::Options &opt) {
    check_template_utf8(tmpl);
    if (!request.is_object()) fail(LLM_ERR_INVALID_ARGUMENT, "the chat request must be a JSON object");
    if (json_deeper_than(request, kMaxRequestDepth))
        fail(LLM_ERR_INVALID_ARGUMENT, "the chat request nests deeper than {} levels", kMaxRequestDepth);
    const auto msgs = request.find("messages");
    if (msgs == request.end() || !msgs->is_array()) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the chat request needs \"messages\": an array of message objects");
    }
    for (size_t i = 0; i < msgs->size(); ++i) {
        if (!(*msgs)[i].is_object()) fail(LLM_ERR_INVALID_ARGUMENT, "message {} is not a JSON object", i);
    }
    for (const char *key : {"tools", "documents"}) {
        const auto it = request.find(key);
        if (it != request.end() && !it->is_null() && !it->is_array()) {
            fail(LLM_ERR_INVALID_ARGUMENT, "\"{}\" must be an array or null", key);
        }
    }
    const auto agp = request.find("add_generation_prompt");
    if (agp != request.end() && !agp->is_boolean()) {
        fail(LLM_ERR_INVALID_ARGUMENT, "\"add_generation_prompt\" must be true or false");
    }
    // transformers: render(messages=, tools=, documents=, add_generation_prompt=, **special_tokens, **kwargs)
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    ctx["messages"] = *msgs;
    ctx["tools"] = nullptr;
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = false;
    ctx["bos_token"] = specials.bos;
    ctx["eos_token"] = specials.eos;
    for (auto it = request.begin(); it != request.end(); ++it) ctx[it.key()] = it.value();
    try {
        return jinja::render(tmpl, ctx, opt);
    } catch (const Error &e) {
        fail(e.status(), "chat template: {}", e.what());
    }
}

std::string render_chat_request(std::string_view tmpl, std::string_view request_json, const ChatSpecials &specials,
                                const jinja::Options &opt) {
    nlohmann::ordered_json request;
    try {
        request = nlohmann::ordered_json::parse(request_json);
    } catch (const nlohmann::json::exception &e) {
        fail(LLM_ERR_INVALID_ARGUMENT, "the chat request is not valid JSON: {}", e.what());
    }
    return render_chat_request(tmpl, request, specials, opt);
}

}  // namespace llm
