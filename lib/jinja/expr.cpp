// Expressions: operators with Python's semantics, comparisons, slices, filters and tests, and the
// sandbox's attribute/item lookup and calls.
#include "jinja/eval.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "jinja/builtins.h"
#include "jinja/text.h"
#include "llm.h"

namespace llm::jinja {
namespace {

// Python's name for an object in Jinja's "'x' has no attribute 'y'" messages.
std::string object_desc(const Value &v) {
    if (v.is_none()) return "None";
    return type_name(v) + " object";
}

bool is_int_like(const Value &v) { return v.kind() == Kind::Int || v.kind() == Kind::Bool; }

int64_t checked(bool overflow, int64_t r) {
    if (overflow) fail_unsupported("integer overflow (Python integers are unbounded; ours are 64-bit)");
    return r;
}

// Python's slice.indices(): resolves start/stop/step against a length.
void slice_indices(int64_t len, const Value &start, const Value &stop, const Value &step, int64_t *b, int64_t *e,
                   int64_t *s) {
    auto as_int = [](const Value &v, const char *what) -> int64_t {
        if (!is_int_like(v)) fail_runtime(std::string("TypeError: slice ") + what + " must be integers or None");
        return v.get_int();
    };
    *s = step.is_none() || step.is_undefined() ? 1 : as_int(step, "indices");
    if (*s == 0) fail_runtime("ValueError: slice step cannot be zero");
    const bool neg = *s < 0;
    auto fix = [&](const Value &v, int64_t dflt) -> int64_t {
        if (v.is_none() || v.is_undefined()) return dflt;
        int64_t x = as_int(v, "indices");
        if (x < 0) {
            x += len;
            if (x < 0) x = neg ? -1 : 0;
        } else if (x >= len) {
            x = neg ? len - 1 : len;
        }
        return x;
    };
    *b = fix(start, neg ? len - 1 : 0);
    *e = fix(stop, neg ? -1 : len);
}

}  // namespace

// ---- expressions --------------------------------------------------------------------------------------
Value Evaluator::lookup(const std::string &name) {
    for (const Frame *f = frame_.get(); f; f = f->parent.get()) {
        auto it = f->vars.find(name);
        if (it != f->vars.end()) return it->second;
    }
    return Value::undefined("'" + name + "' is undefined");
}

void Evaluator::eval_args(const Node &n, Args *args) {
    if (n.dyn_args) fail_unsupported("*args / **kwargs in a call");
    for (const auto &a : n.args) args->pos.push_back(eval(*a));
    for (const auto &[k, v] : n.kwargs) args->kw.emplace_back(k, eval(*v));
}

Value Evaluator::eval(const Node &n) {
    budget.charge(1);
    budget.check_stack();
    line = n.line;
    if (folding_ && (n.kind == NK::Name || n.kind == NK::Call)) throw Impossible{};
    switch (n.kind) {
    case NK::Const: return n.value.kind() == Kind::List || n.value.kind() == Kind::Dict ? fresh_copy(n.value) : n.value;
    case NK::Name: return lookup(n.str);
    case NK::Getattr: {
        const Value obj = eval(*n.a);
        line = n.line;
        return getattr(obj, n.str);
    }
    case NK::Getitem: {
        const Value obj = eval(*n.a);
        if (n.b->kind == NK::Slice) return eval_slice(obj, *n.b);
        const Value key = eval(*n.b);
        line = n.line;
        return getitem(obj, key);
    }
    case NK::Call: {
        const Value fn = eval(*n.a);
        Args args;
        eval_args(n, &args);
        line = n.line;
        return call(fn, args);
    }
    case NK::Filter: return eval_filter(n, nullptr);
    case NK::Test: return eval_test(n);
    case NK::Neg:
    case NK::Pos: {
        const Value v = eval(*n.a);
        if (v.is_undefined()) undefined_error(v);
        if (v.kind() == Kind::Float) return Value::number(n.kind == NK::Neg ? -v.get_float() : v.get_float());
        if (is_int_like(v)) {
            if (n.kind == NK::Pos) return Value::integer(v.get_int());
            return Value::integer(checked(v.get_int() == INT64_MIN, -v.get_int()));
        }
        fail_runtime(std::string("TypeError: bad operand type for unary ") + (n.kind == NK::Neg ? "-" : "+") + ": '" +
                     type_name(v) + "'");
    }
    case NK::Not: return Value::boolean(!truthy(eval(*n.a)));
    case NK::Binary: return eval_binary(n);
    case NK::Concat: {
        std::string s;
        for (const auto &part : n.args) {
            const Value v = eval(*part);
            const std::string piece = v.is_string() ? v.str() : str(v);
            budget.string_bytes(s.size() + piece.size());
            s += piece;
        }
        return make_str(std::move(s));
    }
    case NK::Compare: return eval_compare(n);
    case NK::CondExpr:
        if (truthy(eval(*n.a))) return eval(*n.b);
        if (n.c) return eval(*n.c);
        return Value::undefined("the inline if-expression on line " + std::to_string(n.line) +
                                " evaluated to false and no else section was defined.");
    case NK::List:
    case NK::Tuple: {
        std::vector<Value> items;
        items.reserve(n.args.size());
        for (const auto &a : n.args) items.push_back(eval(*a));
        Value v = Value::list(std::move(items), n.kind == NK::Tuple);
        budget.depth(v.depth());
        return v;
    }
    case NK::Dict: {
        auto d = std::make_shared<DictData>();
        for (size_t i = 0; i + 1 < n.args.size(); i += 2) {
            Value k = eval(*n.args[i]);
            d->set(k, eval(*n.args[i + 1]));
        }
        Value v = Value::dict(std::move(d));
        budget.depth(v.depth());
        return v;
    }
    default: fail_unsupported("expression kind");
    }
}

Value Evaluator::eval_filter(const Node &n, const Value *input) {
    if (folding_) {
        static const char *const ctx_filters[] = {"map", "select", "reject", "selectattr", "rejectattr", "random"};
        const bool needs_context =
            std::any_of(std::begin(ctx_filters), std::end(ctx_filters), [&](const char *f) { return n.str == f; });
        if (needs_context || !n.a || n.dyn_args || !jinja_has_filter(n.str)) throw Impossible{};
    }
    // A chain applies innermost first; inside a filter block the innermost input is the rendered body.
    Value in;
    if (!n.a) {
        in = input ? *input : Value();
    } else if (input && n.a->kind == NK::Filter) {
        in = eval_filter(*n.a, input);  // still inside the chain that starts from the block's body
    } else {
        in = eval(*n.a);
    }
    Args args;
    eval_args(n, &args);
    line = n.line;
    return apply_filter(*this, n.str, in, args);
}

Value Evaluator::eval_test(const Node &n) {
    if (folding_ && (n.dyn_args || !jinja_has_test(n.str))) throw Impossible{};
    const Value in = eval(*n.a);
    Args args;
    eval_args(n, &args);
    line = n.line;
    return Value::boolean(apply_test(*this, n.str, in, args));
}

Value Evaluator::eval_compare(const Node &n) {
    Value left = eval(*n.a);
    for (size_t i = 0; i < n.ops.size(); i++) {
        const Value right = eval(*n.args[i]);
        line = n.line;
        const std::string &op = n.ops[i];
        bool r;
        if (op == "==") {
            r = equals(left, right, budget);
        } else if (op == "!=") {
            r = !equals(left, right, budget);
        } else if (op == "<") {
            r = less(left, right, budget, "<");
        } else if (op == ">") {
            r = less(right, left, budget, ">");
        } else if (op == "<=") {
            r = less(left, right, budget, "<=") || equals(left, right, budget);
        } else if (op == ">=") {
            r = less(right, left, budget, ">=") || equals(left, right, budget);
        } else {  // in / notin: Python's `x in container`
            bool found = false;
            if (right.is_string()) {
                if (!left.is_string())
                    fail_runtime("TypeError: 'in <string>' requires string as left operand, not " + type_name(left));
                found = right.str().find(left.str()) != std::string::npos;
            } else if (right.is_dict()) {
                std::string key;
                if (!dict_key(left, &key)) fail_runtime("TypeError: unhashable type: '" + type_name(left) + "'");
                found = right.dict().find(left) != nullptr;
            } else if (right.kind() == Kind::List) {
                budget.charge(right.items().size());
                auto &items = static_cast<ListData &>(*right.heap()).items;
                size_t i = 0;
                for (; i < items.size(); i++)
                    if (equals(items[i], left, budget)) {
                        found = true;
                        break;
                    }
                // an iterator is consumed up to and including the match
                if (right.is_lazy())
                    items.erase(items.begin(),
                                items.begin() + static_cast<std::ptrdiff_t>(std::min(i + 1, items.size())));
            } else if (right.is_undefined()) {
                found = false;  // an undefined value iterates as empty
            } else if (right.kind() == Kind::Object && right.object().type == "Namespace") {
                fail_runtime("TypeError: argument of type 'Namespace' is not iterable");
            } else {
                fail_runtime("TypeError: argument of type '" + type_name(right) + "' is not iterable");
            }
            r = op == "in" ? found : !found;
        }
        if (!r) return Value::boolean(false);
        left = right;
    }
    return Value::boolean(true);
}

Value Evaluator::eval_slice(const Value &obj, const Node &sl) {
    const Value start = sl.a ? eval(*sl.a) : Value::none();
    const Value stop = sl.b ? eval(*sl.b) : Value::none();
    const Value step = sl.c ? eval(*sl.c) : Value::none();
    line = sl.line;
    // Jinja compiles a slice to a plain Python subscript (not the sandbox's getitem), so errors raise;
    // but a constant {{ }} folded at compile time goes through the sandbox's getitem: undefined.
    if (folding_ && !obj.is_undefined()) {
        if (!obj.is_list() && !obj.is_string())
            return Value::undefined(quote(object_desc(obj)) + " is not subscriptable");
        for (const Value *v : {&start, &stop, &step})
            if (!v->is_none() && !is_int_like(*v)) return Value::undefined("slice indices must be integers");
    }
    if (obj.is_undefined()) undefined_error(obj);
    if (obj.is_dict()) fail_runtime("TypeError: unhashable type: 'slice'");
    if (!obj.is_list() && !obj.is_string())
        fail_runtime("TypeError: '" + type_name(obj) + "' object is not subscriptable");
    for (const Value *v : {&start, &stop, &step}) {
        if (v->is_undefined()) undefined_error(*v);
        if (!v->is_none() && !is_int_like(*v))
            fail_runtime("TypeError: slice indices must be integers or None or have an __index__ method");
    }
    std::vector<uint32_t> cps;
    int64_t len;
    if (obj.is_string()) {
        cps = text::decode(obj.str());
        len = static_cast<int64_t>(cps.size());
    } else {
        len = static_cast<int64_t>(obj.items().size());
    }
    int64_t b, e, s;
    slice_indices(len, start, stop, step, &b, &e, &s);
    std::vector<size_t> picks;
    for (int64_t i = b; s > 0 ? i < e : i > e; i += s) picks.push_back(static_cast<size_t>(i));
    budget.charge(picks.size() / 4 + 1);
    if (obj.is_string()) {
        std::string out;
        for (size_t i : picks) text::append_utf8(out, cps[i]);
        return make_str(std::move(out), obj.is_markup());
    }
    std::vector<Value> items;
    items.reserve(picks.size());
    for (size_t i : picks) items.push_back(obj.items()[i]);
    return Value::list(std::move(items), obj.is_tuple());
}

namespace {

// Python's numeric //, % and ** on two numbers (both_int: both are ints or bools), with its
// floor-rounding signs, its errors and our overflow checks.
Value floor_divide(const Value &l, const Value &r, bool both_int) {
    if (both_int) {
        const int64_t a = l.get_int(), b = r.get_int();
        if (b == 0) fail_runtime("ZeroDivisionError: integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) checked(true, 0);
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
        return Value::integer(q);
    }
    if (r.get_float() == 0.0) fail_runtime("ZeroDivisionError: float floor division by zero");
    // CPython's float_divmod: floor of (a - fmod(a, b)) / b, not of a / b (1 // 0.1 == 9.0)
    const double a = l.get_float(), b = r.get_float();
    double mod = std::fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
    double fl;
    if (div != 0) {
        fl = std::floor(div);
        if (div - fl > 0.5) fl += 1.0;
    } else {
        fl = std::copysign(0.0, a / b);
    }
    return Value::number(fl);
}

Value modulo(const Value &l, const Value &r, bool both_int) {
    if (both_int) {
        const int64_t a = l.get_int(), b = r.get_int();
        if (b == 0) fail_runtime("ZeroDivisionError: integer division or modulo by zero");
        if (b == -1) return Value::integer(0);
        int64_t m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value::integer(m);
    }
    const double b = r.get_float();
    if (b == 0.0) fail_runtime("ZeroDivisionError: float modulo");
    double m = std::fmod(l.get_float(), b);
    if (m != 0) {
        if ((m < 0) != (b < 0)) m += b;
    } else {
        m = std::copysign(0.0, b);
    }
    return Value::number(m);
}

Value power(const Value &l, const Value &r, bool both_int) {
    if (both_int && r.get_int() >= 0) {
        int64_t base = l.get_int(), e = r.get_int(), acc = 1;
        while (e > 0) {
            if (e & 1) checked(__builtin_mul_overflow(acc, base, &acc), 0);
            e >>= 1;
            if (e) checked(__builtin_mul_overflow(base, base, &base), 0);
        }
        return Value::integer(acc);
    }
    if (l.get_float() == 0.0 && r.get_float() < 0)
        fail_runtime("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    const double x = std::pow(l.get_float(), r.get_float());
    if (std::isnan(x) && !std::isnan(l.get_float()) && !std::isnan(r.get_float()))
        fail_unsupported("a complex result of **");
    if (std::isinf(x) && std::isfinite(l.get_float()) && std::isfinite(r.get_float()))
        fail_runtime("OverflowError: (34, 'Numerical result out of range')");
    return Value::number(x);
}

}  // namespace

Value Evaluator::eval_binary(const Node &n) {
    const std::string &op = n.str;
    if (op == "and") {
        Value l = eval(*n.a);
        return truthy(l) ? eval(*n.b) : l;
    }
    if (op == "or") {
        Value l = eval(*n.a);
        return truthy(l) ? l : eval(*n.b);
    }
    const Value l = eval(*n.a);
    const Value r = eval(*n.b);
    line = n.line;
    // str % x formats even with an undefined x (it counts as a mapping: "%s" prints it as "")
    if (op == "%" && l.is_string()) return make_str(percent_format(*this, l.str(), r, l.is_markup()), l.is_markup());
    if (l.is_undefined()) undefined_error(l);
    if (r.is_undefined()) undefined_error(r);
    auto type_error = [&]() -> Value {
        if (op == "+" && l.is_string())
            fail_runtime("TypeError: can only concatenate str (not \"" + type_name(r) + "\") to str");
        if (op == "+" && l.is_list() && !l.is_tuple())
            fail_runtime("TypeError: can only concatenate list (not \"" + type_name(r) + "\") to list");
        fail_runtime("TypeError: unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" +
                     type_name(r) + "'");
    };
    const bool both_int = is_int_like(l) && is_int_like(r);
    const bool both_num = l.is_number() && r.is_number();
    if (op == "+") {
        if (both_int) {
            int64_t x;
            const bool overflow = __builtin_add_overflow(l.get_int(), r.get_int(), &x);
            return Value::integer(checked(overflow, x));
        }
        if (both_num) return Value::number(l.get_float() + r.get_float());
        if (l.is_string() && r.is_string()) {
            // Markup + str escapes the plain operand (markupsafe), whichever side it is on.
            const bool markup = l.is_markup() || r.is_markup();
            const std::string a = markup && !l.is_markup() ? text::html_escape(l.str()) : l.str();
            const std::string b = markup && !r.is_markup() ? text::html_escape(r.str()) : r.str();
            budget.string_bytes(a.size() + b.size());
            return make_str(a + b, markup);
        }
        if (l.is_list() && r.is_list() && !l.is_view() && !r.is_view() && l.is_tuple() == r.is_tuple()) {
            budget.items(l.items().size() + r.items().size());
            std::vector<Value> items = l.items();
            items.insert(items.end(), r.items().begin(), r.items().end());
            return Value::list(std::move(items), l.is_tuple());
        }
        return type_error();
    }
    if (op == "-") {
        if (both_int) {
            int64_t x;
            const bool overflow = __builtin_sub_overflow(l.get_int(), r.get_int(), &x);
            return Value::integer(checked(overflow, x));
        }
        if (both_num) return Value::number(l.get_float() - r.get_float());
        return type_error();
    }
    if (op == "*") {
        if (both_int) {
            int64_t x;
            const bool overflow = __builtin_mul_overflow(l.get_int(), r.get_int(), &x);
            return Value::integer(checked(overflow, x));
        }
        if (both_num) return Value::number(l.get_float() * r.get_float());
        const Value *seq = nullptr, *count = nullptr;
        if ((l.is_string() || (l.is_list() && !l.is_view())) && is_int_like(r)) seq = &l, count = &r;
        if ((r.is_string() || (r.is_list() && !r.is_view())) && is_int_like(l)) seq = &r, count = &l;
        if (!seq) {
            if (l.is_string() || r.is_string() || l.is_list() || r.is_list())
                fail_runtime("TypeError: can't multiply sequence by non-int of type '" +
                             type_name(l.is_string() || l.is_list() ? r : l) + "'");
            return type_error();
        }
        const int64_t times = std::max<int64_t>(0, count->get_int());
        if (seq->is_string()) {
            const size_t unit = seq->str().size();
            if (unit && static_cast<uint64_t>(times) > budget.limits.max_output / unit)
                fail_limit("a string of more than " + std::to_string(budget.limits.max_output) + " bytes");
            budget.string_bytes(unit * static_cast<uint64_t>(times));
            std::string s;
            s.reserve(unit * static_cast<size_t>(times));
            for (int64_t i = 0; i < times; i++) s += seq->str();
            return make_str(std::move(s), seq->is_markup());
        }
        const size_t unit = seq->items().size();
        if (unit && static_cast<uint64_t>(times) > budget.limits.max_output / 32 / unit)
            fail_limit("a list of more than " + std::to_string(budget.limits.max_output / 32) + " items");
        budget.items(unit * static_cast<uint64_t>(times));
        std::vector<Value> items;
        for (int64_t i = 0; i < times; i++) items.insert(items.end(), seq->items().begin(), seq->items().end());
        return Value::list(std::move(items), seq->is_tuple());
    }
    if (op == "/") {
        if (!both_num) return type_error();
        if (r.get_float() == 0.0) fail_runtime("ZeroDivisionError: division by zero");
        return Value::number(l.get_float() / r.get_float());
    }
    if (op == "//") return both_num ? floor_divide(l, r, both_int) : type_error();
    if (op == "%") {
        if (l.is_string()) return make_str(percent_format(*this, l.str(), r, l.is_markup()), l.is_markup());
        return both_num ? modulo(l, r, both_int) : type_error();
    }
    if (op == "**") return both_num ? power(l, r, both_int) : type_error();
    fail_unsupported("operator " + op);
}

// ---- sandboxed lookups and calls -------------------------------------------------------------------------
Value Evaluator::loop_attr(const ObjData &loop, const std::string &name) {
    const int64_t i = loop.loop_index - 1, len = loop.loop_length;
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(len - i);
    if (name == "revindex0") return Value::integer(len - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == len - 1);
    if (name == "length") return Value::integer(len);
    if (name == "depth") return Value::integer(1);
    if (name == "depth0") return Value::integer(0);
    if (name == "previtem")
        return i > 0 ? (*loop.loop_items)[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
    if (name == "nextitem")
        return i + 1 < len ? (*loop.loop_items)[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
    if (name == "cycle") {
        auto cyc = std::make_shared<FuncData>();
        cyc->name = "cycle";
        cyc->fn = [i](Evaluator &, Args &a) -> Value {
            if (!a.kw.empty()) fail_runtime("TypeError: cycle() got an unexpected keyword argument");
            if (a.pos.empty()) fail_runtime("TypeError: no items for cycling given");
            return a.pos[static_cast<size_t>(i) % a.pos.size()];
        };
        return Value::func(cyc);
    }
    if (name == "changed" || name == "reset" || name == "__call__") fail_unsupported("loop." + name);
    if (!name.empty() && name[0] == '_')
        return Value::undefined("access to attribute '" + name + "' of 'LoopContext' object is unsafe.");
    return Value::undefined("'LoopContext object' has no attribute '" + name + "'");
}

Value Evaluator::getattr(const Value &obj, const std::string &name) {
    if (obj.is_undefined()) undefined_error(obj);
    if (!name.empty() && name[0] == '_')
        return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
    if (obj.kind() == Kind::Object) {
        if (obj.object().type == "LoopContext") return loop_attr(obj.object(), name);
        const Value *v = obj.object().attrs.find(std::string_view(name));
        if (v) return *v;
        return Value::undefined(quote(object_desc(obj)) + " has no attribute " + quote(name));
    }
    bool found = false;
    Value m = find_method(*this, obj, name, &found);
    if (found) return m;
    if (obj.is_dict()) {
        const Value *v = obj.dict().find(std::string_view(name));
        if (v) return *v;
    }
    return Value::undefined(quote(object_desc(obj)) + " has no attribute " + quote(name));
}

Value Evaluator::getitem(const Value &obj, const Value &key) {
    if (obj.is_undefined()) undefined_error(obj);
    if (obj.is_dict()) {
        const Value *v = obj.dict().find(key);
        if (v) return *v;
    } else if ((obj.is_list() || obj.is_string()) && is_int_like(key)) {
        int64_t i = key.get_int();
        if (obj.is_list()) {
            const auto n = static_cast<int64_t>(obj.items().size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
        } else {
            const auto cps = text::decode(obj.str());
            const auto n = static_cast<int64_t>(cps.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n)
                return Value::string(text::encode(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
        }
    }
    if (key.is_string()) {
        if (obj.kind() == Kind::Object) {
            if (obj.object().type == "LoopContext") return loop_attr(obj.object(), key.str());
            if (const Value *v = obj.object().attrs.find(std::string_view(key.str()))) return *v;
        } else if (!key.str().empty() && key.str()[0] != '_') {
            bool found = false;
            Value m = find_method(*this, obj, key.str(), &found);
            if (found) return m;
        }
        return Value::undefined(quote(object_desc(obj)) + " has no attribute " + quote(key.str()));
    }
    return Value::undefined(quote(object_desc(obj)) + " has no item " + to_repr(key, budget));
}

Value Evaluator::call(const Value &fn, Args &args) {
    if (fn.is_undefined()) undefined_error(fn);
    if (fn.kind() != Kind::Func) fail_runtime("TypeError: '" + type_name(fn) + "' object is not callable");
    // Hold the function while it runs: a macro may rebind the name that referenced it.
    const auto keep = fn.heap();
    return fn.func().fn(*this, args);
}

}  // namespace llm::jinja
