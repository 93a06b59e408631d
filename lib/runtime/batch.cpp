// Several sessions in one pass (llm_session_next_batch): each samples its next token as
// llm_session_next would, then the tokens of all of them run through one forward_batch, so a
// streamed block is read once for the whole batch instead of once per session.
#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>

#include "core/error.h"
#include "model/forward.h"
#include "runtime/session.h"

namespace llm {
// The pass runs on the first advancing session's streamer, thread pool and scratch (its reads and
// I/O counters), with every session's own cache and logits. Until every session is committed the
// pass may fail (cancel, I/O error): each session is then put back as it was before the call, its
// sampler included, so the call can simply be repeated. (A context shift made for the pass stays:
// the shifted context is a valid one, as in run().)
void Session::next_batch(const std::vector<Session *> &ss, int32_t *tokens, int32_t *statuses) {
    const size_t n = ss.size();
    std::vector<std::unique_ptr<CallScope>> calls;
    calls.reserve(n);
    for (Session *s : ss) {
        if (&s->m_ != &ss[0]->m_)
            fail(LLM_ERR_INVALID_ARGUMENT, "llm_session_next_batch: sessions of different models");
        // continues = true, as next(): a cancel pending since the previous call applies to this one.
        calls.push_back(std::make_unique<CallScope>(*s, true));
    }
    for (size_t i = 0; i < n; ++i) {
        tokens[i] = -1;
        statuses[i] = LLM_OK;
    }
    // A pending cancel on any session cancels the pass before anything changes.
    bool cancelled = false;
    for (Session *s : ss) cancelled |= s->cancel_.exchange(false, std::memory_order_relaxed);
    if (cancelled) fail(LLM_ERR_CANCELLED, "cancelled by llm_session_cancel");
    // Drafts verified ahead by speculation are forgotten: this call evaluates one token per session
    // and would overwrite their cache rows (restore_window() below re-checks a ring).
    for (Session *s : ss) s->drop_pending();

    std::vector<Sampler> saved;  // for the rollback of a failed pass
    saved.reserve(n);
    for (Session *s : ss) saved.push_back(s->sampler_);
    std::vector<bool> shifted(n, false);
    auto roll_back = [&](int32_t status) {
        for (size_t i = 0; i < n; ++i) {
            ss[i]->sampler_ = saved[i];
            // A shift stays; the history is the shifted context's tail, as make_room() left it.
            if (shifted[i]) ss[i]->sampler_.set_history(ss[i]->tokens_.data(), ss[i]->tokens_.size());
            tokens[i] = -1;
            statuses[i] = status;
        }
    };

    // Sample each session's token; those that neither end nor fail take part in the pass.
    const int32_t n_vocab = static_cast<int32_t>(ss[0]->m_.config().n_vocab);
    std::vector<size_t> part;
    try {
        for (size_t i = 0; i < n; ++i) {
            Session &s = *ss[i];
            if (s.logits_rows_ == 0) {
                statuses[i] = LLM_ERR_INVALID_ARGUMENT;
                continue;
            }
            // As llm_session_next: an end-of-generation token is sampled, reported and not accepted.
            const int32_t tok = s.sample();
            if (s.m_.tokenizer().is_eog(tok)) {
                tokens[i] = tok;
                statuses[i] = LLM_DONE;
                continue;
            }
            if (s.n_past_ + 1 > s.kv_.n_ctx()) {
                if (!s.opt_.context_shift) {
                    s.sampler_ = saved[i];  // not advanced: as if not sampled
                    statuses[i] = LLM_ERR_CONTEXT_FULL;
                    continue;
                }
                s.make_room(1);
                shifted[i] = true;
            }
            tokens[i] = tok;
            part.push_back(i);
        }
    } catch (...) {
        roll_back(status_of(std::current_exception()));
        throw;
    }
    if (part.empty()) return;

    Session &lead = *ss[part[0]];
    const auto t0 = std::chrono::steady_clock::now();
    // The pass's logits, [session][n_vocab] in one piece (the head writes them in place), copied to
    // each session when all of them are committed.
    std::vector<float> out(part.size() * static_cast<size_t>(n_vocab));
    std::vector<uint64_t> passes(part.size(), 0);
    try {
        // A recompute pending after a truncation or failed call runs first, for that session alone.
        for (size_t i : part) {
            ss[i]->restore_window();
            // Its read-ahead would only compete with the pass's reads.
            if (ss[i] != &lead) ss[i]->streamer_->quiesce();
        }
        // Prompt_chunk rows per pass, as one session's prompt: more sessions than that take several
        // passes (each reads the streamed blocks once).
        const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, lead.m_.prompt_chunk()));
        for (size_t b0 = 0; b0 < part.size(); b0 += chunk) {
            const size_t b1 = std::min(part.size(), b0 + chunk);
            std::vector<ForwardSegment> segs;
            for (size_t j = b0; j < b1; ++j) {
                Session &s = *ss[part[j]];
                ForwardSegment g;
                g.kv = &s.kv_;
                g.tokens = &tokens[part[j]];
                g.n_tokens = 1;
                g.pos0 = s.n_past_;
                g.logits = &out[j * static_cast<size_t>(n_vocab)];
                g.cancel = &s.cancel_;
                segs.push_back(g);
                ++passes[j];
            }
            forward_batch(lead.m_, segs.data(), segs.size(), lead.scratch_, lead.pool_.get(), lead.streamer_.get(),
                          &lead.io_);
        }
    } catch (...) {
        // As a failed accept: n_past unchanged, the rows written past it ignored (a ring may have lost
        // positions it still needs: kv_suspect_); and logits and sampler as before the call.
        const int32_t status = status_of(std::current_exception());
        for (Session *s : ss) {
            if (status == LLM_ERR_CANCELLED) s->cancel_.store(false, std::memory_order_relaxed);
        }
        for (size_t j = 0; j < part.size(); ++j) ss[part[j]]->kv_suspect_ = true;
        roll_back(status);
        throw;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t j = 0; j < part.size(); ++j) {
        Session &s = *ss[part[j]];
        s.commit(tokens[part[j]], &out[j * static_cast<size_t>(n_vocab)]);
        s.stats_.decode_seconds += secs;
        s.stats_.passes += passes[j];
    }
}

}  // namespace llm
