// Token sampling in llama.cpp's default chain order: logit bias -> penalties (repetition, frequency,
// presence) -> top-k -> top-p -> min-p -> temperature -> draw. Temperature <= 0 is greedy: argmax, lowest id on ties. Seeded mt19937, so the
// same seed and logits give the same tokens.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <random>
#include <utility>
#include <vector>

namespace llm {

struct SamplerParams {
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;  // the history every penalty sees
    // llama.cpp's: a token seen c > 0 times in the history loses c * frequency_penalty + presence_penalty.
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    uint64_t seed = 0;
};

// MT19937 (Matsumoto & Nishimura): the outputs of std::mt19937 (the standard fixes them), with its
// state words in reach, so a saved session restores its RNG in O(1) and reads the same in every C++
// library (std::mt19937's text form differs between them).
class Mt19937 {
public:
    using result_type = uint32_t;
    struct State {
        std::array<uint32_t, 624> words{};
        uint32_t index = 624;  // the next word to temper; 624: twist first
    };
    static constexpr result_type min() { return 0; }
    static constexpr result_type max() { return 0xFFFFFFFFu; }
    void seed(uint32_t s);
    result_type operator()();
    State state() const { return {w_, i_}; }
    void set_state(const State &st) {
        w_ = st.words;
        i_ = st.index;
    }

private:
    std::array<uint32_t, 624> w_{};
    uint32_t i_ = 624;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams &p);

    int32_t sample(const float *logits, int32_t n_vocab);
    // The logits the truncation steps start from: logits plus the bias, then penalized (n_vocab of
    // them, in id order), what log-probabilities are reported from.
    void adjusted(const float *logits, int32_t n_vocab, std::vector<float> &out);
    // Added to a token's logit before anything else (-inf bans it); replaces the previous map.
    void set_bias(std::vector<std::pair<int32_t, float>> bias) { bias_ = std::move(bias); }
    // Records a token in the repetition history (prompt tokens too, as llama.cpp's CLI does).
    void accept(int32_t token);
    void reset();
    // Replaces the repetition history with the tail of tokens[0..n) (RNG untouched): after a rewind.
    void set_history(const int32_t *tokens, size_t n);

    // The RNG's whole state, for saved sessions.
    using RngState = Mt19937::State;
    RngState rng_state() const { return rng_.state(); }
    const std::deque<int32_t> &history() const { return history_; }
    // A saved sampler back: its RNG state and history (cut to this sampler's repeat_last_n).
    // Sampling parameters stay this sampler's own.
    void restore(const RngState &rng, std::deque<int32_t> history);

private:
    struct Cand {
        int32_t id;
        float logit;
    };
    // Fills cands_ with the logits in id order, biased and penalized.
    void adjust(const float *logits, int32_t n_vocab);
    void apply_penalties(std::vector<Cand> &c) const;

    SamplerParams p_;
    Mt19937 rng_;
    std::deque<int32_t> history_;
    std::vector<Cand> cands_;
    std::vector<std::pair<int32_t, float>> bias_;  // token id, added to its logit
};

// Argmax with the lowest id winning ties: the "greedy" of the goldens.
int32_t argmax(const float *logits, int32_t n);

}  // namespace llm
