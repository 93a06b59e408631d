// render(): parse, fold constants, evaluate; the status-returning forms map any exception with
// status_of() (core/error.h), as every boundary of the library does.
#include "jinja/jinja.h"

#include <exception>

#include "core/error.h"
#include "jinja/eval.h"
#include "jinja/parser.h"
#include "llm.h"

namespace llm::jinja {
namespace {

template <typename Json>
std::string render_any(std::string_view source, const Json &context, const Options &opt) {
    if (!context.is_object()) fail(LLM_ERR_INVALID_ARGUMENT, "template context must be a JSON object");
    Template tmpl = parse(source, opt.limits);
    Evaluator ev(opt);
    ev.budget.stack_base = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    try {
        ev.fold_constants(tmpl);
        const Value ctx = from_json(context, ev.budget);
        std::string result;
        ev.run(tmpl, ctx, &result);
        return result;
    } catch (const TemplateError &e) {
        if (e.line() == 0) throw e.at_line(ev.line);
        throw;
    }
}

// The status-returning form of a throwing render: *out on success, else the status and *error.
template <typename F>
int32_t to_status(F &&render_fn, std::string *out, std::string *error) noexcept {
    try {
        std::string result = render_fn();
        if (out) *out = std::move(result);
        return LLM_OK;
    } catch (...) {
        return status_of(std::current_exception(), error);
    }
}

}  // namespace

std::string render(std::string_view source, const nlohmann::json &context, const Options &opt) {
    return render_any(source, context, opt);
}

std::string render(std::string_view source, const nlohmann::ordered_json &context, const Options &opt) {
    return render_any(source, context, opt);
}

std::string render_chat(std::string_view source, const std::vector<ChatMessage> &msgs, bool add_generation_prompt,
                        const std::string &bos, const std::string &eos, const Options &opt) {
    // ordered: each message is {role, content} in that order, as transformers builds it
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    ctx["messages"] = nlohmann::ordered_json::array();
    for (const auto &m : msgs) {
        nlohmann::ordered_json jm = nlohmann::ordered_json::object();
        jm["role"] = m.role;
        jm["content"] = m.content;
        ctx["messages"].push_back(std::move(jm));
    }
    ctx["add_generation_prompt"] = add_generation_prompt;
    ctx["bos_token"] = bos;
    ctx["eos_token"] = eos;
    ctx["tools"] = nullptr;
    ctx["documents"] = nullptr;
    return render_any(source, ctx, opt);
}

int32_t render(std::string_view source, const nlohmann::json &context, const Options &opt, std::string *out,
               std::string *error) noexcept {
    return to_status([&] { return render_any(source, context, opt); }, out, error);
}

int32_t render(std::string_view source, const nlohmann::ordered_json &context, const Options &opt, std::string *out,
               std::string *error) noexcept {
    return to_status([&] { return render_any(source, context, opt); }, out, error);
}

int32_t render_chat(std::string_view source, const std::vector<ChatMessage> &msgs, bool add_generation_prompt,
                    const std::string &bos, const std::string &eos, const Options &opt, std::string *out,
                    std::string *error) noexcept {
    return to_status([&] { return render_chat(source, msgs, add_generation_prompt, bos, eos, opt); }, out, error);
}

}  // namespace llm::jinja
