// Jinja2's builtin tests (jinja2/tests.py) and globals as HF's environment has them (range with the
// sandbox's MAX_RANGE, namespace, dict, raise_exception, strftime_now), and the filter/test dispatch.
#include "jinja/builtins.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "jinja/eval.h"
#include "jinja/text.h"
#include "llm.h"

namespace llm::jinja {
namespace {

bool is_int_like(const Value &v) { return v.kind() == Kind::Int || v.kind() == Kind::Bool; }

// A test's one required argument, bound as Python binds it.
Value one_arg(const std::string &name, Args &args, const char *pname) {
    const Bound b = bind(args, {pname}, name.c_str());
    if (!b.has(0)) fail_runtime("TypeError: test '" + name + "' missing required argument '" + pname + "'");
    return b[0];
}
void no_args(const std::string &name, Args &args) { bind(args, {}, name.c_str()); }

// odd: value % 2 == 1, even: value % 2 == 0, divisibleby: value % num == 0, with Python's %
bool py_mod_equals(Evaluator &ev, const Value &v, const Value &num, int64_t want) {
    if (v.is_undefined()) ev.undefined_error(v);
    if (v.is_string()) {
        percent_format(ev, v.str(), num, false);  // str % n: raises unless the string takes it
        return false;                             // a str never equals an int
    }
    if (!v.is_number() || !num.is_number())
        fail_runtime("TypeError: unsupported operand type(s) for %: '" + type_name(v) + "' and '" + type_name(num) +
                     "'");
    if (is_int_like(v) && is_int_like(num)) {
        const int64_t b = num.get_int();
        if (b == 0) fail_runtime("ZeroDivisionError: integer division or modulo by zero");
        if (b == -1) return want == 0;
        int64_t m = v.get_int() % b;
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return m == want;
    }
    const double b = num.get_float();
    if (b == 0) fail_runtime("ZeroDivisionError: float modulo");
    double m = std::fmod(v.get_float(), b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m == static_cast<double>(want);
}

bool test_in(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Value seq = one_arg(name, args, "seq");
    if (seq.is_string()) {
        if (!v.is_string()) fail_runtime("TypeError: 'in <string>' requires string as left operand");
        return seq.str().find(v.str()) != std::string::npos;
    }
    if (seq.is_dict()) return seq.dict().find(v) != nullptr;
    for (const auto &it : ev.iterate(seq))
        if (equals(it, v, ev.budget)) return true;
    return false;
}

bool test_sameas(Evaluator &, const std::string &name, const Value &v, Args &args) {
    const Value o = one_arg(name, args, "other");
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
    case Kind::None: return true;
    case Kind::Bool: return v.get_bool() == o.get_bool();
    case Kind::Undefined: return false;
    case Kind::List:
    case Kind::Dict:
    case Kind::Func:
    case Kind::Object: return v.heap() == o.heap();
    default: fail_unsupported("'sameas' on " + type_name(v) + " values (identity of Python objects)");
    }
}

// A test that takes no argument: a predicate on the value alone.
template <bool (*Pred)(const Value &)>
bool plain(Evaluator &, const std::string &name, const Value &v, Args &args) {
    no_args(name, args);
    return Pred(v);
}

bool is_iterable(const Value &v) {
    return v.is_string() || v.kind() == Kind::List || v.is_dict() || v.is_undefined() ||
           (v.kind() == Kind::Object && v.object().type == "LoopContext");
}

bool test_case(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    no_args(name, args);
    return text::all_cased_match(ev.str(v), name == "upper");
}
bool test_odd_even(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    no_args(name, args);
    return py_mod_equals(ev, v, Value::integer(2), name == "odd" ? 1 : 0);
}
bool test_divisibleby(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return py_mod_equals(ev, v, one_arg(name, args, "num"), 0);
}
bool test_eq(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return equals(v, one_arg(name, args, "other"), ev.budget);
}
bool test_ne(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return !equals(v, one_arg(name, args, "other"), ev.budget);
}
bool test_gt(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return less(one_arg(name, args, "other"), v, ev.budget, ">");
}
bool test_lt(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    return less(v, one_arg(name, args, "other"), ev.budget, "<");
}
bool test_ge(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Value o = one_arg(name, args, "other");
    return less(o, v, ev.budget, ">=") || equals(v, o, ev.budget);
}
bool test_le(Evaluator &ev, const std::string &name, const Value &v, Args &args) {
    const Value o = one_arg(name, args, "other");
    return less(v, o, ev.budget, "<=") || equals(v, o, ev.budget);
}

// Jinja2's tests (jinja2/tests.py) by name; a null function is one this interpreter leaves out.
// "filter" and "test" are defined below the table: they look names up in it.
bool test_filter(Evaluator &, const std::string &name, const Value &v, Args &args);
bool test_test(Evaluator &, const std::string &name, const Value &v, Args &args);

// clang-format off
constexpr TestEntry kTests[] = {
    {"!=", test_ne},          {"<", test_lt},           {"<=", test_le},          {"==", test_eq},
    {">", test_gt},           {">=", test_ge},          {"boolean", plain<[](const Value &v) { return v.kind() == Kind::Bool; }>},
    {"callable", plain<[](const Value &v) { return v.kind() == Kind::Func || v.is_undefined(); }>},
    {"defined", plain<[](const Value &v) { return !v.is_undefined(); }>},
    {"divisibleby", test_divisibleby},                  {"eq", test_eq},          {"equalto", test_eq},
    {"escaped", plain<[](const Value &v) { return v.is_markup(); }>},
    {"even", test_odd_even},
    {"false", plain<[](const Value &v) { return v.kind() == Kind::Bool && !v.get_bool(); }>},
    {"filter", test_filter},
    {"float", plain<[](const Value &v) { return v.kind() == Kind::Float; }>},
    {"ge", test_ge},          {"greaterthan", test_gt}, {"gt", test_gt},          {"in", test_in},
    {"integer", plain<[](const Value &v) { return v.kind() == Kind::Int; }>},
    {"iterable", plain<is_iterable>},
    {"le", test_le},          {"lessthan", test_lt},    {"lower", test_case},     {"lt", test_lt},
    {"mapping", plain<[](const Value &v) { return v.is_dict(); }>},
    {"ne", test_ne},
    {"none", plain<[](const Value &v) { return v.is_none(); }>},
    {"number", plain<[](const Value &v) { return v.is_number(); }>},
    {"odd", test_odd_even},   {"sameas", test_sameas},
    {"sequence", plain<[](const Value &v) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }>},
    {"string", plain<[](const Value &v) { return v.is_string(); }>},
    {"test", test_test},
    {"true", plain<[](const Value &v) { return v.kind() == Kind::Bool && v.get_bool(); }>},
    {"undefined", plain<[](const Value &v) { return v.is_undefined(); }>},
    {"upper", test_case},
};
// clang-format on

bool test_filter(Evaluator &, const std::string &name, const Value &v, Args &args) {
    no_args(name, args);
    return v.is_string() && find_filter(v.str()) != nullptr;
}
bool test_test(Evaluator &, const std::string &name, const Value &v, Args &args) {
    no_args(name, args);
    return v.is_string() && find_test(v.str()) != nullptr;
}

// ---- globals --------------------------------------------------------------------------------------------
Value make_func(const char *name, std::function<Value(Evaluator &, Args &)> fn) {
    auto f = std::make_shared<FuncData>();
    f->name = name;
    f->fn = std::move(fn);
    return Value::func(f);
}

Value range_global(Evaluator &ev, Args &a) {
    if (!a.kw.empty()) fail_runtime("TypeError: range() takes no keyword arguments");
    if (a.pos.empty() || a.pos.size() > 3) fail_runtime("TypeError: range expected 1 to 3 arguments");
    for (const auto &v : a.pos) {
        if (v.is_undefined()) ev.undefined_error(v);
        want_int(v, "range() argument");
    }
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
        stop = a.pos[0].get_int();
    } else {
        start = a.pos[0].get_int();
        stop = a.pos[1].get_int();
        if (a.pos.size() == 3) step = a.pos[2].get_int();
    }
    if (step == 0) fail_runtime("ValueError: range() arg 3 must not be zero");
    // Python's len(range(...)), computed without overflow.
    long double span = step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
    long double n = span <= 0 ? 0 : std::floor((span - 1) / std::fabs(static_cast<long double>(step))) + 1;
    // The sandbox refuses ranges longer than MAX_RANGE.
    if (n > 100000)
        fail_runtime("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    std::vector<Value> items;
    const auto count = static_cast<int64_t>(n);
    ev.budget.items(static_cast<uint64_t>(count));
    items.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; i++) items.push_back(Value::integer(start + i * step));
    return Value::view(std::move(items), Value::View::Range);
}

void strftime_append(std::string &out, char spec, char pad, const std::tm &t) {
    static const char *const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    static const char *const months[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};
    auto num = [&](int v, int width, char dflt_pad) {
        std::string s = std::to_string(v);
        const char p = pad ? pad : dflt_pad;
        if (p != '-' && static_cast<int>(s.size()) < width)
            s = std::string(static_cast<size_t>(width) - s.size(), p == '_' ? ' ' : p) + s;
        out += s;
    };
    switch (spec) {
    case 'a': out += std::string(days[t.tm_wday]).substr(0, 3); break;
    case 'A': out += days[t.tm_wday]; break;
    case 'b':
    case 'h': out += std::string(months[t.tm_mon]).substr(0, 3); break;
    case 'B': out += months[t.tm_mon]; break;
    case 'C': num((t.tm_year + 1900) / 100, 2, '0'); break;
    case 'd': num(t.tm_mday, 2, '0'); break;
    case 'e': num(t.tm_mday, 2, ' '); break;
    case 'H': num(t.tm_hour, 2, '0'); break;
    case 'I': num(t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12, 2, '0'); break;
    case 'j': num(t.tm_yday + 1, 3, '0'); break;
    case 'k': num(t.tm_hour, 2, ' '); break;
    case 'l': num(t.tm_hour % 12 == 0 ? 12 : t.tm_hour % 12, 2, ' '); break;
    case 'm': num(t.tm_mon + 1, 2, '0'); break;
    case 'M': num(t.tm_min, 2, '0'); break;
    case 'n': out += '\n'; break;
    case 't': out += '\t'; break;
    case 'p': out += t.tm_hour < 12 ? "AM" : "PM"; break;
    case 'P': out += t.tm_hour < 12 ? "am" : "pm"; break;
    case 'S': num(t.tm_sec, 2, '0'); break;
    case 'u': num(t.tm_wday == 0 ? 7 : t.tm_wday, 1, '0'); break;
    case 'w': num(t.tm_wday, 1, '0'); break;
    case 'y': num((t.tm_year + 1900) % 100, 2, '0'); break;
    case 'Y': num(t.tm_year + 1900, 1, '0'); break;
    case 'Z':
    case 'z': break;  // a naive datetime has no zone
    case '%': out += '%'; break;
    case 'D':
        strftime_append(out, 'm', 0, t), out += '/', strftime_append(out, 'd', 0, t), out += '/',
            strftime_append(out, 'y', 0, t);
        break;
    case 'F':
        strftime_append(out, 'Y', 0, t), out += '-', strftime_append(out, 'm', 0, t), out += '-',
            strftime_append(out, 'd', 0, t);
        break;
    case 'T':
    case 'X':
        strftime_append(out, 'H', 0, t), out += ':', strftime_append(out, 'M', 0, t), out += ':',
            strftime_append(out, 'S', 0, t);
        break;
    case 'R': strftime_append(out, 'H', 0, t), out += ':', strftime_append(out, 'M', 0, t); break;
    case 'x': strftime_append(out, 'D', 0, t); break;
    case 'c':
        strftime_append(out, 'a', 0, t), out += ' ', strftime_append(out, 'b', 0, t), out += ' ';
        strftime_append(out, 'e', 0, t), out += ' ', strftime_append(out, 'T', 0, t), out += ' ',
            strftime_append(out, 'Y', 0, t);
        break;
    default: fail_unsupported(std::string("strftime directive %") + spec);
    }
}

Value strftime_now(Evaluator &ev, Args &a) {
    const Bound b = bind(a, {"format"}, "strftime_now");
    if (!b.has(0) || !b[0].is_string()) fail_runtime("TypeError: strftime() argument 1 must be str");
    std::tm t{};
    if (ev.now >= 0) {
        const std::time_t tt = static_cast<std::time_t>(ev.now);
        gmtime_r(&tt, &t);
    } else {
        const std::time_t tt = std::time(nullptr);
        localtime_r(&tt, &t);
    }
    const std::string &f = b[0].str();
    std::string out;
    for (size_t i = 0; i < f.size(); i++) {
        if (f[i] != '%' || i + 1 >= f.size()) {
            out += f[i];
            continue;
        }
        char pad = 0;
        if (f[i + 1] == '-' || f[i + 1] == '_' || f[i + 1] == '0') {
            pad = f[i + 1];
            i++;
            if (i + 1 >= f.size()) fail_unsupported("a trailing strftime flag");
        }
        strftime_append(out, f[++i], pad, t);
    }
    return ev.make_str(std::move(out));
}

}  // namespace

const TestEntry *find_test(std::string_view name) {
    for (const TestEntry &t : kTests) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

bool jinja_has_filter(std::string_view name) { return find_filter(name) != nullptr; }
bool jinja_has_test(std::string_view name) { return find_test(name) != nullptr; }

Value apply_filter(Evaluator &ev, const std::string &name, const Value &input, Args &args) {
    ev.budget.charge(1);
    const FilterEntry *f = find_filter(name);
    if (!f) fail_runtime("TemplateRuntimeError: No filter named '" + name + "' found.");
    if (!f->fn) fail_unsupported("filter '" + name + "'");
    return f->fn(ev, name, input, args);
}

bool apply_test(Evaluator &ev, const std::string &name, const Value &input, Args &args) {
    ev.budget.charge(1);
    const TestEntry *t = find_test(name);
    if (!t) fail_runtime("TemplateRuntimeError: No test named '" + name + "' found.");
    if (!t->fn) fail_unsupported("test '" + name + "'");
    return t->fn(ev, name, input, args);
}

Bound bind(const Args &args, std::initializer_list<const char *> names, const char *fname) {
    Bound b;
    const std::vector<const char *> ns(names);
    b.v.resize(ns.size());
    b.given.assign(ns.size(), false);
    if (args.pos.size() > ns.size())
        fail_runtime(std::string("TypeError: ") + fname + "() takes at most " + std::to_string(ns.size()) +
                     " arguments (" + std::to_string(args.pos.size()) + " given)");
    for (size_t i = 0; i < args.pos.size(); i++) b.v[i] = args.pos[i], b.given[i] = true;
    for (const auto &[k, v] : args.kw) {
        size_t i = 0;
        while (i < ns.size() && k != ns[i]) i++;
        if (i == ns.size())
            fail_runtime(std::string("TypeError: ") + fname + "() got an unexpected keyword argument '" + k + "'");
        if (b.given[i])
            fail_runtime(std::string("TypeError: ") + fname + "() got multiple values for argument '" + k + "'");
        b.v[i] = v, b.given[i] = true;
    }
    return b;
}

void add_globals(Evaluator &ev, std::unordered_map<std::string, Value> &vars) {
    vars["range"] = make_func("range", range_global);
    vars["namespace"] = make_func("namespace", [](Evaluator &e, Args &a) -> Value {
        auto ns = std::make_shared<ObjData>();
        ns->type = "Namespace";
        if (a.pos.size() > 1) fail_runtime("TypeError: dict expected at most 1 argument");
        if (a.pos.size() == 1) {
            const Value &init = a.pos[0];
            if (init.is_dict()) {
                for (const auto &[k, v] : init.dict().entries) ns->attrs.set(k, v);
            } else {
                for (const auto &pair : e.iterate(init)) {
                    const auto kv = e.iterate(pair);
                    if (kv.size() != 2) fail_runtime("ValueError: dictionary update sequence element has wrong length");
                    ns->attrs.set(kv[0], kv[1]);
                }
            }
        }
        for (const auto &[k, v] : a.kw) ns->attrs.set(Value::string(k), v);
        e.track(ns);
        return Value::object(ns);
    });
    vars["dict"] = make_func("dict", [](Evaluator &e, Args &a) -> Value {
        auto d = std::make_shared<DictData>();
        if (a.pos.size() > 1) fail_runtime("TypeError: dict expected at most 1 argument");
        if (a.pos.size() == 1) {
            if (a.pos[0].is_dict()) {
                *d = a.pos[0].dict();
            } else {
                for (const auto &pair : e.iterate(a.pos[0])) {
                    const auto kv = e.iterate(pair);
                    if (kv.size() != 2) fail_runtime("ValueError: dictionary update sequence element has wrong length");
                    d->set(kv[0], kv[1]);
                }
            }
        }
        for (const auto &[k, v] : a.kw) d->set(Value::string(k), v);
        return Value::dict(d);
    });
    vars["raise_exception"] = make_func("raise_exception", [](Evaluator &e, Args &a) -> Value {
        const Bound b = bind(a, {"message"}, "raise_exception");
        if (!b.has(0)) fail_runtime("TypeError: raise_exception() missing 1 required positional argument: 'message'");
        fail_raised(e.str(b[0]));
    });
    vars["strftime_now"] = make_func("strftime_now", strftime_now);
    for (const char *name : {"lipsum", "cycler", "joiner"}) {
        const std::string n = name;
        vars[name] = make_func(name, [n](Evaluator &, Args &) -> Value { fail_unsupported("global '" + n + "'"); });
    }
}

}  // namespace llm::jinja
