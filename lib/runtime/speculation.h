// Speculative decoding: where a session's proposed next tokens come from (prompt lookup, a draft
// model). How Session::next() checks and hands them out is in speculation.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace llm {

// The largest lookup_ngram accepted: longer n-grams almost never recur verbatim, and the search
// costs O(context * n) per n.
constexpr int32_t kMaxLookupNgram = 32;
constexpr int32_t kMaxDraft = 64;

// Throws LLM_ERR_INVALID_ARGUMENT for n_draft, lookup_ngram or draft_p_min out of range.
void validate_speculation(const SpeculationOptions &o);

// Throws LLM_ERR_INVALID_ARGUMENT naming the first difference when draft's vocabulary (size, then
// token texts in id order) is not target's.
void check_same_vocabulary(const Model &target, const Model &draft);

// Prompt lookup: for n = ngram down to 1, the most recent earlier occurrence of ctx's last n tokens;
// returns up to k tokens that followed it (empty if no n-gram recurs).
std::vector<int32_t> lookup_proposals(const int32_t *ctx, size_t n_ctx_tokens, int32_t ngram, int32_t k);

// Greedy choice of a draft: the highest logit, ties to the lower id; *p_top receives its softmax
// probability when p_top is not null.
int32_t greedy_token(const float *logits, int32_t n_vocab, float *p_top);

class Speculator {
public:
    // session, n_ctx, n_threads: the session's; the draft's own session holds the same context with
    // the same cache types.
    Speculator(const Model &target, const SpeculationOptions &o, const SessionOptions &session, int32_t n_ctx,
               int32_t n_threads);

    // Up to k tokens proposed to follow ctx (its last token just sampled), deterministic; never an
    // end-of-generation token (proposals stop before one). poll() runs between draft passes
    // (the session's cancel check).
    std::vector<int32_t> propose(const std::vector<int32_t> &ctx, int32_t k, const std::function<void()> &poll);

    const SpeculationOptions &options() const { return opt_; }
    std::string mode() const;  // "lookup", "draft" or "lookup+draft"
    uint64_t draft_passes() const { return draft_ ? draft_->stats().passes : 0; }

private:
    std::vector<int32_t> draft_proposals(const std::vector<int32_t> &ctx, int32_t k, const std::function<void()> &poll);

    const Model &target_;
    SpeculationOptions opt_;         // holds the draft Model alive for draft_
    std::unique_ptr<Session> draft_;  // the draft model's own context, kept in step with the session's
};

}  // namespace llm
