// Jinja2's builtin filters (jinja2/filters.py) as HF's environment has them, each following Jinja 3.1's
// definition including its quirks: case-insensitive sort, unique, min and max; indent skipping blank
// lines; int() falling back through float(); lazy filters returning one-pass generators. One function per
// filter (or family), found by name in kFilters at the bottom.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/text.h"
#include "llm.h"

namespace llm::jinja {
namespace {

bool is_int_like(const Value &v) { return v.kind() == Kind::Int || v.kind() == Kind::Bool; }

// soft_str(): str() that keeps a Markup a Markup.
Value soft_str(Evaluator &ev, const Value &v) {
    if (v.is_string()) return v;
    return ev.make_str(ev.str(v));
}

}  // namespace

int64_t want_int(const Value &v, const char *what) {
    if (!is_int_like(v))
        fail_runtime(std::string("TypeError: ") + what + " must be an integer, not '" + type_name(v) + "'");
    return v.get_int();
}

namespace {

// Python's int(str, base): optional sign, underscores between digits, surrounding whitespace.
bool parse_int(const std::string &s0, int base, int64_t *out) {
    std::string s = text::strip(s0, std::nullopt, true, true);
    if (s.empty()) return false;
    bool neg = false;
    size_t i = 0;
    if (s[0] == '+' || s[0] == '-') neg = s[0] == '-', i = 1;
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (s.size() > i + 1 && s[i] == '0') {
            const char p = static_cast<char>(s[i + 1] | 0x20);
            const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
            if (pb && (base == 0 || base == pb)) {
                base = pb;
                i += 2;
                if (i < s.size() && s[i] == '_') i++;
            }
        }
        if (base == 0) base = 10;
    }
    std::string digits;
    bool prev_us = true;
    for (; i < s.size(); i++) {
        if (s[i] == '_') {
            if (prev_us) return false;
            prev_us = true;
            continue;
        }
        const char c = static_cast<char>(s[i] | 0x20);
        const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
        if (d >= base) return false;
        digits += s[i];
        prev_us = false;
    }
    if (digits.empty() || prev_us) return false;
    errno = 0;
    const long long v = std::strtoll(digits.c_str(), nullptr, base);
    if (errno == ERANGE) fail_unsupported("an integer beyond 64 bits");
    *out = neg ? -v : v;
    return true;
}

// Python's float(str).
bool parse_float(const std::string &s0, double *out) {
    std::string s = text::strip(s0, std::nullopt, true, true);
    std::string clean;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '_') {
            if (i == 0 || i + 1 == s.size() || !isdigit(static_cast<unsigned char>(s[i - 1])) ||
                !isdigit(static_cast<unsigned char>(s[i + 1])))
                return false;
            continue;
        }
        clean += s[i];
    }
    if (clean.empty()) return false;
    std::string low = text::lower(clean);
    const std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
    if (body == "inf" || body == "infinity" || body == "nan") {
        const double x = body == "nan" ? NAN : INFINITY;
        *out = low[0] == '-' ? -x : x;
        return true;
    }
    for (char c : body)
        if (!(isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) return false;
    char *end = nullptr;
    *out = std::strtod(clean.c_str(), &end);
    return end && *end == '\0';
}

Value to_list(Evaluator &ev, const Value &v) { return Value::list(ev.iterate(v)); }

// Jinja's make_attrgetter: "a.b.0" walks items (then attributes), digits as integer keys.
Value attr_path(Evaluator &ev, const Value &item, const Value &attribute, const Value *dflt) {
    Value cur = item;
    std::vector<Value> parts;
    if (attribute.is_string()) {
        for (auto &p : text::split(attribute.str(), std::string("."), -1)) {
            int64_t n;
            bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (digits && parse_int(p, 10, &n)) {
                parts.push_back(Value::integer(n));
            } else {
                parts.push_back(Value::string(p));
            }
        }
    } else {
        parts.push_back(attribute);
    }
    for (const auto &p : parts) {
        cur = ev.getitem(cur, p);
        if (dflt && !dflt->is_none() && cur.is_undefined()) cur = *dflt;
    }
    return cur;
}

// Jinja's ignore_case: strings compare lower-cased unless case_sensitive.
Value sort_key(const Value &v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value::string(text::lower(v.str()));
    return v;
}

std::vector<Value> sorted(Evaluator &ev, std::vector<Value> items, const std::vector<Value> &keys, bool reverse) {
    std::vector<size_t> idx(items.size());
    for (size_t i = 0; i < idx.size(); i++) idx[i] = i;
    ev.budget.charge(items.size() * 8);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
        // Python's reverse=True keeps equal items in their original order too.
        return reverse ? less(keys[b], keys[a], ev.budget) : less(keys[a], keys[b], ev.budget);
    });
    std::vector<Value> out;
    out.reserve(items.size());
    for (size_t i : idx) out.push_back(items[i]);
    return out;
}

// select / reject / selectattr / rejectattr: args after the value are [attr,] [test, test args...].
Value select_like(Evaluator &ev, const Value &seq, Args &args, bool with_attr, bool keep_if) {
    size_t next = 0;
    Value attribute;
    if (with_attr) {
        if (args.pos.empty()) fail_runtime("TypeError: missing attribute argument");
        attribute = args.pos[next++];
    }
    std::string test;
    Args test_args;
    if (next < args.pos.size()) {
        if (!args.pos[next].is_string()) fail_runtime("TypeError: test name must be a string");
        test = args.pos[next++].str();
        test_args.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(next), args.pos.end());
        test_args.kw = args.kw;
    } else if (!args.kw.empty()) {
        fail_unsupported("keyword arguments to select/reject without a test");
    }
    std::vector<Value> out;
    if (!truthy(seq)) return Value::view({}, Value::View::Generator);  // Jinja checks `if value:` before iterating
    for (const auto &item : ev.iterate(seq)) {
        ev.budget.charge(1);
        const Value v = with_attr ? attr_path(ev, item, attribute, nullptr) : item;
        Args a = test_args;
        const bool ok = test.empty() ? truthy(v) : apply_test(ev, test, v, a);
        if (ok == keep_if) out.push_back(item);
    }
    return Value::view(std::move(out), Value::View::Generator);
}

Value json_filter(Evaluator &ev, const std::string &, const Value &v, Args &args) {
    // HF: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    const Bound b = bind(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
    JsonStyle st;
    st.ensure_ascii = b.has(0) && truthy(b[0]);
    st.sort_keys = b.has(3) && truthy(b[3]);
    if (b.has(1) && !b[1].is_none()) {
        st.pretty = true;
        if (b[1].is_string()) {
            st.indent = b[1].str();
        } else if (is_int_like(b[1])) {
            const int64_t n = std::max<int64_t>(0, b[1].get_int());
            ev.budget.string_bytes(static_cast<uint64_t>(n));
            st.indent = std::string(static_cast<size_t>(n), ' ');
        } else {
            fail_runtime("TypeError: indent must be an int or a string");
        }
        st.item_sep = ",";
    }
    if (b.has(2) && !b[2].is_none()) {
        const Value &sep = b[2];
        if (!sep.is_list() || sep.items().size() != 2 || !sep.items()[0].is_string() || !sep.items()[1].is_string())
            fail_runtime("ValueError: separators must be a (item_separator, key_separator) pair of strings");
        st.item_sep = sep.items()[0].str();
        st.key_sep = sep.items()[1].str();
    }
    return ev.make_str(to_json(v, st, ev.budget));
}

Value indent_filter(Evaluator &ev, const std::string &, const Value &v, Args &args) {
    const Bound b = bind(args, {"width", "first", "blank"}, "indent");
    std::string ind = "    ";
    if (b.has(0) && b[0].is_string()) {
        ind = b[0].str();
    } else if (b.has(0)) {
        const int64_t n = std::max<int64_t>(0, want_int(b[0], "width"));
        ev.budget.string_bytes(static_cast<uint64_t>(n));
        ind = std::string(static_cast<size_t>(n), ' ');
    }
    const bool first = b.has(1) && truthy(b[1]);
    const bool blank = b.has(2) && truthy(b[2]);
    // Jinja does `s += "\n"` then s.splitlines(): anything but a string fails there.
    if (v.is_undefined()) ev.undefined_error(v);
    if (!v.is_string()) fail_runtime("TypeError: indent needs a string, not '" + type_name(v) + "'");
    const Value &s = v;
    const auto lines = text::splitlines(s.str() + "\n", false);
    std::string out;
    for (size_t i = 0; i < lines.size(); i++) {
        if (i) {
            out += '\n';
            if (blank || !lines[i].empty()) out += ind;
        }
        out += lines[i];
        ev.budget.string_bytes(out.size());
    }
    if (first) out = ind + out;
    return ev.make_str(std::move(out), s.is_markup());
}

Value minmax(Evaluator &ev, const Value &v, Args &args, bool want_max) {
    const Bound b = bind(args, {"case_sensitive", "attribute"}, want_max ? "max" : "min");
    const bool cs = b.has(0) && truthy(b[0]);
    const auto items = ev.iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    Value best_key;
    for (size_t i = 0; i < items.size(); i++) {
        const Value k = sort_key(b.has(1) && !b[1].is_none() ? attr_path(ev, items[i], b[1], nullptr) : items[i], cs);
        if (i == 0 || (want_max ? less(best_key, k, ev.budget) : less(k, best_key, ev.budget))) {
            best = i;
            best_key = k;
        }
    }
    return items[best];
}

Value round_filter(Evaluator &, const std::string &, const Value &v, Args &args) {
    const Bound b = bind(args, {"precision", "method"}, "round");
    const int64_t prec = b.has(0) ? want_int(b[0], "precision") : 0;
    const std::string method = b.has(1) ? b[1].str() : "common";
    if (!v.is_number()) fail_runtime("TypeError: type " + type_name(v) + " doesn't define __round__ method");
    const double x = v.get_float();
    if (prec < 0 || prec > 15) fail_unsupported("round() with precision " + std::to_string(prec));
    const double scale = std::pow(10.0, static_cast<double>(prec));
    if (method == "floor") return Value::number(std::floor(x * scale) / scale);
    if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
    if (method != "common") fail_runtime("FilterArgumentError: method must be common, ceil or floor");
    if (is_int_like(v)) return Value::integer(v.get_int());  // Python's round(int, n) stays an int
    if (!std::isfinite(x)) return Value::number(x);
    // Python rounds the exact binary value half-to-even, as printf's %.Nf does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);
    return Value::number(std::strtod(buf, nullptr));
}

Value dictsort(Evaluator &ev, const std::string &, const Value &v, Args &args) {
    const Bound b = bind(args, {"case_sensitive", "by", "reverse"}, "dictsort");
    if (!v.is_dict()) fail_runtime("FilterArgumentError: dictsort needs a mapping");
    const bool cs = b.has(0) && truthy(b[0]);
    const std::string by = b.has(1) ? b[1].str() : "key";
    if (by != "key" && by != "value")
        fail_runtime("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    const bool rev = b.has(2) && truthy(b[2]);
    std::vector<Value> items, keys;
    for (const auto &[k, val] : v.dict().entries) {
        items.push_back(Value::list({k, val}, true));
        keys.push_back(sort_key(by == "key" ? k : val, cs));
    }
    return Value::list(sorted(ev, std::move(items), keys, rev));
}

Value filter_safe(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, "safe");
    return ev.make_str(v.is_string() ? v.str() : ev.str(v), true);
}

Value filter_string(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, "string");
    return soft_str(ev, v);
}

Value filter_trim(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"chars"}, "trim");
    const Value s = soft_str(ev, v);
    std::optional<std::string> chars;
    if (b.has(0) && !b[0].is_none()) chars = ev.str(b[0]);
    return ev.make_str(text::strip(s.str(), chars, true, true), s.is_markup());
}

Value filter_length(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, name.c_str());
    switch (v.kind()) {
    case Kind::Undefined: return Value::integer(0);
    case Kind::String: return Value::integer(static_cast<int64_t>(text::length(v.str())));
    case Kind::List:
        if (v.is_lazy()) fail_runtime("TypeError: object of type '" + type_name(v) + "' has no len()");
        return Value::integer(static_cast<int64_t>(v.items().size()));
    case Kind::Dict: return Value::integer(static_cast<int64_t>(v.dict().entries.size()));
    case Kind::Object:
        if (v.object().type == "LoopContext") return Value::integer(v.object().loop_length);
        [[fallthrough]];
    default: fail_runtime("TypeError: object of type '" + type_name(v) + "' has no len()");
    }
}

Value filter_default(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"default_value", "boolean"}, "default");
    const bool boolean = b.has(1) && truthy(b[1]);
    if (v.is_undefined() || (boolean && !truthy(v))) return b.has(0) ? b[0] : Value::string("");
    return v;
}

Value filter_upper_lower(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, name.c_str());
    const Value s = soft_str(ev, v);
    return ev.make_str(name == "upper" ? text::upper(s.str()) : text::lower(s.str()), s.is_markup());
}

Value filter_capitalize_title(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, name.c_str());
    const Value s = soft_str(ev, v);
    return ev.make_str(name == "title" ? text::title_words(s.str()) : text::capitalize(s.str()), s.is_markup());
}

Value filter_items(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, "items");
    if (v.is_undefined()) return Value::view({}, Value::View::Generator);
    if (!v.is_dict()) fail_runtime("TypeError: Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto &[k, val] : v.dict().entries) out.push_back(Value::list({k, val}, true));
    return Value::view(std::move(out), Value::View::Generator);
}

Value filter_list(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, "list");
    return to_list(ev, v);
}

Value filter_join(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"d", "attribute"}, "join");
    const std::string sep = b.has(0) ? ev.str(b[0]) : "";
    std::string out;
    bool first = true;
    for (const auto &item : ev.iterate(v)) {
        const Value x = b.has(1) && !b[1].is_none() ? attr_path(ev, item, b[1], nullptr) : item;
        if (!first) out += sep;
        first = false;
        out += x.is_string() ? x.str() : ev.str(x);
        ev.budget.string_bytes(out.size());
    }
    return ev.make_str(std::move(out));
}

Value filter_first_last(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, name.c_str());
    if (v.is_undefined())
        return Value::undefined(name == "first" ? "No first item, sequence was empty."
                                                : "No last item, sequence was empty.");
    if (v.kind() == Kind::Object || (name == "last" && v.is_lazy()))
        fail_runtime("TypeError: '" + type_name(v) + "' object is not reversible");
    if (name == "first" && v.is_lazy()) {  // next(): takes one item from the iterator
        auto &live = static_cast<ListData &>(*v.heap()).items;
        if (live.empty()) return Value::undefined("No first item, sequence was empty.");
        Value head = live.front();
        live.erase(live.begin());
        return head;
    }
    const auto items = ev.iterate(v);
    if (items.empty())
        return Value::undefined(name == "first" ? "No first item, sequence was empty."
                                                : "No last item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
}

Value filter_replace(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"old", "new", "count"}, "replace");
    if (!b.has(0) || !b.has(1)) fail_runtime("TypeError: replace() missing required arguments");
    const int64_t count = b.has(2) && !b[2].is_none() ? want_int(b[2], "count") : -1;
    const std::string s = ev.str(v);
    const std::string o = ev.str(b[0]), n = ev.str(b[1]);
    if (!o.empty() && !s.empty())
        ev.budget.string_bytes(s.size() / o.size() * n.size() + s.size());
    else
        ev.budget.string_bytes((text::length(s) + 1) * n.size() + s.size());
    return ev.make_str(text::replace(s, o, n, count));
}

Value filter_int(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"default", "base"}, "int");
    const Value dflt = b.has(0) ? b[0] : Value::integer(0);
    const int64_t base = b.has(1) ? want_int(b[1], "base") : 10;
    if (v.is_undefined()) ev.undefined_error(v);
    if (is_int_like(v)) return Value::integer(v.get_int());
    if (v.kind() == Kind::Float) {
        const double d = v.get_float();
        if (std::isnan(d)) return dflt;
        if (std::isinf(d) || std::fabs(d) >= 9.2e18) fail_unsupported("int() of a huge float");
        return Value::integer(static_cast<int64_t>(d));
    }
    if (v.is_string()) {
        int64_t n;
        if (base != 0 && (base < 2 || base > 36)) fail_runtime("ValueError: int() base must be >= 2 and <= 36, or 0");
        if (parse_int(v.str(), static_cast<int>(base), &n)) return Value::integer(n);
        double d;
        if (parse_float(v.str(), &d) && std::isfinite(d)) {
            if (std::fabs(d) >= 9.2e18) fail_unsupported("int() of a huge number");
            return Value::integer(static_cast<int64_t>(d));
        }
        if (parse_float(v.str(), &d) && std::isinf(d))
            fail_runtime("OverflowError: cannot convert float infinity to integer");
        return dflt;
    }
    return dflt;
}

Value filter_float(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"default"}, "float");
    const Value dflt = b.has(0) ? b[0] : Value::number(0.0);
    if (v.is_undefined()) ev.undefined_error(v);
    if (v.is_number()) return Value::number(v.get_float());
    double d;
    if (v.is_string() && parse_float(v.str(), &d)) return Value::number(d);
    return dflt;
}

Value filter_abs(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, "abs");
    if (is_int_like(v)) {
        if (v.get_int() == INT64_MIN) fail_unsupported("integer overflow");
        return Value::integer(std::llabs(v.get_int()));
    }
    if (v.kind() == Kind::Float) return Value::number(std::fabs(v.get_float()));
    if (v.is_undefined()) ev.undefined_error(v);
    fail_runtime("TypeError: bad operand type for abs(): '" + type_name(v) + "'");
}

Value filter_sort(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"reverse", "case_sensitive", "attribute"}, "sort");
    const bool rev = b.has(0) && truthy(b[0]);
    const bool cs = b.has(1) && truthy(b[1]);
    std::vector<Value> items = ev.iterate(v), keys;
    const bool by_attr = b.has(2) && !b[2].is_none();
    // attribute="a,b" sorts by several attributes: the key is the list of their values
    const bool multi = by_attr && b[2].is_string() && b[2].str().find(',') != std::string::npos;
    std::vector<std::string> attrs;
    if (multi) attrs = text::split(b[2].str(), std::string(","), -1);
    for (const auto &it : items) {
        if (multi) {
            std::vector<Value> parts;
            for (const auto &a : attrs) parts.push_back(sort_key(attr_path(ev, it, Value::string(a), nullptr), cs));
            keys.push_back(Value::list(std::move(parts)));
        } else {
            keys.push_back(sort_key(by_attr ? attr_path(ev, it, b[2], nullptr) : it, cs));
        }
    }
    return Value::list(sorted(ev, std::move(items), keys, rev));
}

Value filter_unique(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"case_sensitive", "attribute"}, "unique");
    const bool cs = b.has(0) && truthy(b[0]);
    std::vector<Value> out;
    std::vector<std::string> seen;
    for (const auto &it : ev.iterate(v)) {
        const Value k = sort_key(b.has(1) && !b[1].is_none() ? attr_path(ev, it, b[1], nullptr) : it, cs);
        std::string key;
        if (!dict_key(k, &key)) fail_runtime("TypeError: unhashable type: '" + type_name(k) + "'");
        ev.budget.charge(seen.size() / 16 + 1);
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(std::move(key));
        out.push_back(it);
    }
    return Value::view(std::move(out), Value::View::Generator);
}

Value filter_min_max(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return minmax(ev, v, args, name == "max");
}

Value filter_sum(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"attribute", "start"}, "sum");
    Value acc = b.has(1) ? b[1] : Value::integer(0);
    for (const auto &it : ev.iterate(v)) {
        const Value x = b.has(0) && !b[0].is_none() ? attr_path(ev, it, b[0], nullptr) : it;
        if (is_int_like(acc) && is_int_like(x)) {
            int64_t r;
            if (__builtin_add_overflow(acc.get_int(), x.get_int(), &r)) fail_unsupported("integer overflow");
            acc = Value::integer(r);
        } else if (acc.is_number() && x.is_number()) {
            acc = Value::number(acc.get_float() + x.get_float());
        } else {
            fail_runtime("TypeError: unsupported operand type(s) for +: '" + type_name(acc) + "' and '" + type_name(x) +
                         "'");
        }
    }
    return acc;
}

Value filter_reverse(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, "reverse");
    if (v.is_string()) {
        auto cps = text::decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return ev.make_str(text::encode(cps, 0, cps.size()), v.is_markup());
    }
    // reversed(): an iterator over a sequence; anything else (a generator) becomes a reversed list
    const bool reversible = v.is_list() || v.is_dict() || v.is_undefined() || v.view_kind() == Value::View::Keys ||
                            v.view_kind() == Value::View::Values || v.view_kind() == Value::View::Items;
    if (!reversible && v.kind() != Kind::List) fail_runtime("TypeError: '" + type_name(v) + "' object is not iterable");
    auto items = ev.iterate(v);
    std::reverse(items.begin(), items.end());
    return reversible ? Value::view(std::move(items), Value::View::Iterator) : Value::list(std::move(items));
}

Value filter_map(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    std::vector<Value> out;
    if (!truthy(v)) return Value::view({}, Value::View::Generator);  // Jinja checks `if value:` before iterating
    const auto items = ev.iterate(v);
    const auto attr_it =
        std::find_if(args.kw.begin(), args.kw.end(), [](const auto &kv) { return kv.first == "attribute"; });
    if (attr_it != args.kw.end()) {
        Value dflt;
        bool has_default = false;
        for (const auto &[k, val] : args.kw) {
            if (k == "default") {
                dflt = val;
                has_default = true;
            } else if (k != "attribute") {
                fail_runtime("FilterArgumentError: Unexpected keyword argument '" + k + "'");
            }
        }
        if (!args.pos.empty()) fail_runtime("FilterArgumentError: Unexpected positional arguments with attribute=");
        for (const auto &it : items) {
            ev.budget.charge(1);
            out.push_back(attr_path(ev, it, attr_it->second, has_default ? &dflt : nullptr));
        }
        return Value::view(std::move(out), Value::View::Generator);
    }
    if (args.pos.empty()) fail_runtime("FilterArgumentError: map requires a filter argument");
    if (!args.pos[0].is_string()) fail_runtime("TypeError: filter name must be a string");
    const std::string f = args.pos[0].str();
    Args rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    for (const auto &it : items) {
        ev.budget.charge(1);
        Args a = rest;
        out.push_back(apply_filter(ev, f, it, a));
    }
    return Value::view(std::move(out), Value::View::Generator);
}

Value filter_select(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return select_like(ev, v, args, false, true);
}

Value filter_reject(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return select_like(ev, v, args, false, false);
}

Value filter_selectattr(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return select_like(ev, v, args, true, true);
}

Value filter_rejectattr(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return select_like(ev, v, args, true, false);
}

Value filter_format(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    if (!args.pos.empty() && !args.kw.empty())
        fail_runtime("FilterArgumentError: can't handle positional and keyword arguments at the same time");
    const Value s = soft_str(ev, v);
    Value fmt_args;
    if (!args.kw.empty()) {
        auto d = std::make_shared<DictData>();
        for (const auto &[k, val] : args.kw) d->set(Value::string(k), val);
        fmt_args = Value::dict(d);
    } else {
        fmt_args = Value::list(args.pos, true);
    }
    return ev.make_str(percent_format(ev, s.str(), fmt_args, s.is_markup()), s.is_markup());
}

Value filter_escape(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    bind(args, {}, name.c_str());
    if (v.is_markup() && name != "forceescape") return v;
    return ev.make_str(text::html_escape(v.is_string() ? v.str() : ev.str(v)), true);
}

Value filter_attr(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"name"}, "attr");
    if (!b.has(0) || !b[0].is_string()) fail_runtime("TypeError: attribute name must be a string");
    if (v.is_dict() && !b[0].str().empty() && b[0].str()[0] != '_') {
        bool found = false;
        Value m = find_method(ev, v, b[0].str(), &found);
        return found ? m : Value::undefined("'dict object' has no attribute '" + b[0].str() + "'");
    }
    return ev.getattr(v, b[0].str());
}

Value filter_center(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"width"}, "center");
    const int64_t width = b.has(0) ? want_int(b[0], "width") : 80;
    const std::string s = ev.str(v);
    const auto len = static_cast<int64_t>(text::length(s));
    if (width <= len) return ev.make_str(s);
    ev.budget.string_bytes(static_cast<uint64_t>(width));
    const int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
    return ev.make_str(std::string(static_cast<size_t>(left), ' ') + s +
                       std::string(static_cast<size_t>(marg - left), ' '));
}

Value filter_batch(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Bound b = bind(args, {"linecount", "fill_with"}, "batch");
    const int64_t n = b.has(0) ? want_int(b[0], "linecount") : 0;
    if (n <= 0) fail_unsupported("batch() with a count below 1");
    std::vector<Value> out, cur;
    for (const auto &it : ev.iterate(v)) {
        cur.push_back(it);
        if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
    }
    if (!cur.empty()) {
        if (b.has(1) && !b[1].is_none())
            while (static_cast<int64_t>(cur.size()) < n) cur.push_back(b[1]);
        out.push_back(Value::list(std::move(cur)));
    }
    return Value::view(std::move(out), Value::View::Generator);
}

// Every filter Jinja2 has (with HF's tojson), by name; a null function is one this interpreter leaves out.
constexpr FilterEntry kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"batch", filter_batch},
    {"capitalize", filter_capitalize_title},
    {"center", filter_center},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", dictsort},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"filesizeformat", nullptr},
    {"first", filter_first_last},
    {"float", filter_float},
    {"forceescape", filter_escape},
    {"format", filter_format},
    {"groupby", nullptr},
    {"indent", indent_filter},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_first_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", filter_upper_lower},
    {"map", filter_map},
    {"max", filter_min_max},
    {"min", filter_min_max},
    {"pprint", nullptr},
    {"random", nullptr},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", round_filter},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"slice", nullptr},
    {"sort", filter_sort},
    {"string", filter_string},
    {"striptags", nullptr},
    {"sum", filter_sum},
    {"title", filter_capitalize_title},
    {"tojson", json_filter},
    {"trim", filter_trim},
    {"truncate", nullptr},
    {"unique", filter_unique},
    {"upper", filter_upper_lower},
    {"urlencode", nullptr},
    {"urlize", nullptr},
    {"wordcount", nullptr},
    {"wordwrap", nullptr},
    {"xmlattr", nullptr},
};

}  // namespace

const FilterEntry *find_filter(std::string_view name) {
    for (const FilterEntry &f : kFilters) {
        if (f.name == name) return &f;
    }
    return nullptr;
}

}  // namespace llm::jinja
