// libFuzzer target over the chat-template interpreter (lib/jinja): the input is a template, then
// optionally a NUL byte and a JSON context (an object: the variables; an array: the messages). Each
// render must end with LLM_OK or an error status, inside small limits, without crashing, leaking or
// reading out of bounds.
//
// Build: cmake -S . -B build-fuzz -DLLM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
//        cmake --build build-fuzz --target fuzz_jinja fuzz_jinja_corpus
// Run:   build-fuzz/tests/fuzz/fuzz_jinja_corpus ../shared jinja-corpus && build-fuzz/tests/fuzz/fuzz_jinja jinja-corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/jinja.h"
#include "llm.h"

namespace {

using ojson = nlohmann::ordered_json;

ojson default_context() {
    ojson ctx = ojson::object();
    ctx["messages"] = ojson::array({{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "Hi 🌍"}},
                                    {{"role", "assistant"}, {"content", "ok"}}});
    ctx["tools"] = nullptr;
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = true;
    ctx["bos_token"] = "<s>";
    ctx["eos_token"] = "</s>";
    return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view input(reinterpret_cast<const char *>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);
    ojson ctx = default_context();
    if (nul != std::string_view::npos) {
        ojson j = ojson::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
        if (j.is_object()) {
            ctx = std::move(j);
        } else if (j.is_array()) {
            ctx["messages"] = std::move(j);
        }
    }
    llm::jinja::Options opt;
    opt.now = 1768435200;
    opt.limits.max_steps = 200000;
    opt.limits.max_depth = 64;
    opt.limits.max_output = 1 << 16;
    std::string out, err;
    const int32_t st = llm::jinja::render(source, ctx, opt, &out, &err);
    const bool known = st == LLM_OK || st == LLM_ERR_FORMAT || st == LLM_ERR_INVALID_ARGUMENT ||
                       st == LLM_ERR_UNSUPPORTED;
    if (!known || (st == LLM_OK && out.size() > opt.limits.max_output) || (st != LLM_OK && err.empty())) {
        std::fprintf(stderr, "fuzz_jinja: status %d, %zu output bytes, error '%s'\n", st, out.size(), err.c_str());
        std::abort();
    }
    return 0;
}
