#include "grammar/matcher.h"

#include "core/error.h"
#include "core/utf8.h"

#include <algorithm>
#include <set>

namespace llm::grammar {

static_assert(kMaxStacks == 4096 && kMaxExpansions == 32768, "llm_session_set_grammar (llm.h) states these bounds");

namespace {

[[noreturn]] void too_many(const char *what, size_t limit) {
    fail(LLM_ERR_UNSUPPORTED,
         "grammar: more than {} {} (alternatives that multiply as they nest, such as a repetition of "
         "something that may be empty, repeated again); write the grammar with fewer ambiguous repetitions",
         limit, what);
}

}  // namespace

void charge_expansions(size_t *expanded, size_t n) {
    *expanded += n;
    if (*expanded > kMaxExpansions) too_many("stacks expanded for one token", kMaxExpansions);
}

void StackSink::add(const Stack &st) {
    if (out_.size() < kLinear) {
        if (std::find(out_.begin(), out_.end(), st) != out_.end()) return;
    } else {
        if (index_.empty()) index_.insert(out_.begin(), out_.end());
        if (!index_.insert(st).second) return;
        if (out_.size() >= kMaxStacks) too_many("grammar stacks open at once", kMaxStacks);
    }
    out_.push_back(st);
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) { reset(); }

void Matcher::reset() {
    stacks_.clear();
    Stacks fresh;
    StackSink sink(fresh);
    size_t expanded = 0;
    // The root rule's alternatives, as if a reference to it were being expanded.
    const std::vector<Element> &e = g_->elems;
    uint32_t alt = g_->rule_start[g_->root];
    for (;;) {
        Stack st;
        if (!ends_sequence(e[alt].op)) st.push_back(alt);
        expand(st, sink, &expanded);
        while (!ends_sequence(e[alt].op)) ++alt;
        if (e[alt].op == Op::End) break;
        ++alt;
    }
    stacks_.swap(fresh);
}

bool Matcher::can_end() const {
    return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack &s) { return s.empty(); });
}

void Matcher::expand(const Stack &start, StackSink &out, size_t *expanded) const {
    const std::vector<Element> &e = g_->elems;
    std::vector<Stack> todo{start};
    std::set<Stack> seen;  // one stack reached along two paths is expanded once
    while (!todo.empty()) {
        Stack st = std::move(todo.back());
        todo.pop_back();
        if (!seen.insert(st).second) continue;
        if (st.empty() || is_terminal(e[st.back()].op)) {
            out.add(st);
            continue;
        }
        charge_expansions(expanded, 1);
        // A rule reference: one stack per alternative of the rule, each with the rest of the current
        // sequence below it.
        const uint32_t pos = st.back();
        uint32_t alt = g_->rule_start[e[pos].value];
        for (;;) {
            Stack next(st.begin(), st.end() - 1);
            if (!ends_sequence(e[pos + 1].op)) next.push_back(pos + 1);
            if (!ends_sequence(e[alt].op)) next.push_back(alt);
            todo.push_back(std::move(next));
            while (!ends_sequence(e[alt].op)) ++alt;
            if (e[alt].op == Op::End) break;
            ++alt;
        }
    }
}

bool Matcher::match_char(uint32_t pos, uint32_t cp, uint32_t *next) const {
    const std::vector<Element> &e = g_->elems;
    if (e[pos].op == Op::CharAny) {
        *next = pos + 1;
        return true;
    }
    const bool positive = e[pos].op == Op::Char;
    bool found = false;
    do {
        if (e[pos + 1].op == Op::CharUpper) {
            found = found || (e[pos].value <= cp && cp <= e[pos + 1].value);
            pos += 2;
        } else {
            found = found || e[pos].value == cp;
            pos += 1;
        }
    } while (e[pos].op == Op::CharAlt);
    *next = pos;
    return found == positive;
}

void Matcher::advance_past(const Stack &st, uint32_t next, StackSink &out, size_t *expanded) const {
    Stack rest(st.begin(), st.end() - 1);
    if (!ends_sequence(g_->elems[next].op)) rest.push_back(next);
    expand(rest, out, expanded);
}

void Matcher::step(const Stacks &from, int32_t token, const uint32_t *cps, size_t n, Stacks &out) const {
    const std::vector<Element> &e = g_->elems;
    out.clear();
    StackSink out_sink(out);
    size_t expanded = 0;  // over the whole unit: a long token must not multiply the bound
    Stacks text, next_text;
    for (const Stack &st : from) {
        if (st.empty()) continue;
        const Element &top = e[st.back()];
        if (top.op == Op::Token || top.op == Op::TokenNot) {
            const bool same = top.value == static_cast<uint32_t>(token);
            if (same == (top.op == Op::Token)) advance_past(st, st.back() + 1, out_sink, &expanded);
        } else if (n > 0) {
            text.push_back(st);
        }
    }
    for (size_t i = 0; i < n && !text.empty(); ++i) {
        next_text.clear();
        StackSink next_sink(next_text);
        for (const Stack &st : text) {
            if (st.empty()) continue;  // the root rule is complete: no more text
            uint32_t after = 0;
            const Op op = e[st.back()].op;
            if (op == Op::Token || op == Op::TokenNot) continue;  // a token cannot match part of a text
            if (match_char(st.back(), cps[i], &after)) advance_past(st, after, next_sink, &expanded);
        }
        text.swap(next_text);
    }
    for (const Stack &st : text) out_sink.add(st);
}

bool Matcher::accept(int32_t token, const uint32_t *cps, size_t n) {
    Stacks out;
    step(stacks_, token, cps, n, out);
    if (out.empty()) return false;
    stacks_.swap(out);
    return true;
}

bool Matcher::may_start_with(const Stacks &st, uint32_t cp) const {
    uint32_t after = 0;
    for (const Stack &s : st) {
        if (s.empty()) continue;
        const Op op = g_->elems[s.back()].op;
        if (op == Op::Token || op == Op::TokenNot) continue;
        if (match_char(s.back(), cp, &after)) return true;
    }
    return false;
}

bool Matcher::may_accept_range(const Stacks &st, uint32_t lo, uint32_t hi) const {
    const std::vector<Element> &e = g_->elems;
    for (const Stack &s : st) {
        if (s.empty()) continue;
        uint32_t pos = s.back();
        const Op op = e[pos].op;
        if (op == Op::CharAny) return true;
        if (op != Op::Char && op != Op::CharNot) continue;
        // A positive class admits some cp in [lo, hi] if one of its items overlaps the range; a
        // negated one unless its items cover the whole range (checked item by item: conservative,
        // it says yes when only several items together cover it).
        const bool positive = op == Op::Char;
        bool overlap = false, covers = false;
        do {
            uint32_t a = e[pos].value, b = a;
            if (e[pos + 1].op == Op::CharUpper) {
                b = e[pos + 1].value;
                pos += 2;
            } else {
                pos += 1;
            }
            overlap = overlap || (a <= hi && lo <= b);
            covers = covers || (a <= lo && hi <= b);
        } while (e[pos].op == Op::CharAlt);
        if (positive ? overlap : !covers) return true;
    }
    return false;
}

bool Matcher::accept_text(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        uint32_t cp = 0;
        size_t len = 0;
        if (!utf8::decode_at(text, i, &cp, &len) || !accept_char(cp)) return false;
        i += len;
    }
    return true;
}

}  // namespace llm::grammar
