// Grammars shared by the grammar tests that exercise the matcher's bounds (grammar/matcher.h).
#pragma once

#include <cstddef>
#include <string>

namespace test {

// ("c"*)+ nested `depth` deep: 2^depth stacks open at the start. Forty is far past kMaxStacks;
// four is an ordinary (if ambiguous) grammar.
inline std::string nested_repetition(int depth) {
    return "root ::= \"c\"*" + std::string(static_cast<size_t>(depth), '+') + "\n";
}

// `rule` names a chain rule0 -> rule1 -> ... -> rule<links-1> ::= terminal: reaching the terminal
// costs `links` expansions on one stack (no stacks multiply).
inline std::string reference_chain(const std::string &rule, int links, const std::string &terminal) {
    std::string out;
    for (int i = 0; i + 1 < links; ++i) out += rule + std::to_string(i) + " ::= " + rule + std::to_string(i + 1) + "\n";
    out += rule + std::to_string(links - 1) + " ::= " + terminal + "\n";
    return out;
}

}  // namespace test
