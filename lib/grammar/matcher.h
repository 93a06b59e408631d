// Incremental matching of a grammar (grammar.h) as a pushdown automaton with a set of stacks, the way
// llama.cpp's llama-grammar.cpp does it: a stack holds positions in Grammar::elems, its top always a
// terminal (a class, `.` or a token), the positions below it where to continue once that is matched.
// Every alternative the input so far leaves open is one stack; an empty stack means the root rule is
// complete. Feeding a unit keeps the stacks whose top matches it and expands what follows each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace llm::grammar {

using Stack = std::vector<uint32_t>;  // positions in Grammar::elems, top at back()
using Stacks = std::vector<Stack>;

// Bounds on the work one step may take. A grammar whose alternatives multiply as they nest (a
// repetition of something that may be empty, repeated again: ("c"*)+ nested forty deep) opens 2^depth
// stacks; llama.cpp expands them all and hangs. Past these bounds the matcher throws UNSUPPORTED
// instead. Real grammars stay far below: the largest state in the gbnf and schema vectors holds 66
// stacks, the costliest step expands 330.
constexpr size_t kMaxStacks = 4096;        // stacks open at once (one state)
constexpr size_t kMaxExpansions = 1 << 15;  // stacks expanded for one unit fed (or one reset)

// Adds `n` expansions to *expanded; throws Error(UNSUPPORTED) past kMaxExpansions.
void charge_expansions(size_t *expanded, size_t n);

// Collects stacks into a Stacks without duplicates; throws Error(UNSUPPORTED) past kMaxStacks.
// Sets are tens of stacks, so a linear search is the fast path; an ordered index takes over past
// that, so a large set (near the bound) costs log n per stack, not n.
class StackSink {
public:
    explicit StackSink(Stacks &out) : out_(out) {}
    void add(const Stack &st);

private:
    static constexpr size_t kLinear = 64;
    Stacks &out_;
    std::set<Stack> index_;
};

class Matcher {
public:
    explicit Matcher(std::shared_ptr<const Grammar> g);

    // Back to the start of the root rule.
    void reset();
    // Every call that expands stacks (reset, accept, step, advance_past) throws Error(UNSUPPORTED) when
    // it would pass kMaxStacks or kMaxExpansions; the matcher's state is then unchanged, except that
    // a reset that throws leaves it empty (not alive).

    // Feeds one unit: a token, given by its id and its text's code points. A stack whose top is a token
    // (<[N]>, !<[N]>) matches the id and consumes the whole unit; the others match the code points one
    // by one (a unit with none matches nothing there). Returns false and changes nothing if no stack
    // accepts the unit.
    bool accept(int32_t token, const uint32_t *cps, size_t n);
    // A code point alone, as a unit of token id 0 (llama.cpp's tests feed text that way).
    bool accept_char(uint32_t cp) { return accept(0, &cp, 1); }
    // Every code point of the UTF-8 text in turn, as accept_char. False at the first byte that is not
    // valid UTF-8 or the first code point no stack accepts; the matcher then holds the state after the
    // code points before it. "Is text a sentence": reset(), then accept_text(text) && can_end().
    bool accept_text(std::string_view text);

    // The stacks after feeding a unit to `from` (empty: rejected); the matcher's state is untouched.
    void step(const Stacks &from, int32_t token, const uint32_t *cps, size_t n, Stacks &out) const;
    // Whether some stack's top is a class that admits a code point in [lo, hi] (the code points a
    // partial UTF-8 sequence may still become), or `.`.
    bool may_accept_range(const Stacks &st, uint32_t lo, uint32_t hi) const;
    // Whether a stack's top could take cp as the next code point (a cheap first filter).
    bool may_start_with(const Stacks &st, uint32_t cp) const;

    // Does the class / `.` at pos admit cp; *next: the position after the class
    // (the same whatever cp is).
    bool match_char(uint32_t pos, uint32_t cp, uint32_t *next) const;
    // After matching the terminal on top of st (which ends at next): pop it, continue at next,
    // adding the resulting stacks to out; *expanded counts expansions against kMaxExpansions (one
    // count per unit fed, as step() keeps).
    void advance_past(const Stack &st, uint32_t next, StackSink &out, size_t *expanded) const;

    const Stacks &stacks() const { return stacks_; }
    void set_stacks(Stacks st) { stacks_ = std::move(st); }
    // The input so far is a prefix of the language (some continuation is still possible).
    bool alive() const { return !stacks_.empty(); }
    // The input so far is a whole sentence of the language.
    bool can_end() const;
    const Grammar &grammar() const { return *g_; }

private:
    // Expands rule references on top of `st` until every resulting stack has a terminal on top (or
    // is empty), adding the new ones to out; *expanded counts the stacks expanded for the unit.
    void expand(const Stack &st, StackSink &out, size_t *expanded) const;

    std::shared_ptr<const Grammar> g_;
    Stacks stacks_;
};

}  // namespace llm::grammar
