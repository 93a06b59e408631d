// Python methods of str, dict, list and tuple values as the immutable sandbox exposes them (mutating
// list/dict methods exist but refuse to run), and Python's two string formatting mini-languages.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/text.h"

namespace llm::jinja {
namespace {

const char *const kNumberAttrs[] = {
    "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator", "from_bytes", "imag",
    "numerator",        "real",      "to_bytes",   "hex",       "fromhex",     "is_integer"};

template <size_t N>
bool in(const char *const (&table)[N], const std::string &name) {
    return std::any_of(std::begin(table), std::end(table), [&](const char *s) { return name == s; });
}

bool is_int_like(const Value &v) { return v.kind() == Kind::Int || v.kind() == Kind::Bool; }

// A method: the value it is bound to, the name it was called by (several names share one function), and
// the call's arguments.
using MethodFn = Value (*)(Evaluator &e, const Value &self, const std::string &name, Args &a);
struct MethodEntry {
    std::string_view name;
    MethodFn fn;          // null: a real Python method this interpreter does not carry (unsupported)
    bool unsafe = false;  // refused by the immutable sandbox: an undefined value saying so
};

Value bound(const Value &self, const std::string &name, MethodFn fn) {
    auto f = std::make_shared<FuncData>();
    f->name = name;
    f->fn = [self, name, fn](Evaluator &ev, Args &a) { return fn(ev, self, name, a); };
    return Value::func(f);
}

std::optional<std::string> opt_str(Evaluator &ev, const Bound &b, size_t i, const char *what) {
    if (!b.has(i) || b[i].is_none()) return std::nullopt;
    if (!b[i].is_string()) fail_runtime(std::string("TypeError: ") + what + " arg must be None or str");
    return b[i].str();
}

// startswith/endswith: a string or a tuple of strings, with optional start/end code point bounds.
bool affix(Evaluator &ev, const Value &self, Args &a, bool prefix) {
    const Bound b = bind(a, {"prefix", "start", "end"}, prefix ? "startswith" : "endswith");
    if (!b.has(0)) fail_runtime("TypeError: startswith/endswith takes at least 1 argument");
    std::string s = self.str();
    if ((b.has(1) && !b[1].is_none()) || (b.has(2) && !b[2].is_none())) {
        const auto cps = text::decode(s);
        const auto n = static_cast<int64_t>(cps.size());
        auto fix = [&](const Value &v, int64_t d) {
            if (v.is_none()) return d;
            if (!is_int_like(v)) fail_runtime("TypeError: slice indices must be integers or None");
            int64_t x = v.get_int();
            if (x < 0) x = std::max<int64_t>(0, x + n);
            return std::min(x, n);
        };
        const int64_t st = b.has(1) ? fix(b[1], 0) : 0, en = b.has(2) ? fix(b[2], n) : n;
        if (st > n) return false;
        s = st < en ? text::encode(cps, static_cast<size_t>(st), static_cast<size_t>(en)) : "";
    }
    std::vector<std::string> cands;
    if (b[0].is_string()) {
        cands.push_back(b[0].str());
    } else if (b[0].is_tuple()) {
        for (const auto &c : b[0].items()) {
            if (!c.is_string()) fail_runtime("TypeError: tuple for startswith must only contain str");
            cands.push_back(c.str());
        }
    } else {
        fail_runtime("TypeError: startswith first arg must be str or a tuple of str, not " + type_name(b[0]));
    }
    for (const auto &c : cands) {
        if (c.size() > s.size()) continue;
        if (prefix ? s.compare(0, c.size(), c) == 0 : s.compare(s.size() - c.size(), c.size(), c) == 0) return true;
    }
    return false;
}

Value str_strip(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    const Bound b = bind(a, {"chars"}, name.c_str());
    return e.make_str(text::strip(s.str(), opt_str(e, b, 0, name.c_str()), name != "rstrip", name != "lstrip"), mk);
}

Value str_split(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    const Bound b = bind(a, {"sep", "maxsplit"}, name.c_str());
    int64_t maxsplit = -1;
    if (b.has(1)) {
        if (!is_int_like(b[1])) fail_runtime("TypeError: maxsplit must be an integer");
        maxsplit = b[1].get_int();
    }
    std::vector<Value> out;
    e.budget.charge(s.str().size() / 64);
    const auto parts =
        text::split(s.str(), opt_str(e, b, 0, "sep"), maxsplit, name == "rsplit", e.budget.limits.max_output / 32);
    e.budget.items(parts.size());
    for (const auto &p : parts) out.push_back(Value::string(p, mk));
    return Value::list(std::move(out));
}

Value str_splitlines(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    const Bound b = bind(a, {"keepends"}, "splitlines");
    std::vector<Value> out;
    for (const auto &p : text::splitlines(s.str(), b.has(0) && truthy(b[0]))) out.push_back(Value::string(p, mk));
    e.budget.items(out.size());
    return Value::list(std::move(out));
}

Value str_affix(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    return Value::boolean(affix(e, s, a, name == "startswith"));
}

Value str_case(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    bind(a, {}, name.c_str());
    if (name == "upper") return e.make_str(text::upper(s.str()), mk);
    if (name == "lower") return e.make_str(text::lower(s.str()), mk);
    if (name == "title") return e.make_str(text::py_title(s.str()), mk);
    return e.make_str(text::capitalize(s.str()), mk);
}

Value str_replace(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    const Bound b = bind(a, {"old", "new", "count"}, "replace");
    if (!b.has(0) || !b.has(1) || !b[0].is_string() || !b[1].is_string())
        fail_runtime("TypeError: replace() arguments must be str");
    int64_t count = -1;
    if (b.has(2)) {
        if (!is_int_like(b[2])) fail_runtime("TypeError: replace() count must be an integer");
        count = b[2].get_int();
    }
    // Markup.replace escapes its plain-string arguments.
    const std::string o = mk && !b[0].is_markup() ? text::html_escape(b[0].str()) : b[0].str();
    const std::string n = mk && !b[1].is_markup() ? text::html_escape(b[1].str()) : b[1].str();
    const std::string &str = s.str();
    e.budget.string_bytes(str.size() + (o.empty() ? text::length(str) + 1 : str.size() / o.size()) * n.size());
    return e.make_str(text::replace(str, o, n, count), mk);
}

Value str_find(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const Bound b = bind(a, {"sub"}, name.c_str());
    if (!b.has(0) || !b[0].is_string()) fail_runtime("TypeError: must be str");
    if (name == "count") return Value::integer(text::count(s.str(), b[0].str()));
    const int64_t r = text::find(s.str(), b[0].str(), name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) fail_runtime("ValueError: substring not found");
    return Value::integer(r);
}

Value str_join(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    const Bound b = bind(a, {"iterable"}, "join");
    if (!b.has(0)) fail_runtime("TypeError: join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const auto &it : e.iterate(b[0])) {
        if (!it.is_string())
            fail_runtime("TypeError: sequence item: expected str instance, " + type_name(it) + " found");
        if (!first) out += s.str();
        first = false;
        out += mk && !it.is_markup() ? text::html_escape(it.str()) : it.str();
        e.budget.string_bytes(out.size());
    }
    return e.make_str(std::move(out), mk);
}

Value str_format_method(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    return e.make_str(str_format(e, s.str(), a, mk), mk);
}

Value str_remove_affix(Evaluator &e, const Value &s, const std::string &name, Args &a) {
    const bool mk = s.is_markup();
    const Bound b = bind(a, {"affix"}, name.c_str());
    if (!b.has(0) || !b[0].is_string()) fail_runtime("TypeError: " + name + "() argument must be str");
    const std::string &str = s.str(), &x = b[0].str();
    if (name == "removeprefix" && str.compare(0, x.size(), x) == 0) return e.make_str(str.substr(x.size()), mk);
    if (name == "removesuffix" && !x.empty() && str.size() >= x.size() &&
        str.compare(str.size() - x.size(), x.size(), x) == 0)
        return e.make_str(str.substr(0, str.size() - x.size()), mk);
    return s;
}

Value str_is(Evaluator &, const Value &s, const std::string &name, Args &a) {
    bind(a, {}, name.c_str());
    const auto cps = text::decode(s.str());
    if (name == "isascii") return Value::boolean(text::is_ascii(s.str()));
    if (name == "isupper" || name == "islower")
        return Value::boolean(text::all_cased_match(s.str(), name == "isupper"));
    if (cps.empty()) return Value::boolean(false);
    for (uint32_t c : cps) {
        if (c >= 0x80 && name != "isspace") fail_unsupported("str." + name + "() on non-ASCII text");
        const bool digit = c >= '0' && c <= '9', alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        bool ok = name == "isspace"   ? text::is_space(c)
                  : name == "isdigit" ? digit
                  : name == "isalpha" ? alpha
                                      : digit || alpha;
        if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
}

// Python's str methods by name; a null function is one this interpreter leaves out.
const MethodEntry kStrMethods[] = {
    {"capitalize", str_case},
    {"casefold", nullptr},
    {"center", nullptr},
    {"count", str_find},
    {"encode", nullptr},
    {"endswith", str_affix},
    {"escape", nullptr},
    {"expandtabs", nullptr},
    {"find", str_find},
    {"format", str_format_method},
    {"format_map", nullptr},
    {"index", str_find},
    {"isalnum", str_is},
    {"isalpha", str_is},
    {"isascii", str_is},
    {"isdecimal", nullptr},
    {"isdigit", str_is},
    {"isidentifier", nullptr},
    {"islower", str_is},
    {"isnumeric", nullptr},
    {"isprintable", nullptr},
    {"isspace", str_is},
    {"istitle", nullptr},
    {"isupper", str_is},
    {"join", str_join},
    {"ljust", nullptr},
    {"lower", str_case},
    {"lstrip", str_strip},
    {"maketrans", nullptr},
    {"partition", nullptr},
    {"removeprefix", str_remove_affix},
    {"removesuffix", str_remove_affix},
    {"replace", str_replace},
    {"rfind", str_find},
    {"rindex", str_find},
    {"rjust", nullptr},
    {"rpartition", nullptr},
    {"rsplit", str_split},
    {"rstrip", str_strip},
    {"split", str_split},
    {"splitlines", str_splitlines},
    {"startswith", str_affix},
    {"strip", str_strip},
    {"striptags", nullptr},
    {"swapcase", nullptr},
    {"title", str_case},
    {"translate", nullptr},
    {"unescape", nullptr},
    {"upper", str_case},
    {"zfill", nullptr},
};

Value dict_view(Evaluator &e, const Value &d, const std::string &name, Args &a) {
    bind(a, {}, name.c_str());
    std::vector<Value> out;
    e.budget.charge(d.dict().entries.size() / 4);
    for (const auto &[k, v] : d.dict().entries)
        out.push_back(name == "keys" ? k : name == "values" ? v : Value::list({k, v}, true));
    return Value::view(std::move(out), name == "keys"     ? Value::View::Keys
                                       : name == "values" ? Value::View::Values
                                                          : Value::View::Items);
}

Value dict_get(Evaluator &, const Value &d, const std::string &, Args &a) {
    const Bound b = bind(a, {"key", "default"}, "get");
    if (!b.has(0)) fail_runtime("TypeError: get expected at least 1 argument, got 0");
    std::string k;
    if (!dict_key(b[0], &k)) fail_runtime("TypeError: unhashable type: '" + type_name(b[0]) + "'");
    const Value *v = d.dict().find(b[0]);
    return v ? *v : (b.has(1) ? b[1] : Value::none());
}

Value dict_copy(Evaluator &, const Value &d, const std::string &, Args &a) {
    bind(a, {}, "copy");
    return Value::dict(std::make_shared<DictData>(d.dict()));
}

// Python's dict methods by name. The immutable sandbox refuses those that change the dict (unsafe).
const MethodEntry kDictMethods[] = {
    {"clear", nullptr, true},      {"copy", dict_copy},       {"fromkeys", nullptr},  {"get", dict_get},
    {"items", dict_view},          {"keys", dict_view},       {"pop", nullptr, true}, {"popitem", nullptr, true},
    {"setdefault", nullptr, true}, {"update", nullptr, true}, {"values", dict_view},
};

Value list_count_index(Evaluator &e, const Value &l, const std::string &name, Args &a) {
    const Bound b = bind(a, {"value"}, name.c_str());
    if (!b.has(0)) fail_runtime("TypeError: " + name + "() takes exactly one argument");
    int64_t count = 0;
    for (size_t i = 0; i < l.items().size(); i++) {
        if (!equals(l.items()[i], b[0], e.budget)) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        count++;
    }
    if (name == "index") fail_runtime("ValueError: value is not in list");
    return Value::integer(count);
}

// The one place a list changes in place: every reference to it sees the change, as in Python.
Value list_pop_clear(Evaluator &, const Value &l, const std::string &name, Args &a) {
    auto &items = static_cast<ListData &>(*l.heap()).items;
    if (name == "clear") {
        bind(a, {}, "clear");
        items.clear();
        return Value::none();
    }
    const Bound b = bind(a, {"index"}, "pop");
    if (items.empty()) fail_runtime("IndexError: pop from empty list");
    int64_t i = static_cast<int64_t>(items.size()) - 1;
    if (b.has(0)) {
        if (!is_int_like(b[0])) fail_runtime("TypeError: list indices must be integers");
        i = b[0].get_int();
        if (i < 0) i += static_cast<int64_t>(items.size());
        if (i < 0 || i >= static_cast<int64_t>(items.size())) fail_runtime("IndexError: pop index out of range");
    }
    Value out = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return out;
}

Value list_copy(Evaluator &, const Value &l, const std::string &, Args &a) {
    bind(a, {}, "copy");
    return Value::list(l.items());
}

// Python's list methods by name. Jinja 3.1's immutable sandbox blocks those that change the list,
// except pop() and clear().
const MethodEntry kListMethods[] = {
    {"append", nullptr, true}, {"clear", list_pop_clear},   {"copy", list_copy},       {"count", list_count_index},
    {"extend", nullptr, true}, {"index", list_count_index}, {"insert", nullptr, true}, {"pop", list_pop_clear},
    {"remove", nullptr, true}, {"reverse", nullptr, true},  {"sort", nullptr, true},
};
// A tuple has only these two.
const MethodEntry kTupleMethods[] = {{"count", list_count_index}, {"index", list_count_index}};

// The method `name` of self from its type's table, bound to self; *found false if the type has no such
// attribute.
template <size_t N>
Value lookup_method(const MethodEntry (&table)[N], const char *type, const Value &self, const std::string &name,
                    bool *found) {
    const MethodEntry *m =
        std::find_if(std::begin(table), std::end(table), [&](const MethodEntry &r) { return r.name == name; });
    *found = m != std::end(table);
    if (!*found) return Value();
    if (m->unsafe) return Value::undefined("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
    if (!m->fn) fail_unsupported(std::string("method ") + type + "." + name + "()");
    return bound(self, name, m->fn);
}

// ---- printf-style formatting ------------------------------------------------------------------------------
// Widths and precisions parsed from a format string saturate here, far above any max_output.
constexpr int64_t kHugeWidth = int64_t(1) << 40;

std::string pad(Budget &b, std::string s, int64_t width, bool left, char fill) {
    const auto len = static_cast<int64_t>(text::length(s));
    if (width <= len) return s;
    b.string_bytes(static_cast<uint64_t>(width));
    const std::string p(static_cast<size_t>(width - len), fill);
    return left ? s + p : p + s;
}

std::string format_number(double x, char conv, int64_t prec, bool alt) {
    if (prec > 300) fail_unsupported("a float precision above 300");
    if (std::isnan(x)) return conv >= 'a' ? "nan" : "NAN";
    if (std::isinf(x)) return std::string(x < 0 ? "-" : "") + (conv >= 'a' ? "inf" : "INF");
    char fmt[16];
    std::snprintf(fmt, sizeof fmt, "%%%s.%d%c", alt ? "#" : "", static_cast<int>(prec), conv);
    std::vector<char> buf(static_cast<size_t>(prec) + 400);  // %f of 1e308 has 309 integer digits
    std::snprintf(buf.data(), buf.size(), fmt, x);
    return buf.data();
}

// One %-conversion of printf-style formatting, before padding to the width: its flags, width and precision
// (-1: none) and conversion character.
struct PercentSpec {
    bool left, zero, plus, space, alt;
    int64_t width, prec;
    char conv;
};

std::string percent_piece(Evaluator &ev, const PercentSpec &sp, const Value &val, bool markup) {
    std::string piece;
    auto sign_of = [&](bool neg) { return neg ? "-" : sp.plus ? "+" : sp.space ? " " : ""; };
    const bool left = sp.left, zero = sp.zero, alt = sp.alt;
    const int64_t width = sp.width, prec = sp.prec;
    const char conv = sp.conv;
    switch (conv) {
    case 's':
    case 'r':
    case 'a': {
        piece = conv == 's' ? (val.is_string() ? val.str() : ev.str(val)) : to_repr(val, ev.budget);
        if (markup && !val.is_markup()) piece = text::html_escape(piece);
        if (prec >= 0) {
            const auto cps = text::decode(piece);
            piece = text::encode(cps, 0, std::min<size_t>(cps.size(), static_cast<size_t>(prec)));
        }
        break;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
        int64_t n;
        if (is_int_like(val)) {
            n = val.get_int();
        } else if (val.kind() == Kind::Float && (conv == 'd' || conv == 'i' || conv == 'u')) {
            if (!std::isfinite(val.get_float()) || std::fabs(val.get_float()) >= 9.2e18)
                fail_unsupported("%d of a huge float");
            n = static_cast<int64_t>(val.get_float());
        } else {
            fail_runtime(std::string("TypeError: %") + conv + " format: a number is required, not " + type_name(val));
        }
        const bool neg = n < 0;
        const uint64_t mag = neg ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
        char buf[32];
        const char *f = conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : conv == 'o' ? "%llo" : "%llu";
        std::snprintf(buf, sizeof buf, f, static_cast<unsigned long long>(mag));
        std::string digits = buf;
        if (prec >= 0 && static_cast<int64_t>(digits.size()) < prec) {
            ev.budget.string_bytes(static_cast<uint64_t>(prec));
            digits = std::string(static_cast<size_t>(prec) - digits.size(), '0') + digits;
        }
        std::string prefix = sign_of(neg);
        if (alt && conv == 'x') prefix += "0x";
        if (alt && conv == 'X') prefix += "0X";
        if (alt && conv == 'o') prefix += "0o";
        if (zero && !left && width > static_cast<int64_t>(prefix.size() + digits.size())) {
            ev.budget.string_bytes(static_cast<uint64_t>(width));
            digits = std::string(static_cast<size_t>(width) - prefix.size() - digits.size(), '0') + digits;
        }
        piece = prefix + digits;
        break;
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
        if (!val.is_number()) fail_runtime(std::string("TypeError: must be real number, not ") + type_name(val));
        const double x = val.get_float();
        std::string body = format_number(std::fabs(x), conv, prec < 0 ? 6 : prec, alt);
        const std::string prefix = sign_of(std::signbit(x) && !std::isnan(x));
        if (zero && !left && std::isfinite(x) && width > static_cast<int64_t>(prefix.size() + body.size())) {
            ev.budget.string_bytes(static_cast<uint64_t>(width));
            body = std::string(static_cast<size_t>(width) - prefix.size() - body.size(), '0') + body;
        }
        piece = prefix + body;
        break;
    }
    case 'c':
        if (val.is_string() && text::length(val.str()) == 1) {
            piece = val.str();
        } else if (is_int_like(val) && val.get_int() >= 0 && val.get_int() <= 0x10FFFF) {
            text::append_utf8(piece, static_cast<uint32_t>(val.get_int()));
        } else {
            fail_runtime("TypeError: %c requires int or char");
        }
        break;
    default: fail_runtime(std::string("ValueError: unsupported format character '") + conv + "'");
    }
    return piece;
}

// str.format's field numbering: automatic ({}) and manual ({0}) may not be mixed.
struct FieldNumbering {
    size_t auto_index = 0;
    bool manual = false, automatic = false;
};

// The value a replacement field's head names: an argument (by position or keyword), then .attr and
// [key] lookups.
Value field_value(Evaluator &ev, const std::string &head, Args &args, FieldNumbering *num) {
    size_t k = 0;
    while (k < head.size() && head[k] != '.' && head[k] != '[') k++;
    const std::string first = head.substr(0, k);
    Value v;
    if (first.empty()) {
        if (num->manual)
            fail_runtime("ValueError: cannot switch from manual field specification to automatic field numbering");
        num->automatic = true;
        if (num->auto_index >= args.pos.size())
            fail_runtime("IndexError: Replacement index " + std::to_string(num->auto_index) +
                         " out of range for positional args tuple");
        v = args.pos[num->auto_index++];
    } else if (std::all_of(first.begin(), first.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        if (num->automatic)
            fail_runtime("ValueError: cannot switch from automatic field numbering to manual field specification");
        num->manual = true;
        const size_t idx = std::stoul(first);
        if (idx >= args.pos.size())
            fail_runtime("IndexError: Replacement index " + first + " out of range for positional args tuple");
        v = args.pos[idx];
    } else {
        auto it = std::find_if(args.kw.begin(), args.kw.end(), [&](const auto &kv) { return kv.first == first; });
        if (it == args.kw.end()) fail_runtime("KeyError: '" + first + "'");
        v = it->second;
    }
    while (k < head.size()) {
        if (head[k] == '.') {
            size_t e = k + 1;
            while (e < head.size() && head[e] != '.' && head[e] != '[') e++;
            v = ev.getattr(v, head.substr(k + 1, e - k - 1));
            k = e;
        } else {
            const size_t e = head.find(']', k);
            if (e == std::string::npos) fail_runtime("ValueError: Missing ']' in format string");
            const std::string key = head.substr(k + 1, e - k - 1);
            const bool digits =
                !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
            v = ev.getitem(v, digits ? Value::integer(std::stoll(key)) : Value::string(key));
            k = e + 1;
        }
    }
    return v;
}

// One replacement field's value after its !conversion, formatted by its spec:
// [[fill]align][sign][#][0][width][,|_][.precision][type].
std::string format_field(Evaluator &ev, Value v, const std::string &conv, const std::string &spec, bool markup) {
    std::string piece;
    if (conv == "r" || conv == "a") {
        piece = to_repr(v, ev.budget);
        v = Value::string(piece);
    } else if (!conv.empty() && conv != "s") {
        fail_runtime("ValueError: Unknown conversion specifier " + conv);
    } else if (conv == "s") {
        v = Value::string(v.is_string() ? v.str() : ev.str(v));
    }
    // spec: [[fill]align][sign][#][0][width][,|_][.precision][type]
    size_t p = 0;
    char fill = ' ', align = 0, sign = 0, type = 0;
    bool zero = false, alt = false;
    auto is_align = [](char ch) { return ch == '<' || ch == '>' || ch == '^' || ch == '='; };
    if (spec.size() >= 2 && is_align(spec[1])) {
        fill = spec[0], align = spec[1], p = 2;
    } else if (!spec.empty() && is_align(spec[0])) {
        align = spec[0], p = 1;
    }
    if (p < spec.size() && (spec[p] == '+' || spec[p] == '-' || spec[p] == ' ')) sign = spec[p++];
    if (p < spec.size() && spec[p] == '#') alt = true, p++;
    if (p < spec.size() && spec[p] == '0') zero = true, p++;
    int64_t width = 0, prec = -1;
    while (p < spec.size() && spec[p] >= '0' && spec[p] <= '9')
        width = std::min<int64_t>(width * 10 + (spec[p++] - '0'), kHugeWidth);
    if (p < spec.size() && (spec[p] == ',' || spec[p] == '_')) fail_unsupported("digit grouping in str.format");
    if (p < spec.size() && spec[p] == '.') {
        prec = 0;
        p++;
        while (p < spec.size() && spec[p] >= '0' && spec[p] <= '9')
            prec = std::min<int64_t>(prec * 10 + (spec[p++] - '0'), kHugeWidth);
    }
    if (p < spec.size()) type = spec[p++];
    if (p != spec.size()) fail_runtime("ValueError: Invalid format specifier");
    if (v.is_string()) {
        if (type && type != 's')
            fail_runtime(std::string("ValueError: Unknown format code '") + type + "' for object of type 'str'");
        if (sign || alt || align == '=') fail_runtime("ValueError: invalid format spec for a str");
        piece = v.str();
        if (prec >= 0) {
            const auto cps = text::decode(piece);
            piece = text::encode(cps, 0, std::min<size_t>(cps.size(), static_cast<size_t>(prec)));
        }
        if (!align) align = '<';
    } else if (v.is_number()) {
        if (alt) fail_unsupported("'#' in a str.format number spec");
        const bool as_int = is_int_like(v) && (type == 0 || type == 'd');
        if (as_int) {
            piece = std::to_string(v.get_int());
        } else if (is_int_like(v) && (type == 'x' || type == 'X' || type == 'o' || type == 'b')) {
            if (type == 'b') fail_unsupported("binary in str.format");
            char buf[32];
            const int64_t n = v.get_int();
            std::snprintf(
                buf, sizeof buf,
                type == 'x'   ? "%llx"
                : type == 'X' ? "%llX"
                              : "%llo",
                static_cast<unsigned long long>(n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n)));
            piece = std::string(n < 0 ? "-" : "") + buf;
        } else if (type == 0 && v.kind() == Kind::Float && prec < 0) {
            piece = float_repr(v.get_float());
        } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == '%' ||
                   ((type == 'g' || type == 'G') && prec >= 0)) {
            double x = v.get_float();
            if (type == '%') x *= 100;
            piece = format_number(x, type == '%' ? 'f' : type, prec < 0 ? 6 : prec, false);
            if (type == '%') piece += '%';
        } else {
            fail_unsupported("str.format number spec '" + spec + "'");
        }
        if (sign == '+' && piece[0] != '-') piece = "+" + piece;
        if (sign == ' ' && piece[0] != '-') piece = " " + piece;
        if (zero && !align) fill = '0', align = '=';
        if (!align) align = '>';
    } else if (!spec.empty()) {
        fail_unsupported("str.format spec on a " + type_name(v));
    } else {
        piece = ev.str(v);
    }
    if (markup && !v.is_markup()) piece = text::html_escape(piece);
    const auto len = static_cast<int64_t>(text::length(piece));
    if (width > len) {
        ev.budget.string_bytes(static_cast<uint64_t>(width));
        const auto n = static_cast<size_t>(width - len);
        std::string f;
        for (size_t q = 0; q < n; q++) f += fill;
        if (align == '<') {
            piece += f;
        } else if (align == '>') {
            piece = f + piece;
        } else if (align == '^') {
            std::string l, r;
            for (size_t q = 0; q < n / 2; q++) l += fill;
            for (size_t q = n / 2; q < n; q++) r += fill;
            piece = l + piece + r;
        } else {  // '=': padding after the sign
            const size_t s = (!piece.empty() && (piece[0] == '-' || piece[0] == '+' || piece[0] == ' ')) ? 1 : 0;
            piece = piece.substr(0, s) + f + piece.substr(s);
        }
    }
    return piece;
}

}  // namespace

Value find_method(Evaluator &ev, const Value &self, const std::string &name, bool *found) {
    *found = false;
    switch (self.kind()) {
    case Kind::String: return lookup_method(kStrMethods, "str", self, name, found);
    case Kind::Dict: return lookup_method(kDictMethods, "dict", self, name, found);
    case Kind::List:
        if (self.is_view()) return Value();  // keys()/values()/items() views and iterators: no methods
        if (self.is_tuple()) return lookup_method(kTupleMethods, "tuple", self, name, found);
        return lookup_method(kListMethods, "list", self, name, found);
    case Kind::Int:
    case Kind::Float:
    case Kind::Bool:
        if (in(kNumberAttrs, name)) fail_unsupported("attribute '" + name + "' of a number");
        return Value();
    default: return Value();
    }
}

std::string percent_format(Evaluator &ev, const std::string &fmt, const Value &args, bool markup) {
    std::vector<Value> pos;
    const Value *mapping = nullptr;
    if (args.is_tuple()) {
        pos = args.items();
    } else {
        pos.push_back(args);
        if (args.is_dict()) mapping = &args;
    }
    size_t next = 0;
    bool used_mapping = false;
    std::string out;
    auto arg = [&]() -> Value {
        if (next >= pos.size()) fail_runtime("TypeError: not enough arguments for format string");
        return pos[next++];
    };
    for (size_t i = 0; i < fmt.size(); i++) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) fail_runtime("ValueError: incomplete format");
        Value val;
        bool have_val = false;
        if (fmt[i] == '(') {
            const size_t close = fmt.find(')', i);
            if (close == std::string::npos) fail_runtime("ValueError: incomplete format key");
            if (!mapping) fail_runtime("TypeError: format requires a mapping");
            const Value *v = mapping->dict().find(std::string_view(fmt).substr(i + 1, close - i - 1));
            if (!v) fail_runtime("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
            val = *v;
            have_val = used_mapping = true;
            i = close + 1;
        }
        bool left = false, zero = false, plus = false, space = false, alt = false;
        for (; i < fmt.size() && std::string("-0+ #").find(fmt[i]) != std::string::npos; i++) {
            left |= fmt[i] == '-', zero |= fmt[i] == '0', plus |= fmt[i] == '+', space |= fmt[i] == ' ',
                alt |= fmt[i] == '#';
        }
        int64_t width = -1, prec = -1;
        auto read_num = [&](int64_t *dst) {
            if (i < fmt.size() && fmt[i] == '*') {
                const Value w = arg();
                if (!is_int_like(w)) fail_runtime("TypeError: * wants int");
                *dst = w.get_int();
                i++;
                return;
            }
            int64_t n = -1;
            while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
                n = std::min<int64_t>((n < 0 ? 0 : n) * 10 + (fmt[i++] - '0'), kHugeWidth);
            *dst = n;
        };
        read_num(&width);
        if (width < -1) left = true, width = -width;
        if (i < fmt.size() && fmt[i] == '.') {
            i++;
            read_num(&prec);
            if (prec < 0) prec = 0;
        }
        while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) i++;
        if (i >= fmt.size()) fail_runtime("ValueError: incomplete format");
        const char conv = fmt[i];
        if (conv == '%') {
            out += '%';
            continue;
        }
        if (!have_val) val = arg();
        out +=
            pad(ev.budget, percent_piece(ev, PercentSpec{left, zero, plus, space, alt, width, prec, conv}, val, markup),
                width, left, ' ');
        ev.budget.string_bytes(out.size());
    }
    // Python skips this check when the argument supports subscripting (a dict or a list, not a tuple or str)
    const bool subscriptable = args.is_dict() || args.is_undefined() || (args.kind() == Kind::List && !args.is_tuple());
    if (!used_mapping && next < pos.size() && !subscriptable)
        fail_runtime("TypeError: not all arguments converted during string formatting");
    return out;
}

std::string str_format(Evaluator &ev, const std::string &fmt, Args &args, bool markup) {
    std::string out;
    FieldNumbering numbering;
    for (size_t i = 0; i < fmt.size(); i++) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out += '}';
                i++;
                continue;
            }
            fail_runtime("ValueError: Single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            i++;
            continue;
        }
        // a replacement field: name[.attr|[key]]...[!conv][:spec]; nested fields in spec are left out
        size_t j = i + 1;
        int depth = 1;
        while (j < fmt.size() && depth) {
            if (fmt[j] == '{') depth++;
            if (fmt[j] == '}') depth--;
            if (depth) j++;
        }
        if (j >= fmt.size()) fail_runtime("ValueError: expected '}' before end of string");
        const std::string field = fmt.substr(i + 1, j - i - 1);
        i = j;
        std::string spec, conv;
        size_t colon = std::string::npos, bang = std::string::npos;
        for (size_t k = 0, br = 0; k < field.size(); k++) {
            if (field[k] == '[') br++;
            if (field[k] == ']' && br) br--;
            if (br) continue;
            if (field[k] == '!' && bang == std::string::npos && colon == std::string::npos) bang = k;
            if (field[k] == ':' && colon == std::string::npos) {
                colon = k;
                break;
            }
        }
        std::string head = field.substr(0, std::min(colon, bang));
        if (colon != std::string::npos) spec = field.substr(colon + 1);
        if (bang != std::string::npos)
            conv = field.substr(bang + 1, (colon == std::string::npos ? field.size() : colon) - bang - 1);
        if (spec.find('{') != std::string::npos) fail_unsupported("nested fields in a str.format spec");
        out += format_field(ev, field_value(ev, head, args, &numbering), conv, spec, markup);
        ev.budget.string_bytes(out.size());
    }
    return out;
}

}  // namespace llm::jinja
