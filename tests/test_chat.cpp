// The 0.3 metadata and chat calls of llm.h: llm_model_meta_string's text forms and string protocol,
// llm_model_chat_template, llm_chat_apply_template on a model with a ChatML template (chat_fixture.h),
// and parse_special in llm_tokenize and in a session.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "chat_fixture.h"
#include "gguf/byte_source.h"
#include "gguf_writer.h"
#include "gguf/weight_source.h"
#include "llm.h"

namespace {

const std::string kLlama = std::string(LLM_SHARED_DIR) + "/fixtures/models/llama.f32.gguf";

// A model file written for one test and removed with it.
struct TempModel {
    std::string path;
    llm_model *m = nullptr;
    explicit TempModel(const std::function<void(const std::string &)> &write) {
        char p[] = "/tmp/llm_chat_XXXXXX";
        const int fd = mkstemp(p);
        REQUIRE(fd >= 0);
        close(fd);
        path = p;
        write(path);
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        const int32_t st = llm_model_load(path.c_str(), &mp, &m);
        INFO(llm_last_error());
        REQUIRE(st == LLM_OK);
    }
    ~TempModel() {
        llm_model_free(m);
        std::remove(path.c_str());
    }
};

// The chat fixture, written once per test that needs it (members in this order: file's writer sets ids).
struct ChatModel {
    chat_fixture::Ids ids;
    TempModel file{[this](const std::string &p) { ids = chat_fixture::write(kLlama, p); }};
    llm_model *m = file.m;
};

llm_model *load(const std::string &path) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(path.c_str(), &mp, &m) == LLM_OK);
    return m;
}

// The value through the size query and then a buffer of the size asked for.
std::string meta(const llm_model *m, const char *key) {
    size_t len = 12345;
    const int32_t st = llm_model_meta_string(m, key, nullptr, 0, &len);
    INFO(key << ": " << llm_last_error());
    REQUIRE(st == LLM_ERR_BUFFER_TOO_SMALL);
    std::string buf(len + 1, '\x7f');
    size_t len2 = 0;
    REQUIRE(llm_model_meta_string(m, key, buf.data(), buf.size(), &len2) == LLM_OK);
    CHECK(len2 == len);
    CHECK(buf[len] == '\0');
    return buf.substr(0, len);
}

std::string apply(const llm_model *m, const char *tmpl, const std::vector<llm_chat_message> &msgs, bool add_assistant,
                  int32_t *status = nullptr) {
    size_t len = 0;
    int32_t st = llm_chat_apply_template(m, tmpl, msgs.data(), msgs.size(), add_assistant, nullptr, 0, &len);
    if (st == LLM_ERR_BUFFER_TOO_SMALL) {
        std::string out(len + 1, '\0');
        st = llm_chat_apply_template(m, tmpl, msgs.data(), msgs.size(), add_assistant, out.data(), out.size(), &len);
        out.resize(len);
        if (status) *status = st;
        return st == LLM_OK ? out : std::string();
    }
    if (status) *status = st;
    return {};
}

std::vector<int32_t> tokenize(const llm_model *m, const std::string &text, bool parse_special) {
    std::vector<int32_t> ids(text.size() + 8);
    int32_t n = 0;
    REQUIRE(llm_tokenize(m, text.data(), text.size(), true, parse_special, ids.data(), static_cast<int32_t>(ids.size()),
                         &n) == LLM_OK);
    ids.resize(static_cast<size_t>(n));
    return ids;
}

bool contains(const std::vector<int32_t> &v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("llm_model_meta_string: each GGUF scalar type as text", "[chat]") {
    TempModel t([](const std::string &p) {
        auto src = llm::WeightSource::open(llm::open_file_source(kLlama));
        llm::GgufWriter w;
        w.add_all_from(*src);
        w.add_bool("test.yes", true);
        w.add_bool("test.no", false);
        w.add_i8("test.i8", -128);
        w.add_u8("test.u8", 255);
        w.add_i16("test.i16", -32768);
        w.add_i32("test.i32", -5);
        w.add_u64("test.u64", UINT64_MAX);
        w.add_i64("test.i64", INT64_MIN);
        w.add_f32("test.f32", 0.1f);
        w.add_f64("test.f64", 0.1);
        w.add_f64("test.f64big", 1e300);
        w.add_string("test.empty", "");
        w.add_string("test.utf8", "caf\xc3\xa9 \xe2\x9c\x93");
        w.write_file(p);
    });
    const llm_model *m = t.m;
    CHECK(meta(m, "general.name") == "tinyrand-llama");
    CHECK(meta(m, "general.architecture") == "llama");
    CHECK(meta(m, "llama.block_count") == "2");                           // u32
    CHECK(meta(m, "tokenizer.ggml.padding_token_id") == "4294967295");    // u32 max
    CHECK(meta(m, "llama.rope.freq_base") == "10000");                    // f32
    CHECK(meta(m, "llama.attention.layer_norm_rms_epsilon") == "1e-05");  // f32 1e-5, shortest
    CHECK(meta(m, "test.yes") == "true");
    CHECK(meta(m, "test.no") == "false");
    CHECK(meta(m, "test.i8") == "-128");
    CHECK(meta(m, "test.u8") == "255");
    CHECK(meta(m, "test.i16") == "-32768");
    CHECK(meta(m, "test.i32") == "-5");
    CHECK(meta(m, "test.u64") == "18446744073709551615");
    CHECK(meta(m, "test.i64") == "-9223372036854775808");
    CHECK(meta(m, "test.f32") == "0.1");  // the f32 nearest 0.1 reads back from "0.1" as an f32
    CHECK(meta(m, "test.f64") == "0.1");
    CHECK(meta(m, "test.f64big") == "1e+300");
    CHECK(meta(m, "test.empty").empty());
    CHECK(meta(m, "test.utf8") == "caf\xc3\xa9 \xe2\x9c\x93");

    // Every float form reads back to the stored value.
    CHECK(std::strtof(meta(m, "llama.attention.layer_norm_rms_epsilon").c_str(), nullptr) == 1e-5f);
}

TEST_CASE("llm_model_meta_string: the string protocol and its errors", "[chat]") {
    llm_model *m = load(kLlama);
    const std::string name = "tinyrand-llama";  // 14 bytes

    SECTION("a buffer of exactly the length has no room for the NUL") {
        char buf[32];
        std::memset(buf, 'x', sizeof buf);
        size_t len = 0;
        CHECK(llm_model_meta_string(m, "general.name", buf, name.size(), &len) == LLM_ERR_BUFFER_TOO_SMALL);
        CHECK(len == name.size());
        CHECK(buf[0] == 'x');  // nothing written on failure
        CHECK(llm_model_meta_string(m, "general.name", buf, name.size() + 1, &len) == LLM_OK);
        CHECK(std::string(buf) == name);
        CHECK(llm_model_meta_string(m, "general.name", buf, sizeof buf, nullptr) == LLM_OK);  // len may be NULL
        CHECK(std::string(buf) == name);
    }
    SECTION("a missing key is NOT_FOUND and names the key; *len is left alone") {
        size_t len = 777;
        char buf[8];
        CHECK(llm_model_meta_string(m, "general.nope", buf, sizeof buf, &len) == LLM_ERR_NOT_FOUND);
        CHECK(std::string(llm_last_error()).find("general.nope") != std::string::npos);
        CHECK(len == 777);
    }
    SECTION("an array is INVALID_ARGUMENT") {
        size_t len = 0;
        CHECK(llm_model_meta_string(m, "tokenizer.ggml.tokens", nullptr, 0, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("tokenizer.ggml.tokens") != std::string::npos);
    }
    SECTION("NULL arguments") {
        char buf[8];
        size_t len = 0;
        CHECK(llm_model_meta_string(nullptr, "general.name", buf, sizeof buf, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_model_meta_string(m, nullptr, buf, sizeof buf, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_model_meta_string(m, "general.name", nullptr, 8, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_model_chat_template(nullptr, nullptr, buf, sizeof buf, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_model_chat_template(m, nullptr, nullptr, 8, &len) == LLM_ERR_INVALID_ARGUMENT);
    }
    llm_model_free(m);
}

TEST_CASE("llm_model_chat_template: the fixtures have none", "[chat]") {
    for (const char *f : {"llama.f32.gguf", "qwen2.f32.gguf", "gpt2.f32.gguf"}) {
        INFO(f);
        llm_model *m = load(std::string(LLM_SHARED_DIR) + "/fixtures/models/" + f);
        size_t len = 99;
        CHECK(llm_model_chat_template(m, nullptr, nullptr, 0, &len) == LLM_ERR_NOT_FOUND);
        CHECK(len == 99);
        CHECK(llm_model_chat_template(m, "tool_use", nullptr, 0, &len) == LLM_ERR_NOT_FOUND);
        CHECK(std::string(llm_last_error()).find("tool_use") != std::string::npos);
        // Without a template of its own, the model's is asked for: NOT_FOUND too.
        const llm_chat_message msg{"user", "hi"};
        CHECK(llm_chat_apply_template(m, nullptr, &msg, 1, true, nullptr, 0, &len) == LLM_ERR_NOT_FOUND);
        llm_model_free(m);
    }
}

TEST_CASE("a model's ChatML template renders a conversation", "[chat]") {
    ChatModel cm;
    const llm_model *m = cm.m;

    size_t len = 0;
    REQUIRE(llm_model_chat_template(m, nullptr, nullptr, 0, &len) == LLM_ERR_BUFFER_TOO_SMALL);
    std::string tmpl(len + 1, '\0');
    REQUIRE(llm_model_chat_template(m, nullptr, tmpl.data(), tmpl.size(), &len) == LLM_OK);
    tmpl.resize(len);
    CHECK(tmpl == chat_fixture::kChatml);
    CHECK(meta(m, "tokenizer.chat_template") == chat_fixture::kChatml);  // the same key, as metadata

    const std::vector<llm_chat_message> conv = {
        {"system", "You are terse."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Tell me a story."}};
    const std::string want =
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nTell me a story.<|im_end|>\n";
    int32_t st = 0;
    CHECK(apply(m, nullptr, conv, false, &st) == want);
    CHECK(st == LLM_OK);
    CHECK(apply(m, nullptr, conv, true) == want + "<|im_start|>assistant\n");
    // The same source given explicitly, with and without the model.
    CHECK(apply(m, chat_fixture::kChatml, conv, true) == want + "<|im_start|>assistant\n");
    CHECK(apply(nullptr, chat_fixture::kChatml, conv, true) == want + "<|im_start|>assistant\n");
    CHECK(apply(m, nullptr, {}, true) == "<|im_start|>assistant\n");

    SECTION("bos_token and eos_token are the vocabulary's texts of BOS and EOS; \"\" without a model") {
        REQUIRE(llm_model_chat_template(m, "tool_use", nullptr, 0, &len) == LLM_ERR_BUFFER_TOO_SMALL);
        CHECK(len == std::string(chat_fixture::kNamed).size());
        CHECK(llm_model_token_eos(m) == cm.ids.im_end);
        CHECK(apply(m, chat_fixture::kNamed, {{"user", "Hi"}}, false) == "<s>[user]Hi<|im_end|>");
        CHECK(apply(nullptr, chat_fixture::kNamed, {{"user", "Hi"}}, false) == "[user]Hi");
    }
    SECTION("the output protocol: size query, exact fit, one byte short") {
        const std::string full = want + "<|im_start|>assistant\n";
        std::string buf(full.size() + 1, 'x');
        CHECK(llm_chat_apply_template(m, nullptr, conv.data(), conv.size(), true, buf.data(), full.size(), &len) ==
              LLM_ERR_BUFFER_TOO_SMALL);
        CHECK(len == full.size());
        CHECK(buf[0] == 'x');
        CHECK(llm_chat_apply_template(m, nullptr, conv.data(), conv.size(), true, buf.data(), buf.size(), &len) ==
              LLM_OK);
        CHECK(buf.c_str() == full);
    }
    SECTION("bad conversations and templates get clear errors") {
        std::vector<llm_chat_message> bad = conv;
        bad[1].content = nullptr;
        CHECK(llm_chat_apply_template(m, nullptr, bad.data(), bad.size(), true, nullptr, 0, &len) ==
              LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("msgs[1]") != std::string::npos);
        bad = conv;
        bad[0].role = nullptr;
        CHECK(llm_chat_apply_template(m, nullptr, bad.data(), bad.size(), true, nullptr, 0, &len) ==
              LLM_ERR_INVALID_ARGUMENT);
        bad = conv;
        bad[2].content = "caf\xc3";  // cut inside a character
        CHECK(llm_chat_apply_template(m, nullptr, bad.data(), bad.size(), true, nullptr, 0, &len) ==
              LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("UTF-8") != std::string::npos);
        CHECK(llm_chat_apply_template(m, nullptr, nullptr, 2, true, nullptr, 0, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_chat_apply_template(nullptr, nullptr, conv.data(), conv.size(), true, nullptr, 0, &len) ==
              LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_chat_apply_template(m, nullptr, conv.data(), conv.size(), true, nullptr, 5, &len) ==
              LLM_ERR_INVALID_ARGUMENT);
        CHECK(llm_chat_apply_template(m, "{% for x in %}", conv.data(), conv.size(), true, nullptr, 0, &len) ==
              LLM_ERR_FORMAT);
        CHECK(llm_chat_apply_template(m, "{{ raise_exception('System role not supported') }}", conv.data(), conv.size(),
                                      true, nullptr, 0, &len) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("System role not supported") != std::string::npos);
    }
}

TEST_CASE("parse_special: a rendered prompt's control-token text becomes those tokens", "[chat]") {
    ChatModel cm;
    llm_model *m = cm.m;
    const std::string prompt = apply(m, nullptr, {{"user", "Hi"}}, true);
    REQUIRE(prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

    const std::vector<int32_t> special = tokenize(m, prompt, true);
    const std::vector<int32_t> plain = tokenize(m, prompt, false);
    CHECK(std::count(special.begin(), special.end(), cm.ids.im_start) == 2);
    CHECK(std::count(special.begin(), special.end(), cm.ids.im_end) == 1);
    CHECK_FALSE(contains(plain, cm.ids.im_start));
    CHECK_FALSE(contains(plain, cm.ids.im_end));
    CHECK(plain.size() > special.size());
    CHECK(llm_model_token_is_eog(m, cm.ids.im_end));
    // The pieces around the special tokens tokenize as the text between them does.
    const std::vector<int32_t> head = tokenize(m, "<|im_start|>", true);
    REQUIRE(head.size() == 2);  // BOS, <|im_start|>
    CHECK(head[1] == cm.ids.im_start);

    // The session's parse_special decides how llm_session_generate tokenizes its prompt.
    for (bool ps : {false, true}) {
        INFO("parse_special " << ps);
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
        sp.parse_special = ps;
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
        REQUIRE(llm_session_generate(s, prompt.c_str(), 0, nullptr, nullptr) == LLM_OK);
        std::vector<int32_t> held(512);
        int32_t n = 0;
        REQUIRE(llm_session_tokens(s, held.data(), static_cast<int32_t>(held.size()), &n) == LLM_OK);
        held.resize(static_cast<size_t>(n));
        CHECK(held == (ps ? special : plain));
        llm_session_free(s);
    }
    // A rendering that begins with the BOS text ({{ bos_token }}) starts with one BOS, not two.
    const std::string with_bos = apply(m, chat_fixture::kNamed, {{"user", "Hi"}}, false);
    REQUIRE(with_bos.rfind("<s>", 0) == 0);
    for (bool ps : {false, true}) {
        INFO("parse_special " << ps);
        llm_session_params sp;
        llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
        sp.parse_special = ps;
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
        REQUIRE(llm_session_generate(s, with_bos.c_str(), 0, nullptr, nullptr) == LLM_OK);
        std::vector<int32_t> held(512);
        int32_t n = 0;
        REQUIRE(llm_session_tokens(s, held.data(), static_cast<int32_t>(held.size()), &n) == LLM_OK);
        REQUIRE(n >= 3);
        CHECK(held[0] == llm_model_token_bos(m));
        CHECK(held[1] != llm_model_token_bos(m));  // with parse_special: "<s>" was the BOS
        CHECK(contains(std::vector<int32_t>(held.begin(), held.begin() + n), cm.ids.im_end) == ps);
        // llm_tokenize gives a host the same tokens: the rule is the tokenizer's.
        CHECK(tokenize(m, with_bos, ps) == std::vector<int32_t>(held.begin(), held.begin() + n));
        llm_session_free(s);
    }

    // Version 1 params have no parse_special: off, as before.
    llm_session_params v1;
    llm_session_params_init(&v1, 1);
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &v1, &s) == LLM_OK);
    REQUIRE(llm_session_generate(s, prompt.c_str(), 0, nullptr, nullptr) == LLM_OK);
    CHECK(llm_session_n_past(s) == static_cast<int32_t>(plain.size()));
    llm_session_free(s);
}

TEST_CASE("llm_chat_apply_template may be called from several threads at once", "[chat]") {
    ChatModel cm;
    const std::vector<llm_chat_message> conv = {{"user", "Hi"}, {"assistant", "Hello."}, {"user", "More."}};
    const std::string want = apply(cm.m, nullptr, conv, true);
    REQUIRE_FALSE(want.empty());
    std::vector<int> ok(4, 0);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
        ts.emplace_back([&, t] {
            for (int i = 0; i < 50; ++i) {
                std::string buf(want.size() + 1, '\0');
                size_t len = 0;
                if (llm_chat_apply_template(cm.m, nullptr, conv.data(), conv.size(), true, buf.data(), buf.size(),
                                            &len) == LLM_OK &&
                    buf.substr(0, len) == want) {
                    ++ok[t];
                }
            }
        });
    }
    for (auto &t : ts) t.join();
    for (int t = 0; t < 4; ++t) CHECK(ok[t] == 50);
}
