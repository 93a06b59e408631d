// Jinja2's filters, tests and globals, HF's additions (tojson, raise_exception, strftime_now), and
// the Python methods templates call on str, dict and list values.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jinja/value.h"

namespace llm::jinja {

class Evaluator;

// Names Jinja2 (with HF's tojson) knows, implemented here or not: the parser rejects others outside if-blocks.
bool jinja_has_filter(std::string_view name);
bool jinja_has_test(std::string_view name);

// Applies a filter / test; fails as unsupported for a Jinja2 builtin we leave out, and as Jinja's
// runtime error for a name it does not know either.
Value apply_filter(Evaluator &ev, const std::string &name, const Value &input, Args &args);
bool apply_test(Evaluator &ev, const std::string &name, const Value &input, Args &args);

// A Python method of a str / dict / list value, bound to it; *found false if the type has no such
// attribute (then Jinja tries an item lookup). Fails as unsupported for a real Python method we do not carry.
Value find_method(Evaluator &ev, const Value &self, const std::string &name, bool *found);

// The globals every render sees: range, namespace, dict, cycler, joiner, raise_exception, strftime_now.
void add_globals(Evaluator &ev, std::unordered_map<std::string, Value> &vars);

// Filters and tests are found by name in a table (filters.cpp, builtins.cpp) listing every one Jinja2
// has; a row whose function is null is one this interpreter leaves out (unsupported). The function
// gets the name it was called by, as several names share one (upper/lower, ==/eq/equalto, ...).
using FilterFn = Value (*)(Evaluator &ev, const std::string &name, const Value &input, Args &args);
using TestFn = bool (*)(Evaluator &ev, const std::string &name, const Value &input, Args &args);
struct FilterEntry {
    std::string_view name;
    FilterFn fn;
};
struct TestEntry {
    std::string_view name;
    TestFn fn;
};
const FilterEntry *find_filter(std::string_view name);  // null: Jinja2 has no such filter
const TestEntry *find_test(std::string_view name);
// An int (or bool) argument, else Python's TypeError naming `what`.
int64_t want_int(const Value &v, const char *what);

// Python's `fmt % args` (printf-style) and str.format; markup escapes the arguments (a Markup format).
std::string percent_format(Evaluator &ev, const std::string &fmt, const Value &args, bool markup);
std::string str_format(Evaluator &ev, const std::string &fmt, Args &args, bool markup);

// Binds call arguments to parameter names like a Python signature; unknown keywords and too many
// arguments fail with Python's TypeError. Missing ones are left undefined (check with has()).
struct Bound {
    std::vector<Value> v;
    std::vector<bool> given;
    bool has(size_t i) const { return given[i]; }
    const Value &operator[](size_t i) const { return v[i]; }
};
Bound bind(const Args &args, std::initializer_list<const char *> names, const char *fname);

}  // namespace llm::jinja
