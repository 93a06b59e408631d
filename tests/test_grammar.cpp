// GBNF grammars (lib/grammar) against ../shared/grammar/gbnf_vectors.json: llama.cpp's grammar tests
// and derived cases, each verdict checked there with llama.cpp's engine. Units are fed as its
// test-grammar-integration.cpp feeds them: a code point of text is one unit (token id 0), a token id N
// one unit (id N, text "<[N]>").
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "grammar_cases.h"
#include "gguf/weight_source.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "grammar/vocab_text.h"
#include "test_files.h"
#include "tokenizer/tokenizer.h"

namespace {

using llm::grammar::Matcher;

nlohmann::json vectors() {
    std::ifstream f(std::string(LLM_SHARED_DIR) + "/grammar/gbnf_vectors.json", std::ios::binary);
    REQUIRE(f.good());
    return nlohmann::json::parse(f);
}

std::vector<uint32_t> code_points(const std::string &s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        size_t len = 0;
        llm::utf8::decode_at(s, i, &cp, &len);
        out.push_back(cp);
        i += len;
    }
    return out;
}

// Feeds an input; returns the index of the first rejected unit, or -1 if all were accepted.
long feed(Matcher &m, const nlohmann::json &input) {
    m.reset();
    const nlohmann::json parts = input.is_array() ? input : nlohmann::json::array({input});
    long unit = 0;
    for (const nlohmann::json &p : parts) {
        if (p.is_string()) {
            for (uint32_t cp : code_points(p.get<std::string>())) {
                if (!m.accept_char(cp)) return unit;
                ++unit;
            }
        } else {
            const int32_t id = p.get<int32_t>();
            const std::vector<uint32_t> text = code_points("<[" + std::to_string(id) + "]>");
            if (!m.accept(id, text.data(), text.size())) return unit;
            ++unit;
        }
    }
    return -1;
}

}  // namespace

TEST_CASE("gbnf vectors: pass accepted, fail rejected where llama.cpp rejects, bad grammars refused", "[grammar]") {
    const nlohmann::json v = vectors();
    int pass_ok = 0, pass_n = 0, fail_ok = 0, fail_n = 0, refused_ok = 0, refused_n = 0;
    for (const nlohmann::json &c : v.at("cases")) {
        const std::string id = c.at("id");
        const std::string text = c.at("grammar");
        const std::string root = c.value("root", "root");
        INFO("case " << id);
        if (c.value("parse_error", false)) {
            ++refused_n;
            std::string msg;
            try {
                llm::grammar::parse_gbnf(text, root);
            } catch (const llm::Error &e) {
                msg = e.what();
            }
            INFO("expected refusal (" << c.value("error_kind", "") << ")");
            CHECK_FALSE(msg.empty());
            if (!msg.empty()) ++refused_ok;
            continue;
        }
        std::shared_ptr<const llm::grammar::Grammar> g;
        try {
            g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(text, root));
        } catch (const llm::Error &e) {
            FAIL_CHECK("refused a valid grammar: " << e.what());
            continue;
        }
        Matcher m(g);
        for (const nlohmann::json &in : c.value("pass", nlohmann::json::array())) {
            ++pass_n;
            INFO("pass input " << in.dump());
            const long dead = feed(m, in);
            const bool ok = dead < 0 && m.can_end();
            CHECK(ok);
            pass_ok += ok;
        }
        const nlohmann::json fails = c.value("fail", nlohmann::json::array());
        const nlohmann::json dead_at = c.value("fail_dead_at", nlohmann::json::array());
        for (size_t i = 0; i < fails.size(); ++i) {
            ++fail_n;
            INFO("fail input " << fails[i].dump() << ", llama.cpp dies at " << dead_at[i].dump());
            const long dead = feed(m, fails[i]);
            bool ok;
            if (dead_at[i].is_null()) {
                ok = dead < 0 && !m.can_end();  // an unfinished prefix
            } else {
                ok = dead == dead_at[i].get<long>();
            }
            CHECK(ok);
            fail_ok += ok;
        }
    }
    std::printf("gbnf vectors: pass %d/%d accepted, fail %d/%d rejected as llama.cpp, bad grammars %d/%d refused\n",
                pass_ok, pass_n, fail_ok, fail_n, refused_ok, refused_n);
    CHECK(pass_n == 222);
    CHECK(fail_n == 278);
    CHECK(refused_n == 18);
}

TEST_CASE("gbnf errors say where and what was expected", "[grammar]") {
    const auto message = [](const char *text, const char *root = "root") {
        try {
            llm::grammar::parse_gbnf(text, root);
        } catch (const llm::Error &e) {
            CHECK(e.status() == LLM_ERR_INVALID_ARGUMENT);
            return std::string(e.what());
        }
        return std::string("(parsed)");
    };
    CHECK(message("root ::= \"a\"\nx ::= [b-\n") == "GBNF line 3, column 1: expected ']' closing the character class, found the end of the grammar");
    CHECK(message("root ::= \"a\" b\n  c\n") == "GBNF line 2, column 4: expected '::=' after the rule name 'c', found a line break");
    CHECK(message("root ::= (\"a\" | \"b\"\n") ==
          "GBNF line 2, column 1: expected ')' closing the group opened at line 1, column 10, found the end of the grammar");
    CHECK(message("root ::= foo\n") == "GBNF line 1, column 10: rule 'foo' is used but not defined");
    CHECK(message("a ::= \"x\"\n") == "the grammar has no rule named 'root' (the start rule)");
    CHECK(message("# only a comment\n") == "the grammar defines no rule");
    CHECK(message("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\"\n") ==
          "GBNF: left recursion is not supported: rule 'a' can reach itself before matching any input (a -> b -> a)");
    CHECK(message("root ::= ( [x]* )*\n") == "(parsed)");  // a cycle of tail references ends
    CHECK(message("root ::= \"\\q\"\n").find("unknown escape") != std::string::npos);
    CHECK(message("root ::= \"a\"{3,2}\n").find("upper bound below") != std::string::npos);
}

namespace {

// A vocabulary by hand: each token's printed bytes (split as VocabText::build splits them).
std::shared_ptr<const llm::grammar::VocabText> vocab_of(const std::vector<std::string> &pieces, int32_t eog) {
    auto v = std::make_shared<llm::grammar::VocabText>();
    for (size_t id = 0; id < pieces.size(); ++id) {
        llm::grammar::Utf8Split s = llm::grammar::split_utf8(pieces[id]);
        llm::grammar::VocabText::Token t;
        t.valid = s.valid;
        t.eog = static_cast<int32_t>(id) == eog;
        t.cp_begin = static_cast<uint32_t>(v->cps.size());
        t.cp_count = static_cast<uint32_t>(s.cps.size());
        v->cps.insert(v->cps.end(), s.cps.begin(), s.cps.end());
        t.tail = s.tail;
        v->tokens.push_back(t);
        v->pieces.push_back(pieces[id]);
    }
    return v;
}

}  // namespace

TEST_CASE("grammar constraint: tokens across UTF-8 sequences, end only where the language may end, masks", "[grammar]") {
    // é is C3 A9, € is E2 82 AC: tokens may split them.
    const std::vector<std::string> pieces = {"</s>", "a", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82", "\xAC", "b\xC3",
                                             "", "\xA9x", "ab"};
    auto vocab = vocab_of(pieces, 0);
    auto g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf("root ::= \"a\" [é€]+\n"));
    llm::grammar::Constraint c(g, vocab);
    CHECK_FALSE(c.allows(0));  // nothing yet: the language may not end
    CHECK(c.allows(1));
    CHECK_FALSE(c.allows(2));   // é cannot come first
    CHECK_FALSE(c.allows(8));   // no text
    CHECK_FALSE(c.allows(10));  // "ab": b is not allowed after a
    c.accept(1);
    CHECK(c.allows(2));         // C3 may become é
    CHECK(c.allows(4));
    CHECK(c.allows(5));         // E2 82 may become €
    CHECK_FALSE(c.allows(3));   // a lone continuation byte
    CHECK_FALSE(c.allows(7));
    CHECK_FALSE(c.allows(0));   // "a" alone is not a sentence
    c.accept(2);
    CHECK_FALSE(c.can_end());   // inside a sequence
    CHECK_FALSE(c.allows(0));
    CHECK(c.allows(3));         // completes é
    CHECK_FALSE(c.allows(9));   // completes é, then x is refused
    CHECK_FALSE(c.allows(1));   // C3 then 'a' is malformed
    c.accept(3);
    CHECK(c.can_end());
    CHECK(c.allows(0));
    std::vector<float> logits(pieces.size(), 1.0f);
    CHECK(c.mask(logits.data()) == 4);  // </s>, C3, C3 A9, E2 82, and nothing else
    CHECK(std::isinf(logits[1]));
    CHECK(logits[0] == 1.0f);
    CHECK(logits[4] == 1.0f);
    CHECK_THROWS_AS(c.accept(10), llm::Error);
    // Byte-range grammars: C3 can only become U+00C0..U+00FF.
    auto ascii = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf("root ::= [a-z\\u0100-\\u0200]+\n"));
    llm::grammar::Constraint d(ascii, vocab);
    CHECK_FALSE(d.allows(2));
    CHECK(d.allows(1));
}

TEST_CASE("gbnf parser and schema converter survive truncated and mutated input", "[grammar]") {
    const nlohmann::json v = vectors();
    int parsed = 0, refused = 0;
    const auto attempt = [&](const std::string &text) {
        try {
            auto g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(text));
            Matcher m(g);
            for (uint32_t cp : {'a', '{', '"', '0', ' '})
                if (!m.accept_char(cp)) break;
            ++parsed;
        } catch (const llm::Error &e) {
            // UNSUPPORTED: a grammar that parses but whose stacks outgrow the matcher's bounds.
            CHECK((e.status() == LLM_ERR_INVALID_ARGUMENT || e.status() == LLM_ERR_UNSUPPORTED));
            ++refused;
        }
    };
    uint32_t rng = 12345;
    for (const nlohmann::json &c : v.at("cases")) {
        const std::string text = c.at("grammar");
        for (size_t n = 0; n <= text.size(); n += 3) attempt(text.substr(0, n));
        for (int k = 0; k < 40 && !text.empty(); ++k) {
            std::string t = text;
            rng = rng * 1103515245u + 12345u;
            const size_t at = (rng >> 8) % t.size();
            rng = rng * 1103515245u + 12345u;
            t[at] = "\"[]()|*+?{},-^\\.#:=\n ax0"[(rng >> 8) % 25];
            attempt(t);
        }
    }
    std::printf("gbnf mutations: %d parsed, %d refused\n", parsed, refused);
    CHECK(parsed > 0);
    CHECK(refused > 0);
}

namespace {

// `"c"*` with `depth` more `+`: each level a repetition of a rule that may be empty, so the stacks
// open after any prefix double with every level.
using test::nested_repetition;

int32_t status_of_matcher(const std::string &gbnf, const char *text) {
    try {
        Matcher m(std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf)));
        m.accept_text(text);
        return LLM_OK;
    } catch (const llm::Error &e) {
        return e.status();
    }
}

}  // namespace

TEST_CASE("Matcher: alternatives that multiply as they nest are refused, not expanded for ever", "[grammar]") {
    // Found by fuzz_grammar: forty nested levels opened 2^40 stacks at reset and hung.
    CHECK(status_of_matcher(nested_repetition(40), "") == LLM_ERR_UNSUPPORTED);
    // Shallow nesting is an ordinary (if ambiguous) grammar: its stacks fit.
    auto shallow = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(nested_repetition(4)));
    Matcher m(shallow);
    CHECK(m.accept_text("cccc"));
    CHECK(m.can_end());
    CHECK(m.stacks().size() <= llm::grammar::kMaxStacks);

    // Past the bound only when a unit is fed: accept throws and leaves the state as it was.
    auto late = std::make_shared<const llm::grammar::Grammar>(
        llm::grammar::parse_gbnf("root ::= \"a\" deep\ndeep ::= \"c\"*" + std::string(40, '+') + "\n"));
    Matcher l(late);
    const llm::grammar::Stacks before = l.stacks();
    try {
        l.accept_char('a');
        FAIL("accept expanded past the bounds");
    } catch (const llm::Error &e) {
        CHECK(e.status() == LLM_ERR_UNSUPPORTED);
        CHECK(std::string(e.what()).find("more than") != std::string::npos);
    }
    CHECK(l.stacks() == before);
    CHECK_FALSE(l.accept_char('b'));  // still the state before 'a'
    CHECK(l.stacks() == before);
}

TEST_CASE("grammar constraint: the grouped mask refuses exactly where the one-by-one check refuses", "[grammar]") {
    // The expansion bound counts over a whole token (step() keeps one count for all its code points).
    // After "x" the chain costs 20,000 expansions, and again after "z" "x": a token "xzx" passes
    // kMaxExpansions though each code point alone stays below it. mask() walks the code points level
    // by level; it must carry the count across levels, or it would allow what allows() refuses.
    static_assert(2 * 20000 > llm::grammar::kMaxExpansions && 20000 < llm::grammar::kMaxExpansions);
    const std::string gbnf = "root ::= \"x\" c0 \"x\" c0\n" + test::reference_chain("c", 20000, "\"z\"");
    auto g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf));
    auto vocab = vocab_of({"</s>", "x", "xz", "xzx", "y"}, 0);
    llm::grammar::Constraint c(g, vocab);
    CHECK(c.allows(1));
    CHECK(c.allows(2));
    CHECK_FALSE(c.allows(4));
    const auto status_of = [](auto &&fn) {
        try {
            fn();
        } catch (const llm::Error &e) {
            return e.status();
        }
        return LLM_OK;
    };
    CHECK(status_of([&] { c.allows(3); }) == LLM_ERR_UNSUPPORTED);
    std::vector<float> logits(5, 0.0f);
    CHECK(status_of([&] { c.mask(logits.data()); }) == LLM_ERR_UNSUPPORTED);
    // Without "xzx" among the candidates the same state masks as usual.
    logits.assign(5, 0.0f);
    logits[3] = -std::numeric_limits<float>::infinity();
    CHECK(c.mask(logits.data()) == 2);
    CHECK(std::isfinite(logits[1]));
    CHECK(std::isfinite(logits[2]));
    CHECK_FALSE(std::isfinite(logits[4]));
}

TEST_CASE("Matcher::accept_text: whole UTF-8 strings, stopping at bad bytes and refused code points", "[grammar]") {
    auto g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf("root ::= \"h\" [é-ê]+ \"!\"\n"));
    Matcher m(g);
    CHECK(m.accept_text("hé"));
    CHECK_FALSE(m.can_end());
    CHECK(m.accept_text("ê!"));
    CHECK(m.can_end());
    m.reset();
    CHECK_FALSE(m.accept_text("h\xC3"));  // a cut sequence is not valid UTF-8
    m.reset();
    CHECK_FALSE(m.accept_text("hx"));
    CHECK(m.alive());  // the state after "h": still open
    CHECK(m.accept_text("é!"));
    CHECK(m.can_end());
    m.reset();
    CHECK(m.accept_text(""));
    CHECK_FALSE(m.can_end());
}

TEST_CASE("grammar constraint: the grouped mask allows exactly the tokens the one-by-one check allows", "[grammar][cpu-neutral]") {
    // mask() walks the candidates together; allows() checks one token from scratch. Along random walks
    // through each grammar, on a byte-level vocabulary (GPT-2: tokens ending inside UTF-8 sequences)
    // and an SPM one (<0xXX> byte tokens), both must give the same verdict for every token.
    const std::string any_object = llm::grammar::json_schema_to_gbnf(R"({"type": "object"})");
    const std::string schema = llm::grammar::json_schema_to_gbnf(R"({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "tag": {"enum": ["été", "€uro", "plain"]},
        "n": {"type": "integer"}, "xs": {"type": "array", "items": {"type": "number"}}},
        "required": ["name", "tag"]})");
    const std::vector<std::pair<std::string, std::string>> grammars = {
        {"json", any_object},
        {"schema", schema},
        {"utf-8 classes", "root ::= ([a-zé€]+ \" \")+ [0-9]{1,3}\n"},
        {"token ids", "root ::= \"a\" (<[1000]> | !<[1000]>) [^\\n]*\n"},  // the one-by-one path
    };
    for (const char *rel : {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"}) {
        auto ws = llm::WeightSource::open(llm::open_file_source(std::string(LLM_SHARED_DIR) + "/" + rel));
        auto tok = llm::Tokenizer::from_metadata(ws->meta());
        auto vocab = std::make_shared<const llm::grammar::VocabText>(llm::grammar::VocabText::build(*tok));
        const int32_t n = static_cast<int32_t>(vocab->tokens.size());
        for (const auto &[name, text] : grammars) {
            auto g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(text));
            llm::grammar::Constraint c(g, vocab);
            uint32_t rng = 7;
            int compared = 0;
            std::string walked;
            // Sanitizer and qemu builds walk fewer steps and check every fifth token one by one (a step
            // checking the whole vocabulary made this case 139 s of the ASan ctest); the token each
            // step takes is checked too, so the walk is the native build's.
            const int32_t stride = test::kSlowBuild ? 5 : 1;
            for (int step = 0; step < (test::kSlowBuild ? 4 : 10); ++step) {
                std::vector<float> logits(static_cast<size_t>(n), 0.0f);
                logits[5] = -std::numeric_limits<float>::infinity();  // already out stays out
                const int32_t allowed = c.mask(logits.data());
                std::vector<int32_t> ok;  // the tokens the mask allows
                int mismatches = 0;
                for (int32_t t = 0; t < n; ++t) {
                    const bool masked_in = std::isfinite(logits[t]);
                    if (masked_in) ok.push_back(t);
                    if (t % stride == 0) mismatches += masked_in != (t != 5 && c.allows(t));
                }
                INFO(rel << ", " << name << ", step " << step);
                REQUIRE(mismatches == 0);
                REQUIRE(allowed == static_cast<int32_t>(ok.size()));
                ++compared;
                if (ok.empty()) break;
                // Prefer longer tokens so the walk gets somewhere (into strings, numbers, nesting).
                rng = rng * 1103515245u + 12345u;
                int32_t pick = ok[(rng >> 8) % ok.size()];
                for (int k = 0; k < 3; ++k) {
                    rng = rng * 1103515245u + 12345u;
                    const int32_t other = ok[(rng >> 8) % ok.size()];
                    if (vocab->pieces[static_cast<size_t>(other)].size() > vocab->pieces[static_cast<size_t>(pick)].size())
                        pick = other;
                }
                REQUIRE(c.allows(pick));
                if (vocab->tokens[static_cast<size_t>(pick)].eog) break;
                c.accept(pick);
                walked += vocab->pieces[static_cast<size_t>(pick)];
            }
            std::printf("grouped mask, %s, %s: %d states compared, walked '%s'\n", rel, name.c_str(), compared,
                        walked.c_str());
            CHECK(compared > 0);
        }
    }
}
