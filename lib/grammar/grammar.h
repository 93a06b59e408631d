// GBNF grammars (llama.cpp's grammars/README.md): rules of alternatives of sequences over string
// literals, character classes, `.`, rule references, groups and the repetitions * + ? {m,n}, plus
// token ids <[N]> and !<[N]>. A parsed grammar is a flat array of elements that the matcher
// (grammar/matcher.h) walks with stacks of positions; repetitions and groups are already rewritten into
// generated rules, so the matcher sees only references, terminals and alternatives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llm::grammar {

enum class Op : uint8_t {
    End,        // end of a rule (after its last alternative)
    Alt,        // the next alternative of the same rule starts after this
    RuleRef,    // value: rule id
    Char,       // value: a code point; first item of a class, which CharAlt / CharUpper continue
    CharNot,    // as Char, for a negated class [^...]
    CharAlt,    // value: another code point (or range start) of the class opened before
    CharUpper,  // value: the inclusive upper end of a range whose lower end is the element before
    CharAny,    // `.`: any code point
    Token,      // value: a token id, <[N]>
    TokenNot,   // value: a token id, !<[N]>: any token but N
};

struct Element {
    Op op = Op::End;
    uint32_t value = 0;
};

struct Grammar {
    std::vector<Element> elems;            // every rule's alternatives, each rule closed by End
    std::vector<uint32_t> rule_start;      // rule id -> index of its first element in elems
    std::vector<std::string> rule_names;   // rule id -> name (generated rules: <base>_<n>)
    uint32_t root = 0;                     // the start rule
};

// Limits as llama.cpp's: a repetition count above this is refused, and so is a repetition whose
// expansion (generated rules times copies) reaches it; an upper bound above it means "no bound".
constexpr uint64_t kMaxRepetition = 2000;

// Parses GBNF text and checks it (every referenced rule defined, `root` defined, no left recursion,
// also through rules that can match the empty string). Throws Error(LLM_ERR_INVALID_ARGUMENT) whose
// message says where (line and column, 1-based) and what was expected.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

// Checks of a grammar the parser built, every rule defined (the parser refuses an undefined one with
// the place it is used): no left recursion (grammar/check.cpp). Throws as parse_gbnf does.
void check_rules(const std::vector<std::vector<Element>> &rules, const std::vector<std::string> &names);

// True if the element is a terminal the matcher stops at (a class, `.`, or a token).
inline bool is_terminal(Op op) {
    return op == Op::Char || op == Op::CharNot || op == Op::CharAny || op == Op::Token || op == Op::TokenNot;
}
inline bool ends_sequence(Op op) { return op == Op::End || op == Op::Alt; }

}  // namespace llm::grammar
