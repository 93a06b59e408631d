// Statements and scopes: output, if, for (a frame per iteration), set, macros, filter and set blocks;
// and the constant folding pass Jinja's compiler applies before any of it runs.
#include "jinja/eval.h"

#include <algorithm>
#include <cmath>

#include "jinja/builtins.h"
#include "jinja/text.h"
#include "llm.h"

namespace llm::jinja {

Evaluator::Evaluator(const Options &opt) : now(opt.now) { budget.limits = opt.limits; }

Evaluator::~Evaluator() {
    // Namespaces may hold each other (or themselves): drop their attributes one by one so nothing
    // leaks and no long chain is destroyed recursively.
    for (auto &ns : namespaces_) {
        DictData tmp;
        std::swap(tmp, ns->attrs);
    }
    frame_.reset();
}

void Evaluator::undefined_error(const Value &v) {
    fail_runtime(v.str().empty() ? std::string("UndefinedError: undefined value") : "UndefinedError: " + v.str());
}

Value Evaluator::make_str(std::string s, bool markup) {
    budget.string_bytes(s.size());
    return Value::string(std::move(s), markup);
}

void Evaluator::run(const Template &tmpl, const Value &context, std::string *out) {
    auto globals = std::make_shared<Frame>();
    add_globals(*this, globals->vars);
    auto root = std::make_shared<Frame>();
    root->parent = globals;
    for (const auto &[k, v] : context.dict().entries)
        if (k.is_string()) root->vars[k.str()] = v;
    frame_ = root;
    out_ = out;
    exec_block(tmpl.body);
}

void Evaluator::emit(const std::string &s) {
    if (out_->size() + s.size() > budget.limits.max_output)
        fail_limit("output of more than " + std::to_string(budget.limits.max_output) + " bytes");
    budget.charge(s.size() / 64);
    out_->append(s);
}

// ---- statements -----------------------------------------------------------------------------------------
Evaluator::Flow Evaluator::exec_block(const std::vector<NodePtr> &body) {
    for (const auto &st : body) {
        const Flow f = exec(*st);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

std::string Evaluator::render_body(const std::vector<NodePtr> &body, std::shared_ptr<Frame> frame, Flow *flow) {
    std::string buf;
    std::string *saved_out = out_;
    auto saved_frame = frame_;
    out_ = &buf;
    frame_ = std::move(frame);
    try {
        const Flow f = exec_block(body);
        if (flow) *flow = f;
    } catch (...) {
        out_ = saved_out;
        frame_ = saved_frame;
        throw;
    }
    out_ = saved_out;
    frame_ = saved_frame;
    return buf;
}

Evaluator::Flow Evaluator::exec(const Node &n) {
    budget.charge(1);
    budget.check_stack();
    line = n.line;
    switch (n.kind) {
    case NK::Text: emit(n.str); return Flow::Normal;
    case NK::Output: {
        const Value v = output_value(*n.a);
        emit(v.is_string() ? v.str() : str(v));
        return Flow::Normal;
    }
    case NK::If:
        for (size_t i = 0; i < n.args.size(); i++) {
            line = n.args[i]->line;
            if (truthy(eval(*n.args[i]))) return exec_block(n.branches[i]);
        }
        return exec_block(n.orelse);
    case NK::For: {
        Flow f = Flow::Normal;
        exec_for(n, &f);
        return f;
    }
    case NK::Set: set_target(n.target, eval(*n.a)); return Flow::Normal;
    case NK::SetBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame_;
        Flow flow = Flow::Normal;
        Value v = make_str(render_body(n.body, inner, &flow));
        if (flow != Flow::Normal) return flow;
        if (n.a) v = eval_filter(*n.a, &v);
        set_target(n.target, std::move(v));
        return Flow::Normal;
    }
    case NK::Macro: define_macro(n); return Flow::Normal;
    case NK::FilterBlock: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame_;
        Flow flow = Flow::Normal;
        const Value body = make_str(render_body(n.body, inner, &flow));
        if (flow != Flow::Normal) return flow;
        const Value v = eval_filter(*n.a, &body);
        emit(str(v));
        return Flow::Normal;
    }
    case NK::With: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame_;
        for (const auto &[name, expr] : n.kwargs) inner->vars[name] = eval(*expr);
        Flow flow = Flow::Normal;
        emit(render_body(n.body, inner, &flow));
        return flow;
    }
    case NK::Generation: {
        auto inner = std::make_shared<Frame>();
        inner->parent = frame_;
        emit(render_body(n.body, inner));
        return Flow::Normal;
    }
    case NK::Break: return Flow::Break;
    case NK::Continue: return Flow::Continue;
    default: fail_unsupported("statement kind");
    }
}

void Evaluator::assign(const Target &t, const Value &v, Frame &frame) {
    if (!t.tuple) {
        frame.vars[t.names[0]] = v;
        return;
    }
    const std::vector<Value> items = iterate(v);
    if (items.size() < t.names.size())
        fail_runtime("ValueError: not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                     std::to_string(items.size()) + ")");
    if (items.size() > t.names.size())
        fail_runtime("ValueError: too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
    for (size_t i = 0; i < items.size(); i++) frame.vars[t.names[i]] = items[i];
}

void Evaluator::set_target(const Target &t, Value v) {
    if (t.ns_attr.empty()) {
        assign(t, v, *frame_);
        return;
    }
    const Value ns = lookup(t.names[0]);
    if (ns.kind() != Kind::Object || ns.object().type != "Namespace")
        fail_runtime("TemplateRuntimeError: cannot assign attribute on non-namespace object");
    budget.depth(v.depth() + 1);
    ns.object().attrs.set(Value::string(t.ns_attr), std::move(v));
}

std::vector<Value> Evaluator::iterate(const Value &v) {
    switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::List: {
        budget.charge(v.items().size() / 4);
        if (!v.is_lazy()) return v.items();
        // a Python generator/iterator: iterating it uses it up, for every reference to it
        auto &items = static_cast<ListData &>(*v.heap()).items;
        std::vector<Value> out = std::move(items);
        items.clear();
        return out;
    }
    case Kind::Dict: {
        std::vector<Value> keys;
        keys.reserve(v.dict().entries.size());
        for (const auto &kv : v.dict().entries) keys.push_back(kv.first);
        budget.charge(keys.size() / 4);
        return keys;
    }
    case Kind::String: {
        std::vector<Value> chars;
        const auto cps = text::decode(v.str());
        budget.items(cps.size());
        chars.reserve(cps.size());
        for (size_t i = 0; i < cps.size(); i++) chars.push_back(Value::string(text::encode(cps, i, i + 1)));
        return chars;
    }
    default: fail_runtime("TypeError: '" + type_name(v) + "' object is not iterable");
    }
}

void Evaluator::exec_for(const Node &n, Flow *flow) {
    if (n.recursive) fail_unsupported("recursive for loops");
    const Value seq = eval(*n.a);
    std::vector<Value> items = iterate(seq);
    if (n.b) {  // `for x in y if cond`: filtered before the loop counts
        std::vector<Value> kept;
        for (const auto &it : items) {
            auto test_frame = std::make_shared<Frame>();
            test_frame->parent = frame_;
            assign(n.target, it, *test_frame);
            auto saved = frame_;
            frame_ = test_frame;
            bool keep;
            try {
                keep = truthy(eval(*n.b));
            } catch (...) {
                frame_ = saved;
                throw;
            }
            frame_ = saved;
            if (keep) kept.push_back(it);
        }
        items = std::move(kept);
    }
    auto outer = frame_;
    const auto len = static_cast<int64_t>(items.size());
    const auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
    try {
        for (int64_t i = 0; i < len; i++) {
            budget.charge(1);
            auto iter_frame = std::make_shared<Frame>();
            iter_frame->parent = outer;
            assign(n.target, (*shared_items)[static_cast<size_t>(i)], *iter_frame);
            auto loop = std::make_shared<ObjData>();
            loop->type = "LoopContext";
            loop->loop_index = i + 1;
            loop->loop_length = len;
            loop->loop_items = shared_items;
            iter_frame->vars["loop"] = Value::object(loop);
            frame_ = iter_frame;
            const Flow f = exec_block(n.body);
            frame_ = outer;
            if (f == Flow::Break) break;
        }
    } catch (...) {
        frame_ = outer;
        throw;
    }
    if (len == 0 && !n.orelse.empty()) {
        auto else_frame = std::make_shared<Frame>();
        else_frame->parent = outer;
        frame_ = else_frame;
        try {
            *flow = exec_block(n.orelse);  // a break in the else block belongs to an enclosing loop
        } catch (...) {
            frame_ = outer;
            throw;
        }
        frame_ = outer;
    }
}

namespace {

// Does the macro body mention `name` anywhere (Jinja gives such macros *args / **kwargs catch-alls)?
bool mentions(const Node &n, const char *name) {
    if (n.kind == NK::Name && n.str == name) return true;
    auto any = [&](const std::vector<NodePtr> &v) {
        for (const auto &x : v)
            if (x && mentions(*x, name)) return true;
        return false;
    };
    if ((n.a && mentions(*n.a, name)) || (n.b && mentions(*n.b, name)) || (n.c && mentions(*n.c, name))) return true;
    if (any(n.args) || any(n.body) || any(n.orelse)) return true;
    for (const auto &br : n.branches)
        if (any(br)) return true;
    for (const auto &kv : n.kwargs)
        if (mentions(*kv.second, name)) return true;
    for (const auto &p : n.params)
        if (p.default_value && mentions(*p.default_value, name)) return true;
    return false;
}

}  // namespace

void Evaluator::define_macro(const Node &n) {
    bool varargs = false, kwargs = false;
    for (const auto &st : n.body) {
        varargs = varargs || mentions(*st, "varargs");
        kwargs = kwargs || mentions(*st, "kwargs");
        if (mentions(*st, "caller")) fail_unsupported("macros that use 'caller' (line " + std::to_string(n.line) + ")");
    }
    std::weak_ptr<Frame> defined_in = frame_;
    const Node *macro = &n;
    auto f = std::make_shared<FuncData>();
    f->name = n.str;
    f->macro = true;
    f->fn = [macro, defined_in, varargs, kwargs](Evaluator &ev, Args &a) -> Value {
        auto parent = defined_in.lock();
        if (!parent) fail_unsupported("calling a macro after the scope that defined it ended");
        const auto &params = macro->params;
        auto frame = std::make_shared<Frame>();
        frame->parent = parent;
        std::vector<Value> extra;
        for (size_t i = 0; i < a.pos.size(); i++) {
            if (i < params.size()) {
                frame->vars[params[i].name] = a.pos[i];
            } else if (varargs) {
                extra.push_back(a.pos[i]);
            } else {
                fail_runtime("TypeError: macro '" + macro->str + "' takes not more than " +
                             std::to_string(params.size()) + " argument(s)");
            }
        }
        auto kw = std::make_shared<DictData>();
        for (auto &kv : a.kw) {
            const std::string &k = kv.first;
            const Value &v = kv.second;
            auto it = std::find_if(params.begin(), params.end(), [&k](const Param &p) { return p.name == k; });
            if (it == params.end()) {
                if (!kwargs)
                    fail_runtime("TypeError: macro '" + macro->str + "' takes no keyword argument '" + k + "'");
                kw->set(Value::string(k), v);
                continue;
            }
            if (static_cast<size_t>(it - params.begin()) < a.pos.size())
                fail_runtime("TypeError: macro '" + macro->str + "' got multiple values for argument '" + k + "'");
            frame->vars[k] = v;
        }
        if (varargs) frame->vars["varargs"] = Value::list(std::move(extra), true);
        if (kwargs) frame->vars["kwargs"] = Value::dict(kw);
        // Defaults are evaluated in the macro's frame, in order, so they may use earlier parameters.
        auto saved = ev.frame_;
        ev.frame_ = frame;
        ev.call_depth_++;
        try {
            ev.budget.depth(ev.call_depth_);
            for (const auto &p : params) {
                if (frame->vars.count(p.name)) continue;
                frame->vars[p.name] = p.default_value ? ev.eval(*p.default_value)
                                                      : Value::undefined("parameter '" + p.name + "' was not provided");
            }
        } catch (...) {
            ev.frame_ = saved;
            ev.call_depth_--;
            throw;
        }
        ev.frame_ = saved;
        std::string out;
        try {
            out = ev.render_body(macro->body, frame);
        } catch (...) {
            ev.call_depth_--;
            throw;
        }
        ev.call_depth_--;
        return Value::string(std::move(out));
    };
    frame_->vars[n.str] = Value::func(f);
}

// ---- constant folding ------------------------------------------------------------------------------
namespace {

// has_safe_repr(): values Jinja's optimizer may turn into literals.
bool safe_literal(const Value &v) {
    switch (v.kind()) {
    case Kind::None:
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
    case Kind::String: return true;
    case Kind::List:
        if (v.is_view() && v.view_kind() != Value::View::Range) return false;
        return std::all_of(v.items().begin(), v.items().end(), safe_literal);
    case Kind::Dict:
        return std::all_of(v.dict().entries.begin(), v.dict().entries.end(),
                           [](const auto &kv) { return safe_literal(kv.first) && safe_literal(kv.second); });
    default: return false;
    }
}

bool is_expression(NK k) { return k < NK::Text; }

}  // namespace

void Evaluator::fold_constants(Template &tmpl) {
    for (auto &st : tmpl.body) fold(st);
}

// Post-order over the tree; returns whether the subtree is free of names, calls and context filters.
bool Evaluator::fold(NodePtr &n) {
    if (!n) return true;
    budget.charge(1);
    budget.check_stack();
    bool pure = n->kind != NK::Name && n->kind != NK::Call && !n->dyn_args;
    if (n->kind == NK::Filter) {
        static const char *const ctx_filters[] = {"map", "select", "reject", "selectattr", "rejectattr", "random"};
        if (!n->a || !jinja_has_filter(n->str) ||
            std::any_of(std::begin(ctx_filters), std::end(ctx_filters), [&](const char *f) { return n->str == f; }))
            pure = false;
    }
    if (n->kind == NK::Test && !jinja_has_test(n->str)) pure = false;
    pure = fold(n->a) & pure;
    pure = fold(n->b) & pure;
    pure = fold(n->c) & pure;
    for (auto &x : n->args) pure = fold(x) & pure;
    for (auto &kv : n->kwargs) pure = fold(kv.second) & pure;
    for (auto &x : n->body) fold(x);
    for (auto &x : n->orelse) fold(x);
    for (auto &br : n->branches)
        for (auto &x : br) fold(x);
    for (auto &p : n->params) fold(p.default_value);
    if (!pure || !is_expression(n->kind) || n->kind == NK::Const || n->kind == NK::Slice) return pure;
    folding_ = true;
    try {
        Value v = eval(*n);
        folding_ = false;
        if (safe_literal(v)) {
            auto c = std::make_unique<Node>(NK::Const, n->line);
            c->value = std::move(v);
            n = std::move(c);
        }
    } catch (const Impossible &) {
    } catch (const TemplateError &f) {
        if (f.kind() == TemplateError::Kind::Limit) {
            folding_ = false;
            throw;  // out of budget while folding: the render is over too
        }
    }
    folding_ = false;
    return pure;
}

Value Evaluator::output_value(const Node &expr) {
    if (!folding_) {
        folding_ = true;
        try {
            Value v = eval(expr);
            folding_ = false;
            return v;
        } catch (const Impossible &) {
        } catch (const TemplateError &f) {  // an error while folding: Jinja evaluates at run time instead
            if (f.kind() == TemplateError::Kind::Limit) {
                folding_ = false;
                throw;
            }
        }
        folding_ = false;
    }
    return eval(expr);
}

}  // namespace llm::jinja
