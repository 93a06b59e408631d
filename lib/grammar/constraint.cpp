#include "grammar/constraint.h"

#include <algorithm>
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
        // The previous token left a sequence unfinished: decode it together with this one's bytes,
        // which must go on with a continuation byte (the common refusal, without building a string).
        const std::string &piece = vocab_->pieces[static_cast<size_t>(token)];
        if (!piece.empty() && (static_cast<uint8_t>(piece[0]) & 0xC0) != 0x80) return false;
        joined = split_utf8(pending_ + piece);
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

// Checking each token on its own repeats the same work for every token that starts alike: inside a
// JSON string nearly the whole vocabulary passes the first code point, and each check copies stacks.
// So mask() moves the candidates forward together, one code point per level: each stack's top class
// is tried on every candidate's next code point; candidates that matched the same set of stacks share
// the union of those stacks' continuations (each computed once), which is exactly the stack set
// Matcher::step would reach for each of them; the walk then goes on per such group. Where a token id
// may be matched (a <[N]> on top) or an unfinished UTF-8 sequence is pending, tokens are checked one by
// one instead (try_token), as allows() always does; the tests compare the two.
int32_t Constraint::mask(float *logits) const {
    const int32_t n = static_cast<int32_t>(vocab_->tokens.size());
    auto out = [&](int32_t t) { return !std::isfinite(logits[t]) && logits[t] < 0; };
    int32_t allowed = 0;
    if (!pending_.empty() || token_tops_) {
        for (int32_t t = 0; t < n; ++t) {
            if (out(t)) continue;
            if (allows(t)) {
                ++allowed;
            } else {
                logits[t] = -std::numeric_limits<float>::infinity();
            }
        }
        return allowed;
    }
    // Kept between calls: one verdict and at most one candidate per vocabulary entry, every token.
    std::vector<uint8_t> &ok = mask_ok_;
    ok.assign(static_cast<size_t>(n), 0);
    std::vector<Cand> &cands = mask_cands_;
    cands.clear();
    cands.reserve(static_cast<size_t>(n));
    for (int32_t t = 0; t < n; ++t) {
        if (out(t)) continue;
        const VocabText::Token &tk = vocab_->tokens[static_cast<size_t>(t)];
        if (tk.eog) {
            ok[static_cast<size_t>(t)] = can_end();
        } else if (!tk.valid) {
            // malformed UTF-8: never allowed
        } else if (tk.cp_count == 0) {
            // No whole code point: only an unfinished sequence the grammar may still take.
            uint32_t lo = 0, hi = 0;
            if (!tk.tail.empty()) {
                tail_range(tk.tail, &lo, &hi);
                ok[static_cast<size_t>(t)] = lo <= hi && m_.may_accept_range(m_.stacks(), lo, hi);
            }
        } else {
            cands.push_back({t, vocab_->cps.data() + tk.cp_begin, tk.cp_count});
        }
    }
    walk(m_.stacks(), cands, 0, 0, ok);
    for (int32_t t = 0; t < n; ++t) {
        if (out(t)) continue;
        if (ok[static_cast<size_t>(t)]) {
            ++allowed;
        } else {
            logits[t] = -std::numeric_limits<float>::infinity();
        }
    }
    return allowed;
}

void Constraint::walk(const Stacks &st, std::vector<Cand> &cands, uint32_t depth, size_t spent,
                      std::vector<uint8_t> &ok) const {
    const std::vector<Element> &e = m_.grammar().elems;
    // Candidates with every code point matched are allowed if their unfinished tail (if any) may
    // still become a code point here; the others stay in play.
    size_t keep = 0;
    for (const Cand &c : cands) {
        if (c.n > depth) {
            cands[keep++] = c;
            continue;
        }
        const std::string &tail = vocab_->tokens[static_cast<size_t>(c.token)].tail;
        uint32_t lo = 0, hi = 0;
        if (!tail.empty()) tail_range(tail, &lo, &hi);
        ok[static_cast<size_t>(c.token)] = tail.empty() || (lo <= hi && m_.may_accept_range(st, lo, hi));
    }
    cands.resize(keep);
    if (cands.empty()) return;

    // The stacks whose top takes a code point (an empty stack has ended; a token top takes no text).
    std::vector<uint32_t> live;
    for (uint32_t i = 0; i < st.size(); ++i) {
        if (st[i].empty()) continue;
        const Op op = e[st[i].back()].op;
        if (op == Op::Char || op == Op::CharNot || op == Op::CharAny) live.push_back(i);
    }
    if (live.empty()) return;
    const size_t words = (live.size() + 63) / 64;

    // Group the candidates by the set of live stacks their next code point matches.
    std::vector<uint64_t> group_sets;  // words per group
    std::vector<std::vector<Cand>> groups;
    std::vector<uint64_t> set(words);
    uint32_t after = 0;
    for (const Cand &c : cands) {
        std::fill(set.begin(), set.end(), 0);
        bool any = false;
        for (size_t j = 0; j < live.size(); ++j) {
            if (m_.match_char(st[live[j]].back(), c.cps[depth], &after)) {
                set[j / 64] |= uint64_t{1} << (j % 64);
                any = true;
            }
        }
        if (!any) continue;
        size_t g = 0;
        while (g < groups.size() && !std::equal(set.begin(), set.end(), group_sets.begin() + g * words)) ++g;
        if (g == groups.size()) {
            group_sets.insert(group_sets.end(), set.begin(), set.end());
            groups.emplace_back();
        }
        groups[g].push_back(c);
    }

    // Each live stack's continuation after its top, computed at most once, and what it cost. A group
    // is charged the sum over its stacks, as step() would be for each of its candidates.
    constexpr size_t kNotYet = ~size_t{0};
    std::vector<Stacks> next(live.size());
    std::vector<size_t> cost(live.size(), kNotYet);
    Stacks merged;
    for (size_t g = 0; g < groups.size(); ++g) {
        merged.clear();
        StackSink sink(merged);
        size_t group_spent = spent;
        for (size_t j = 0; j < live.size(); ++j) {
            if (!(group_sets[g * words + j / 64] >> (j % 64) & 1)) continue;
            if (cost[j] == kNotYet) {
                const Stack &s = st[live[j]];
                m_.match_char(s.back(), 0, &after);  // where the class ends does not depend on the code point
                StackSink own(next[j]);
                size_t c = 0;
                m_.advance_past(s, after, own, &c);
                cost[j] = c;
            }
            charge_expansions(&group_spent, cost[j]);
            for (const Stack &s : next[j]) sink.add(s);
        }
        walk(merged, groups[g], depth + 1, group_spent, ok);
    }
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
