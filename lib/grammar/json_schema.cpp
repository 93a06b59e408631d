#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/regex_gbnf.h"

namespace llm::grammar {
namespace {

// ordered_json: object members keep the schema's order, which the object grammar follows.
using json = nlohmann::ordered_json;

// The building blocks, as GBNF rules added on first use. Numbers have no digit limit (big numbers
// are valid JSON); an integer may carry a zero fraction (1.0 is an integer in JSON Schema).
const std::map<std::string, std::string> &primitives() {
    static const std::map<std::string, std::string> p = {
        {"space", R"(| " " | "\n"{1,2} [ \t]{0,20})"},
        {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
        {"string", R"("\"" char* "\"" space)"},
        {"integral-part", R"("0" | [1-9] [0-9]*)"},
        {"number", R"("-"? integral-part ("." [0-9]+)? ([eE] [-+]? [0-9]+)? space)"},
        {"integer", R"("-"? integral-part ("." "0"+)? space)"},
        {"boolean", R"(("true" | "false") space)"},
        {"null", R"("null" space)"},
        {"value", R"(object | array | string | number | boolean | null)"},
        {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)"},
        {"array", R"("[" space ( value ("," space value)* )? "]" space)"},
        {"hex", R"([0-9a-fA-F])"},
        {"uuid", R"("\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\"" space)"},
        // RFC 3339 full-date, with February 29 only in leap years (Gregorian: divisible by 4, and
        // centuries only when divisible by 400).
        {"d28", R"("0" [1-9] | "1" [0-9] | "2" [0-8])"},
        {"month-day", R"(("01" | "03" | "05" | "07" | "08" | "10" | "12") "-" (d28 | "29" | "30" | "31") | ("04" | "06" | "09" | "11") "-" (d28 | "29" | "30") | "02-" d28)"},
        {"leap-year", R"([0-9] [0-9] ([02468] [48] | [13579] [26] | [2468] "0") | ([02468] [048] | [13579] [26]) "00")"},
        {"full-date", R"([0-9]{4} "-" month-day | leap-year "-02-29")"},
        // RFC 3339 full-time; a leap second only where it is 23:59:60 UTC written in UTC (others are
        // rejected although some are valid: the offset arithmetic is not worth a grammar).
        {"hour", R"([01] [0-9] | "2" [0-3])"},
        {"minute", R"([0-5] [0-9])"},
        {"fraction", R"(("." [0-9]+)?)"},
        {"full-time", R"(hour ":" minute ":" minute fraction time-offset | "23:59:60" fraction ([Zz] | [+-] "00:00"))"},
        {"time-offset", R"([Zz] | [+-] hour ":" minute)"},
        {"date", R"("\"" full-date "\"" space)"},
        {"time", R"("\"" full-time "\"" space)"},
        {"date-time", R"("\"" full-date [Tt] full-time "\"" space)"},
    };
    return p;
}

// Which primitives a primitive uses, so only the needed ones are emitted.
const std::map<std::string, std::vector<std::string>> &primitive_deps() {
    static const std::map<std::string, std::vector<std::string>> d = {
        {"char", {}},
        {"string", {"char", "space"}},
        {"number", {"integral-part", "space"}},
        {"integer", {"integral-part", "space"}},
        {"boolean", {"space"}},
        {"null", {"space"}},
        {"value", {"object", "array", "string", "number", "boolean", "null"}},
        {"object", {"space", "string", "value"}},
        {"array", {"space", "value"}},
        {"uuid", {"hex", "space"}},
        {"month-day", {"d28"}},
        {"full-date", {"month-day", "leap-year"}},
        {"full-time", {"hour", "minute", "fraction", "time-offset"}},
        {"time-offset", {"hour", "minute"}},
        {"date", {"full-date", "space"}},
        {"time", {"full-time", "space"}},
        {"date-time", {"full-date", "full-time", "space"}},
    };
    return d;
}

const std::set<std::string> kAnnotations = {"$schema", "$comment", "title", "description", "default", "examples",
                                            "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
const std::set<std::string> kSupported = {"type", "enum", "const", "properties", "required", "additionalProperties",
                                          "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern",
                                          "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength",
                                          "format", "anyOf", "oneOf", "allOf", "$ref"};

// A GBNF string literal for raw text.
std::string literal(const std::string &text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02X}", c);
                else out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

// A GBNF class item for one code point written as UTF-8 bytes in `ch`.
std::string class_char(const std::string &ch) {
    if (ch == "]" || ch == "[" || ch == "\\" || ch == "\"" || ch == "^" || ch == "-") return "\\" + (ch == "^" || ch == "-" ? fmt::format("x{:02X}", ch[0]) : ch);
    return ch;
}

class Converter {
public:
    explicit Converter(const json &root) : root_(root) {}

    std::string convert() {
        const std::string body = visit(root_, "root");
        std::string out = "root ::= " + body + "\n";
        for (const auto &[name, rule] : rules_) out += name + " ::= " + rule + "\n";
        std::set<std::string> done;
        std::vector<std::string> todo(used_.begin(), used_.end());
        while (!todo.empty()) {
            const std::string p = todo.back();
            todo.pop_back();
            if (!done.insert(p).second) continue;
            out += p + " ::= " + primitives().at(p) + "\n";
            const auto it = primitive_deps().find(p);
            if (it != primitive_deps().end()) todo.insert(todo.end(), it->second.begin(), it->second.end());
        }
        return out;
    }

private:
    [[noreturn]] static void refuse(const std::string &why) {
        fail(LLM_ERR_UNSUPPORTED, "JSON schema: {}", why);
    }
    std::string use(const std::string &primitive) {
        used_.insert(primitive);
        return primitive;
    }
    std::string add_rule(const std::string &hint, const std::string &body) {
        std::string name;
        for (char c : hint) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
        if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) name = "r-" + name;
        name = fmt::format("{}-{}", name.substr(0, 40), ++counter_);
        rules_[name] = body;
        return name;
    }

    // The expression for a schema.
    std::string visit(const json &s, const std::string &hint) {
        if (s.is_boolean()) {
            if (!s.get<bool>()) refuse("the schema false (nothing is valid) has no grammar");
            return use("value");
        }
        if (!s.is_object()) refuse("a schema must be an object or a boolean");
        for (const auto &[k, v] : s.items()) {
            if (!kAnnotations.count(k) && !kSupported.count(k)) refuse(fmt::format("keyword '{}' is not supported", k));
        }
        if (s.contains("$schema") && s["$schema"] != "https://json-schema.org/draft/2020-12/schema")
            refuse("only the draft 2020-12 metaschema is supported");
        const auto only = [&](const char *key) {
            for (const auto &[k, v] : s.items())
                if (k != key && !kAnnotations.count(k)) return false;
            return true;
        };
        if (s.contains("$ref")) {
            if (!only("$ref")) refuse("'$ref' beside other keywords is not supported");
            return ref(s["$ref"].get<std::string>());
        }
        if (s.contains("allOf")) return visit(merge_all_of(s), hint);
        for (const char *key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            if (s.contains("anyOf") && s.contains("oneOf")) refuse("'anyOf' beside 'oneOf' is not supported");
            // Keywords beside it hold for every alternative: each becomes base + alternative (allOf).
            json base = s;
            base.erase(key);
            const bool alone = only(key);
            std::string alts;
            size_t i = 0;
            for (const json &sub : s[key]) {
                json both = base;
                both["allOf"] = json::array({sub});
                const json one = alone ? sub : merge_all_of(both);
                alts += (alts.empty() ? "" : " | ") + visit(one, hint + "-" + std::to_string(i++));
            }
            if (alts.empty()) refuse(fmt::format("'{}' is empty", key));
            return add_rule(hint, alts);
        }
        if (s.contains("const")) {
            if (!only("const")) refuse("'const' beside other keywords is not supported");
            return add_rule(hint, value_literal(s["const"]));
        }
        if (s.contains("enum")) {
            if (!only("enum")) refuse("'enum' beside other keywords is not supported");
            std::string alts;
            for (const json &v : s["enum"]) alts += (alts.empty() ? "" : " | ") + value_literal(v);
            if (alts.empty()) refuse("'enum' is empty");
            return add_rule(hint, alts);
        }
        std::vector<std::string> types;
        if (s.contains("type")) {
            if (s["type"].is_string()) types.push_back(s["type"]);
            else for (const json &t : s["type"]) types.push_back(t.get<std::string>());
        } else {
            // No type: every type is valid, each with the keywords that apply to it.
            types = {"object", "array", "string", "number", "boolean", "null"};
        }
        std::string alts;
        for (const std::string &t : types) alts += (alts.empty() ? "" : " | ") + typed(s, t, hint + "-" + t);
        return add_rule(hint, alts);
    }

    std::string typed(const json &s, const std::string &type, const std::string &hint) {
        if (type == "object") return object(s, hint);
        if (type == "array") return array(s, hint);
        if (type == "string") return string(s, hint);
        if (type == "number" || type == "integer") {
            if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                s.contains("exclusiveMaximum"))
                return bounded_integer(s, hint);
            return use(type);
        }
        if (type == "boolean") return use("boolean");
        if (type == "null") return use("null");
        refuse(fmt::format("unknown type '{}'", type));
    }

    // An integer in [lo, hi] (bounds from minimum / maximum / exclusive*, which must be integers). A
    // "number" with bounds gets the same grammar: narrower (no fractions but .0, no exponents).
    // A length or item count (0 if absent): a non-negative integer the grammar's repetition can hold.
    static uint64_t count(const json &s, const char *key) {
        if (!s.contains(key)) return 0;
        const json &v = s[key];
        const bool whole = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ||
                           (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>()));
        if (!whole) fail(LLM_ERR_INVALID_ARGUMENT, "JSON schema: '{}' must be a non-negative integer", key);
        const double n = v.get<double>();
        if (n > 1000) refuse(fmt::format("'{}' above 1000 is not supported", key));
        return static_cast<uint64_t>(n);
    }

    std::string bounded_integer(const json &s, const std::string &hint) {
        long long lo = LLONG_MIN, hi = LLONG_MAX;
        // Bounds are kept to |b| <= 1e18 so that the exclusive forms' +-1 and the negations below
        // cannot overflow.
        constexpr long long kMaxBound = 1000000000000000000LL;
        const auto bound = [&](const char *key) -> long long {
            const json &b = s[key];
            if (b.is_number_unsigned()) {
                if (b.get<uint64_t>() <= static_cast<uint64_t>(kMaxBound)) return b.get<long long>();
            } else if (b.is_number_integer()) {
                const long long v = b.get<long long>();
                if (v >= -kMaxBound && v <= kMaxBound) return v;
            } else if (b.is_number_float()) {
                // Magnitude first: casting a double outside long long's range is undefined.
                const double d = b.get<double>();
                if (std::abs(d) < 1e15 && d == std::floor(d)) return static_cast<long long>(d);
            }
            refuse(fmt::format("'{}' must be an integer of at most 18 digits here (other bounds are not supported)", key));
        };
        if (s.contains("minimum")) lo = std::max(lo, bound("minimum"));
        if (s.contains("exclusiveMinimum")) lo = std::max(lo, bound("exclusiveMinimum") + 1);
        if (s.contains("maximum")) hi = std::min(hi, bound("maximum"));
        if (s.contains("exclusiveMaximum")) hi = std::min(hi, bound("exclusiveMaximum") - 1);
        if (lo > hi) refuse("the bounds leave no integer");
        std::string alts;
        if (hi >= 0) alts = magnitudes(std::max(lo, 0LL), hi == LLONG_MAX ? -1 : hi);
        if (lo < 0) {
            // -m for m in [max(1, -hi), -lo]
            const long long mlo = hi >= 0 ? 1 : -hi;
            const std::string neg = "\"-\" (" + magnitudes(mlo, lo == LLONG_MIN ? -1 : -lo) + ")";
            alts += (alts.empty() ? "" : " | ") + neg;
        }
        use("space");
        return add_rule(hint, "(" + alts + ") (\".\" \"0\"+)? space");
    }

    // Decimal numerals without leading zeros for [lo, hi] (lo >= 0; hi -1: no upper bound).
    static std::string magnitudes(long long lo, long long hi) {
        const std::string a = std::to_string(lo);
        std::string alts;
        const auto add = [&](const std::string &x) { alts += (alts.empty() ? "" : " | ") + x; };
        const size_t top = hi < 0 ? a.size() : std::to_string(hi).size();
        for (size_t len = a.size(); len <= top; ++len) {
            std::string first = a;  // the least numeral of this length in range
            if (len != a.size()) {
                first.assign(len, '0');
                first[0] = '1';
            }
            const std::string last = hi >= 0 && len == top ? std::to_string(hi) : std::string(len, '9');
            add(same_length(first, last));
        }
        if (hi < 0) add(fmt::format("[1-9] [0-9]{{{},}}", a.size()));
        return alts;
    }

    // Numerals of a's length from a to b (a <= b, same length), digit by digit.
    static std::string same_length(const std::string &a, const std::string &b) {
        if (a == b) return "\"" + a + "\"";
        const size_t n = a.size();
        if (a[0] == b[0]) return "\"" + a.substr(0, 1) + "\" (" + same_length(a.substr(1), b.substr(1)) + ")";
        if (n == 1) return fmt::format("[{}-{}]", a[0], b[0]);
        std::string alts = "\"" + a.substr(0, 1) + "\" (" + same_length(a.substr(1), std::string(n - 1, '9')) + ")";
        if (a[0] + 1 <= b[0] - 1) alts += fmt::format(" | [{}-{}] [0-9]{{{}}}", static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1), n - 1);
        alts += " | \"" + b.substr(0, 1) + "\" (" + same_length(std::string(n - 1, '0'), b.substr(1)) + ")";
        return alts;
    }

    std::string string(const json &s, const std::string &hint) {
        if (s.contains("pattern")) {
            if (s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
                refuse("'pattern' with format or a length bound is not supported");
            const std::string char_rule = use("char");
            use("space");
            return add_rule(hint, regex_to_gbnf(s["pattern"].get<std::string>(), char_rule) + " space");
        }
        if (s.contains("format")) {
            const std::string f = s["format"];
            if (s.contains("minLength") || s.contains("maxLength")) refuse("'format' with a length bound is not supported");
            if (f == "uuid" || f == "date" || f == "time" || f == "date-time") return use(f);
            refuse(fmt::format("format '{}' is not supported", f));
        }
        if (!s.contains("minLength") && !s.contains("maxLength")) return use("string");
        const uint64_t lo = count(s, "minLength");
        use("char");
        use("space");
        if (s.contains("maxLength")) {
            const uint64_t hi = count(s, "maxLength");
            if (hi < lo) refuse("maxLength below minLength: nothing is valid");
            return add_rule(hint, fmt::format("\"\\\"\" char{{{},{}}} \"\\\"\" space", lo, hi));
        }
        return add_rule(hint, fmt::format("\"\\\"\" char{{{},}} \"\\\"\" space", lo));
    }

    std::string array(const json &s, const std::string &hint) {
        const uint64_t lo = count(s, "minItems");
        const bool bounded = s.contains("maxItems");
        const uint64_t hi = bounded ? count(s, "maxItems") : 0;
        if (bounded && hi < lo) refuse("maxItems below minItems: no array is valid");
        std::string item = use("value");
        bool more = true;  // items after the prefix allowed
        if (s.contains("items")) {
            if (s["items"].is_array()) refuse("'items' as an array (use prefixItems in 2020-12) is not supported");
            if (s["items"].is_boolean() && !s["items"].get<bool>()) more = false;
            else item = visit(s["items"], hint + "-item");
        }
        use("space");
        if (s.contains("prefixItems")) {
            if (s.contains("minItems") || s.contains("maxItems")) refuse("'prefixItems' with minItems/maxItems is not supported");
            const json &pre = s["prefixItems"];
            // [ p1 ( , p2 ( ... ( , item)* )? )? ]: fewer items than the prefix are valid too.
            std::string tail = more ? "(\",\" space " + item + ")*" : "";
            for (size_t i = pre.size(); i-- > 0;) {
                const std::string p = visit(pre[i], hint + "-prefix" + std::to_string(i));
                tail = i == 0 ? p + " " + tail : "(\",\" space " + p + " " + tail + ")?";
            }
            return add_rule(hint, "\"[\" space (" + tail + ")? \"]\" space");
        }
        if (!more) {
            if (lo > 0) refuse("items false with minItems: no array is valid");
            return add_rule(hint, "\"[\" space \"]\" space");
        }
        std::string rest = "(\",\" space " + item + ")";
        const uint64_t rlo = lo > 0 ? lo - 1 : 0;
        if (bounded) {
            if (hi == 0) return add_rule(hint, "\"[\" space \"]\" space");
            rest += fmt::format("{{{},{}}}", rlo, hi - 1);
        } else {
            rest += fmt::format("{{{},}}", rlo);
        }
        const std::string list = item + " " + rest;
        return add_rule(hint, "\"[\" space " + (lo > 0 ? list : "(" + list + ")?") + " \"]\" space");
    }

    // Declared members in any order when there are at most kAnyOrder of them, else in declared
    // order; additional members after the declared ones, with names that are none of the declared
    // ones (a declared member after an additional one is rejected: narrower, never wider).
    static constexpr size_t kAnyOrder = 3;
    std::string object(const json &s, const std::string &hint) {
        std::vector<std::pair<std::string, std::string>> members;  // (name, key-value expression)
        std::set<std::string> names, required;
        if (s.contains("required"))
            for (const json &r : s["required"]) required.insert(r.get<std::string>());
        use("space");
        if (s.contains("properties")) {
            for (const auto &[name, sub] : s["properties"].items()) {
                const std::string v = visit(sub, hint + "-" + name);
                names.insert(name);
                members.emplace_back(name, value_literal(json(name)) + " \":\" space " + v);
            }
        }
        for (const std::string r : s.value("required", json::array())) {
            if (names.count(r)) continue;  // required without a schema: any value, in the list's order
            names.insert(r);
            members.emplace_back(r, value_literal(json(r)) + " \":\" space " + use("value"));
        }
        std::string extra;  // one additional key-value, or empty when none are allowed
        const json addl = s.value("additionalProperties", json(true));
        // A declared name with a quote, backslash or control character has escaped spellings the
        // name trie does not follow: such an object gets no additional members (narrower, never wider).
        const bool plain_names = std::all_of(names.begin(), names.end(), [](const std::string &nm) {
            return std::none_of(nm.begin(), nm.end(), [](char c) {
                return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
            });
        });
        if (plain_names && !(addl.is_boolean() && !addl.get<bool>())) {
            const std::string v = addl.is_boolean() ? use("value") : visit(addl, hint + "-additional");
            extra = other_key(names, hint) + " \":\" space " + v;
        }
        // For one order of the members: first[i], members from i on with none written yet; next[i],
        // from i on after some member. Up to kAnyOrder members may come in any order (one chain per
        // permutation); more follow the declared order.
        const size_t n = members.size();
        const std::string after_all = extra.empty() ? "\"\"" : add_rule(hint + "-more", "(\",\" space " + extra + ")*");
        const std::string only_extra =
            extra.empty() ? "\"\"" : add_rule(hint + "-extra", "(" + extra + " (\",\" space " + extra + ")*)?");
        std::vector<size_t> order(n);
        for (size_t i = 0; i < n; ++i) order[i] = i;
        std::string orders;
        do {
            std::vector<std::string> first(n + 1), next(n + 1);
            first[n] = only_extra;
            next[n] = after_all;
            for (size_t i = n; i-- > 0;) {
                const std::string &kv = members[order[i]].second;
                const bool req = required.count(members[order[i]].first) > 0;
                next[i] = add_rule(hint + "-next", req ? "\",\" space " + kv + " " + next[i + 1]
                                                       : "(\",\" space " + kv + ")? " + next[i + 1]);
                first[i] = add_rule(hint + "-first", req ? kv + " " + next[i + 1]
                                                         : kv + " " + next[i + 1] + " | " + first[i + 1]);
            }
            orders += (orders.empty() ? "" : " | ") + first[0];
        } while (n <= kAnyOrder && std::next_permutation(order.begin(), order.end()));
        return add_rule(hint, "\"{\" space (" + orders + ") \"}\" space");
    }

    // A JSON string (with its quotes) that is none of `names`: a walk down the names' trie, leaving
    // it at the first character no name continues with, or ending where no name ends.
    std::string other_key(const std::set<std::string> &names, const std::string &hint) {
        use("char");
        use("space");
        if (names.empty()) return use("string");
        struct Node {
            std::map<std::string, Node> kids;  // next code point (as UTF-8) -> subtree
            bool end = false;
        };
        Node root;
        for (const std::string &nm : names) {
            Node *at = &root;
            for (size_t i = 0; i < nm.size();) {
                size_t len = 1;
                const unsigned char c = static_cast<unsigned char>(nm[i]);
                len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
                at = &at->kids[nm.substr(i, len)];
                i += len;
            }
            at->end = true;
        }
        std::function<std::string(const Node &)> walk = [&](const Node &node) -> std::string {
            std::string excluded, alts;
            for (const auto &[ch, kid] : node.kids) {
                excluded += class_char(ch);
                alts += (alts.empty() ? "" : " | ") + literal(ch) + " " + add_rule(hint + "-key", walk(kid));
            }
            // Leave the trie: any other character (or any escape), then anything.
            alts += (alts.empty() ? "" : " | ") + std::string("([^\"\\\\\\x7F\\x00-\\x1F") + excluded +
                    "] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) char*";
            if (!node.end) alts += " | \"\"";
            return alts;
        };
        return add_rule(hint + "-other-key", "\"\\\"\" (" + walk(root) + ") \"\\\"\" space");
    }

    // A value exactly (objects: members in any order when there are few).
    std::string value_literal(const json &v) {
        use("space");
        if (v.is_null()) return "\"null\" space";
        if (v.is_boolean()) return v.get<bool>() ? "\"true\" space" : "\"false\" space";
        if (v.is_number_integer() || v.is_number_unsigned()) return literal(v.dump()) + " (\".\" \"0\"+)? space";
        if (v.is_number_float()) {
            const double d = v.get<double>();
            // Magnitude first: casting a double outside long long's range is undefined.
            if (std::abs(d) < 1e15 && d == std::trunc(d))
                return literal(std::to_string(static_cast<long long>(d))) + " (\".\" \"0\"+)? space";
            return literal(v.dump()) + " space";  // this spelling only: narrower, never wrong
        }
        if (v.is_string()) return literal(v.dump(-1, ' ', false)) + " space";
        if (v.is_array()) {
            std::string out = "\"[\" space";
            for (size_t i = 0; i < v.size(); ++i) out += (i ? " \",\" space " : " ") + value_literal(v[i]);
            return "(" + out + " \"]\" space)";
        }
        std::vector<std::string> keys;
        for (const auto &[k, x] : v.items()) keys.push_back(k);
        if (keys.empty()) return "(\"{\" space \"}\" space)";
        if (keys.size() > 4) refuse("const/enum objects with more than 4 members are not supported");
        std::string alts;
        std::sort(keys.begin(), keys.end());
        do {
            std::string one = "\"{\" space";
            for (size_t i = 0; i < keys.size(); ++i)
                one += (i ? " \",\" space " : " ") + value_literal(json(keys[i])) + " \":\" space " + value_literal(v[keys[i]]);
            alts += (alts.empty() ? "" : " | ") + one + " \"}\" space";
        } while (std::next_permutation(keys.begin(), keys.end()));
        return "(" + alts + ")";
    }

    std::string ref(const std::string &r) {
        if (r.empty() || r[0] != '#') refuse(fmt::format("$ref '{}' to another document is not supported", r));
        if (r == "#") return "root";
        const auto it = refs_.find(r);
        if (it != refs_.end()) return it->second;
        if (r.size() < 2 || r[1] != '/') refuse(fmt::format("$ref '{}' (anchors) is not supported", r));
        const json *at = &root_;
        std::string token;
        const std::string path = r.substr(2) + "/";
        for (size_t i = 0; i < path.size(); ++i) {
            if (path[i] != '/') {
                token += path[i];
                continue;
            }
            std::string key;
            for (size_t k = 0; k < token.size(); ++k) {
                if (token[k] == '~' && k + 1 < token.size()) {
                    key += token[k + 1] == '1' ? '/' : '~';
                    ++k;
                } else if (token[k] == '%' && k + 2 < token.size()) {
                    // A URI fragment's %XX; anything else after '%' is not a pointer we can follow.
                    auto hex = [&](char ch) {
                        if (ch >= '0' && ch <= '9') return ch - '0';
                        if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
                        if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
                        refuse(fmt::format("$ref '{}': bad percent-encoding", r));
                        return 0;
                    };
                    key += static_cast<char>(hex(token[k + 1]) * 16 + hex(token[k + 2]));
                    k += 2;
                } else {
                    key += token[k];
                }
            }
            token.clear();
            if (at->is_object() && at->contains(key)) at = &(*at)[key];
            else if (at->is_array() && !key.empty() && key.size() <= 9 &&
                     std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
                     std::stoul(key) < at->size())
                at = &(*at)[std::stoul(key)];
            else refuse(fmt::format("$ref '{}' points at nothing", r));
        }
        // Named before it is visited, so a schema that refers to itself becomes a recursive rule.
        const std::string name = add_rule("ref-" + r.substr(2), "\"\"");
        refs_[r] = name;
        rules_[name] = visit(*at, "ref-" + r.substr(2));
        return name;
    }

    // allOf: the schema and its subschemas merged, where that is exact (no keyword twice but
    // properties and required, which combine; the same type).
    json merge_all_of(const json &s) {
        json merged = json::object();
        std::vector<json> parts;
        json base = s;
        base.erase("allOf");
        parts.push_back(base);
        for (const json &sub : s["allOf"]) {
            if (!sub.is_object()) refuse("'allOf' with a boolean subschema is not supported");
            parts.push_back(sub);
        }
        bool has_items = false, has_prefix = false;
        for (const json &p : parts) {
            // additionalProperties counts only its own part's properties, items only the items after
            // its own part's prefixItems: merging would change what they cover.
            if (p.contains("additionalProperties")) refuse("'allOf' with additionalProperties is not supported");
            if ((p.contains("items") && has_prefix && !p.contains("prefixItems")) ||
                (p.contains("prefixItems") && has_items && !p.contains("items")))
                refuse("'allOf' with items and prefixItems in different subschemas is not supported");
            has_items = has_items || p.contains("items");
            has_prefix = has_prefix || p.contains("prefixItems");
            for (const auto &[k, v] : p.items()) {
                if (kAnnotations.count(k)) continue;
                if (!merged.contains(k)) {
                    merged[k] = v;
                } else if (k == "properties") {
                    for (const auto &[name, sub] : v.items()) {
                        if (merged[k].contains(name) && merged[k][name] != sub)
                            refuse(fmt::format("'allOf' declaring property '{}' twice is not supported", name));
                        merged[k][name] = sub;
                    }
                } else if (k == "required") {
                    for (const json &r : v) merged[k].push_back(r);
                } else if (merged[k] != v) {
                    refuse(fmt::format("'allOf' with '{}' in more than one subschema is not supported", k));
                }
            }
        }
        if (merged.contains("allOf")) refuse("nested 'allOf' is not supported");
        return merged;
    }

    const json &root_;
    std::map<std::string, std::string> rules_;
    std::map<std::string, std::string> refs_;
    std::set<std::string> used_;
    int counter_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_text) {
    json schema;
    try {
        schema = json::parse(schema_text);
    } catch (const std::exception &e) {
        fail(LLM_ERR_INVALID_ARGUMENT, "JSON schema: not JSON: {}", e.what());
    }
    try {
        return Converter(schema).convert();
    } catch (const json::exception &e) {
        // A keyword of the wrong JSON type ("required": 3, "minLength": "x").
        fail(LLM_ERR_INVALID_ARGUMENT, "JSON schema: a keyword has a value of the wrong type: {}", e.what());
    }
}

}  // namespace llm::grammar
