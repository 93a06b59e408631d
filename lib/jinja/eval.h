// Walks the parsed template: Jinja2's scoping (a for-loop iteration, macro call, filter block and
// block set each get their own frame; if does not), loop contexts, macros, namespaces, and the
// sandbox's attribute and item lookup.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace llm::jinja {

struct Frame {
    std::shared_ptr<Frame> parent;
    std::unordered_map<std::string, Value> vars;
};

class Evaluator {
public:
    explicit Evaluator(const Options &opt);
    ~Evaluator();
    // Jinja's optimizer: replaces each expression built from literals alone by its value when that
    // value has a Python literal form (has_safe_repr). Run once before run(); it changes results only
    // where folding and run time differ (a slice of a non-sequence folds to undefined).
    void fold_constants(Template &tmpl);
    // Renders `tmpl` with the variables of `context` (a dict) into *out.
    void run(const Template &tmpl, const Value &context, std::string *out);

    Budget budget;
    int64_t now;   // strftime_now's time; -1: the current local time
    int line = 0;  // the line of the node being evaluated, for error messages

    // Jinja's environment.getattr / getitem in the sandbox: attribute first, then item (or the reverse).
    Value getattr(const Value &obj, const std::string &name);
    Value getitem(const Value &obj, const Value &key);
    Value call(const Value &fn, Args &args);
    // A string value built by the interpreter: size checked and charged.
    Value make_str(std::string s, bool markup = false);
    std::string str(const Value &v) { return to_str(v, budget); }
    // Iterating a value as Python's iter() does (dict: keys; str: characters); fails for non-iterables.
    std::vector<Value> iterate(const Value &v);
    // Registers a namespace so its attributes can be released iteratively when rendering ends.
    void track(const std::shared_ptr<ObjData> &ns) { namespaces_.push_back(ns); }
    [[noreturn]] void undefined_error(const Value &v);

private:
    enum class Flow { Normal, Break, Continue };

    std::shared_ptr<Frame> frame_;
    std::string *out_ = nullptr;
    uint32_t call_depth_ = 0;
    // Evaluating a {{ }} expression as Jinja's compiler folds constants (nodes.as_const): names, calls
    // and context filters are "impossible", and a slice goes through the sandbox's getitem.
    bool folding_ = false;
    struct Impossible {};
    Value output_value(const Node &expr);
    bool fold(NodePtr &n);
    std::vector<std::shared_ptr<ObjData>> namespaces_;

    Flow exec_block(const std::vector<NodePtr> &body);
    Flow exec(const Node &n);
    void emit(const std::string &s);
    // Renders statements into a string in `frame`; *flow gets a break/continue that ended them early
    // (Jinja compiles filter and set blocks inline, so a loop control inside leaves the enclosing loop).
    std::string render_body(const std::vector<NodePtr> &body, std::shared_ptr<Frame> frame, Flow *flow = nullptr);
    void exec_for(const Node &n, Flow *flow);
    // `set` and `set` blocks: a name or names in the current frame, or a namespace's attribute.
    void set_target(const Target &t, Value v);
    void assign(const Target &t, const Value &v, Frame &frame);
    void define_macro(const Node &n);

    Value eval(const Node &n);
    Value eval_filter(const Node &n, const Value *input);
    Value eval_test(const Node &n);
    Value eval_binary(const Node &n);
    Value eval_compare(const Node &n);
    Value eval_slice(const Value &obj, const Node &slice);
    Value lookup(const std::string &name);
    Value loop_attr(const ObjData &loop, const std::string &name);
    void eval_args(const Node &n, Args *args);
};

}  // namespace llm::jinja
