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
    rng_.seed(static_cast<uint32_t>(p_.seed ^ (p_.seed >> 32)));
    history_.clear();
}

void Mt19937::seed(uint32_t s) {
    w_[0] = s;
    for (uint32_t i = 1; i < 624; ++i) w_[i] = 1812433253u * (w_[i - 1] ^ (w_[i - 1] >> 30)) + i;
    i_ = 624;
}

Mt19937::result_type Mt19937::operator()() {
    if (i_ >= 624) {
        // The twist: each word from the top bit of itself, the low bits of the next, and the word
        // 397 further on.
        for (uint32_t k = 0; k < 624; ++k) {
            const uint32_t y = (w_[k] & 0x80000000u) | (w_[(k + 1) % 624] & 0x7FFFFFFFu);
            w_[k] = w_[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908B0DFu : 0u);
        }
        i_ = 0;
    }
    uint32_t y = w_[i_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C5680u;
    y ^= (y << 15) & 0xEFC60000u;
    y ^= y >> 18;
    return y;
}

void Sampler::restore(const RngState &rng, std::deque<int32_t> history) {
    rng_.set_state(rng);
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
    const bool repeat = p_.repeat_penalty != 1.0f;
    const bool counted = p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
    if (p_.repeat_last_n == 0 || !(repeat || counted) || history_.empty()) return;
    std::unordered_map<int32_t, int> seen;
    for (int32_t t : history_) ++seen[t];
    for (Cand &x : c) {
        const auto it = seen.find(x.id);
        if (it == seen.end()) continue;
        if (repeat) x.logit = x.logit <= 0 ? x.logit * p_.repeat_penalty : x.logit / p_.repeat_penalty;
        if (counted) x.logit -= static_cast<float>(it->second) * p_.frequency_penalty + p_.presence_penalty;
    }
}

void Sampler::adjust(const float *logits, int32_t n_vocab) {
    std::vector<Cand> &c = cands_;
    c.resize(n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) c[i] = {i, logits[i]};
    for (const auto &[id, b] : bias_)
        if (id < n_vocab) c[id].logit += b;
    apply_penalties(c);
}

void Sampler::adjusted(const float *logits, int32_t n_vocab, std::vector<float> &out) {
    adjust(logits, n_vocab);
    out.resize(n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) out[i] = cands_[i].logit;
}

int32_t Sampler::sample(const float *logits, int32_t n_vocab) {
    std::vector<Cand> &c = cands_;
    adjust(logits, n_vocab);

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
