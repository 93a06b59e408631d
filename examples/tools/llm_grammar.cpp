// llm-grammar: checks strings against a GBNF grammar or a JSON schema (converted to GBNF), as the
// grammar-constrained sampler sees text: one code point after another from the start rule, and the
// whole string must be a sentence of the language. Not public API only: it links the core (like
// llm-template) and calls the grammar engine (lib/grammar) directly, since the C API applies grammars
// only while sampling.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.h"
#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

using namespace tools;

namespace {

const char *kUsage =
    "usage: llm-grammar (--gbnf FILE [--root NAME] | --json-schema FILE) (--check STRINGS.json | --print-gbnf)\n"
    "  --gbnf FILE          a GBNF grammar (llama.cpp's grammars/README.md)\n"
    "  --root NAME          the start rule (default: root)\n"
    "  --json-schema FILE   a JSON schema (draft 2020-12; unsupported keywords are refused by name)\n"
    "  --print-gbnf         print the grammar (a schema's conversion) instead of checking\n"
    "  --check STRINGS.json a JSON array of strings; prints {\"accepted\": true|false} per string, one a line\n"
    "Exit status 0 after checking; 2 when the grammar cannot be used (the reason on stderr); 1 on other errors.\n";

[[noreturn]] void refuse(const std::string &why) {
    std::fprintf(stderr, "llm-grammar: %s\n", why.c_str());
    std::exit(2);
}

bool accepts(llm::grammar::Matcher &m, const std::string &s) {
    m.reset();
    return m.accept_text(s) && m.can_end();
}

}  // namespace

int main(int argc, char **argv) {
    std::string gbnf, schema, root = "root", check_file;
    bool print = false;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value for " + f);
            return argv[++i];
        };
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (f == "--gbnf") {
            gbnf = val();
        } else if (f == "--root") {
            root = val();
        } else if (f == "--json-schema") {
            schema = val();
        } else if (f == "--check") {
            check_file = val();
        } else if (f == "--print-gbnf") {
            print = true;
        } else {
            die("unknown argument " + f + "\n" + kUsage);
        }
    }
    if (gbnf.empty() == schema.empty()) die(std::string("give one of --gbnf and --json-schema\n") + kUsage);
    if (check_file.empty() == !print) die(std::string("give one of --check STRINGS.json and --print-gbnf\n") + kUsage);

    std::string text;
    const std::string &source = gbnf.empty() ? schema : gbnf;
    if (!read_file(source, &text)) refuse("cannot read " + source);
    std::shared_ptr<const llm::grammar::Grammar> g;
    try {
        if (!schema.empty()) {
            text = llm::grammar::json_schema_to_gbnf(text);
            root = "root";
        }
        g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(text, root));
    } catch (const llm::Error &e) {
        refuse(source + ": " + e.what());
    }
    if (print) {
        std::fputs(text.c_str(), stdout);
        return 0;
    }

    std::string strings_text;
    if (!read_file(check_file, &strings_text)) die("cannot read " + check_file);
    nlohmann::json strings;
    try {
        strings = nlohmann::json::parse(strings_text);
    } catch (const std::exception &e) {
        die(check_file + ": not JSON: " + e.what());
    }
    if (!strings.is_array()) die(check_file + ": expected a JSON array of strings");
    llm::grammar::Matcher m(g);
    for (const nlohmann::json &s : strings) {
        if (!s.is_string()) die(check_file + ": every item must be a string");
        std::printf("{\"accepted\": %s}\n", accepts(m, s.get<std::string>()) ? "true" : "false");
    }
    return 0;
}
