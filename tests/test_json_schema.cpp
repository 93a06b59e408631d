// JSON schema -> GBNF (lib/grammar/json_schema.cpp) against ../shared/grammar/json_schema_vectors.json
// (JSON-Schema-Test-Suite draft 2020-12, restricted to the supported keywords): no invalid instance
// accepted in either serialization, every produced grammar parses, every refusal names its reason; the
// counts are printed beside llama.cpp's (each case's llama_cpp field).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace {

bool matches(llm::grammar::Matcher &m, const std::string &text) {
    m.reset();
    return m.accept_text(text) && m.can_end();
}

}  // namespace

TEST_CASE("json schema vectors: no invalid instance accepted, grammars parse, refusals named", "[grammar][schema]") {
    std::ifstream f(std::string(LLM_SHARED_DIR) + "/grammar/json_schema_vectors.json", std::ios::binary);
    REQUIRE(f.good());
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(f);  // members in the suite's order
    std::map<std::string, std::shared_ptr<llm::grammar::Matcher>> groups;  // null: refused
    std::map<std::string, std::string> refusals;
    int valid = 0, invalid = 0, valid_both = 0, valid_compact = 0, invalid_accepted = 0;
    int ll_valid_compact = 0, ll_valid_spaced = 0, ll_invalid_accepted = 0, ll_converted_groups = 0;
    std::map<std::string, bool> ll_converts;
    for (const nlohmann::ordered_json &c : v.at("cases")) {
        const std::string group = c.at("group");
        INFO("case " << c.at("id").get<std::string>());
        if (!groups.count(group)) {
            std::shared_ptr<llm::grammar::Matcher> m;
            std::string gbnf;
            try {
                gbnf = llm::grammar::json_schema_to_gbnf(c.at("schema").dump());
            } catch (const llm::Error &e) {
                CHECK(e.status() == LLM_ERR_UNSUPPORTED);
                refusals[group] = e.what();
            }
            if (!gbnf.empty()) {
                INFO("grammar:\n" << gbnf);
                try {
                    m = std::make_shared<llm::grammar::Matcher>(
                        std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf)));
                } catch (const llm::Error &e) {
                    // Only a schema that refers to itself at once ({"$ref": "#"}) may give no grammar.
                    INFO(e.what());
                    CHECK(std::string(e.what()).find("left recursion") != std::string::npos);
                    refusals[group] = e.what();
                }
            }
            groups[group] = m;
        }
        const nlohmann::ordered_json &ll = c.at("llama_cpp");
        const bool ll_builds = ll.value("converts", true) && ll.value("builds", true);
        ll_converts[group] = ll_builds;
        const bool ok = c.at("valid");
        (ok ? valid : invalid)++;
        if (ll_builds) {
            if (ok) {
                ll_valid_compact += ll.value("accepts_compact", false);
                ll_valid_spaced += ll.value("accepts_spaced", false);
            } else {
                ll_invalid_accepted += ll.value("accepts_compact", false) || ll.value("accepts_spaced", false);
            }
        }
        const std::shared_ptr<llm::grammar::Matcher> &m = groups[group];
        if (!m) continue;
        const bool compact = matches(*m, c.at("instance_json"));
        const bool spaced = matches(*m, c.at("instance_json_spaced"));
        if (ok) {
            valid_compact += compact;
            valid_both += compact && spaced;
        } else {
            INFO("invalid instance " << c.at("instance_json").get<std::string>() << " accepted");
            CHECK_FALSE(compact);
            CHECK_FALSE(spaced);
            invalid_accepted += compact || spaced;
        }
    }
    int converted = 0, both_convert = 0, only_llama = 0;
    for (const auto &[g, m] : groups) {
        converted += m != nullptr;
        ll_converted_groups += ll_converts[g];
        both_convert += m && ll_converts[g];
        only_llama += !m && ll_converts[g];
    }
    std::printf("json schema vectors: %d/%zu schemas converted (llama.cpp %d, both %d, only llama.cpp %d); "
                "valid accepted %d compact, %d in both forms of %d (llama.cpp %d compact, %d spaced); "
                "invalid accepted %d of %d (llama.cpp %d)\n",
                converted, groups.size(), ll_converted_groups, both_convert, only_llama, valid_compact, valid_both, valid,
                ll_valid_compact, ll_valid_spaced, invalid_accepted, invalid, ll_invalid_accepted);
    std::map<std::string, int> reasons;
    for (const auto &[g, why] : refusals) ++reasons[why];
    for (const auto &[why, n] : reasons) std::printf("  refused %d: %s\n", n, why.c_str());
    CHECK(invalid_accepted == 0);
}

TEST_CASE("json schema: unsupported keywords are refused by name", "[grammar][schema]") {
    const auto why = [](const char *schema) {
        try {
            llm::grammar::json_schema_to_gbnf(schema);
        } catch (const llm::Error &e) {
            return std::string(e.what());
        }
        return std::string("(converted)");
    };
    CHECK(why(R"({"type": "object", "patternProperties": {"^a": {}}})") ==
          "JSON schema: keyword 'patternProperties' is not supported");
    CHECK(why(R"({"type": "string", "format": "email"})") == "JSON schema: format 'email' is not supported");
    CHECK(why(R"({"$ref": "other.json#/x"})") == "JSON schema: $ref 'other.json#/x' to another document is not supported");
    CHECK(why(R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})") == "(converted)");
    CHECK(why(R"({"type": "string", "minLength": "x"})") == "JSON schema: 'minLength' must be a non-negative integer");
    CHECK(why(R"({"type": "string", "maxLength": 5000})") == "JSON schema: 'maxLength' above 1000 is not supported");
    CHECK(why(R"({"required": 3})").find("wrong type") != std::string::npos);
    CHECK(why(R"({"type": "object")").find("not JSON") != std::string::npos);
    // Bad pointers refused by name (fuzz_grammar found the first throwing std::invalid_argument).
    CHECK(why(R"({"$defs": {"a\"b": {"type": "number"}}, "properties": {"x": {"$ref": "#/$defs/a%%22b"}}})") ==
          "JSON schema: $ref '#/$defs/a%%22b': bad percent-encoding");
    CHECK(why(R"({"$defs": {"a\"b": {"type": "number"}}, "properties": {"x": {"$ref": "#/$defs/a%22b"}}})") ==
          "(converted)");
    CHECK(why(R"({"prefixItems": [{"type": "number"}], "properties": {"x": {"$ref": "#/prefixItems/99999999999999999999"}}})") ==
          "JSON schema: $ref '#/prefixItems/99999999999999999999' points at nothing");
}

TEST_CASE("json schema: integer bounds give exactly the integers in range", "[grammar][schema]") {
    const char *schemas[] = {R"({"type": "integer", "minimum": -12, "maximum": 130})",
                             R"({"type": "integer", "exclusiveMinimum": 7})",
                             R"({"type": "number", "exclusiveMaximum": -3})",
                             R"({"type": "integer", "minimum": 0, "maximum": 1000})",
                             R"({"type": "integer", "minimum": 95, "maximum": 95})"};
    const long ranges[][2] = {{-12, 130}, {8, 1L << 40}, {-(1L << 40), -4}, {0, 1000}, {95, 95}};
    for (size_t k = 0; k < 5; ++k) {
        INFO(schemas[k]);
        const std::string gbnf = llm::grammar::json_schema_to_gbnf(schemas[k]);
        INFO(gbnf);
        llm::grammar::Matcher m(std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf)));
        for (long x = -1200; x <= 1200; ++x) {
            const bool in = x >= ranges[k][0] && x <= ranges[k][1];
            INFO(x);
            CHECK(matches(m, std::to_string(x)) == in);
            CHECK(matches(m, std::to_string(x) + ".0") == in);
        }
        CHECK_FALSE(matches(m, "007"));
        CHECK_FALSE(matches(m, "1.5"));
    }
}

TEST_CASE("json schema: numbers at the edges of 64 bits are refused or exact, never undefined", "[grammar][schema]") {
    // fuzz_grammar (UBSan) found an enum float of 1.6e127 cast to long long; exclusive bounds at
    // LLONG_MAX / LLONG_MIN overflowed the +-1. The fuzz build is the one that sees UB; this test pins
    // the outcomes.
    const auto why = [](const std::string &schema) {
        try {
            llm::grammar::json_schema_to_gbnf(schema);
        } catch (const llm::Error &e) {
            return std::string(e.what());
        }
        return std::string("(converted)");
    };
    const std::string big(128, '5');
    CHECK(why(R"({"enum": [1)" + big + R"(, 2, 3]})") == "(converted)");
    CHECK(why(R"({"const": -1e300})") == "(converted)");
    for (const char *s : {R"({"type": "integer", "exclusiveMinimum": 9223372036854775807})",
                          R"({"type": "integer", "exclusiveMaximum": -9223372036854775808})",
                          R"({"type": "integer", "maximum": 18446744073709551615})",
                          R"({"type": "integer", "minimum": 1e300})"}) {
        INFO(s);
        CHECK(why(s).find("must be an integer of at most 18 digits") != std::string::npos);
    }
    CHECK(why(R"({"type": "integer", "minimum": -1000000000000000000, "maximum": 1000000000000000000})") == "(converted)");

    // The enum's huge float matches its own spelling only; 2 and 3 as integers (".0" allowed).
    const std::string gbnf = llm::grammar::json_schema_to_gbnf(R"({"enum": [1e200, 2, 3]})");
    llm::grammar::Matcher m(std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf)));
    CHECK(matches(m, "1e+200"));
    CHECK(matches(m, "2.0"));
    CHECK_FALSE(matches(m, "1"));
}

TEST_CASE("json schema: patterns match the decoded string, searched unless anchored", "[grammar][schema]") {
    struct Case {
        const char *pattern;
        std::vector<std::pair<const char *, bool>> texts;  // JSON string literal -> accepted
    };
    const Case cases[] = {
        {"^[a-c]+\\d{2}$", {{R"("ab12")", true}, {R"("ad12")", false}, {R"("ab1")", false}, {R"("xab12")", false}}},
        {"x", {{R"("axb")", true}, {R"("x")", true}, {R"("ab")", false}}},
        {"^\"\\\\\\n$", {{R"("\"\\\n")", true}, {R"("\"\\n")", false}}},  // quote, backslash, newline
        {"^(?:ab|c)*$", {{R"("abcab")", true}, {R"("")", true}, {R"("ac b")", false}}},
        {"^[^a]$", {{R"("b")", true}, {R"("a")", false}, {R"("\t")", true}, {R"("bb")", false}}},
        {"^.$", {{R"("\n")", false}, {R"("é")", true}}},
    };
    for (const Case &c : cases) {
        const std::string schema = nlohmann::json{{"type", "string"}, {"pattern", c.pattern}}.dump();
        INFO(schema);
        const std::string gbnf = llm::grammar::json_schema_to_gbnf(schema);
        INFO(gbnf);
        llm::grammar::Matcher m(std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf)));
        for (const auto &[text, want] : c.texts) {
            INFO(text);
            CHECK(matches(m, text) == want);
        }
    }
    const auto why = [](const char *pattern) {
        try {
            llm::grammar::json_schema_to_gbnf(nlohmann::json{{"type", "string"}, {"pattern", pattern}}.dump());
        } catch (const llm::Error &e) {
            return std::string(e.what());
        }
        return std::string("(converted)");
    };
    CHECK(why("\\bx") == "JSON schema: pattern '\\bx': the word boundary \\b is not supported");
    CHECK(why("(a)\\1") == "JSON schema: pattern '(a)\\1': backreferences is not supported");
    CHECK(why("a(?=b)") == "JSON schema: pattern 'a(?=b)': lookaround and named groups is not supported");
}

TEST_CASE("json schema converter: mutated schemas convert to grammars that parse, or are refused", "[grammar][schema]") {
    std::ifstream f(std::string(LLM_SHARED_DIR) + "/grammar/json_schema_vectors.json", std::ios::binary);
    REQUIRE(f.good());
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(f);
    uint32_t rng = 99;
    int converted = 0, refused = 0;
    std::set<std::string> seen;
    for (const nlohmann::ordered_json &c : v.at("cases")) {
        const std::string text = c.at("schema").dump();
        if (!seen.insert(text).second) continue;
        for (int k = 0; k < 60; ++k) {
            std::string t = text;
            rng = rng * 1103515245u + 12345u;
            const size_t at = (rng >> 8) % t.size();
            rng = rng * 1103515245u + 12345u;
            t[at] = "0123456789-.\"{}[]:,aeiz\\ "[(rng >> 8) % 26];
            if (k % 10 == 0) t = text.substr(0, at);
            std::string gbnf;
            try {
                gbnf = llm::grammar::json_schema_to_gbnf(t);
            } catch (const llm::Error &e) {
                CHECK((e.status() == LLM_ERR_UNSUPPORTED || e.status() == LLM_ERR_INVALID_ARGUMENT));
                ++refused;
                continue;
            }
            INFO(t);
            INFO(gbnf);
            try {
                llm::grammar::parse_gbnf(gbnf);
                ++converted;
            } catch (const llm::Error &e) {
                const std::string why = e.what();
                // A schema referring to itself before any input ({"$ref": "#"}) has no grammar.
                CHECK(why.find("left recursion") != std::string::npos);
            }
        }
    }
    std::printf("json schema mutations: %d converted, %d refused\n", converted, refused);
    CHECK(converted > 0);
}
