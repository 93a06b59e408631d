// Stop strings: the held-back bookkeeping on its own (runtime/stop_strings.h), then through the C API
// on stories260K: greedy generation ends at a stop string that it produces (also one spanning two
// tokens), the text before it is all handed out and nothing of it, and the context is the prefix
// before the first token holding any of its bytes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "llm.h"
#include "runtime/stop_strings.h"

using llm::StopStrings;

TEST_CASE("stop strings: held text, first occurrence, the token it starts in", "[stop]") {
    StopStrings st;
    st.set({"abc"});
    StopStrings::Result r = st.add("xa", 10);
    CHECK(r.text == "x");
    CHECK_FALSE(r.stopped);
    CHECK(st.held() == "a");
    r = st.add("b", 11);
    CHECK(r.text.empty());
    CHECK(st.held() == "ab");
    r = st.add("cd", 12);
    REQUIRE(r.stopped);
    CHECK(r.text.empty());
    CHECK(r.cut == 10);  // "xa" holds the stop's first byte: the whole token goes
    CHECK(st.held().empty());

    // A prefix that cannot go on is handed out with the token that breaks it.
    st.set({"abc"});
    CHECK(st.add("ab", 0).text.empty());
    r = st.add("x", 1);
    CHECK(r.text == "abx");
    CHECK_FALSE(r.stopped);

    // The lowest start wins, whichever string it is; a stop inside the new token cuts only it.
    st.set({"cd", "bc"});
    r = st.add("ab", 0);
    CHECK(r.text == "a");
    r = st.add("cd", 1);
    REQUIRE(r.stopped);
    CHECK(r.text.empty());  // "a" went out with the first piece
    CHECK(r.cut == 0);
    st.set({"zz"});
    r = st.add("qzz", 5);
    REQUIRE(r.stopped);
    CHECK(r.text == "q");
    CHECK(r.cut == 5);

    // Held text comes out at the end; a context shift moves the positions it remembers.
    st.set({"hello"});
    CHECK(st.add("say he", 20).text == "say ");
    CHECK(st.add("l", 21).text.empty());
    st.shift(4, 10);
    r = st.add("lo", 12);
    REQUIRE(r.stopped);
    CHECK(r.cut == 10);
    st.set({"hello"});
    st.add("oh hel", 0);
    CHECK(st.flush() == "hel");
    CHECK(st.held().empty());
}

namespace {

const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";
const char *kPrompt = "Once upon a time";

struct Run {
    int32_t status = 0;
    std::string text;
    std::vector<int32_t> tokens;  // as on_token saw them (-1: the last text, after the loop)
    std::vector<int32_t> context;
};

bool collect(int32_t token, const char *piece, size_t len, void *user) {
    Run *r = static_cast<Run *>(user);
    r->tokens.push_back(token);
    r->text.append(piece, len);
    return true;
}

std::vector<int32_t> context_of(llm_session *s) {
    std::vector<int32_t> t(static_cast<size_t>(llm_session_n_past(s)));
    int32_t n = 0;
    REQUIRE(llm_session_tokens(s, t.data(), static_cast<int32_t>(t.size()), &n) == LLM_OK);
    return t;
}

llm_session *greedy_session(llm_model *m) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0.0f;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    return s;
}

Run generate(llm_model *m, const std::vector<std::string> &stops, int32_t n) {
    llm_session *s = greedy_session(m);
    std::vector<const char *> list;
    for (const std::string &x : stops) list.push_back(x.c_str());
    REQUIRE(llm_session_set_stop(s, list.data(), list.size()) == LLM_OK);
    Run r;
    r.status = llm_session_generate(s, kPrompt, n, collect, &r);
    r.context = context_of(s);
    llm_session_free(s);
    return r;
}

// The same through the pull API: each piece llm_session_next hands out, and the held text at the end.
Run pull(llm_model *m, const std::vector<std::string> &stops, int32_t n) {
    llm_session *s = greedy_session(m);
    std::vector<const char *> list;
    for (const std::string &x : stops) list.push_back(x.c_str());
    REQUIRE(llm_session_set_stop(s, list.data(), list.size()) == LLM_OK);
    int32_t prompt[64], n_prompt = 0;
    REQUIRE(llm_tokenize(m, kPrompt, std::char_traits<char>::length(kPrompt), true, false, prompt, 64, &n_prompt) ==
            LLM_OK);
    REQUIRE(llm_session_prefill(s, prompt, static_cast<size_t>(n_prompt)) == LLM_OK);
    Run r;
    r.status = LLM_OK;
    char buf[256];
    for (int32_t i = 0; i < n; ++i) {
        int32_t tok = -1;
        size_t len = 0;
        const int32_t st = llm_session_next(s, &tok, buf, sizeof buf, &len);
        REQUIRE(st >= 0);
        r.text.append(buf, len);
        if (st != LLM_OK) {
            r.status = st;
            break;
        }
        r.tokens.push_back(tok);
    }
    size_t len = 0;
    REQUIRE(llm_session_flush_held(s, buf, sizeof buf, &len) == LLM_OK);
    if (r.status == LLM_OK) {
        r.text.append(buf, len);
    } else {
        CHECK(len == 0);  // the end of generation handed everything out
    }
    r.context = context_of(s);
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

std::string piece_of(llm_model *m, int32_t t) {
    char buf[64];
    size_t len = 0;
    REQUIRE(llm_token_to_piece(m, t, buf, sizeof buf, &len) == LLM_OK);
    return std::string(buf, len);
}

}  // namespace

TEST_CASE("stop strings: greedy generation ends at the first occurrence, cut from the context", "[stop][api]") {
    ModelH h;
    const int32_t n = 48;
    const Run plain = generate(h.m, {}, n);
    REQUIRE(plain.status == LLM_OK);
    REQUIRE(plain.tokens.size() == static_cast<size_t>(n));
    const size_t n_prompt = plain.context.size() - plain.tokens.size();
    const std::vector<int32_t> prompt(plain.context.begin(), plain.context.begin() + static_cast<long>(n_prompt));
    std::vector<std::string> pieces;
    std::vector<size_t> at;  // byte offset of each token's piece in plain.text
    for (int32_t t : plain.tokens) {
        at.push_back(at.empty() ? 0 : at.back() + pieces.back().size());
        pieces.push_back(piece_of(h.m, t));
    }
    REQUIRE(plain.text.size() == at.back() + pieces.back().size());

    // The context must be the prompt and the tokens before token k; the text everything before the stop.
    const auto check_stop = [&](const std::string &stop, size_t k, bool spans) {
        INFO("stop '" << stop << "' from token " << k << " in '" << plain.text << "'");
        const size_t first = plain.text.find(stop);
        REQUIRE(first != std::string::npos);
        std::vector<int32_t> want(prompt);
        want.insert(want.end(), plain.tokens.begin(), plain.tokens.begin() + static_cast<long>(k));
        for (const Run &r : {generate(h.m, {stop}, n), pull(h.m, {stop}, n)}) {
            CHECK(r.status == LLM_STOPPED);
            CHECK(r.text == plain.text.substr(0, first));
            CHECK(r.context == want);
        }
        if (spans) CHECK(first + stop.size() > at[k] + pieces[k].size());
    };

    // A word greedy produces, on its own token: the first token whose piece is a word after a space.
    size_t word = 0;
    for (size_t k = 3; k < pieces.size() && !word; ++k) {
        const std::string w = pieces[k].size() > 2 && pieces[k][0] == ' ' ? pieces[k].substr(1) : "";
        if (!w.empty() && plain.text.find(w) == at[k] + 1) word = k;
    }
    REQUIRE(word > 0);
    check_stop(pieces[word].substr(1), word, false);

    // Spanning two tokens: the last two bytes of one piece and the first two of the next.
    size_t span = 0;
    for (size_t k = 2; k + 1 < pieces.size() && !span; ++k) {
        if (pieces[k].size() < 3 || pieces[k + 1].size() < 2) continue;
        const std::string stop = pieces[k].substr(pieces[k].size() - 2) + pieces[k + 1].substr(0, 2);
        if (plain.text.find(stop) == at[k] + pieces[k].size() - 2) span = k;
    }
    REQUIRE(span > 0);
    check_stop(pieces[span].substr(pieces[span].size() - 2) + pieces[span + 1].substr(0, 2), span, true);

    // Of two stop strings the earlier occurrence wins.
    const std::string late = pieces[span].substr(pieces[span].size() - 2) + pieces[span + 1].substr(0, 2);
    const std::string early = pieces[word].substr(1);
    if (plain.text.find(early) < plain.text.find(late)) {
        const Run r = generate(h.m, {late, early}, n);
        CHECK(r.status == LLM_STOPPED);
        CHECK(r.text == plain.text.substr(0, plain.text.find(early)));
    }

    // A stop string that never completes, though its start ends the text: held back, flushed at the end.
    const std::string tail = plain.text.substr(plain.text.size() - 3) + "\x01never";
    for (const Run &r : {generate(h.m, {tail}, n), pull(h.m, {tail}, n)}) {
        CHECK(r.status == LLM_OK);
        CHECK(r.text == plain.text);
        CHECK(r.context == plain.context);
    }
    const Run held = generate(h.m, {tail}, n);
    REQUIRE_FALSE(held.tokens.empty());
    CHECK(held.tokens.back() == -1);  // the held text came in the last call
}

TEST_CASE("stop strings: bad lists are refused; the status has a name", "[stop][api]") {
    ModelH h;
    llm_session *s = greedy_session(h.m);
    const char *empty[] = {"x", ""};
    CHECK(llm_session_set_stop(s, empty, 2) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_last_error()).find("empty") != std::string::npos);
    const char *null_entry[] = {"x", nullptr};
    CHECK(llm_session_set_stop(s, null_entry, 2) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_set_stop(s, nullptr, 1) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_set_stop(s, nullptr, 0) == LLM_OK);
    CHECK(llm_session_set_stop(nullptr, nullptr, 0) == LLM_ERR_INVALID_ARGUMENT);
    size_t len = 7;
    CHECK(llm_session_flush_held(s, nullptr, 0, &len) == LLM_OK);
    CHECK(len == 0);
    CHECK(llm_session_flush_held(s, nullptr, 0, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::string(llm_status_string(LLM_STOPPED)).find("stop") != std::string::npos);
    llm_session_free(s);
}
