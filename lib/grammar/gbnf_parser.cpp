// The GBNF parser: text -> rules of elements (grammar.h). Recursive descent over
//   grammar     := space (rule)*
//   rule        := name space-on-line "::=" space alternates (newline | end) space
//   alternates  := sequence ("|" space sequence)*
//   sequence    := (item repetition*)*
//   item        := "literal" | [class] | [^class] | . | name | ( alternates ) | <[N]> | !<[N]>
//   repetition  := * | + | ? | {m} | {m,} | {m,n}
// Whitespace and # comments may cross line breaks only inside parentheses and after "::=" or "|"
// (a line break otherwise ends the rule), as in llama.cpp.
#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/utf8.h"
#include "grammar/grammar.h"

namespace llm::grammar {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || is_digit(c); }

class Parser {
public:
    explicit Parser(std::string_view src) : s_(src) {}

    Grammar parse(std::string_view root_name) {
        pos_ = skip_space(0, true);
        while (pos_ < s_.size()) parse_rule();
        if (defined_.empty()) fail(LLM_ERR_INVALID_ARGUMENT, "the grammar defines no rule");
        // The first undefined rule is reported, with the place of its first use (worked out only for
        // it: where() scans the text, so once per rule would cost a grammar of many rules its size squared).
        for (size_t r = 0; r < rules_.size(); ++r)
            if (rules_[r].empty())
                fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: rule '{}' is used but not defined", where(used_at_[r]),
                     names_[r]);
        check_rules(rules_, names_);
        const auto it = ids_.find(std::string(root_name));
        if (it == ids_.end() || !defined_.count(it->second))
            fail(LLM_ERR_INVALID_ARGUMENT, "the grammar has no rule named '{}' (the start rule)", root_name);
        Grammar g;
        g.root = it->second;
        g.rule_names = names_;
        for (const std::vector<Element> &r : rules_) {
            g.rule_start.push_back(static_cast<uint32_t>(g.elems.size()));
            g.elems.insert(g.elems.end(), r.begin(), r.end());
        }
        return g;
    }

private:
    char at(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
    bool at_end(size_t i) const { return i >= s_.size(); }

    std::string where(size_t i) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < i && k < s_.size(); ++k) {
            if (s_[k] == '\n') {
                ++line;
                col = 1;
            } else if ((static_cast<unsigned char>(s_[k]) & 0xC0) != 0x80) {
                ++col;  // columns count characters, not bytes
            }
        }
        return fmt::format("line {}, column {}", line, col);
    }
    std::string found(size_t i) const {
        if (at_end(i)) return "the end of the grammar";
        const char c = s_[i];
        if (c == '\n' || c == '\r') return "a line break";
        size_t n = 0;
        while (i + n < s_.size() && n < 12 && s_[i + n] != '\n' && s_[i + n] != '\r') ++n;
        return fmt::format("'{}'", s_.substr(i, n));
    }
    [[noreturn]] void expected(size_t i, std::string_view what) const {
        fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: expected {}, found {}", where(i), what, found(i));
    }

    size_t skip_space(size_t i, bool newlines) const {
        while (!at_end(i)) {
            const char c = s_[i];
            if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
                ++i;
            } else if (c == '#') {
                while (!at_end(i) && s_[i] != '\n' && s_[i] != '\r') ++i;
            } else {
                break;
            }
        }
        return i;
    }

    uint32_t symbol(std::string_view name, size_t used_at) {
        auto [it, added] = ids_.emplace(std::string(name), static_cast<uint32_t>(names_.size()));
        if (added) {
            names_.emplace_back(name);
            rules_.emplace_back();
            used_at_.push_back(used_at);
        }
        return it->second;
    }
    uint32_t generated_symbol(const std::string &base) {
        const uint32_t id = static_cast<uint32_t>(names_.size());
        std::string name = fmt::format("{}_{}", base, id);
        ids_.emplace(name, id);
        names_.push_back(std::move(name));
        rules_.emplace_back();
        used_at_.push_back(0);  // defined here, never reported
        defined_.insert(id);
        return id;
    }

    void parse_rule() {
        const size_t start = pos_;
        size_t i = pos_;
        while (is_name_char(at(i))) ++i;
        if (i == start) expected(start, "a rule name (letters, digits, '-')");
        const std::string name(s_.substr(start, i - start));
        const uint32_t id = symbol(name, start);
        if (defined_.count(id)) fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: rule '{}' is defined twice", where(start), name);
        i = skip_space(i, false);
        if (s_.substr(i, 3) != "::=") expected(i, fmt::format("'::=' after the rule name '{}'", name));
        pos_ = skip_space(i + 3, true);
        defined_.insert(id);
        rules_[id] = parse_alternates(name, false);
        if (at(pos_) == '\r') {
            pos_ += at(pos_ + 1) == '\n' ? 2 : 1;
        } else if (at(pos_) == '\n') {
            ++pos_;
        } else if (!at_end(pos_)) {
            expected(pos_, fmt::format("a line break or the end of the grammar after rule '{}'", name));
        }
        pos_ = skip_space(pos_, true);
    }

    std::vector<Element> parse_alternates(const std::string &rule_name, bool nested) {
        std::vector<Element> out;
        parse_sequence(rule_name, nested, out);
        while (at(pos_) == '|') {
            out.push_back({Op::Alt, 0});
            pos_ = skip_space(pos_ + 1, true);
            parse_sequence(rule_name, nested, out);
        }
        out.push_back({Op::End, 0});
        return out;
    }

    // One character of a literal or class: UTF-8 or an escape.
    uint32_t parse_char() {
        if (at_end(pos_)) expected(pos_, "a character");
        if (s_[pos_] == '\\') {
            const char e = at(pos_ + 1);
            switch (e) {
                case 'x': return parse_hex(2);
                case 'u': return parse_hex(4);
                case 'U': return parse_hex(8);
                case 't': pos_ += 2; return '\t';
                case 'r': pos_ += 2; return '\r';
                case 'n': pos_ += 2; return '\n';
                case '\\': case '"': case '[': case ']': pos_ += 2; return static_cast<unsigned char>(e);
                default:
                    fail(LLM_ERR_INVALID_ARGUMENT,
                         "GBNF {}: unknown escape {}; the escapes are \\x \\u \\U \\t \\n \\r \\\\ \\\" \\[ \\]",
                         where(pos_), found(pos_));
            }
        }
        uint32_t cp = 0;
        size_t len = 0;
        if (!utf8::decode_at(s_, pos_, &cp, &len)) expected(pos_, "well-formed UTF-8");
        pos_ += len;
        return cp;
    }
    uint32_t parse_hex(int digits) {
        const size_t start = pos_ + 2;
        uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
            const char c = at(start + k);
            int d;
            if (c >= '0' && c <= '9') d = c - '0';
            else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            else expected(start + k, fmt::format("{} hex digits after \\{}", digits, s_[pos_ + 1]));
            v = v * 16 + static_cast<uint32_t>(d);
        }
        pos_ = start + digits;
        return v;
    }

    uint64_t parse_int() {
        const size_t start = pos_;
        uint64_t v = 0;
        while (is_digit(at(pos_))) {
            v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(at(pos_) - '0'), uint64_t{1} << 40);
            ++pos_;
        }
        if (pos_ == start) expected(start, "a number");
        return v;
    }

    // <[N]> (N a token id). Tokens by text (<think>) need a vocabulary, which a grammar parsed here has not.
    uint32_t parse_token() {
        const size_t start = pos_;
        if (at(pos_) != '<') expected(pos_, "'<' of a token <[N]>");
        if (at(pos_ + 1) != '[')
            fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: tokens are written by id, <[N]>; token text such as {} is not supported",
                 where(start), found(start));
        pos_ += 2;
        const uint64_t id = parse_int();
        if (id > 0x7FFFFFFF) fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: token id {} is out of range", where(start), id);
        if (at(pos_) != ']') expected(pos_, "']' closing the token id");
        if (at(pos_ + 1) != '>') expected(pos_ + 1, "'>' closing the token");
        pos_ += 2;
        return static_cast<uint32_t>(id);
    }

    // Rewrites the item rule[item..] as item{min,max} (max UINT64_MAX: unbounded):
    //   min copies inline, then for an upper bound (max-min) nested optional rules
    //   R1 ::= item | ; Rk ::= item R(k-1) | ; and for none one recursive rule R ::= item R | .
    // weight: rules the item carries (a group's generated rules), which each copy duplicates.
    void repeat(std::vector<Element> &rule, size_t item, uint64_t &weight, uint64_t min, uint64_t max,
                const std::string &rule_name, size_t at_pos) {
        if (item == rule.size()) expected(at_pos, "an item before the repetition operator");
        const bool unbounded = max == UINT64_MAX;
        const uint64_t copies = !unbounded && max > 0 ? max : std::max<uint64_t>(min, 1);
        if (weight * copies >= kMaxRepetition) {
            fail(LLM_ERR_INVALID_ARGUMENT,
                 "GBNF {}: this repetition would expand into {} or more rules (limit {}); repeat fewer times or "
                 "a simpler item",
                 where(at_pos), weight * copies, kMaxRepetition);
        }
        const std::vector<Element> body(rule.begin() + static_cast<std::ptrdiff_t>(item), rule.end());
        if (min == 0) {
            rule.resize(item);
        } else {
            for (uint64_t k = 1; k < min; ++k) rule.insert(rule.end(), body.begin(), body.end());
        }
        const uint64_t optional = unbounded ? 1 : max - min;
        uint32_t prev = 0;
        for (uint64_t k = 0; k < optional; ++k) {
            const uint32_t id = generated_symbol(rule_name);
            std::vector<Element> r = body;
            if (unbounded) r.push_back({Op::RuleRef, id});
            else if (k > 0) r.push_back({Op::RuleRef, prev});
            r.push_back({Op::Alt, 0});
            r.push_back({Op::End, 0});
            rules_[id] = std::move(r);
            prev = id;
        }
        if (optional > 0) rule.push_back({Op::RuleRef, prev});
        weight *= copies;
    }

    void parse_sequence(const std::string &rule_name, bool nested, std::vector<Element> &rule) {
        size_t item = rule.size();  // where the last item starts; == size: none to repeat
        uint64_t weight = 1;
        while (!at_end(pos_)) {
            const char c = s_[pos_];
            if (c == '"') {
                ++pos_;
                item = rule.size();
                weight = 1;
                while (at(pos_) != '"') {
                    if (at_end(pos_)) expected(pos_, "'\"' closing the string");
                    rule.push_back({Op::Char, parse_char()});
                }
                pos_ = skip_space(pos_ + 1, nested);
            } else if (c == '[') {
                ++pos_;
                Op first = Op::Char;
                if (at(pos_) == '^') {
                    first = Op::CharNot;
                    ++pos_;
                }
                item = rule.size();
                weight = 1;
                while (at(pos_) != ']') {
                    if (at_end(pos_)) expected(pos_, "']' closing the character class");
                    const uint32_t lo = parse_char();
                    rule.push_back({rule.size() > item ? Op::CharAlt : first, lo});
                    if (at(pos_) == '-' && at(pos_ + 1) != ']') {
                        ++pos_;
                        if (at_end(pos_)) expected(pos_, "the upper end of the range");
                        rule.push_back({Op::CharUpper, parse_char()});
                    }
                }
                if (rule.size() == item) expected(pos_, "a character in the class (an empty class matches nothing)");
                pos_ = skip_space(pos_ + 1, nested);
            } else if (c == '<' || c == '!') {
                Op op = Op::Token;
                if (c == '!') {
                    op = Op::TokenNot;
                    ++pos_;
                }
                item = rule.size();
                weight = 1;
                rule.push_back({op, parse_token()});
                pos_ = skip_space(pos_, nested);
            } else if (is_name_char(c)) {
                const size_t start = pos_;
                while (is_name_char(at(pos_))) ++pos_;
                item = rule.size();
                weight = 1;
                rule.push_back({Op::RuleRef, symbol(s_.substr(start, pos_ - start), start)});
                pos_ = skip_space(pos_, nested);
            } else if (c == '(') {
                const size_t open = pos_;
                pos_ = skip_space(pos_ + 1, true);
                const size_t before = names_.size();
                const uint32_t id = generated_symbol(rule_name);
                rules_[id] = parse_alternates(rule_name, true);
                weight = std::max<uint64_t>(1, names_.size() - before);
                item = rule.size();
                rule.push_back({Op::RuleRef, id});
                if (at(pos_) != ')') {
                    expected(pos_, fmt::format("')' closing the group opened at {}", where(open)));
                }
                pos_ = skip_space(pos_ + 1, nested);
            } else if (c == '.') {
                item = rule.size();
                weight = 1;
                rule.push_back({Op::CharAny, 0});
                pos_ = skip_space(pos_ + 1, nested);
            } else if (c == '*' || c == '+' || c == '?') {
                const size_t op_at = pos_;
                pos_ = skip_space(pos_ + 1, nested);
                const uint64_t min = c == '+' ? 1 : 0;
                const uint64_t max = c == '?' ? 1 : UINT64_MAX;
                repeat(rule, item, weight, min, max, rule_name, op_at);
            } else if (c == '{') {
                const size_t op_at = pos_;
                pos_ = skip_space(pos_ + 1, nested);
                if (!is_digit(at(pos_))) expected(pos_, "a number (the least count) after '{'");
                const uint64_t min = parse_int();
                pos_ = skip_space(pos_, nested);
                uint64_t max = UINT64_MAX;
                if (at(pos_) == '}') {
                    max = min;
                    pos_ = skip_space(pos_ + 1, nested);
                } else if (at(pos_) == ',') {
                    pos_ = skip_space(pos_ + 1, nested);
                    if (is_digit(at(pos_))) {
                        max = parse_int();
                        pos_ = skip_space(pos_, nested);
                    }
                    if (at(pos_) != '}') expected(pos_, "'}' closing the repetition");
                    pos_ = skip_space(pos_ + 1, nested);
                } else {
                    expected(pos_, "',' or '}' in the repetition");
                }
                if (min > kMaxRepetition) {
                    fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: repetition count {} exceeds the limit {}", where(op_at), min,
                         kMaxRepetition);
                }
                if (max != UINT64_MAX && max < min) {
                    fail(LLM_ERR_INVALID_ARGUMENT, "GBNF {}: repetition {{{},{}}} has its upper bound below its lower",
                         where(op_at), min, max);
                }
                if (max != UINT64_MAX && max > kMaxRepetition) max = UINT64_MAX;
                repeat(rule, item, weight, min, max, rule_name, op_at);
            } else {
                break;
            }
        }
    }

    std::string_view s_;
    size_t pos_ = 0;
    std::map<std::string, uint32_t> ids_;
    std::vector<std::string> names_;
    std::vector<std::vector<Element>> rules_;  // empty: referenced, not (yet) defined
    std::vector<size_t> used_at_;  // offset of each rule's first reference
    std::set<uint32_t> defined_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) { return Parser(text).parse(root); }

}  // namespace llm::grammar
