#include "jinja/jinja.h"

#include <new>

#include "jinja/eval.h"
#include "jinja/parser.h"
#include "llm.h"

namespace llm::jinja {
namespace {

std::string describe(const Failure &f) {
    if (f.raised) return "template raised: " + f.message;
    if (f.status == LLM_ERR_UNSUPPORTED)
        return "unsupported: " + f.message + (f.line ? " (line " + std::to_string(f.line) + ")" : "");
    return (f.line ? "template line " + std::to_string(f.line) + ": " : std::string("template: ")) + f.message;
}

template <typename Json>
int32_t render_any(std::string_view source, const Json &context, const Options &opt, std::string *out,
                   std::string *error) {
    std::string err_text;
    int32_t status = LLM_OK;
    try {
        if (!context.is_object()) {
            status = LLM_ERR_INVALID_ARGUMENT;
            err_text = "template context must be a JSON object";
        } else {
            const Template tmpl = parse(source, opt.limits);
            Evaluator ev(opt);
            ev.budget.stack_base = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
            try {
                const Value ctx = from_json(context, ev.budget);
                std::string result;
                ev.run(tmpl, ctx, &result);
                if (out) *out = std::move(result);
            } catch (Failure &f) {
                if (!f.line) f.line = ev.line;
                throw;
            }
        }
    } catch (const Failure &f) {
        status = f.status;
        err_text = describe(f);
    } catch (const std::bad_alloc &) {
        status = LLM_ERR_OUT_OF_MEMORY;
        err_text = "out of memory while rendering the template";
    } catch (const std::exception &e) {
        status = LLM_ERR_INTERNAL;
        err_text = std::string("template: internal error: ") + e.what();
    } catch (...) {
        status = LLM_ERR_INTERNAL;
        err_text = "template: internal error";
    }
    if (status != LLM_OK && error) {
        try {
            *error = std::move(err_text);
        } catch (...) {
        }
    }
    return status;
}

}  // namespace

int32_t render(std::string_view source, const nlohmann::json &context, const Options &opt, std::string *out,
               std::string *error) {
    return render_any(source, context, opt, out, error);
}

int32_t render(std::string_view source, const nlohmann::ordered_json &context, const Options &opt, std::string *out,
               std::string *error) {
    return render_any(source, context, opt, out, error);
}

int32_t render_chat(std::string_view source, const std::vector<ChatMessage> &msgs, bool add_generation_prompt,
                    const std::string &bos, const std::string &eos, const Options &opt, std::string *out,
                    std::string *error) {
    try {
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
        return render(source, ctx, opt, out, error);
    } catch (...) {
        if (error) *error = "out of memory while building the template context";
        return LLM_ERR_OUT_OF_MEMORY;
    }
}

}  // namespace llm::jinja
