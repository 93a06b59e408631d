// Token sampling in llama.cpp's default chain order: repetition penalty -> top-k -> top-p -> min-p ->
// temperature -> draw. Temperature <= 0 is greedy: argmax, lowest id on ties. Seeded mt19937, so the
// same seed and logits give the same tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace llm {

struct SamplerParams {
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;
    uint64_t seed = 0;
};

class Sampler {
public:
    explicit Sampler(const SamplerParams &p);

    int32_t sample(const float *logits, int32_t n_vocab);
    // Records a token in the repetition history (prompt tokens too, as llama.cpp's CLI does).
    void accept(int32_t token);
    void reset();
    // Replaces the repetition history with the tail of tokens[0..n) (RNG untouched): after a rewind.
    void set_history(const int32_t *tokens, size_t n);

    // The RNG's whole state is its 32-bit seed and how many numbers it has drawn: that is the same
    // sequence in every C++ library (the standard fixes mt19937's outputs, not its text form).
    struct RngState {
        uint32_t seed = 0;
        uint64_t draws = 0;
    };
    RngState rng_state() const { return {rng_.seed, rng_.draws}; }
    const std::deque<int32_t> &history() const { return history_; }
    // A saved sampler back: its RNG state and history (cut to this sampler's repeat_last_n).
    // Sampling parameters stay this sampler's own.
    void restore(RngState rng, std::deque<int32_t> history);

private:
    struct Cand {
        int32_t id;
        float logit;
    };
    void apply_penalties(std::vector<Cand> &c) const;

    // mt19937 counting its draws (RngState).
    struct CountingRng {
        using result_type = std::mt19937::result_type;
        static constexpr result_type min() { return std::mt19937::min(); }
        static constexpr result_type max() { return std::mt19937::max(); }
        result_type operator()() {
            ++draws;
            return engine();
        }
        std::mt19937 engine;
        uint32_t seed = 0;
        uint64_t draws = 0;
    };

    SamplerParams p_;
    CountingRng rng_;
    std::deque<int32_t> history_;
    std::vector<Cand> cands_;
};

// Argmax with the lowest id winning ties: the "greedy" of the goldens.
int32_t argmax(const float *logits, int32_t n);

}  // namespace llm
