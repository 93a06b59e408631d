// Speculative decoding in Session::next().
//
// A step samples t0 from the current logits as always, then asks for up to K proposals d1..dK that
// would follow the context + t0 (prompt lookup and/or a draft model, both greedy and deterministic)
// and evaluates [t0, d1..dK] in ONE forward pass with the logits of every row R0..RK. t0 is committed
// with R0; d1..dK stay pending: their KV rows are written beyond n_past_, their logits kept. The next
// call samples t from the current logits with the very same sampler call as without speculation;
// t == the first pending token commits it with its row and no evaluation, anything else drops
// the pending tokens and starts a fresh step with t.
//
// Why this is lossless at every temperature, and even gives the same tokens for a seed:
// - Our forward pass is batch-size independent: the rows of a K+1-token pass are bit-identical to
//   evaluating the tokens one at a time, so a committed pending token leaves exactly the KV rows
//   and logits that accept() would have produced.
// - The sampler sees the same logits and the same history and makes the same RNG draws in the same
//   order as without speculation (drafting never touches it), so it draws the same token.
// - This is the standard speculative-sampling rule for a deterministic proposal d: accept d with
//   probability p(d), otherwise draw from p with d removed (renormalized). Drawing x ~ p and
//   accepting iff x == d has exactly that law: P(accept) = p(d), and given x != d, x ~ p(. | x != d).
//   Reusing the same draw makes it equal to plain sampling token for token, not only in law.
// Pending rows beyond n_past_ are junk once dropped: later writes overwrite them on full-length
// layers; a ring (capacity window + kKvWriteBatch) written at most K + 1 <= 65 positions ahead still
// holds every position a later query reads, but drop_pending() marks the cache suspect anyway so
// restore_window() checks it.
// A recurrent layer's state has no rows to ignore: the verify pass absorbs every draft into it. So
// the pass keeps a journal (RecurrentState::begin_journal): a snapshot of the state before it, and
// each recurrent layer's inputs per token. When the next token rejects a draft, restore_window()
// puts the snapshot back and replays the records of the tokens kept (replay_recurrent): the same
// arithmetic as the pass, no weights read, so the state has the bits of plain decoding and the
// pass still reads the streamed blocks once for all its tokens. The draft model's own session, if
// hybrid, goes back through its checkpoints (truncate) like any session.
#include "runtime/speculation.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace llm {

void check_same_vocabulary(const Model &target, const Model &draft) {
    const Tokenizer &a = target.tokenizer(), &b = draft.tokenizer();
    if (target.config().n_vocab != draft.config().n_vocab || a.n_vocab() != b.n_vocab()) {
        fail(LLM_ERR_INVALID_ARGUMENT, "draft vocabulary differs in size: {} tokens vs the session model's {}",
             b.n_vocab(), a.n_vocab());
    }
    for (int32_t id = 0; id < a.n_vocab(); ++id) {
        if (a.token_text(id) != b.token_text(id)) {
            fail(LLM_ERR_INVALID_ARGUMENT, "draft vocabulary differs at token {}: '{}' vs '{}'", id, b.token_text(id),
                 a.token_text(id));
        }
    }
}

std::vector<int32_t> lookup_proposals(const int32_t *ctx, size_t n_tok, int32_t ngram, int32_t k) {
    if (n_tok < 2 || k <= 0) return {};
    for (size_t n = std::min<size_t>(static_cast<size_t>(std::max(ngram, 0)), n_tok - 1); n >= 1; --n) {
        const int32_t *pat = ctx + n_tok - n;
        // Occurrences starting at i <= n_tok - n - 1 have at least one token after them.
        for (size_t i = n_tok - n; i-- > 0;) {
            if (std::equal(pat, pat + n, ctx + i)) {
                const size_t from = i + n, to = std::min(from + static_cast<size_t>(k), n_tok);
                return {ctx + from, ctx + to};
            }
        }
    }
    return {};
}

int32_t greedy_token(const float *logits, int32_t n_vocab, float *p_top) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i)
        if (logits[i] > logits[best]) best = i;
    if (p_top) {
        double sum = 0;
        for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - logits[best]);
        *p_top = static_cast<float>(1.0 / sum);
    }
    return best;
}

void validate_speculation(const SpeculationOptions &o) {
    if (o.n_draft < 1 || o.n_draft > kMaxDraft)
        fail(LLM_ERR_INVALID_ARGUMENT, "n_draft {} is out of range 1..{}", o.n_draft, kMaxDraft);
    if (o.lookup_ngram < 0 || o.lookup_ngram > kMaxLookupNgram) {
        fail(LLM_ERR_INVALID_ARGUMENT, "lookup_ngram {} is out of range 0..{}", o.lookup_ngram, kMaxLookupNgram);
    }
    if (!std::isfinite(o.draft_p_min) || o.draft_p_min < 0.0f || o.draft_p_min > 1.0f) {
        fail(LLM_ERR_INVALID_ARGUMENT, "draft_p_min {} is not in [0, 1]", o.draft_p_min);
    }
}

Speculator::Speculator(const Model &target, const SpeculationOptions &o, const SessionOptions &session, int32_t n_ctx,
                       int32_t n_threads)
    : target_(target), opt_(o) {
    validate_speculation(o);
    if (!o.draft) return;
    check_same_vocabulary(target, *o.draft);
    if (o.draft->vocab_only()) fail(LLM_ERR_INVALID_ARGUMENT, "the draft model was loaded vocab-only; it cannot run");
    if (o.draft->has_position_embd() && static_cast<uint32_t>(n_ctx) > o.draft->config().n_ctx_train) {
        fail(LLM_ERR_INVALID_ARGUMENT,
             "the draft model cannot hold the session's context: n_ctx {} exceeds its {} learned positions", n_ctx,
             o.draft->config().n_ctx_train);
    }
    // The session's cache types, so that a draft of the same file proposes exactly the session's
    // greedy tokens (an F16 cache beside an F32 one would flip near-ties).
    SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = n_threads;
    so.kv_type_k = session.kv_type_k;
    so.kv_type_v = session.kv_type_v;
    so.kv_ring = session.kv_ring;
    draft_ = std::make_unique<Session>(*o.draft, so);
}

std::string Speculator::mode() const {
    if (opt_.draft && opt_.lookup_ngram > 0) return "lookup+draft";
    return opt_.draft ? "draft" : "lookup";
}

std::vector<int32_t> Speculator::propose(const std::vector<int32_t> &ctx, int32_t k,
                                         const std::function<void()> &poll) {
    std::vector<int32_t> out;
    if (opt_.lookup_ngram > 0) {
        out = lookup_proposals(ctx.data(), ctx.size(), opt_.lookup_ngram, k);
        const Tokenizer &tok = target_.tokenizer();
        out.erase(std::find_if(out.begin(), out.end(), [&](int32_t t) { return tok.is_eog(t); }), out.end());
    }
    if (out.empty() && draft_) return draft_proposals(ctx, k, poll);
    return out;
}

// The draft session is brought to ctx through the longest common prefix of the token lists (it
// usually holds the previous step's context and proposals), then proposes greedily.
std::vector<int32_t> Speculator::draft_proposals(const std::vector<int32_t> &ctx, int32_t k,
                                                 const std::function<void()> &poll) {
    const std::vector<int32_t> &have = draft_->tokens();
    size_t common = 0;
    while (common < have.size() && common < ctx.size() && have[common] == ctx[common]) ++common;
    // The last token is evaluated again when the draft holds all of ctx: its logits are gone.
    common = std::min(common, ctx.size() - 1);
    draft_->truncate(static_cast<int32_t>(common));
    draft_->prefill(ctx.data() + common, ctx.size() - common);
    const int32_t n_vocab = static_cast<int32_t>(target_.config().n_vocab);
    const Tokenizer &tok = target_.tokenizer();
    std::vector<int32_t> out;
    while (static_cast<int32_t>(out.size()) < k) {
        float p = 1.0f;
        const int32_t d = greedy_token(draft_->logits(), n_vocab, opt_.draft_p_min > 0 ? &p : nullptr);
        if (p < opt_.draft_p_min || tok.is_eog(d)) break;
        out.push_back(d);
        if (static_cast<int32_t>(out.size()) == k) break;  // its logits are not needed
        poll();
        draft_->accept(d);
    }
    return out;
}

// ---- Session side --------------------------------------------------------------------------------

void Session::set_speculation(const SpeculationOptions &o) {
    validate_speculation(o);
    std::shared_ptr<Speculator> next;
    if (o.draft || o.lookup_ngram > 0) {
        next = std::make_shared<Speculator>(m_, o, opt_, kv_.n_ctx(), static_cast<int32_t>(pool_->size()));
    }
    drop_pending();
    spec_ = std::move(next);
}

void Session::drop_pending() {
    if (pending_at_ < pending_.size()) kv_suspect_ = true;
    pending_.clear();
    pending_at_ = 0;
}

void Session::advance(int32_t t) {
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    if (pending_at_ < pending_.size() && pending_[pending_at_] == t) {
        // A cancel from on_token stops this token as it would stop accept().
        check_cancel();
        commit(t, pending_logits_.data() + (pending_at_ + 1) * m_.config().n_vocab);
        ++stats_.accepted_tokens;
        if (++pending_at_ == pending_.size()) drop_pending();
        stats_.decode_seconds += elapsed();
        return;
    }
    drop_pending();
    check_cancel();
    const int32_t room = kv_.n_ctx() - n_past_ - 1;  // positions after t0's
    std::vector<int32_t> drafts;
    if (room > 0) {
        std::vector<int32_t> ctx(tokens_);
        ctx.push_back(t);
        drafts = spec_->propose(ctx, std::min(spec_->options().n_draft, room), [this] { check_cancel(); });
    }
    if (drafts.empty()) {
        stats_.decode_seconds += elapsed();
        accept(t);  // may shift the context
        return;
    }
    verify(t, drafts);
    stats_.decode_seconds += elapsed();
}

void Session::verify(int32_t t0, const std::vector<int32_t> &drafts) {
    const size_t n_vocab = m_.config().n_vocab;
    const int64_t n = static_cast<int64_t>(drafts.size()) + 1;
    std::vector<int32_t> seq;
    seq.reserve(static_cast<size_t>(n));
    seq.push_back(t0);
    seq.insert(seq.end(), drafts.begin(), drafts.end());
    pending_logits_.resize(static_cast<size_t>(n) * n_vocab);
    // A recurrent state cannot drop the rejected drafts it absorbs: the pass records a journal from
    // the state before it (RecurrentState::begin_journal), which restore_window() replays up to the
    // accepted tokens once the next token rejects a draft (or after a failed pass: none of them).
    evaluate_next(seq.data(), n, pending_logits_.data(), true, false, true);
    commit(t0, pending_logits_.data());
    stats_.drafted_tokens += drafts.size();
    pending_ = drafts;
    pending_at_ = 0;
}

}  // namespace llm
