// Log-probabilities, logit bias and presence/frequency penalties through the C API on stories260K,
// each checked against a computation of its own from llm_session_logits and the context's tokens.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "llm.h"

namespace {

const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";

struct ModelH {
    llm_model *m = nullptr;
    ModelH() {
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    }
    ~ModelH() { llm_model_free(m); }
};

llm_session *session(llm_model *m, float temp, float presence = 0.0f, float frequency = 0.0f, int32_t last_n = 64) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = temp;
    sp.seed = 11;
    sp.presence_penalty = presence;
    sp.frequency_penalty = frequency;
    sp.repeat_last_n = last_n;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    int32_t toks[32], n = 0;
    REQUIRE(llm_tokenize(m, "Once upon a time", 16, true, false, toks, 32, &n) == LLM_OK);
    REQUIRE(llm_session_prefill(s, toks, static_cast<size_t>(n)) == LLM_OK);
    return s;
}

// log-softmax in double, from the logits as the API gives them plus `adjust` per token.
std::vector<double> log_softmax(const std::vector<double> &x) {
    double mx = -std::numeric_limits<double>::infinity();
    for (double v : x) mx = std::max(mx, v);
    double sum = 0.0;
    for (double v : x) sum += std::exp(v - mx);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - mx - std::log(sum);
    return out;
}

std::vector<double> current_logits(llm_session *s) {
    const float *lg = nullptr;
    int32_t nv = 0;
    REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
    return std::vector<double>(lg, lg + nv);
}

std::vector<int32_t> top_ids(const std::vector<double> &lp, size_t n) {
    std::vector<int32_t> ids(lp.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return lp[a] > lp[b]; });
    ids.resize(n);
    return ids;
}

struct Seen {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<std::vector<llm_token_logprob>> tops;
};

void on_logprobs(int32_t token, float logprob, const llm_token_logprob *top, int32_t n_top, void *user) {
    Seen *s = static_cast<Seen *>(user);
    s->tokens.push_back(token);
    s->logprobs.push_back(logprob);
    s->tops.emplace_back(top, top + n_top);
}

// One step: the reference from the logits (with `adjust`), then llm_session_next, then both sides.
void check_step(llm_session *s, const std::vector<double> &adjust, int32_t n_top, bool greedy) {
    std::vector<double> x = current_logits(s);
    for (size_t i = 0; i < x.size(); ++i) x[i] += adjust.empty() ? 0.0 : adjust[i];
    const std::vector<double> ref = log_softmax(x);
    int32_t tok = -1;
    REQUIRE(llm_session_next(s, &tok, nullptr, 0, nullptr) >= LLM_OK);
    int32_t t = -1, n = -1;
    float lp = 0.0f;
    const llm_token_logprob *top = nullptr;
    REQUIRE(llm_session_logprobs(s, &t, &lp, &top, &n) == LLM_OK);
    CHECK(t == tok);
    CHECK(lp == Approx(ref[tok]).margin(1e-4));
    if (greedy) CHECK(tok == top_ids(ref, 1)[0]);
    REQUIRE(n == n_top);
    const std::vector<int32_t> want = top_ids(ref, static_cast<size_t>(n_top));
    for (int32_t k = 0; k < n; ++k) {
        // Near-ties may order differently in float; the values must agree either way.
        CHECK(top[k].logprob == Approx(ref[want[k]]).margin(1e-4));
        CHECK(top[k].logprob == Approx(ref[top[k].token]).margin(1e-4));
    }
}

}  // namespace

TEST_CASE("logprobs: the sampled token's and the top n equal the log-softmax of the logits", "[logprobs][api]") {
    ModelH h;
    for (float temp : {0.0f, 1.0f, 1.7f}) {
        INFO("temperature " << temp);
        llm_session *s = session(h.m, temp);
        Seen seen;
        llm_logprobs_params lp;
        REQUIRE(llm_logprobs_params_init(&lp, LLM_LOGPROBS_PARAMS_VERSION) == LLM_OK);
        CHECK(lp.n_top == 0);
        CHECK(lp.on_token == nullptr);
        lp.n_top = 5;
        lp.on_token = on_logprobs;
        lp.user = &seen;
        REQUIRE(llm_session_set_logprobs(s, &lp) == LLM_OK);
        CHECK(llm_session_logprobs(s, nullptr, nullptr, nullptr, nullptr) == LLM_ERR_INVALID_ARGUMENT);
        for (int i = 0; i < 24; ++i) {
            check_step(s, {}, 5, temp == 0.0f);
            // The callback saw what the pull API gives.
            int32_t t = -1, n = 0;
            float v = 0.0f;
            const llm_token_logprob *top = nullptr;
            REQUIRE(llm_session_logprobs(s, &t, &v, &top, &n) == LLM_OK);
            REQUIRE(seen.tokens.size() == static_cast<size_t>(i + 1));
            CHECK(seen.tokens.back() == t);
            CHECK(seen.logprobs.back() == v);
            REQUIRE(seen.tops.back().size() == static_cast<size_t>(n));
            for (int32_t k = 0; k < n; ++k) CHECK(seen.tops.back()[k].token == top[k].token);
        }
        REQUIRE(llm_session_set_logprobs(s, nullptr) == LLM_OK);
        CHECK(llm_session_logprobs(s, nullptr, nullptr, nullptr, nullptr) == LLM_ERR_INVALID_ARGUMENT);
        llm_session_free(s);
    }
}

TEST_CASE("logit bias: added before sampling and reflected in the log-probabilities", "[logprobs][api]") {
    ModelH h;
    llm_session *plain = session(h.m, 0.0f);
    int32_t first = -1;
    REQUIRE(llm_session_sample(plain, &first) == LLM_OK);
    const int32_t n_vocab = static_cast<int32_t>(current_logits(plain).size());
    llm_session_free(plain);

    llm_session *s = session(h.m, 0.0f);
    llm_logprobs_params lp;
    llm_logprobs_params_init(&lp, LLM_LOGPROBS_PARAMS_VERSION);
    lp.n_top = 3;
    REQUIRE(llm_session_set_logprobs(s, &lp) == LLM_OK);
    // Ban greedy's first choice and lift another token a little: the reference has the same bias.
    const int32_t ids[] = {first, 300, 300};
    const float bias[] = {-INFINITY, 1.5f, 0.5f};  // a token listed twice gets the sum
    REQUIRE(llm_session_set_logit_bias(s, ids, bias, 3) == LLM_OK);
    std::vector<double> adjust(static_cast<size_t>(n_vocab), 0.0);
    adjust[first] = -INFINITY;
    adjust[300] = 2.0;
    for (int i = 0; i < 12; ++i) check_step(s, adjust, 3, true);
    int32_t toks[256], n = 0;
    REQUIRE(llm_session_tokens(s, toks, 256, &n) == LLM_OK);
    CHECK(std::find(toks + 5, toks + n, first) == toks + n);  // never generated

    // Errors leave the map in use.
    const int32_t bad_id[] = {n_vocab};
    const float one[] = {1.0f};
    CHECK(llm_session_set_logit_bias(s, bad_id, one, 1) == LLM_ERR_INVALID_ARGUMENT);
    const int32_t ok_id[] = {5};
    const float nan[] = {NAN}, pinf[] = {INFINITY};
    CHECK(llm_session_set_logit_bias(s, ok_id, nan, 1) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_set_logit_bias(s, ok_id, pinf, 1) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_set_logit_bias(s, nullptr, one, 1) == LLM_ERR_INVALID_ARGUMENT);
    check_step(s, adjust, 3, true);
    REQUIRE(llm_session_set_logit_bias(s, nullptr, nullptr, 0) == LLM_OK);
    check_step(s, {}, 3, true);
    llm_session_free(s);
}

TEST_CASE("presence and frequency penalties: llama.cpp's over the last repeat_last_n tokens", "[logprobs][api]") {
    ModelH h;
    const int32_t last_n = 12;
    const float presence = 0.7f, frequency = 0.4f;
    llm_session *s = session(h.m, 0.0f, presence, frequency, last_n);
    llm_logprobs_params lp;
    llm_logprobs_params_init(&lp, LLM_LOGPROBS_PARAMS_VERSION);
    lp.n_top = 4;
    REQUIRE(llm_session_set_logprobs(s, &lp) == LLM_OK);
    const size_t n_vocab = current_logits(s).size();
    for (int i = 0; i < 30; ++i) {
        int32_t toks[256], n = 0;
        REQUIRE(llm_session_tokens(s, toks, 256, &n) == LLM_OK);
        std::map<int32_t, int> count;
        for (int32_t k = std::max(0, n - last_n); k < n; ++k) ++count[toks[k]];
        std::vector<double> adjust(n_vocab, 0.0);
        for (const auto &[t, c] : count) adjust[t] = -(static_cast<double>(c) * frequency + presence);
        check_step(s, adjust, 4, true);
    }
    llm_session_free(s);

    // Off by default, and a non-finite penalty is refused at creation.
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    CHECK(sp.presence_penalty == 0.0f);
    CHECK(sp.frequency_penalty == 0.0f);
    sp.frequency_penalty = NAN;
    llm_session *bad = nullptr;
    CHECK(llm_session_create(h.m, &sp, &bad) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(bad == nullptr);
}

TEST_CASE("logprobs: bad parameters are refused", "[logprobs][api]") {
    ModelH h;
    llm_session *s = session(h.m, 0.0f);
    llm_logprobs_params lp;
    llm_logprobs_params_init(&lp, LLM_LOGPROBS_PARAMS_VERSION);
    lp.n_top = 257;
    CHECK(llm_session_set_logprobs(s, &lp) == LLM_ERR_INVALID_ARGUMENT);
    lp.n_top = -1;
    CHECK(llm_session_set_logprobs(s, &lp) == LLM_ERR_INVALID_ARGUMENT);
    lp.n_top = 0;
    lp.version = LLM_LOGPROBS_PARAMS_VERSION + 1;
    CHECK(llm_session_set_logprobs(s, &lp) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_logprobs_params_init(&lp, 0) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_logprobs_params_init(nullptr, LLM_LOGPROBS_PARAMS_VERSION) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_set_logprobs(nullptr, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_logprobs(nullptr, nullptr, nullptr, nullptr, nullptr) == LLM_ERR_INVALID_ARGUMENT);
    // n_top 0: the sampled token's only.
    llm_logprobs_params_init(&lp, LLM_LOGPROBS_PARAMS_VERSION);
    REQUIRE(llm_session_set_logprobs(s, &lp) == LLM_OK);
    check_step(s, {}, 0, true);
    llm_session_free(s);
}
