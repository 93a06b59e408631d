// Byte-level BPE tokenizer: llama.cpp's ggml-vocab-*.gguf.{inp,out} vectors for the GPT-2 vocab with the
// gpt-2 and llama-bpe pre-tokenizers, the same vocab relabelled with every pre-tokenizer name llama.cpp
// accepts (vocab/pre/), piece() round trips, and the regex splitter on its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "gguf_writer.h"
#include "gguf/weight_source.h"
#include "llm.h"
#include "test_files.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
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

std::unique_ptr<llm::BpeTokenizer> load_bpe(const llm::Metadata &meta) {
    auto tok = llm::Tokenizer::from_metadata(meta);
    REQUIRE(tok->model_name() == "gpt2");
    return std::unique_ptr<llm::BpeTokenizer>(dynamic_cast<llm::BpeTokenizer *>(tok.release()));
}

std::unique_ptr<llm::BpeTokenizer> load_bpe(const std::string &rel) {
    auto ws = llm::WeightSource::open(llm::open_file_source(shared_path(rel)));
    return load_bpe(ws->meta());
}

std::string ids_string(const std::vector<int32_t> &ids) {
    std::string s;
    for (int32_t id : ids) s += ' ' + std::to_string(id);
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

std::string vocab_file(const std::string &name) { return "vocab/ggml-vocab-" + name + ".gguf"; }

std::vector<std::string> vocab_cases(const std::string &name) {
    return split_cases(read_text(shared_path(vocab_file(name) + ".inp")));
}

void check_vocab_vectors(const std::string &name) {
    auto tok = load_bpe(vocab_file(name));
    auto cases = vocab_cases(name);
    auto expected = parse_out(read_text(shared_path(vocab_file(name) + ".out")));
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

// Byte-level BPE loses nothing: the pieces of every case's ids give back its exact bytes.
void check_round_trip(const std::string &name) {
    auto tok = load_bpe(vocab_file(name));
    size_t passed = 0;
    auto cases = vocab_cases(name);
    for (size_t i = 0; i < cases.size(); ++i) {
        std::string text;
        for (int32_t id : tok->encode(cases[i], false, false)) text += tok->piece(id);
        if (text == cases[i]) {
            ++passed;
            continue;
        }
        UNSCOPED_INFO(name << " case " << i << " '" << cases[i] << "' came back as '" << text << "'");
    }
    CHECK(passed == cases.size());
}

std::vector<std::string> split_with(const std::string &pre, const std::string &text) {
    llm::RegexSplitter splitter(llm::pre_tokenizer_config(pre).regexes);
    std::vector<std::string> out;
    for (std::string_view p : splitter.split(text)) out.emplace_back(p);
    return out;
}

using Pieces = std::vector<std::string>;

// A copy of the metadata with tokenizer.ggml.pre replaced (or dropped when pre is empty).
llm::Metadata with_pre(const llm::Metadata &meta, const std::string &pre) {
    llm::Metadata out;
    for (const auto &[key, value] : meta.all())
        if (key != "tokenizer.ggml.pre") out.add(key, value);
    if (!pre.empty()) {
        llm::MetaValue v;
        v.type = llm::MetaType::STRING;
        v.str = pre;
        out.add("tokenizer.ggml.pre", v);
    }
    return out;
}

// ../ggml-vocab-gpt-2.gguf relabelled with `pre` ("" drops the key), written to the temp dir.
std::string gpt2_vocab_with_pre(const std::string &pre) {
    static const auto ws = llm::WeightSource::open(llm::open_file_source(shared_path(vocab_file("gpt-2"))));
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("llm-test-pre-" + std::to_string(::getpid()) + "-" + (pre.empty() ? std::string("none") : pre) + ".gguf"))
            .string();
    llm::GgufWriter w;
    w.add_all_from(*ws, [](const std::string &key) { return key == "tokenizer.ggml.pre"; });
    if (!pre.empty()) w.add_string("tokenizer.ggml.pre", pre);
    w.write_file(path);
    return path;
}

struct ModelDeleter {
    void operator()(llm_model *m) const { llm_model_free(m); }
};
using ModelPtr = std::unique_ptr<llm_model, ModelDeleter>;

// Loads a vocab-only GGUF through the C API; returns the status and, on success, the model.
int32_t load_vocab_only(const std::string &path, ModelPtr &out) {
    llm_model_params p;
    llm_model_params_init(&p, LLM_MODEL_PARAMS_VERSION);
    p.vocab_only = true;
    llm_model *m = nullptr;
    int32_t rc = llm_model_load(path.c_str(), &p, &m);
    out.reset(m);
    return rc;
}

std::vector<int32_t> c_tokenize(const llm_model *m, const std::string &text) {
    std::vector<int32_t> ids(text.size() + 8);
    int32_t n = 0;
    int32_t rc =
        llm_tokenize(m, text.data(), text.size(), false, false, ids.data(), static_cast<int32_t>(ids.size()), &n);
    REQUIRE(rc == LLM_OK);
    ids.resize(n);
    return ids;
}

}  // namespace

TEST_CASE("BPE matches llama.cpp test vectors: gpt-2", "[tokenizer]") { check_vocab_vectors("gpt-2"); }

TEST_CASE("BPE matches llama.cpp test vectors: gpt2 vocab with the llama-bpe pre-tokenizer", "[tokenizer]") {
    check_vocab_vectors("gpt2-llama-bpe");
}

TEST_CASE("BPE pieces give back the input bytes", "[tokenizer]") {
    check_round_trip("gpt-2");
    check_round_trip("gpt2-llama-bpe");
}

TEST_CASE("BPE pre-tokenizer and flags follow tokenizer.ggml.pre", "[tokenizer]") {
    auto gpt2 = load_bpe(vocab_file("gpt-2"));
    CHECK(gpt2->pre().kind == "gpt2");
    CHECK_FALSE(gpt2->pre().ignore_merges);
    CHECK_FALSE(gpt2->adds_bos());
    CHECK(gpt2->pre().clean_spaces);

    // The same GPT-2 vocab, but tagged llama-bpe: Llama 3's regex, whole-word lookups, BOS by default.
    auto llama = load_bpe(vocab_file("gpt2-llama-bpe"));
    CHECK(llama->pre().kind == "llama3");
    CHECK(llama->pre().ignore_merges);
    CHECK(llama->adds_bos());
    CHECK(llama->encode("Hello", true, false).front() == llama->bos());
    // Never two BOS, in BPE too: a text that begins with the BOS text starts with one.
    const std::string bos_text = llama->token_text(llama->bos());
    CHECK(llama->encode(bos_text + "Hello", true, true) == llama->encode("Hello", true, true));

    CHECK(llm::pre_tokenizer_config("qwen2").kind == "qwen2");
    CHECK_FALSE(llm::pre_tokenizer_config("qwen2").clean_spaces);
    CHECK(llm::pre_tokenizer_config("deepseek-r1-qwen").kind == "qwen2");
    CHECK(llm::pre_tokenizer_config("phi-2").kind == "gpt2");
    CHECK(llm::pre_tokenizer_config("dbrx").kind == "llama3");
    CHECK_FALSE(llm::pre_tokenizer_config("smaug-bpe").ignore_merges);
    CHECK(llm::pre_tokenizer_config("tekken").kind == "tekken");
    CHECK(llm::pre_tokenizer_config("tekken").add_bos);
    CHECK(llm::pre_tokenizer_config("starcoder").regexes.size() == 2);
    CHECK(llm::pre_tokenizer_config("default").regexes.size() == 4);

    // Flags the 126 vectors cannot show (they add no BOS and never decode), from llama_vocab::impl::load.
    CHECK(llm::pre_tokenizer_config("falcon-h1").add_bos);
    CHECK(llm::pre_tokenizer_config("jina-v5-nano").ignore_merges);
    CHECK(llm::pre_tokenizer_config("chameleon").add_bos);
    CHECK_FALSE(llm::pre_tokenizer_config("chameleon").clean_spaces);
    CHECK_FALSE(llm::pre_tokenizer_config("gpt-4o").add_bos);
    CHECK_FALSE(llm::pre_tokenizer_config("llama4").clean_spaces);
    CHECK(llm::pre_tokenizer_config("megrez").clean_spaces);  // Qwen2's regex, but keeps the clean-up
    CHECK(llm::pre_tokenizer_config("stablelm2").clean_spaces);
    CHECK_FALSE(llm::pre_tokenizer_config("hunyuan").clean_spaces);
    CHECK(llm::pre_tokenizer_config("minicpm5").ignore_merges);
    CHECK_FALSE(llm::pre_tokenizer_config("minicpm5").add_bos);
    CHECK(llm::pre_tokenizer_config("youtu").ignore_merges);
    CHECK(llm::pre_tokenizer_config("exaone-moe").clean_spaces);
    CHECK_FALSE(llm::pre_tokenizer_config("deepseek-v3").clean_spaces);
    CHECK(llm::pre_tokenizer_config("glm4").no_bos);
    CHECK_FALSE(llm::pre_tokenizer_config("llama-bpe").no_bos);
    CHECK(llm::pre_tokenizer_names().size() == 83);
}

TEST_CASE("BPE with a missing pre-tokenizer warns and uses the default", "[tokenizer]") {
    auto ws = llm::WeightSource::open(llm::open_file_source(shared_path(vocab_file("gpt-2"))));
    std::vector<std::string> warnings;
    llm::set_log_callback(
        [](int32_t level, const char *msg, void *user) {
            if (level == LLM_LOG_WARN) static_cast<std::vector<std::string> *>(user)->push_back(msg);
        },
        &warnings);
    auto missing = load_bpe(with_pre(ws->meta(), ""));
    llm::set_log_callback(nullptr, nullptr);

    CHECK(missing->pre().kind == "default");
    bool warned = false;
    for (const std::string &w : warnings) warned = warned || w.find("tokenizer.ggml.pre") != std::string::npos;
    CHECK(warned);

    // The default list splits punctuation runs and three-digit groups off first.
    const std::string text = "Hello, world!! 12345 $x+=1";
    std::string back;
    for (int32_t id : missing->encode(text, false, false)) back += missing->piece(id);
    CHECK(back == text);
    auto named_default = load_bpe(with_pre(ws->meta(), "default"));
    CHECK(missing->encode(text, false, false) == named_default->encode(text, false, false));
}

TEST_CASE("BPE refuses an unknown pre-tokenizer, naming it", "[tokenizer]") {
    auto ws = llm::WeightSource::open(llm::open_file_source(shared_path(vocab_file("gpt-2"))));
    try {
        load_bpe(with_pre(ws->meta(), "no-such-pre"));
        FAIL("an unknown tokenizer.ggml.pre loaded");
    } catch (const llm::Error &e) {
        CHECK(e.status() == LLM_ERR_UNSUPPORTED);
        CHECK(std::string(e.what()).find("no-such-pre") != std::string::npos);
    }

    // The same through the C API, and for llama.cpp's pre-tokenizers that are not byte-level.
    for (const std::string pre : {"no-such-pre", "gemma4", "whitespace"}) {
        const std::string path = gpt2_vocab_with_pre(pre);
        ModelPtr m;
        CHECK(load_vocab_only(path, m) == LLM_ERR_UNSUPPORTED);
        CHECK(m == nullptr);
        INFO(llm_last_error());
        CHECK(std::string(llm_last_error()).find("'" + pre + "'") != std::string::npos);
        std::filesystem::remove(path);
    }
}

// vocab/pre/<pre>.out: llama.cpp's ids for each case of vocab/pre/cases.inp on the GPT-2 vocab relabelled
// with that pre value. The relabelled file is written here, with our writer, and loaded vocab-only
// through the C API.
TEST_CASE("BPE matches llama.cpp for every byte-level pre-tokenizer name", "[tokenizer]") {
    const std::filesystem::path dir = shared_path("vocab/pre");
    const auto cases = split_cases(read_text((dir / "cases.inp").string()));
    REQUIRE(cases.size() == 126);

    std::vector<std::string> names;
    for (const auto &entry : std::filesystem::directory_iterator(dir))
        if (entry.path().extension() == ".out") names.push_back(entry.path().stem().string());
    std::sort(names.begin(), names.end());
    REQUIRE(names.size() == 83);

    // Under qemu and the sanitizers (test::kSlowBuild), one name per regex list: the others differ
    // only in flags (plain logic; the native run checks every name), while a platform difference such
    // as char's signedness on arm64 would show in any.
    std::set<std::vector<std::string>> regex_lists;
    size_t names_run = 0, names_passed = 0, cases_passed = 0;
    std::vector<std::string> failed;
    for (const std::string &pre : names) {
        if (test::kSlowBuild && !regex_lists.insert(llm::pre_tokenizer_config(pre).regexes).second) continue;
        ++names_run;
        const auto expected = parse_out(read_text((dir / (pre + ".out")).string()));
        REQUIRE(expected.size() == cases.size());
        const std::string path = gpt2_vocab_with_pre(pre);
        ModelPtr m;
        const int32_t rc = load_vocab_only(path, m);
        std::filesystem::remove(path);
        if (rc != LLM_OK) {
            UNSCOPED_INFO(pre << ": load failed: " << llm_last_error());
            failed.push_back(pre);
            continue;
        }
        size_t ok = 0;
        for (size_t i = 0; i < cases.size(); ++i) {
            auto got = c_tokenize(m.get(), cases[i]);
            if (got == expected[i]) {
                ++ok;
                continue;
            }
            UNSCOPED_INFO(pre << " case " << i << " '" << cases[i] << "'\n  expected:" << ids_string(expected[i])
                              << "\n  got:     " << ids_string(got));
        }
        cases_passed += ok;
        if (ok == cases.size())
            ++names_passed;
        else
            failed.push_back(pre);
    }
    std::string failed_list;
    for (const std::string &f : failed) failed_list += " " + f;
    INFO("pre-tokenizer names passing: " << names_passed << "/" << names_run << ", cases " << cases_passed << "/"
                                         << names_run * cases.size() << "; failing:" << failed_list);
    CHECK(names_passed == names_run);
    CHECK(names_run == (test::kSlowBuild ? regex_lists.size() : names.size()));

    // Each name we accept has vectors, except the ones llama.cpp's README says cannot run on this vocab.
    for (const std::string &pre : llm::pre_tokenizer_names()) {
        INFO(pre);
        CHECK(std::binary_search(names.begin(), names.end(), pre));
    }
}

TEST_CASE("Regex splitter: Unicode categories and each family's quirks", "[tokenizer]") {
    SECTION("gpt2: letters, numbers, contractions, trailing spaces, non-ASCII letters") {
        CHECK(split_with("gpt-2", "Hello  world") == Pieces{"Hello", " ", " world"});
        CHECK(split_with("gpt-2", "I'll 2024 naïve café") == Pieces{"I", "'ll", " 2024", " naïve", " café"});
        CHECK(split_with("gpt-2", "Привет мир") == Pieces{"Привет", " мир"});
        // Only a space joins the following word; a lone tab before a letter is left as a gap piece.
        CHECK(split_with("gpt-2", "a\t\tb") == Pieces{"a", "\t", "\t", "b"});
        CHECK(split_with("gpt-2", "x   ") == Pieces{"x", "   "});
        // Full-width digits are \p{N}, CJK ideographs are \p{L}.
        CHECK(split_with("gpt-2", "１２３漢字") == Pieces{"１２３", "漢字"});
    }
    SECTION("llama3: digit triples, case-insensitive contractions, newlines") {
        CHECK(split_with("llama-bpe", "12345") == Pieces{"123", "45"});
        CHECK(split_with("llama-bpe", "I'M here") == Pieces{"I", "'M", " here"});
        CHECK(split_with("llama-bpe", "ok!\n\nyes") == Pieces{"ok", "!\n\n", "yes"});
        CHECK(split_with("llama-bpe", "a \n b") == Pieces{"a", " \n", " b"});
    }
    SECTION("qwen2: single digits") { CHECK(split_with("qwen2", "x=123") == Pieces{"x", "=", "1", "2", "3"}); }
    SECTION("tekken: camel case and non-ASCII case") {
        CHECK(split_with("tekken", "HelloWorld") == Pieces{"Hello", "World"});
        CHECK(split_with("tekken", "ÉcoleNORMALE") == Pieces{"École", "NORMALE"});
        CHECK(split_with("tekken", "a/b//\n") == Pieces{"a", "/b", "//\n"});
    }
    SECTION("starcoder: digits one by one before the GPT-2 regex") {
        CHECK(split_with("starcoder", "v12") == Pieces{"v", "1", "2"});
    }
    SECTION("digit groups of three from the right, as llama.cpp's splitters cut them") {
        CHECK(split_with("superbpe", "1234567") == Pieces{"1", "234", "567"});
        CHECK(split_with("superbpe", "x123456") == Pieces{"x", "123", "456"});
        // Only 0-9 count for the triples (std::wregex's \d); other digits stay with the lead group.
        CHECK(split_with("superbpe", "\u0661\u06621234") == Pieces{"\u0661\u06621", "234"});
        CHECK(split_with("tiny_aya", "x=1234567") == Pieces{"x", "=", "1", "234", "567"});
        // The text before a run is glued to its first group and split again by the second regex, which
        // sees "a  12" and so keeps the two spaces apart.
        CHECK(split_with("tiny_aya", "a  12345") == Pieces{"a", " ", " ", "12", "345"});
        CHECK(split_with("afmoe", "99999") == Pieces{"99", "999"});
    }
    SECTION("llama.cpp's categories: '~' is neither punctuation nor symbol in its collapsed regexes") {
        CHECK(split_with("deepseek-v3", "x ++ y") == Pieces{"x", " ++", " y"});
        CHECK(split_with("deepseek-v3", "x ~~ y") == Pieces{"x", " ", "~~", " y"});
    }
    SECTION("Kimi K2: Han runs apart from other letters, no case split") {
        CHECK(split_with("kimi-k2", "HelloWorld\u4e2d\u6587abc") == Pieces{"HelloWorld", "\u4e2d\u6587", "abc"});
    }
    SECTION("broken UTF-8 is kept, never dropped") {
        const std::string text = "ab\xFF\xFE cd\xC3";
        std::string joined;
        for (const std::string &p : split_with("llama-bpe", text)) joined += p;
        CHECK(joined == text);
    }
    SECTION("empty text has no pieces") { CHECK(split_with("gpt-2", "").empty()); }
}

TEST_CASE("BPE edge cases", "[tokenizer]") {
    auto tok = load_bpe(vocab_file("gpt-2"));
    REQUIRE(tok->bos() == 50256);
    REQUIRE(tok->eos() == 50256);

    SECTION("merge ranks come from the merges array order") {
        CHECK(tok->rank("Ġ", "t") == 0);
        CHECK(tok->rank("h", "e") == 2);
        CHECK(tok->rank("r", "e") == 4);
        CHECK(tok->rank("q", "Ġ") == -1);
    }
    SECTION("byte-level pieces: space and newline travel inside tokens") {
        auto ids = tok->encode(" Hello\n", false, false);
        REQUIRE(ids.size() == 2);
        CHECK(tok->piece(ids[0]) == " Hello");
        CHECK(tok->piece(ids[1]) == "\n");
    }
    SECTION("invalid UTF-8 still encodes byte by byte and round-trips") {
        const std::string text = "ok\xFF\xC3(\x80";
        std::string back;
        for (int32_t id : tok->encode(text, false, false)) back += tok->piece(id);
        CHECK(back == text);
    }
    SECTION("<|endoftext|> is a control token: parsed only with parse_special, prints as nothing") {
        CHECK(tok->encode("<|endoftext|>", false, true) == std::vector<int32_t>{50256});
        auto literal = tok->encode("<|endoftext|>", false, false);
        CHECK(literal.size() > 1);
        CHECK(tok->piece(50256).empty());
        CHECK(tok->is_eog(50256));
    }
    SECTION("no BOS for GPT-2 even when asked") { CHECK(tok->encode("Hi", true, false).front() != tok->bos()); }
    SECTION("decode cleans up spaces HF-style unless the pre-tokenizer says not to") {
        auto ids = tok->encode("Hello , world ! it 's done .", false, false);
        CHECK(tok->decode(ids) == "Hello, world! it's done.");
        CHECK(tok->decode(tok->encode("don 't", false, false)) == "don 't");
    }
    SECTION("out-of-range ids are rejected") {
        CHECK_THROWS_AS(tok->piece(tok->n_vocab()), llm::Error);
        CHECK_THROWS_AS(tok->piece(-1), llm::Error);
    }
}

namespace {

// A vocab-only byte-level BPE GGUF whose tokens are "a", "b" and then `extra`, all typed NORMAL unless
// listed in `control`, written with our writer; ids of `extra` start at 2.
std::string eog_vocab(const std::string &name, const std::vector<std::string> &extra,
                      const std::vector<std::pair<std::string, uint32_t>> &id_keys = {}) {
    llm::GgufWriter w;
    w.add_string("general.architecture", "gpt2");
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "gpt-2");
    std::vector<std::string> tokens = {"a", "b"};
    tokens.insert(tokens.end(), extra.begin(), extra.end());
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_array("tokenizer.ggml.token_type", std::vector<int32_t>(tokens.size(), 1));
    w.add_string_array("tokenizer.ggml.merges", {"a b"});
    for (const auto &[key, id] : id_keys) w.add_u32(key, id);
    const std::string path =
        (std::filesystem::temp_directory_path() / ("llm-test-eog-" + std::to_string(::getpid()) + "-" + name + ".gguf"))
            .string();
    w.write_file(path);
    return path;
}

struct EogModel {
    ModelPtr m;
    std::vector<std::string> texts;  // id -> text
    explicit EogModel(const std::string &name, const std::vector<std::string> &extra,
                      const std::vector<std::pair<std::string, uint32_t>> &id_keys = {}) {
        const std::string path = eog_vocab(name, extra, id_keys);
        REQUIRE(load_vocab_only(path, m) == LLM_OK);
        std::filesystem::remove(path);
        texts = {"a", "b"};
        texts.insert(texts.end(), extra.begin(), extra.end());
    }
    int32_t id(const std::string &text) const {
        auto it = std::find(texts.begin(), texts.end(), text);
        REQUIRE(it != texts.end());
        return static_cast<int32_t>(it - texts.begin());
    }
    bool eog(const std::string &text) const { return llm_model_token_is_eog(m.get(), id(text)); }
    std::string piece(const std::string &text) const {
        char buf[64];
        size_t n = 0;
        REQUIRE(llm_token_to_piece(m.get(), id(text), buf, sizeof buf, &n) == LLM_OK);
        return std::string(buf, n);
    }
};

}  // namespace

// llama.cpp's llama_vocab::impl::load (d32676d) decides end of generation by token text as well as by the
// eos/eot/eom keys; whatever it stops on, llm_model_token_is_eog (and so generation) stops on.
TEST_CASE("End-of-generation set follows llama.cpp's texts and keys", "[tokenizer]") {
    const std::vector<std::string> eog_texts = {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<eos>",
        "<turn|>",
        "<｜end▁of▁sentence｜>",
        "[e~[",
        "<|flush|>",
    };
    SECTION("every listed text ends generation and becomes control") {
        std::vector<std::string> extra = eog_texts;
        extra.push_back("<|im_start|>");
        EogModel v("texts", extra);
        for (const std::string &t : eog_texts) {
            INFO(t);
            CHECK(v.eog(t));
            CHECK(v.piece(t).empty());  // control: prints as nothing
        }
        CHECK_FALSE(v.eog("<|im_start|>"));
        CHECK_FALSE(v.eog("a"));
        CHECK(v.piece("<|im_start|>") == "<|im_start|>");
    }
    SECTION("eos, eot and eom ids end generation whatever their text") {
        EogModel v("keys", {"x1", "x2", "x3", "x4"},
                   {{"tokenizer.ggml.eos_token_id", 2},
                    {"tokenizer.ggml.eot_token_id", 3},
                    {"tokenizer.ggml.eom_token_id", 4}});
        CHECK(v.eog("x1"));
        CHECK(v.eog("x2"));
        CHECK(v.eog("x3"));
        CHECK_FALSE(v.eog("x4"));
        CHECK(llm_model_token_eos(v.m.get()) == 2);
    }
    SECTION("FIM pad, repo and file-separator tokens end generation; prefix/suffix/middle do not") {
        EogModel v("fim", {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>",
                           "<|file_sep|>"});
        CHECK_FALSE(v.eog("<|fim_prefix|>"));
        CHECK_FALSE(v.eog("<|fim_suffix|>"));
        CHECK_FALSE(v.eog("<|fim_middle|>"));
        CHECK(v.eog("<|fim_pad|>"));
        CHECK(v.eog("<|repo_name|>"));
        CHECK(v.eog("<|file_sep|>"));
        CHECK(v.piece("<|fim_prefix|>").empty());
        EogModel k("kimi-pad", {"[PAD]"});
        CHECK(k.eog("[PAD]"));
    }
    SECTION("gpt-oss: <|end|> ends a message, not the turn, when <|return|> and <|call|> exist") {
        EogModel v("harmony", {"<|end|>", "<|return|>", "<|call|>", "<|channel|>", "<|message|>", "<|start|>"});
        CHECK_FALSE(v.eog("<|end|>"));
        CHECK(v.eog("<|return|>"));
        CHECK(v.eog("<|call|>"));
        CHECK(v.piece("<|end|>") == "<|end|>");  // user-defined: printed
        CHECK(v.piece("<|channel|>") == "<|channel|>");
        // <|end|> with only one of the two stays an end.
        EogModel r("return-only", {"<|end|>", "<|return|>"});
        CHECK(r.eog("<|end|>"));
    }
    SECTION("Solar Open: the same with <|calls|> and <|flush|>") {
        EogModel v("solar", {"<|end|>", "<|calls|>", "<|flush|>"});
        CHECK_FALSE(v.eog("<|end|>"));
        CHECK(v.eog("<|calls|>"));
        CHECK(v.eog("<|flush|>"));
    }
    SECTION("Gemma 4: </s> is ordinary text when <|tool_response> exists") {
        EogModel v("gemma4", {"</s>", "<|tool_response>", "<turn|>"});
        CHECK_FALSE(v.eog("</s>"));
        CHECK(v.eog("<|tool_response>"));
        CHECK(v.eog("<turn|>"));
        CHECK(v.piece("</s>") == "</s>");
    }
}

// vocab/gemma4: a synthetic gemma4-model vocabulary (raw UTF-8 merges, ' ' as U+2581, newline runs,
// <0xXX> byte fallback) and llama.cpp's ids for the 126 cases of vocab/pre/cases.inp.
TEST_CASE("the gemma4 tokenizer matches llama.cpp and gives the text back", "[tokenizer]") {
    const std::string path = shared_path("vocab/gemma4/ggml-vocab-gemma4-synthetic.gguf");
    const auto cases = split_cases(read_text(shared_path("vocab/pre/cases.inp")));
    const auto expected = parse_out(read_text(path + ".out"));
    REQUIRE(cases.size() == 126);
    REQUIRE(expected.size() == cases.size());
    ModelPtr m;
    REQUIRE(load_vocab_only(path, m) == LLM_OK);
    auto ws = llm::WeightSource::open(llm::open_file_source(path));
    auto tok = llm::Tokenizer::from_metadata(ws->meta());
    CHECK(tok->model_name() == "gemma4");

    size_t passed = 0, round_trips = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto got = c_tokenize(m.get(), cases[i]);
        if (got == expected[i])
            ++passed;
        else
            UNSCOPED_INFO("case " << i << " '" << cases[i] << "'\n  expected:" << ids_string(expected[i])
                                  << "\n  got:     " << ids_string(got));
        // Lossless but for a literal U+2581, which reads back as the space it stands for.
        std::string text;
        for (int32_t id : got) text += tok->piece(id);
        std::string want;
        for (size_t k = 0; k < cases[i].size();) {
            const bool mark = cases[i].compare(k, 3, "\xE2\x96\x81") == 0;
            want += mark ? ' ' : cases[i][k];
            k += mark ? 3 : 1;
        }
        if (text == want)
            ++round_trips;
        else
            UNSCOPED_INFO("case " << i << " '" << cases[i] << "' came back as '" << text << "'");
    }
    CHECK(passed == cases.size());
    CHECK(round_trips == cases.size());

    // BOS is added whatever the file says (llama.cpp forces it for gemma4); no space prefix.
    std::vector<int32_t> ids(16);
    int32_t n = 0;
    REQUIRE(llm_tokenize(m.get(), "a", 1, true, false, ids.data(), 16, &n) == LLM_OK);
    REQUIRE(n >= 2);
    CHECK(ids[0] == 1);
    CHECK(tok->token_text(ids[1]) == "a");
}
