// Grammar-constrained sampling through the C API (llm_session_set_grammar) on stories260K: every
// seed's output at temperature 1 is a sentence of the grammar, errors are reported with their place,
// a host's accept is checked, and clearing the grammar gives back unconstrained sampling unchanged.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar_cases.h"
#include "llm.h"
#include "synth_model.h"

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

TEST_CASE("grammar sampling: 50 seeds at temperature 1 end in text the grammar accepts", "[grammar][sampling][cpu-neutral]") {
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
    // Parses, but nests repetitions of something that may be empty forty deep (2^40 open stacks).
    const std::string nested = test::nested_repetition(40);
    CHECK(llm_session_set_grammar(s, nested.c_str(), nullptr) == LLM_ERR_UNSUPPORTED);
    CHECK(std::string(llm_last_error()).find("stacks") != std::string::npos);
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

// Three schemas, for stories260K and the byte-level vocabulary alike: bounded strings, items and integers, so the
// grammars they become must end too (an integer's zero fraction "1.000" is the one open repetition;
// each further '0' needs a draw among a few tokens against the closing ones, so it ends).
const char *const kSchemas[] = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name", "age"],
        "additionalProperties": false})",
    R"({"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3})",
    R"({"type": "object", "properties": {"ok": {"type": "boolean"}, "tags": {"type": "array",
        "items": {"type": "string", "pattern": "^[a-z]{1,5}$"}, "maxItems": 2}}, "required": ["ok"],
        "additionalProperties": false})"};

TEST_CASE("json schema sampling: 50 seeds at temperature 1 give JSON the schema's grammar accepts", "[grammar][sampling][schema][cpu-neutral]") {
    ModelH h;
    for (const char *schema : kSchemas) {
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

// ---- a byte-level BPE vocabulary ------------------------------------------------------------------
// stories260K's 512 SentencePiece pieces are mostly whole words with a space mark; a byte-level BPE
// vocabulary (GPT-2, Llama 3, Qwen) has 50k-150k tokens that are byte strings: pieces of UTF-8
// characters, several JSON punctuation marks in one token, leading spaces. No shared model fixture
// carries one (they all copy stories260K's tokenizer), so a small random-weight model is written with
// the real GPT-2 vocabulary (../shared/vocab/ggml-vocab-gpt-2.gguf: 50257 tokens, its merges and
// pre-tokenizer) copied in.
namespace {

const std::string &bpe_model() {
    struct File {
        std::string path;
        File() {
            path = (std::filesystem::temp_directory_path() /
                    ("llm-grammar-gpt2vocab-" + std::to_string(::getpid()) + ".gguf"))
                       .string();
            tools::SynthShape sh{"gpt2-vocab", 64, 2, 4, 2, 128, 50257, 512};
            sh.vocab = std::string(LLM_SHARED_DIR) + "/vocab/ggml-vocab-gpt-2.gguf";
            tools::write_synth_model(sh, "q8_0", path, 21);
        }
        ~File() {
            std::error_code ec;
            std::filesystem::remove(path, ec);
        }
    };
    static File f;
    return f.path;
}

// llama.cpp's grammars/json.gbnf with every repetition bounded (strings of at most 8 characters, at
// most 2 members or items, objects and arrays nested 2 deep, bounded numbers and whitespace): its
// language is finite, its longest sentence well under 2048 bytes, so any draw -- a random-weight model
// rambles -- reaches its end within kMaxTokens tokens (every token but end-of-generation adds at least
// a byte) and then only end-of-generation is left. Unbounded json.gbnf would leave a random model
// inside a string for ever.
const char *kBoundedJson = R"(root   ::= "{" ws ( member ( "," ws member )? )? "}" ws
member ::= string ":" ws value
value  ::= inner | array | scalar
inner  ::= "{" ws ( string ":" ws scalar ( "," ws string ":" ws scalar )? )? "}" ws
array  ::= "[" ws ( scalar ( "," ws scalar )? )? "]" ws
scalar ::= string | number | ("true" | "false" | "null") ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) ){0,8} "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{0,5}) ("." [0-9]{1,4})? ([eE] [-+]? [0-9]{1,2})? ws
ws     ::= | " " | "\n" [ \t]{0,4}
)";
constexpr int32_t kMaxTokens = 2048;


struct Constraint {
    std::string name, gbnf;
    const char *schema;  // nullptr: kBoundedJson as a GBNF grammar
};

std::vector<Constraint> bpe_constraints() {
    std::vector<Constraint> out{{"bounded json.gbnf", kBoundedJson, nullptr}};
    for (size_t i = 0; i < 3; ++i)
        out.push_back({"schema " + std::to_string(i + 1), llm::grammar::json_schema_to_gbnf(kSchemas[i]), kSchemas[i]});
    return out;
}

Run generate_under(llm_model *m, const Constraint &c, float temp, uint64_t seed, int lookup_ngram) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = temp;
    sp.seed = seed;
    sp.n_ctx = kMaxTokens + 64;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    if (lookup_ngram) {
        llm_speculation_params p;
        llm_speculation_params_init(&p, LLM_SPECULATION_PARAMS_VERSION);
        p.lookup_ngram = lookup_ngram;
        REQUIRE(llm_session_set_speculation(s, &p) == LLM_OK);
    }
    if (c.schema) REQUIRE(llm_session_set_json_schema(s, c.schema) == LLM_OK);
    else REQUIRE(llm_session_set_grammar(s, c.gbnf.c_str(), nullptr) == LLM_OK);
    Run r;
    r.status = llm_session_generate(s, "Once upon a time", kMaxTokens, collect, &r);
    if (r.status < 0) FAIL(llm_last_error());
    llm_session_free(s);
    return r;
}

// The stories260K schemas' instances checked by hand (JSON Schema's integer is any number without a
// fraction: 12.0 is one).
bool fits_schema(size_t i, const nlohmann::json &v) {
    const auto whole = [](const nlohmann::json &x, double lo, double hi) {
        if (!x.is_number()) return false;
        const double d = x.get<double>();
        return d == static_cast<double>(static_cast<long long>(d)) && d >= lo && d <= hi;
    };
    const auto utf8_len = [](const std::string &t) {
        size_t n = 0;
        for (unsigned char ch : t) n += (ch & 0xC0) != 0x80;
        return n;
    };
    if (i == 0) {
        return v.is_object() && v.size() == 2 && v.contains("name") && v["name"].is_string() &&
               utf8_len(v["name"].get<std::string>()) <= 8 && v.contains("age") && whole(v["age"], 0, 120);
    }
    if (i == 1) {
        if (!v.is_array() || v.empty() || v.size() > 3) return false;
        for (const auto &x : v)
            if (!x.is_string() || (x != "red" && x != "green" && x != "blue")) return false;
        return true;
    }
    if (!v.is_object() || !v.contains("ok") || !v["ok"].is_boolean()) return false;
    for (const auto &[k, x] : v.items()) {
        if (k == "ok") continue;
        if (k != "tags" || !x.is_array() || x.size() > 2) return false;
        for (const auto &t : x) {
            if (!t.is_string()) return false;
            const std::string str = t.get<std::string>();
            if (str.empty() || str.size() > 5) return false;
            for (char ch : str)
                if (ch < 'a' || ch > 'z') return false;
        }
    }
    return true;
}

}  // namespace

TEST_CASE("grammar sampling, byte-level BPE vocabulary: 50 seeds at temperature 1 end in text the grammar, "
          "JSON and the schema accept", "[grammar][sampling][bpe][.slow]") {
    // [.slow]: about 20 s here (200 generations on a 50k vocabulary, where nearly every draw of a
    // random-weight model is refused and the whole vocabulary masked); runs in slow_tests.
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(bpe_model().c_str(), &mp, &m) == LLM_OK);
    REQUIRE(llm_model_n_vocab(m) == 50257);
    nlohmann::json outputs = nlohmann::json::array();  // for the Python check below
    const std::vector<Constraint> cs = bpe_constraints();
    for (size_t ci = 0; ci < cs.size(); ++ci) {
        const Constraint &c = cs[ci];
        INFO(c.name);
        int good = 0;
        size_t max_tokens = 0;
        for (uint64_t seed = 0; seed < 50; ++seed) {
            const Run r = generate_under(m, c, 1.0f, seed, 0);
            INFO("seed " << seed << ", " << r.tokens.size() << " tokens: '" << r.text << "'");
            // LLM_DONE, not the token limit: the bounded languages leave no other way out.
            CHECK(r.status == LLM_DONE);
            const bool gram = accepted(c.gbnf.c_str(), r.text);
            const bool json = nlohmann::json::accept(r.text);
            CHECK(gram);
            CHECK(json);
            const bool schema = !c.schema || (json && fits_schema(ci - 1, nlohmann::json::parse(r.text)));
            CHECK(schema);
            good += r.status == LLM_DONE && gram && json && schema;
            max_tokens = std::max(max_tokens, r.tokens.size());
            outputs.push_back({{"schema", c.schema ? nlohmann::json::parse(c.schema) : nlohmann::json()},
                               {"text", r.text}});
        }
        CHECK(good == 50);
        CHECK(max_tokens < static_cast<size_t>(kMaxTokens));
    }

    // The same texts through Python's json and the jsonschema package, where they are installed (the
    // issue's acceptance check); a missing interpreter or package skips this part with a warning.
    if (std::system("python3 -c 'import json, jsonschema' >/dev/null 2>&1") == 0) {
        const std::filesystem::path dir = std::filesystem::temp_directory_path();
        const std::string in = (dir / ("llm-grammar-bpe-" + std::to_string(::getpid()) + ".json")).string();
        std::ofstream(in) << outputs.dump();
        const std::string cmd = "python3 -c 'import json, sys, jsonschema\n"
                                "bad = 0\n"
                                "for o in json.load(open(sys.argv[1])):\n"
                                "    v = json.loads(o[\"text\"])\n"
                                "    if o[\"schema\"] is not None:\n"
                                "        try: jsonschema.validate(v, o[\"schema\"])\n"
                                "        except jsonschema.ValidationError as e: bad += 1; print(e.message)\n"
                                "sys.exit(1 if bad else 0)' " + in;
        CHECK(std::system(cmd.c_str()) == 0);
        std::filesystem::remove(in);
    } else {
        WARN("python3 with jsonschema not found: the Python json + jsonschema check is skipped");
    }
    llm_model_free(m);
}

TEST_CASE("grammar sampling, byte-level BPE vocabulary: greedy with lookup under a grammar equals greedy without",
          "[grammar][sampling][bpe][speculation]") {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(bpe_model().c_str(), &mp, &m) == LLM_OK);
    for (const Constraint &c : bpe_constraints()) {
        INFO(c.name);
        const Run plain = generate_under(m, c, 0.0f, 0, 0);
        CHECK(plain.status == LLM_DONE);
        CHECK(accepted(c.gbnf.c_str(), plain.text));
        for (int n : {1, 2, 3}) {
            INFO("lookup_ngram " << n);
            const Run spec = generate_under(m, c, 0.0f, 0, n);
            CHECK(spec.status == plain.status);
            CHECK(spec.tokens == plain.tokens);
        }
    }
    llm_model_free(m);
}
