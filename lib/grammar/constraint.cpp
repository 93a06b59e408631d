#include "grammar/constraint.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace llm::grammar {

Constraint::Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabText> vocab)
    : m_(std::move(g)), vocab_(std::move(vocab)) {
    reset();
}

void Constraint::reset() {
    m_.reset();
    pending_.clear();
    note_token_tops();
}

void Constraint::note_token_tops() {
    token_tops_ = false;
    for (const Stack &s : m_.stacks()) {
        const Op op = s.empty() ? Op::End : m_.grammar().elems[s.back()].op;
        token_tops_ = token_tops_ || op == Op::Token || op == Op::TokenNot;
    }
}

bool Constraint::try_token(int32_t token, Stacks &out, std::string &tail) const {
    const VocabText::Token &t = vocab_->tokens[static_cast<size_t>(token)];
    const uint32_t *cps = vocab_->cps.data() + t.cp_begin;
    size_t n = t.cp_count;
    tail = t.tail;
    Utf8Split joined;
    if (!pending_.empty()) {
        // The previous token left a sequence unfinished: decode it together with this one's bytes.
        joined = split_utf8(pending_ + vocab_->pieces[static_cast<size_t>(token)]);
        if (!joined.valid) return false;
        cps = joined.cps.data();
        n = joined.cps.size();
        tail = joined.tail;
        if (n == 0 && !tail.empty()) {
            // Still unfinished: viable while the longer prefix still may become an accepted code point.
            uint32_t lo = 0, hi = 0;
            tail_range(tail, &lo, &hi);
            out = m_.stacks();
            return lo <= hi && m_.may_accept_range(out, lo, hi);
        }
    } else if (!t.valid) {
        return false;
    } else if (n > 0 && !token_tops_ && !m_.may_start_with(m_.stacks(), cps[0])) {
        return false;  // the common rejection, without copying a stack
    }
    if (n == 0 && tail.empty() && !token_tops_) return false;  // no text (control tokens): nothing to match
    if (n == 0 && !tail.empty() && pending_.empty()) {
        uint32_t lo = 0, hi = 0;
        tail_range(tail, &lo, &hi);
        out = m_.stacks();
        return lo <= hi && m_.may_accept_range(out, lo, hi);
    }
    m_.step(m_.stacks(), token, cps, n, out);
    if (out.empty()) return false;
    if (!tail.empty()) {
        uint32_t lo = 0, hi = 0;
        tail_range(tail, &lo, &hi);
        if (lo > hi || !m_.may_accept_range(out, lo, hi)) return false;
    }
    return true;
}

bool Constraint::allows(int32_t token) const {
    if (token < 0 || static_cast<size_t>(token) >= vocab_->tokens.size()) return false;
    if (vocab_->tokens[static_cast<size_t>(token)].eog) return can_end();
    std::string tail;
    return try_token(token, scratch_, tail);
}

int32_t Constraint::mask(float *logits) const {
    int32_t allowed = 0;
    const int32_t n = static_cast<int32_t>(vocab_->tokens.size());
    for (int32_t t = 0; t < n; ++t) {
        if (!std::isfinite(logits[t]) && logits[t] < 0) continue;  // already out
        if (allows(t)) {
            ++allowed;
        } else {
            logits[t] = -std::numeric_limits<float>::infinity();
        }
    }
    return allowed;
}

void Constraint::accept(int32_t token) {
    if (token < 0 || static_cast<size_t>(token) >= vocab_->tokens.size())
        fail(LLM_ERR_INVALID_ARGUMENT, "token id {} is out of range", token);
    if (vocab_->tokens[static_cast<size_t>(token)].eog) {
        // The end where the language may end: nothing to consume.
        if (!can_end()) fail(LLM_ERR_INVALID_ARGUMENT, "the grammar does not allow the output to end here");
        return;
    }
    Stacks out;
    std::string tail;
    if (!try_token(token, out, tail)) {
        fail(LLM_ERR_INVALID_ARGUMENT, "token {} ('{}') is not allowed by the grammar here", token,
             vocab_->pieces[static_cast<size_t>(token)]);
    }
    m_.set_stacks(std::move(out));
    pending_ = std::move(tail);
    note_token_tops();
}

}  // namespace llm::grammar
