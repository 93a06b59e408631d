// The parsed template: one node type for expressions and statements. Which fields a kind uses is
// listed beside it; the parser builds nothing deeper than Limits::max_depth, so evaluating and
// destroying a tree never recurses without bound.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace llm::jinja {

enum class NK : uint8_t {
    // expressions
    Const,      // value
    Name,       // str = identifier
    Getattr,    // a.str
    Getitem,    // a[b]
    Slice,      // a:b:c (each may be null); only as Getitem's b
    Call,       // a(args, kwargs)
    Filter,     // a|str(args, kwargs); a is null inside a filter block or `set x | f`
    Test,       // a is str(args, kwargs)
    Neg,        // -a
    Pos,        // +a
    Not,        // not a
    Binary,     // a str b, str one of + - * / // % ** and or
    Concat,     // args[0] ~ args[1] ~ ...
    Compare,    // a, then ops: (str op, args[i]) pairs; op one of == != < <= > >= in notin
    CondExpr,   // b if a else c (c may be null)
    List,       // [args...]
    Tuple,      // (args...)
    Dict,       // {args[0]: args[1], args[2]: args[3], ...}
    // statements
    Text,       // literal template text in str
    Output,     // {{ a }}
    If,         // if args[0]: branches[0] elif args[1]: branches[1] ... else: orelse
    For,        // for target in a [if b]: body; else: orelse
    Set,        // target = a
    SetBlock,   // target = rendered body, through the filter chain a (may be null)
    Macro,      // macro str(params with defaults) body
    FilterBlock,  // body rendered, then filter chain a
    With,       // with (targets = args): body
    Break,
    Continue,
    Generation,  // transformers' {% generation %}: body
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Target {           // what set / for / with assign to
    std::vector<std::string> names;  // one name, or the names of a tuple target (`a, b`)
    bool tuple = false;
    std::string ns_attr;  // set ns.attr: names[0] is the namespace, this the attribute
};

struct Param {
    std::string name;
    NodePtr default_value;  // null: required
};

struct Node {
    NK kind;
    int line;
    uint32_t depth = 1;  // 1 + the deepest child: bounded by the parser
    std::string str;
    Value value;
    NodePtr a, b, c;
    std::vector<NodePtr> args;                            // positional arguments, items, Concat parts
    std::vector<std::pair<std::string, NodePtr>> kwargs;  // keyword arguments
    std::vector<std::string> ops;                         // Compare operators
    std::vector<NodePtr> body, orelse;                    // statements
    std::vector<std::vector<NodePtr>> branches;           // If: one body per test in args
    Target target;
    std::vector<Param> params;  // Macro
    bool recursive = false;     // For ... recursive (refused when evaluated)
    bool soft = false;          // Filter/Test inside an if: an unknown name fails only when reached
    bool dyn_args = false;      // a call with *args / **kwargs (refused when evaluated)

    Node(NK k, int l) : kind(k), line(l) {}
};

struct Template {
    std::vector<NodePtr> body;
};

}  // namespace llm::jinja
