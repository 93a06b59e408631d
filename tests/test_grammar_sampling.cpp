// Grammar-constrained sampling through the C API (llm_session_set_grammar) on stories260K: every
// seed's output at temperature 1 is a sentence of the grammar, errors are reported with their place,
// a host's accept is checked, and clearing the grammar gives back unconstrained sampling unchanged.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "llm.h"

namespace {

const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";

// A small JSON object with a bounded name and age, so that every draw must close it within a few dozen
// tokens; then only end-of-generation remains.
const char *kJsonish = R"(root ::= "{" ws "\"name\":" ws name "," ws "\"age\":" ws age ws "}"
name ::= "\"" [A-Za-z ]{1,12} "\""   # a short name
age  ::= [1-9] [0-9]?
ws   ::= " "?
)";
const char *kWords = "root ::= (\"Once\" | \"Lily\" | \"the\" | \"cat\") (\" \" (\"ran\" | \"was\" | \"happy\")){1,3} \".\"\n";

bool accepted(const char *gbnf, const std::string &text) {
    auto g = std::make_shared<const llm::grammar::Grammar>(llm::grammar::parse_gbnf(gbnf));
    llm::grammar::Matcher m(g);
    return m.accept_text(text) && m.can_end();
}

struct Run {
    int32_t status = 0;
    std::string text;
    std::vector<int32_t> tokens;
};

bool collect(int32_t token, const char *piece, size_t len, void *user) {
    Run *r = static_cast<Run *>(user);
    r->tokens.push_back(token);
    r->text.append(piece, len);
    return true;
}

Run generate(llm_model *m, uint64_t seed, const char *gbnf, int32_t n = 120) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 1.0f;
    sp.seed = seed;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    if (gbnf) REQUIRE(llm_session_set_grammar(s, gbnf, nullptr) == LLM_OK);
    Run r;
    r.status = llm_session_generate(s, "Once upon a time", n, collect, &r);
    if (r.status < 0) INFO(llm_last_error());
    if (gbnf) {
        const nlohmann::json st = nlohmann::json::parse(llm_session_stats_json(s));
        CHECK(st.at("grammar_tokens").get<uint64_t>() >= r.tokens.size());
        CHECK(st.at("grammar_seconds").get<double>() >= 0.0);
        CHECK(st.contains("grammar_us_per_token"));
    }
    llm_session_free(s);
    return r;
}

struct ModelH {
    llm_model *m = nullptr;
    ModelH() {
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    }
    ~ModelH() { llm_model_free(m); }
};

}  // namespace

TEST_CASE("grammar sampling: 50 seeds at temperature 1 end in text the grammar accepts", "[grammar][sampling]") {
    ModelH h;
    for (const char *gbnf : {kJsonish, kWords}) {
        int done = 0;
        for (uint64_t seed = 0; seed < 50; ++seed) {
            const Run r = generate(h.m, seed, gbnf);
            INFO("seed " << seed << " text '" << r.text << "'");
            CHECK(r.status == LLM_DONE);
            CHECK(accepted(gbnf, r.text));
            done += r.status == LLM_DONE && accepted(gbnf, r.text);
        }
        CHECK(done == 50);
    }
}

TEST_CASE("grammar sampling: a cleared grammar leaves sampling as it was; bad grammars say where", "[grammar][sampling]") {
    ModelH h;
    const Run plain = generate(h.m, 7, nullptr, 40);

    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 1.0f;
    sp.seed = 7;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
    CHECK(llm_session_set_grammar(s, "root ::= [a-\n", nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("line 2, column 1") != std::string::npos);
    CHECK(llm_session_set_grammar(s, "root ::= \"x\"\n", "start") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("'start'") != std::string::npos);
    REQUIRE(llm_session_set_grammar(s, kWords, nullptr) == LLM_OK);
    REQUIRE(llm_session_set_grammar(s, nullptr, nullptr) == LLM_OK);  // cleared
    Run again;
    again.status = llm_session_generate(s, "Once upon a time", 40, collect, &again);
    CHECK(again.tokens == plain.tokens);

    // A host's accept must keep to the grammar; the grammar follows truncation.
    REQUIRE(llm_session_set_grammar(s, kWords, nullptr) == LLM_OK);
    int32_t n_vocab = 0;
    const float *logits = nullptr;
    REQUIRE(llm_session_logits(s, &logits, &n_vocab) == LLM_OK);
    std::vector<int32_t> ids(8);
    int32_t n = 0;
    REQUIRE(llm_tokenize(h.m, "zz", 2, false, false, ids.data(), 8, &n) == LLM_OK);
    const int32_t bad = ids[0];
    CHECK(llm_session_accept(s, bad) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("not allowed by the grammar") != std::string::npos);
    const int32_t before = llm_session_n_past(s);
    int32_t t = 0;
    REQUIRE(llm_session_sample(s, &t) == LLM_OK);
    REQUIRE(llm_session_accept(s, t) == LLM_OK);
    REQUIRE(llm_session_truncate(s, before) == LLM_OK);
    CHECK(llm_session_accept(s, t) == LLM_OK);  // back at the start rule, where t was allowed
    llm_session_free(s);
}

TEST_CASE("grammar sampling: speculation keeps to the grammar and changes no token", "[grammar][sampling]") {
    ModelH h;
    CHECK(llm_session_set_grammar(nullptr, kWords, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    for (float temp : {0.0f, 1.0f}) {
        std::vector<int32_t> runs[2];
        for (int spec = 0; spec < 2; ++spec) {
            llm_session_params sp;
            llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
            sp.temperature = temp;
            sp.seed = 11;
            llm_session *s = nullptr;
            REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
            if (spec) {
                llm_speculation_params p;
                llm_speculation_params_init(&p, LLM_SPECULATION_PARAMS_VERSION);
                p.lookup_ngram = 2;
                REQUIRE(llm_session_set_speculation(s, &p) == LLM_OK);
            }
            REQUIRE(llm_session_set_grammar(s, kJsonish, "root") == LLM_OK);
            Run r;
            r.status = llm_session_generate(s, "Once upon a time", 120, collect, &r);
            CHECK(r.status == LLM_DONE);
            CHECK(accepted(kJsonish, r.text));
            runs[spec] = r.tokens;
            llm_session_free(s);
        }
        INFO("temperature " << temp);
        CHECK(runs[0] == runs[1]);
    }
}

TEST_CASE("json schema sampling: 50 seeds at temperature 1 give JSON the schema's grammar accepts", "[grammar][sampling][schema]") {
    ModelH h;
    const char *schemas[] = {
        R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
            "additionalProperties": false})",
        R"({"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3})",
        R"({"type": "object", "properties": {"ok": {"type": "boolean"}, "tags": {"type": "array",
            "items": {"type": "string", "pattern": "^[a-z]{1,5}$"}, "maxItems": 2}}, "required": ["ok"],
            "additionalProperties": false})"};
    for (const char *schema : schemas) {
        INFO(schema);
        const std::string gbnf = llm::grammar::json_schema_to_gbnf(schema);
        int good = 0;
        for (uint64_t seed = 0; seed < 50; ++seed) {
            llm_session_params sp;
            llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
            sp.temperature = 1.0f;
            sp.seed = seed;
            llm_session *s = nullptr;
            REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
            REQUIRE(llm_session_set_json_schema(s, schema) == LLM_OK);
            Run r;
            r.status = llm_session_generate(s, "Once upon a time", 200, collect, &r);
            llm_session_free(s);
            INFO("seed " << seed << ": '" << r.text << "'");
            const bool json_ok = nlohmann::json::accept(r.text);
            CHECK(r.status == LLM_DONE);
            CHECK(json_ok);
            CHECK(accepted(gbnf.c_str(), r.text));
            good += r.status == LLM_DONE && json_ok && accepted(gbnf.c_str(), r.text);
        }
        CHECK(good == 50);
    }
    llm_session *s = nullptr;
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
    CHECK(llm_session_set_json_schema(s, R"({"type": "object", "not": {}})") == LLM_ERR_UNSUPPORTED);
    CHECK(std::string(llm_last_error()) == "JSON schema: keyword 'not' is not supported");
    CHECK(llm_session_set_json_schema(s, "{") == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_set_json_schema(s, nullptr) == LLM_OK);
    llm_session_free(s);
}

TEST_CASE("grammar sampling: a saved session holds no grammar state; the load starts the grammar over",
          "[grammar][sampling][state]") {
    ModelH h;
    // One sentence only: under it, greedy generation must be exactly this text, then end.
    const char *one = "root ::= \" Lily was happy.\"\n";
    const std::string path =
        (std::filesystem::temp_directory_path() / ("llm_grammar_state_" + std::to_string(::getpid()))).string();
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0.0f;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
    REQUIRE(llm_session_set_grammar(s, one, nullptr) == LLM_OK);
    Run half;
    REQUIRE(llm_session_generate(s, "Once upon a time", 2, collect, &half) == LLM_OK);
    REQUIRE(half.tokens.size() == 2);
    CHECK(std::string(" Lily was happy.").rfind(half.text, 0) == 0);  // a proper start of the sentence
    CHECK(half.text.size() < std::string(" Lily was happy.").size());
    REQUIRE(llm_session_save(s, path.c_str()) == LLM_OK);
    // Going on in the same session finishes the sentence.
    Run rest;
    CHECK(llm_session_generate(s, nullptr, 40, collect, &rest) == LLM_DONE);
    CHECK(half.text + rest.text == " Lily was happy.");
    llm_session_free(s);

    // A session with the same grammar that loads the state starts the sentence over after the
    // half-done one: the grammar was not saved, only the tokens.
    REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
    REQUIRE(llm_session_set_grammar(s, one, nullptr) == LLM_OK);
    REQUIRE(llm_session_load(s, path.c_str()) == LLM_OK);
    CHECK(llm_session_n_past(s) == static_cast<int32_t>(half.tokens.size()) + 5);
    Run again;
    CHECK(llm_session_generate(s, nullptr, 40, collect, &again) == LLM_DONE);
    CHECK(again.text == " Lily was happy.");
    CHECK(accepted(one, again.text));
    llm_session_free(s);

    // Re-attaching a grammar for the rest continues the structure.
    REQUIRE(llm_session_create(h.m, &sp, &s) == LLM_OK);
    REQUIRE(llm_session_load(s, path.c_str()) == LLM_OK);
    const std::string rest_gbnf = "root ::= \"" + std::string(" Lily was happy.").substr(half.text.size()) + "\"\n";
    REQUIRE(llm_session_set_grammar(s, rest_gbnf.c_str(), nullptr) == LLM_OK);
    Run cont;
    CHECK(llm_session_generate(s, nullptr, 40, collect, &cont) == LLM_DONE);
    CHECK(half.text + cont.text == " Lily was happy.");
    llm_session_free(s);
    std::remove(path.c_str());
}
