// Tokenizer tests against llama.cpp's own outputs: the ggml-vocab-*.gguf.{inp,out} test vectors and the
// token ids recorded in the golden generation fixtures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/weight_source.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string shared_path(const std::string &rel) { return std::string(LLM_SHARED_DIR) + "/" + rel; }

std::string read_text(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::unique_ptr<llm::Tokenizer> load_tokenizer(const std::string &rel) {
    auto ws = llm::WeightSource::open(llm::open_file_source(shared_path(rel)));
    return llm::Tokenizer::from_metadata(ws->meta());
}

nlohmann::json read_json(const std::string &rel) { return nlohmann::json::parse(read_text(shared_path(rel))); }

std::vector<int32_t> golden_ids(const nlohmann::json &j, const char *key) {
    return j.at(key).get<std::vector<int32_t>>();
}

std::string ids_string(const std::vector<int32_t> &ids) {
    std::string s;
    for (int32_t id : ids) {
        s += ' ';
        s += std::to_string(id);
    }
    return s;
}

// Every case in the .inp file is followed by the separator, the last one included.
std::vector<std::string> split_cases(const std::string &inp) {
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> cases;
    size_t pos = 0;
    for (size_t at; (at = inp.find(sep, pos)) != std::string::npos; pos = at + sep.size())
        cases.push_back(inp.substr(pos, at - pos));
    return cases;
}

std::vector<std::vector<int32_t>> parse_out(const std::string &out) {
    std::vector<std::vector<int32_t>> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        std::istringstream ls(line);
        std::vector<int32_t> ids;
        for (int32_t id; ls >> id;) ids.push_back(id);
        lines.push_back(std::move(ids));
    }
    return lines;
}

void check_vocab_vectors(const std::string &name) {
    auto tok = load_tokenizer("vocab/ggml-vocab-" + name + ".gguf");
    auto cases = split_cases(read_text(shared_path("vocab/ggml-vocab-" + name + ".gguf.inp")));
    auto expected = parse_out(read_text(shared_path("vocab/ggml-vocab-" + name + ".gguf.out")));
    REQUIRE(!cases.empty());
    REQUIRE(cases.size() == expected.size());

    size_t passed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        auto got = tok->encode(cases[i], false, false);
        if (got == expected[i]) {
            ++passed;
            continue;
        }
        UNSCOPED_INFO(name << " case " << i << " '" << cases[i] << "'\n  expected:" << ids_string(expected[i])
                           << "\n  got:     " << ids_string(got));
    }
    CHECK(passed == cases.size());
}

}  // namespace

TEST_CASE("SPM matches llama.cpp test vectors: llama-spm", "[tokenizer]") { check_vocab_vectors("llama-spm"); }

TEST_CASE("SPM matches llama.cpp test vectors: phi-3", "[tokenizer]") { check_vocab_vectors("phi-3"); }

TEST_CASE("SPM prompt tokens match the golden fixtures", "[tokenizer]") {
    auto tok = load_tokenizer("models/stories260K.gguf");
    REQUIRE(tok->model_name() == "llama");
    REQUIRE(tok->adds_bos());

    auto stories = read_json("fixtures/golden/stories260K.json");
    CHECK(tok->n_vocab() == stories.at("n_vocab").get<int32_t>());
    CHECK(tok->encode("Once upon a time", true, true) == golden_ids(stories, "prompt_tokens"));
    CHECK(tok->encode("Once upon a time there was", true, true) ==
          golden_ids(read_json("fixtures/golden/llama.f32.json"), "prompt_tokens"));
    // Without add_bos the same text, minus the BOS.
    auto no_bos = golden_ids(stories, "prompt_tokens");
    no_bos.erase(no_bos.begin());
    CHECK(tok->encode("Once upon a time", false, false) == no_bos);
}

TEST_CASE("SPM pieces of generated tokens concatenate to the golden text", "[tokenizer]") {
    auto tok = load_tokenizer("models/stories260K.gguf");
    auto stories = read_json("fixtures/golden/stories260K.json");
    std::string text;
    for (int32_t id : golden_ids(stories, "generated_tokens")) text += tok->piece(id);
    CHECK(text == stories.at("text").get<std::string>());
}

TEST_CASE("SPM edge cases", "[tokenizer]") {
    auto tok = load_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
    REQUIRE(tok->bos() == 1);
    REQUIRE(tok->eos() == 2);

    SECTION("empty text") {
        CHECK(tok->encode("", false, false).empty());
        CHECK(tok->encode("", true, false) == std::vector<int32_t>{tok->bos()});
    }

    SECTION("byte fallback spells unknown characters as <0xXX> tokens") {
        // U+10348 (Gothic hwair) is not in the Llama vocab: expect its four UTF-8 bytes.
        const std::string hwair = "\xF0\x90\x8D\x88";
        auto ids = tok->encode(hwair, false, false);
        REQUIRE(ids.size() >= 4);
        std::vector<int32_t> tail(ids.end() - 4, ids.end());
        std::string bytes;
        for (int32_t id : tail) {
            std::string p = tok->piece(id);
            REQUIRE(p.size() == 1);
            bytes += p;
        }
        CHECK(bytes == hwair);
        // The pieces of the whole encoding give back the text, with SPM's prefix space.
        std::string all;
        for (int32_t id : ids) all += tok->piece(id);
        CHECK(all == " " + hwair);
    }

    SECTION("control-token text is parsed only with parse_special") {
        auto special = tok->encode("<s>Hi", false, true);
        REQUIRE(!special.empty());
        CHECK(special[0] == tok->bos());
        auto literal = tok->encode("<s>Hi", false, false);
        CHECK(std::find(literal.begin(), literal.end(), tok->bos()) == literal.end());
        CHECK(literal.size() > special.size());
        CHECK(tok->piece(tok->bos()).empty());
    }

    SECTION("never two BOS: a text that begins with the BOS text starts with one, as llama.cpp's chat path") {
        const auto ids = tok->encode("<s>Hi", true, true);
        CHECK(ids == tok->encode("Hi", true, true));
        CHECK(ids == tok->encode("<s>Hi", false, true));
        CHECK(std::count(ids.begin(), ids.end(), tok->bos()) == 1);
        // Only a leading one: a BOS text further on stays a BOS, and without parse_special "<s>" is text.
        const auto later = tok->encode("Hi<s>", true, true);
        CHECK(std::count(later.begin(), later.end(), tok->bos()) == 2);
        const auto literal = tok->encode("<s>Hi", true, false);
        CHECK(literal.front() == tok->bos());
        CHECK(std::count(literal.begin(), literal.end(), tok->bos()) == 1);
        CHECK(literal.size() > ids.size());
    }

    SECTION("end of generation") {
        CHECK(tok->is_eog(tok->eos()));
        CHECK_FALSE(tok->is_eog(tok->bos()));
        CHECK_FALSE(tok->is_eog(-1));
    }
}

TEST_CASE("Phi-3 special tokens swallow the whitespace after them", "[tokenizer]") {
    auto tok = load_tokenizer("vocab/ggml-vocab-phi-3.gguf");
    const llm::Vocab &vocab = dynamic_cast<const llm::SpmTokenizer &>(*tok).vocab();
    const int32_t end = vocab.find("<|end|>");
    const int32_t eos_text = vocab.find("</s>");
    REQUIRE(end >= 0);
    REQUIRE(eos_text >= 0);

    CHECK(tok->is_eog(end));
    CHECK(tok->encode("<|end|>\n  Hi", false, true) == tok->encode("<|end|>Hi", false, true));
    CHECK(tok->encode("<|end|>\nHi", false, true).front() == end);
    // Control text stays text without parse_special. The file types </s> user-defined, but llama.cpp
    // (d32676d) counts it among the end-of-generation texts and so makes it control as well: it ends
    // generation and is matched in text only with parse_special.
    auto plain = tok->encode("<|end|>", false, false);
    CHECK(std::find(plain.begin(), plain.end(), end) == plain.end());
    CHECK(tok->is_eog(eos_text));
    auto user = tok->encode("a</s>b", false, false);
    CHECK(std::find(user.begin(), user.end(), eos_text) == user.end());
    auto parsed = tok->encode("a</s>b", false, true);
    CHECK(std::find(parsed.begin(), parsed.end(), eos_text) != parsed.end());
}

TEST_CASE("Tokenizer factory picks the family from tokenizer.ggml.model", "[tokenizer]") {
    CHECK(load_tokenizer("vocab/ggml-vocab-llama-spm.gguf")->model_name() == "llama");
    CHECK(load_tokenizer("vocab/ggml-vocab-gpt-2.gguf")->model_name() == "gpt2");

    llm::Metadata meta;
    llm::MetaValue model;
    model.type = llm::MetaType::STRING;
    model.str = "t5";
    meta.add("tokenizer.ggml.model", model);
    try {
        llm::Tokenizer::from_metadata(meta);
        FAIL("expected an error");
    } catch (const llm::Error &e) {
        CHECK(e.status() == LLM_ERR_UNSUPPORTED);
        CHECK(std::string(e.what()).find("t5") != std::string::npos);
    }
}

TEST_CASE("Vocab rejects duplicate token texts", "[tokenizer]") {
    llm::Metadata meta;
    llm::MetaValue model;
    model.type = llm::MetaType::STRING;
    model.str = "llama";
    meta.add("tokenizer.ggml.model", model);
    llm::MetaValue tokens;
    tokens.type = llm::MetaType::ARRAY;
    tokens.elem_type = llm::MetaType::STRING;
    tokens.strs = {"<unk>", "<s>", "</s>", "a", "a"};
    tokens.count = tokens.strs.size();
    meta.add("tokenizer.ggml.tokens", tokens);
    try {
        llm::Tokenizer::from_metadata(meta);
        FAIL("expected an error");
    } catch (const llm::Error &e) {
        CHECK(e.status() == LLM_ERR_FORMAT);
    }
}
