// The checks a parsed grammar must pass before a matcher may walk it: every referenced rule is defined,
// and no left recursion (also through rules that can match the empty string) that would make the
// matcher's expansion loop forever.
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "grammar/grammar.h"

namespace llm::grammar {
namespace {

// Rules that can match the empty string: a fixpoint over "some alternative's elements all nullable".
std::vector<bool> nullable_rules(const std::vector<std::vector<Element>> &rules) {
    std::vector<bool> nullable(rules.size(), false);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < rules.size(); ++r) {
            if (nullable[r]) continue;
            bool all = true;  // every element of the current alternative so far can be empty
            for (const Element &e : rules[r]) {
                if (ends_sequence(e.op)) {
                    if (all) {
                        nullable[r] = changed = true;
                        break;
                    }
                    all = true;
                } else if (e.op != Op::RuleRef || !nullable[e.value]) {
                    // classes, tokens and references to non-nullable rules consume input (CharAlt and
                    // CharUpper continue a class that already did)
                    all = false;
                }
            }
        }
    }
    return nullable;
}

// The rules each rule may start with: references at the start of an alternative or after only
// nullable references. `grows`: something of the alternative follows the reference, so expanding it
// leaves a continuation on the matcher's stack.
struct Lead {
    uint32_t to;
    bool grows;
};
std::vector<std::vector<Lead>> leading_refs(const std::vector<std::vector<Element>> &rules,
                                            const std::vector<bool> &nullable) {
    std::vector<std::vector<Lead>> lead(rules.size());
    for (size_t r = 0; r < rules.size(); ++r) {
        const std::vector<Element> &e = rules[r];
        bool at_start = true;
        for (size_t i = 0; i < e.size(); ++i) {
            if (ends_sequence(e[i].op)) {
                at_start = true;
            } else if (at_start && e[i].op == Op::RuleRef) {
                lead[r].push_back({e[i].value, !ends_sequence(e[i + 1].op)});
                at_start = nullable[e[i].value];
            } else {
                at_start = false;
            }
        }
    }
    return lead;
}

// Strongly connected components of the "may start with" graph (Tarjan's algorithm, iterative).
std::vector<uint32_t> components(const std::vector<std::vector<Lead>> &lead) {
    const uint32_t n = static_cast<uint32_t>(lead.size()), none = UINT32_MAX;
    std::vector<uint32_t> index(n, none), low(n, 0), comp(n, none), stack;
    std::vector<bool> on_stack(n, false);
    uint32_t next_index = 0, next_comp = 0;
    struct Frame {
        uint32_t v;
        size_t edge;
    };
    for (uint32_t s = 0; s < n; ++s) {
        if (index[s] != none) continue;
        std::vector<Frame> call{{s, 0}};
        index[s] = low[s] = next_index++;
        stack.push_back(s);
        on_stack[s] = true;
        while (!call.empty()) {
            const uint32_t v = call.back().v;
            if (call.back().edge < lead[v].size()) {
                const uint32_t w = lead[v][call.back().edge++].to;
                if (index[w] == none) {
                    index[w] = low[w] = next_index++;
                    stack.push_back(w);
                    on_stack[w] = true;
                    call.push_back({w, 0});
                } else if (on_stack[w]) {
                    low[v] = std::min(low[v], index[w]);
                }
                continue;
            }
            if (low[v] == index[v]) {
                uint32_t w;
                do {
                    w = stack.back();
                    stack.pop_back();
                    on_stack[w] = false;
                    comp[w] = next_comp;
                } while (w != v);
                ++next_comp;
            }
            call.pop_back();
            if (!call.empty()) low[call.back().v] = std::min(low[call.back().v], low[v]);
        }
    }
    return comp;
}

// A path from `from` to `to` inside one component, for the message.
std::vector<uint32_t> path_within(const std::vector<std::vector<Lead>> &lead, const std::vector<uint32_t> &comp,
                                  uint32_t from, uint32_t to) {
    std::vector<uint32_t> parent(lead.size(), UINT32_MAX);
    std::vector<uint32_t> queue{from};
    parent[from] = from;
    for (size_t q = 0; q < queue.size() && parent[to] == UINT32_MAX; ++q) {
        for (const Lead &l : lead[queue[q]]) {
            if (comp[l.to] != comp[from] || parent[l.to] != UINT32_MAX) continue;
            parent[l.to] = queue[q];
            queue.push_back(l.to);
        }
    }
    std::vector<uint32_t> path{to};
    while (path.back() != from) path.push_back(parent[path.back()]);
    return {path.rbegin(), path.rend()};
}

}  // namespace

// Left recursion: a rule that can reach itself through leading references. The matcher expands
// references until a terminal is on top, remembering the stacks it has seen; a cycle whose references
// all end their alternatives gives the same stack again and stops (llama.cpp's `( [x]* )*`), but a
// cycle through a reference with something after it pushes that each time round and never ends.
// So a rule is refused when such a reference lies on a cycle: in one strongly connected component.
void check_rules(const std::vector<std::vector<Element>> &rules, const std::vector<std::string> &names) {
    const std::vector<bool> nullable = nullable_rules(rules);
    const std::vector<std::vector<Lead>> lead = leading_refs(rules, nullable);
    const std::vector<uint32_t> comp = components(lead);
    for (uint32_t r = 0; r < rules.size(); ++r) {
        for (const Lead &l : lead[r]) {
            if (!l.grows || comp[l.to] != comp[r]) continue;
            std::string cycle = names[r];
            for (uint32_t p : path_within(lead, comp, l.to, r)) cycle += " -> " + names[p];
            fail(LLM_ERR_INVALID_ARGUMENT,
                 "GBNF: left recursion is not supported: rule '{}' can reach itself before matching any input ({})",
                 names[r], cycle);
        }
    }
}

}  // namespace llm::grammar
