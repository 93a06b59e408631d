// A grammar applied to generated tokens (the session's grammar-constrained sampling): which tokens
// keep the output so far a prefix of the language, and the state after each one. A token is allowed
// when its text's code points are accepted one after another and any unfinished UTF-8 sequence at its
// end can still become a code point the grammar takes; an end-of-generation token only where the
// language may end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/vocab_text.h"

namespace llm::grammar {

class Constraint {
public:
    Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabText> vocab);

    // Back to the start rule with no output.
    void reset();
    bool allows(int32_t token) const;
    // Sets logits[t] to -infinity for every token t not allowed; returns how many are allowed.
    int32_t mask(float *logits) const;
    // The state after token (which must be allowed; throws INVALID_ARGUMENT otherwise).
    void accept(int32_t token);
    bool can_end() const { return pending_.empty() && m_.can_end(); }
    const Grammar &grammar() const { return m_.grammar(); }

private:
    // The stacks after the token and the unfinished UTF-8 it leaves; false if it is not allowed.
    bool try_token(int32_t token, Stacks &out, std::string &tail) const;
    // mask()'s fast path: the tokens still in play, all past their first `depth` code points with the
    // stacks `st`, are matched together one code point at a time (see constraint.cpp).
    struct Cand {
        int32_t token;
        const uint32_t *cps;
        uint32_t n;
    };
    // spent: the expansions Matcher::step would have counted for the code points before depth (the
    // same bound applies, so mask() refuses exactly where allows() would).
    void walk(const Stacks &st, std::vector<Cand> &cands, uint32_t depth, size_t spent, std::vector<uint8_t> &ok) const;
    void note_token_tops();

    Matcher m_;
    std::shared_ptr<const VocabText> vocab_;
    std::string pending_;  // bytes of an unfinished UTF-8 sequence at the end of the output so far
    bool token_tops_ = false;  // some stack waits for a token id (then no code-point shortcut applies)
    mutable Stacks scratch_;
    mutable std::vector<uint8_t> mask_ok_;  // mask()'s verdict per token
    mutable std::vector<Cand> mask_cands_;
};

}  // namespace llm::grammar
