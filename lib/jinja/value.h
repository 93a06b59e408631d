// The interpreter's dynamic value: what a Python object is to Jinja2. Lists, dicts and strings are
// immutable once built (the immutable sandbox forbids append/update/...), so they are shared, never
// copied; only namespace objects change, through `{% set ns.attr = ... %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "jinja/jinja.h"

namespace llm::jinja {

// What the interpreter throws: the library's Error (its status and final message, so status_of()
// maps it like any other), plus the kind of failure and the template line. The evaluator attaches
// the line of the node it was evaluating to an error thrown without one (at_line()).
class TemplateError : public Error {
public:
    enum class Kind {
        Runtime,      // an exception Jinja2 would raise too: LLM_ERR_INVALID_ARGUMENT
        Raised,       // raise_exception(): detail is the template's own text; LLM_ERR_INVALID_ARGUMENT
        Syntax,       // a malformed template: LLM_ERR_FORMAT
        Limit,        // a Limits bound: LLM_ERR_FORMAT; the render must stop, whatever eval's caller hoped
        Unsupported,  // a construct this interpreter does not implement: LLM_ERR_UNSUPPORTED
    };
    TemplateError(Kind kind, std::string detail, int line = 0);
    Kind kind() const noexcept { return kind_; }
    int line() const noexcept { return line_; }  // 0: not known yet
    TemplateError at_line(int line) const { return TemplateError(kind_, detail_, line); }

private:
    Kind kind_;
    std::string detail_;  // what happened, without the line
    int line_;
};
// 'text' with quotes, for messages (built by appending: GCC 12 warns falsely on chains of operator+).
std::string quote(std::string_view text);
[[noreturn]] void fail_runtime(std::string msg);      // an exception Jinja2 would raise too
[[noreturn]] void fail_unsupported(std::string msg);  // a construct this interpreter does not implement
[[noreturn]] void fail_limit(std::string msg);        // a Limits bound was reached
[[noreturn]] void fail_syntax(int line, std::string msg);
[[noreturn]] void fail_unsupported_at(int line, std::string msg);
[[noreturn]] void fail_raised(std::string msg);  // raise_exception(msg)

// Counts work and bounds sizes for one render; every costly operation charges it.
struct Budget {
    Limits limits;
    uint64_t steps = 0;
    void charge(uint64_t n) {
        steps += n;
        if (steps > limits.max_steps) fail_limit("more than " + std::to_string(limits.max_steps) + " steps");
    }
    // A string about to be built with n bytes: checked before allocating, and charged per 64 bytes.
    void string_bytes(uint64_t n) {
        if (n > limits.max_output) fail_limit("a string of more than " + std::to_string(limits.max_output) + " bytes");
        charge(n / 64);
    }
    // Lists and dicts: at most max_output/32 items each (a Value is 32 bytes).
    void items(uint64_t n) {
        if (n > limits.max_output / 32)
            fail_limit("a list of more than " + std::to_string(limits.max_output / 32) + " items");
        charge(n / 4);
    }
    void depth(uint32_t d) const {
        if (d > limits.max_depth) fail_limit("nesting deeper than " + std::to_string(limits.max_depth));
    }
    // The parser and evaluator recurse; besides the depth counters, this bounds the C++ stack they use
    // (frames differ between builds, e.g. under sanitizers), so a host thread with a stack of 512 KiB
    // or more is safe. Real templates need under 48 KiB in a release build.
    static constexpr uintptr_t kStackBudget = 256u << 10;
    uintptr_t stack_base = 0;
    void check_stack() const {
        const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
        const uintptr_t used = stack_base > here ? stack_base - here : here - stack_base;
        if (stack_base && used > kStackBudget) fail_limit("template nesting needs too much stack");
    }
};

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Func, Object };

struct Heap {
    virtual ~Heap() = default;
};
struct ListData;
struct DictData;
struct FuncData;
struct ObjData;

class Value {
public:
    Value() = default;  // Undefined
    static Value none() { return Value(Kind::None); }
    static Value boolean(bool b) {
        Value v(Kind::Bool);
        v.b_ = b;
        return v;
    }
    static Value integer(int64_t i) {
        Value v(Kind::Int);
        v.i_ = i;
        return v;
    }
    static Value number(double f) {
        Value v(Kind::Float);
        v.f_ = f;
        return v;
    }
    static Value string(std::string s, bool markup = false);
    // hint: Jinja's message when the undefined value is used ("'x' is undefined").
    static Value undefined(std::string hint);
    static Value list(std::vector<Value> items, bool tuple = false);
    // A list standing for another Python iterable, so it behaves as that type does: dict views
    // (print as dict_keys([...]), not JSON-serializable, not subscriptable), range (printing refused),
    // and the one-pass iterators the lazy filters return (Generator: map, select, unique...; Iterator:
    // reverse), which are always truthy, have no len() and are used up by iterating them.
    enum class View : uint8_t { None, Keys, Values, Items, Range, Generator, Iterator };
    static Value view(std::vector<Value> items, View kind) {
        Value v = list(std::move(items));
        v.view_ = kind;
        return v;
    }
    View view_kind() const { return view_; }
    static Value dict(std::shared_ptr<DictData> d);
    static Value func(std::shared_ptr<FuncData> f);
    static Value object(std::shared_ptr<ObjData> o);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
    bool is_list() const { return kind_ == Kind::List && (view_ == View::None || view_ == View::Range); }  // indexable
    bool is_view() const { return kind_ == Kind::List && view_ != View::None; }
    bool is_lazy() const { return kind_ == Kind::List && (view_ == View::Generator || view_ == View::Iterator); }
    bool is_tuple() const { return kind_ == Kind::List && flag_; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_markup() const { return kind_ == Kind::String && flag_; }

    bool get_bool() const { return b_; }
    int64_t get_int() const { return kind_ == Kind::Bool ? int64_t(b_) : i_; }
    double get_float() const { return kind_ == Kind::Float ? f_ : double(get_int()); }
    const std::string &str() const;  // String, and Undefined's hint ("" when none)
    const std::vector<Value> &items() const;
    const DictData &dict() const;
    const FuncData &func() const;
    ObjData &object() const;
    const std::shared_ptr<Heap> &heap() const { return p_; }
    uint32_t depth() const;  // nesting of lists/dicts (0 for scalars)

private:
    explicit Value(Kind k) : kind_(k) {}
    Kind kind_ = Kind::Undefined;
    bool flag_ = false;  // List: a tuple; String: a Markup (Jinja's "safe" string)
    View view_ = View::None;
    union {
        bool b_;
        int64_t i_ = 0;
        double f_;
    };
    std::shared_ptr<Heap> p_;
};

struct StrData : Heap {
    std::string s;
};

struct ListData : Heap {
    std::vector<Value> items;
    uint32_t depth = 1;
};

// A Python dict: insertion-ordered, keys compared as Python does (1 == 1.0 == True).
struct DictData : Heap {
    std::vector<std::pair<Value, Value>> entries;
    std::unordered_map<std::string, size_t> index;  // dict_key() of a key -> entries position
    uint32_t depth = 1;
    const Value *find(const Value &key) const;
    const Value *find(std::string_view key) const;  // a string key
    void set(const Value &key, Value v);            // fails (TypeError) for an unhashable key
};

class Evaluator;
struct Args {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
};
struct FuncData : Heap {
    std::string name;
    bool macro = false;  // prints as <Macro 'name'>; other functions print with an address (refused)
    std::function<Value(Evaluator &, Args &)> fn;
};

// Namespace (attributes settable by the template) or LoopContext (attributes computed on access
// from the position in the loop's items).
struct ObjData : Heap {
    std::string type;  // Python type name: "Namespace", "LoopContext"
    DictData attrs;
    int64_t loop_index = 0, loop_length = 0;               // 1-based position; the number of items
    std::shared_ptr<const std::vector<Value>> loop_items;  // for previtem / nextitem
};

// Python semantics of values.
bool truthy(const Value &v);
std::string type_name(const Value &v);  // "NoneType", "str", "dict", ... as Python's type(x).__name__
// The key a value has in a dict index; false if Python would call it unhashable.
bool dict_key(const Value &v, std::string *out);
std::string float_repr(double d);  // Python's repr(float): shortest round-trip
// str(v) (Undefined prints as ""), repr(v); both bounded by the budget.
std::string to_str(const Value &v, Budget &b);
std::string to_repr(const Value &v, Budget &b);
bool equals(const Value &a, const Value &b, Budget &bud, uint32_t depth = 0);
// A deep copy of lists and dicts: a folded literal is a new object each time Jinja's code evaluates it.
Value fresh_copy(const Value &v);
// Python's ordering (<); fails with TypeError for unorderable types; op names the operator for it.
bool less(const Value &a, const Value &b, Budget &bud, const char *op = "<", uint32_t depth = 0);

struct JsonStyle {
    bool ensure_ascii = false;
    bool sort_keys = false;
    bool pretty = false;  // indent given (even "" or 0): newlines between items
    std::string indent;
    std::string item_sep = ", ", key_sep = ": ";
};
// json.dumps(v, ...) as HF's tojson calls it.
std::string to_json(const Value &v, const JsonStyle &style, Budget &b);
Value from_json(const nlohmann::json &j, Budget &b, uint32_t depth = 0);
Value from_json(const nlohmann::ordered_json &j, Budget &b, uint32_t depth = 0);  // keeps key order

}  // namespace llm::jinja
