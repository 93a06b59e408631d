#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace llm {

int32_t argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (logits[i] > logits[best]) best = i;
    return best;
}

Sampler::Sampler(const SamplerParams &p) : p_(p) { reset(); }

void Sampler::reset() {
    // mt19937 takes a 32-bit seed; fold the upper half in so 64-bit seeds stay distinct.
    rng_.seed = static_cast<uint32_t>(p_.seed ^ (p_.seed >> 32));
    rng_.engine.seed(rng_.seed);
    rng_.draws = 0;
    history_.clear();
}

void Sampler::restore(RngState rng, std::deque<int32_t> history) {
    rng_.seed = rng.seed;
    rng_.engine.seed(rng.seed);
    rng_.engine.discard(rng.draws);
    rng_.draws = rng.draws;
    history_ = std::move(history);
    const size_t keep = p_.repeat_last_n > 0 ? static_cast<size_t>(p_.repeat_last_n) : 0;
    while (history_.size() > keep) history_.pop_front();
}

void Sampler::set_history(const int32_t *tokens, size_t n) {
    history_.clear();
    for (size_t i = 0; i < n; ++i) accept(tokens[i]);
}

void Sampler::accept(int32_t token) {
    if (p_.repeat_last_n <= 0) return;
    history_.push_back(token);
    while (static_cast<int32_t>(history_.size()) > p_.repeat_last_n) history_.pop_front();
}

void Sampler::apply_penalties(std::vector<Cand> &c) const {
    if (p_.repeat_last_n == 0 || p_.repeat_penalty == 1.0f || history_.empty()) return;
    std::unordered_map<int32_t, int> seen;
    for (int32_t t : history_) ++seen[t];
    for (Cand &x : c) {
        if (!seen.count(x.id)) continue;
        x.logit = x.logit <= 0 ? x.logit * p_.repeat_penalty : x.logit / p_.repeat_penalty;
    }
}

int32_t Sampler::sample(const float *logits, int32_t n_vocab) {
    std::vector<Cand> &c = cands_;
    c.resize(n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) c[i] = {i, logits[i]};
    apply_penalties(c);

    auto by_logit = [](const Cand &a, const Cand &b) { return a.logit > b.logit; };
    if (p_.temperature <= 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < c.size(); ++i)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }

    bool sorted = false;
    if (p_.top_k > 0 && p_.top_k < n_vocab) {
        std::partial_sort(c.begin(), c.begin() + p_.top_k, c.end(), by_logit);
        c.resize(p_.top_k);
        sorted = true;
    }
    if (p_.top_p < 1.0f) {
        if (!sorted) std::sort(c.begin(), c.end(), by_logit);
        sorted = true;
        const float mx = c[0].logit;
        float sum = 0.0f;
        std::vector<float> pr(c.size());
        for (size_t i = 0; i < c.size(); ++i) sum += pr[i] = std::exp(c[i].logit - mx);
        float cum = 0.0f;
        size_t keep = c.size();
        for (size_t i = 0; i < c.size(); ++i) {
            cum += pr[i] / sum;
            if (cum >= p_.top_p) {
                keep = i + 1;
                break;
            }
        }
        c.resize(keep);
    }
    if (p_.min_p > 0.0f) {
        float mx = c[0].logit;
        if (!sorted)
            for (const Cand &x : c) mx = std::max(mx, x.logit);
        const float floor_logit = mx + std::log(p_.min_p);
        std::vector<Cand> kept;
        for (const Cand &x : c)
            if (x.logit >= floor_logit) kept.push_back(x);
        if (!kept.empty()) c.swap(kept);
    }
    for (Cand &x : c) x.logit /= p_.temperature;

    float mx = c[0].logit;
    for (const Cand &x : c) mx = std::max(mx, x.logit);
    double sum = 0.0;
    std::vector<double> pr(c.size());
    for (size_t i = 0; i < c.size(); ++i) sum += pr[i] = std::exp(static_cast<double>(c[i].logit - mx));
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * sum;
    double cum = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
        cum += pr[i];
        if (cum >= u) return c[i].id;
    }
    return c.back().id;
}

}  // namespace llm
