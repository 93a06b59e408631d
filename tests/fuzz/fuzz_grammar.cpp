// libFuzzer target over the GBNF parser and the JSON-schema converter (lib/grammar). The input's first
// byte picks the parser ('s': the rest up to a NUL is a JSON schema, anything else: a GBNF grammar);
// what follows a NUL is text fed to the matcher. Each input must end in a grammar or a refusal
// (INVALID_ARGUMENT, UNSUPPORTED) without crashing, hanging, leaking or reading out of bounds, and a
// schema the converter accepts must become a grammar the parser accepts.
//
// Build: cmake -S . -B build-fuzz -DLLM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
//        cmake --build build-fuzz --target fuzz_grammar fuzz_grammar_corpus
// Run:   build-fuzz/tests/fuzz/fuzz_grammar_corpus ../shared grammar-corpus &&
//        build-fuzz/tests/fuzz/fuzz_grammar grammar-corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "llm.h"

namespace {

[[noreturn]] void bug(const char *what, const std::string &msg) {
    std::fprintf(stderr, "fuzz_grammar: %s: %s\n", what, msg.c_str());
    std::abort();
}

// A refusal must carry the status the C API documents for it.
void expect_refusal(const llm::Error &e, const char *what) {
    if (e.status() != LLM_ERR_INVALID_ARGUMENT && e.status() != LLM_ERR_UNSUPPORTED) bug(what, e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char *>(data) + 1, size - 1);
    const bool schema = data[0] == 's';
    const size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);
    const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);

    std::string gbnf(source);
    if (schema) {
        try {
            gbnf = llm::grammar::json_schema_to_gbnf(source);
        } catch (const llm::Error &e) {
            expect_refusal(e, "json_schema_to_gbnf");
            return 0;
        }
    }
    std::shared_ptr<const llm::grammar::Grammar> g;
    try {
        g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf));
    } catch (const llm::Error &e) {
        if (schema) bug("a converted schema does not parse", std::string(e.what()) + "\n" + gbnf);
        expect_refusal(e, "parse_gbnf");
        return 0;
    }
    // The matcher's state stays bounded on any text (accepted in part or not at all); a grammar whose
    // stacks outgrow the matcher's bounds is refused (UNSUPPORTED) at reset or at the unit that would
    // pass them.
    try {
        llm::grammar::Matcher m(g);
        const bool all = m.accept_text(text.substr(0, 4096));
        if (all) (void)m.can_end();
        m.reset();
        (void)m.accept_text("{\"a\": [1, \"x\"]} ");
    } catch (const llm::Error &e) {
        if (e.status() != LLM_ERR_UNSUPPORTED) bug("matcher", e.what());
    }
    return 0;
}
