#include "jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "llm.h"

namespace llm::jinja {
namespace {

class Parser {
public:
    Parser(std::vector<Token> toks, const Limits &limits) : toks_(std::move(toks)) { budget_.limits = limits; }

    Template run() {
        budget_.stack_base = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
        Template t;
        t.body = subparse({});
        if (!unknown_.empty()) {
            const Node *n = unknown_.front();
            fail_syntax(n->line,
                        std::string("no ") + (n->kind == NK::Filter ? "filter" : "test") + " named " + quote(n->str));
        }
        return t;
    }

private:
    std::vector<Token> toks_;
    size_t i_ = 0;
    Budget budget_;
    uint32_t nesting_ = 0;
    bool soft_ = false;  // inside an if / inline if: unknown filters and tests fail only when evaluated
    // Unknown filter/test names seen outside any if: an error at the end of parsing unless the expression
    // turns out to be the value of an inline if (`x|f if c`), which Jinja compiles softly as well.
    std::vector<Node *> unknown_;

    // Counts parser recursion (brackets, unary operators, nested statements) against max_depth.
    struct Nest {
        Parser &p;
        explicit Nest(Parser &pp) : p(pp) {
            if (++p.nesting_ > p.budget_.limits.max_depth)
                fail_syntax(p.cur().line, "nesting deeper than " + std::to_string(p.budget_.limits.max_depth));
            p.budget_.check_stack();
        }
        ~Nest() { p.nesting_--; }
    };
    struct SoftScope {  // sets soft_ for a region, restoring it after
        Parser &p;
        bool saved;
        SoftScope(Parser &pp, bool v) : p(pp), saved(pp.soft_) { p.soft_ = v; }
        ~SoftScope() { p.soft_ = saved; }
    };

    const Token &cur() const { return toks_[i_]; }
    const Token &peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
    void next() {
        if (i_ + 1 < toks_.size()) i_++;
    }
    bool is_op(const char *op) const { return cur().type == Tok::Op && cur().text == op; }
    bool is_name(const char *n) const { return cur().type == Tok::Name && cur().text == n; }
    bool skip_op(const char *op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char *n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }
    static std::string describe(const Token &t) {
        switch (t.type) {
        case Tok::Data: return "template data";
        case Tok::VarBegin: return "begin of print statement";
        case Tok::VarEnd: return "end of print statement";
        case Tok::BlockBegin: return "begin of statement block";
        case Tok::BlockEnd: return "end of statement block";
        case Tok::Eof: return "end of template";
        default: return quote(t.text);
        }
    }
    [[noreturn]] void unexpected(const char *expected) {
        fail_syntax(cur().line, std::string("expected ") + expected + ", got " + describe(cur()));
    }
    void expect_op(const char *op) {
        if (!skip_op(op)) unexpected(quote(op).c_str());
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) unexpected("a name");
        std::string n = cur().text;
        next();
        return n;
    }
    void expect_name(const char *n) {
        if (!skip_name(n)) unexpected(quote(n).c_str());
    }
    void expect(Tok t, const char *what) {
        if (cur().type != t) unexpected(what);
        next();
    }

    NodePtr node(NK k, int line) { return std::make_unique<Node>(k, line); }
    // Sets the node's depth from its children and bounds it, so evaluation recursion stays bounded.
    NodePtr finish(NodePtr n) {
        uint32_t d = 0;
        auto see = [&](const NodePtr &c) {
            if (c) d = std::max(d, c->depth);
        };
        see(n->a), see(n->b), see(n->c);
        for (const auto &x : n->args) see(x);
        for (const auto &kv : n->kwargs) see(kv.second);
        for (const auto &x : n->body) see(x);
        for (const auto &x : n->orelse) see(x);
        for (const auto &br : n->branches)
            for (const auto &x : br) see(x);
        for (const auto &p : n->params) see(p.default_value);
        n->depth = d + 1;
        if (n->depth > budget_.limits.max_depth)
            fail_syntax(n->line, "expression nested deeper than " + std::to_string(budget_.limits.max_depth));
        return n;
    }

    // ---- statements ------------------------------------------------------------------------------------
    bool at_end_tag(std::initializer_list<const char *> ends) const {
        if (cur().type != Tok::Name) return false;
        for (const char *e : ends)
            if (cur().text == e) return true;
        return false;
    }

    // Parses until a block tag whose name is one of `ends` (left as the current token) or the end.
    std::vector<NodePtr> subparse(std::initializer_list<const char *> ends) {
        std::vector<NodePtr> body;
        while (cur().type != Tok::Eof) {
            const Token &t = cur();
            if (t.type == Tok::Data) {
                auto n = node(NK::Text, t.line);
                n->str = t.text;
                body.push_back(std::move(n));
                next();
            } else if (t.type == Tok::VarBegin) {
                next();
                auto n = node(NK::Output, cur().line);
                n->a = parse_tuple(true, {}, false);
                expect(Tok::VarEnd, "end of print statement");
                body.push_back(finish(std::move(n)));
            } else if (t.type == Tok::BlockBegin) {
                next();
                if (ends.size() && at_end_tag(ends)) return body;
                auto n = statement();
                expect(Tok::BlockEnd, "end of statement block");
                if (n) body.push_back(std::move(n));
            } else {
                unexpected("template data or a tag");
            }
        }
        if (ends.size()) {
            std::string list;
            for (const char *e : ends) list += (list.empty() ? "" : " or ") + quote(e);
            fail_syntax(cur().line, "unexpected end of template, expected " + list);
        }
        return body;
    }

    // The body of a statement: `%}` then statements up to one of `ends`.
    std::vector<NodePtr> statements(std::initializer_list<const char *> ends) {
        skip_op(":");
        expect(Tok::BlockEnd, "end of statement block");
        return subparse(ends);
    }

    NodePtr statement() {
        Nest nest(*this);
        if (cur().type != Tok::Name) fail_syntax(cur().line, "tag name expected");
        const std::string tag = cur().text;
        const int line = cur().line;
        if (tag == "for") return parse_for();
        if (tag == "if") return parse_if();
        if (tag == "set") return parse_set();
        if (tag == "macro") return parse_macro();
        if (tag == "filter") return parse_filter_block();
        if (tag == "with") return parse_with();
        if (tag == "print") {
            next();
            auto n = node(NK::Output, line);
            std::vector<NodePtr> items;
            while (cur().type != Tok::BlockEnd) {
                if (!items.empty()) expect_op(",");
                items.push_back(expression(true));
            }
            // several expressions print one after another
            auto cat = node(NK::Concat, line);
            cat->args = std::move(items);
            n->a = finish(std::move(cat));
            return finish(std::move(n));
        }
        if (tag == "break" || tag == "continue") {
            if (loop_depth_ == 0) fail_syntax(line, quote(tag) + " outside a loop");
            next();
            return node(tag == "break" ? NK::Break : NK::Continue, line);
        }
        if (tag == "generation") {
            next();
            auto n = node(NK::Generation, line);
            const int saved_loops = loop_depth_;  // the body is a caller function: no loop controls across it
            loop_depth_ = 0;
            n->body = statements({"endgeneration"});
            loop_depth_ = saved_loops;
            next();
            return finish(std::move(n));
        }
        if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
            tag == "autoescape" || tag == "call") {
            fail_unsupported_at(line, "statement " + quote(tag));
        }
        fail_syntax(line, "encountered unknown tag " + quote(tag));
    }

    int loop_depth_ = 0;
    int fors_open_ = 0;  // for-statements being parsed, macros between them and here included

    // Jinja2 refuses to compile a for-loop (target, body or else) that assigns to a plain name
    // `loop` anywhere inside it, macros included ("Can't assign to special loop variable").
    void check_not_loop(const Target &t, int line) const {
        if (!t.ns_attr.empty()) return;  // `set loop.x = ...` assigns a namespace's attribute
        for (const auto &name : t.names) {
            if (name == "loop") fail_syntax(line, "Can't assign to special loop variable in for-loop target");
        }
    }

    NodePtr parse_for() {
        auto n = node(NK::For, cur().line);
        next();
        n->target = assign_target({"in"});
        check_not_loop(n->target, n->line);
        ++fors_open_;
        expect_name("in");
        n->a = parse_tuple(false, {"recursive"}, false);
        if (skip_name("if")) n->b = expression(true);
        n->recursive = skip_name("recursive");
        {
            SoftScope hard(*this, false);
            loop_depth_++;
            n->body = statements({"endfor", "else"});
            loop_depth_--;
            if (cur().text == "else") {
                next();
                n->orelse = statements({"endfor"});
            }
        }
        --fors_open_;
        next();
        return finish(std::move(n));
    }

    NodePtr parse_if() {
        auto n = node(NK::If, cur().line);
        next();
        SoftScope soft(*this, true);
        while (true) {
            n->args.push_back(parse_tuple(false, {}, false));
            n->branches.push_back(statements({"elif", "else", "endif"}));
            const std::string t = cur().text;
            next();
            if (t == "elif") continue;
            if (t == "else") {
                n->orelse = statements({"endif"});
                next();
            }
            break;
        }
        return finish(std::move(n));
    }

    NodePtr parse_set() {
        const int line = cur().line;
        next();
        Target target;
        if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
            target.names.push_back(cur().text);
            next();
            next();
            target.ns_attr = expect_name();
        } else {
            target = assign_target({});
        }
        if (fors_open_ > 0) check_not_loop(target, line);
        if (skip_op("=")) {
            auto n = node(NK::Set, line);
            n->target = std::move(target);
            n->a = parse_tuple(true, {}, false);
            return finish(std::move(n));
        }
        auto n = node(NK::SetBlock, line);
        n->target = std::move(target);
        if (is_op("|")) n->a = filter_chain(nullptr, false);
        SoftScope hard(*this, false);
        n->body = statements({"endset"});
        next();
        return finish(std::move(n));
    }

    NodePtr parse_macro() {
        auto n = node(NK::Macro, cur().line);
        next();
        n->str = expect_name();
        expect_op("(");
        while (!is_op(")")) {
            if (!n->params.empty()) expect_op(",");
            Param p;
            p.name = expect_name();
            if (skip_op("=")) {
                p.default_value = expression(true);
            } else if (!n->params.empty() && n->params.back().default_value) {
                fail_syntax(n->line, "non-default argument follows default argument");
            }
            n->params.push_back(std::move(p));
        }
        expect_op(")");
        SoftScope hard(*this, false);
        const int saved_loops = loop_depth_;
        loop_depth_ = 0;
        n->body = statements({"endmacro"});
        loop_depth_ = saved_loops;
        next();
        return finish(std::move(n));
    }

    NodePtr parse_filter_block() {
        auto n = node(NK::FilterBlock, cur().line);
        next();
        n->a = filter_chain(nullptr, true);
        SoftScope hard(*this, false);
        n->body = statements({"endfilter"});
        next();
        return finish(std::move(n));
    }

    NodePtr parse_with() {
        auto n = node(NK::With, cur().line);
        next();
        while (cur().type != Tok::BlockEnd) {
            if (!n->kwargs.empty()) expect_op(",");
            std::string name = expect_name();
            expect_op("=");
            n->kwargs.emplace_back(std::move(name), expression(true));
        }
        SoftScope hard(*this, false);
        n->body = statements({"endwith"});
        next();
        return finish(std::move(n));
    }

    // `a`, `a, b` or `(a, b)`: names only (what Jinja accepts as assignment targets here).
    Target assign_target(std::initializer_list<const char *> extra_end) {
        Target t;
        const bool paren = skip_op("(");
        while (true) {
            if (!t.names.empty()) {
                if (!skip_op(",")) break;
                t.tuple = true;
                if ((paren && is_op(")")) || (!paren && at_end_tag(extra_end)) || is_op("=") ||
                    cur().type == Tok::BlockEnd)
                    break;
            }
            if (cur().type != Tok::Name) fail_syntax(cur().line, "can't assign to " + describe(cur()));
            const std::string &nm = cur().text;
            if (nm == "true" || nm == "false" || nm == "none" || nm == "True" || nm == "False" || nm == "None")
                fail_syntax(cur().line, "can't assign to 'const'");
            t.names.push_back(nm);
            next();
        }
        if (paren) {
            expect_op(")");
            t.tuple = true;
        }
        return t;
    }

    // ---- expressions ---------------------------------------------------------------------------------
    bool tuple_end(std::initializer_list<const char *> extra_end) const {
        if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::Eof) return true;
        if (cur().type == Tok::Op && cur().text == ")") return true;
        return at_end_tag(extra_end);
    }

    NodePtr parse_tuple(bool with_condexpr, std::initializer_list<const char *> extra_end, bool explicit_parens) {
        const int line = cur().line;
        std::vector<NodePtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (tuple_end(extra_end)) break;
            items.push_back(expression(with_condexpr));
            if (is_op(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens) unexpected("an expression");
        }
        auto n = node(NK::Tuple, line);
        n->args = std::move(items);
        return finish(std::move(n));
    }

    NodePtr expression(bool with_condexpr) { return with_condexpr ? condexpr() : parse_or(); }

    NodePtr condexpr() {
        Nest nest(*this);
        int line = cur().line;
        const size_t unknown_mark = unknown_.size();
        NodePtr e1 = parse_or();
        while (skip_name("if")) {
            unknown_.resize(unknown_mark);
            SoftScope soft(*this, true);
            auto n = node(NK::CondExpr, line);
            n->a = parse_or();
            n->b = std::move(e1);
            if (skip_name("else")) n->c = condexpr();
            e1 = finish(std::move(n));
            line = cur().line;
        }
        return e1;
    }

    NodePtr binary(const char *op, NodePtr l, NodePtr r, int line) {
        auto n = node(NK::Binary, line);
        n->str = std::string(op);
        n->a = std::move(l);
        n->b = std::move(r);
        return finish(std::move(n));
    }

    NodePtr parse_or() {
        const int line = cur().line;
        NodePtr l = parse_and();
        while (skip_name("or")) l = binary("or", std::move(l), parse_and(), line);
        return l;
    }

    NodePtr parse_and() {
        const int line = cur().line;
        NodePtr l = parse_not();
        while (skip_name("and")) l = binary("and", std::move(l), parse_not(), line);
        return l;
    }

    NodePtr parse_not() {
        if (is_name("not")) {
            Nest nest(*this);
            auto n = node(NK::Not, cur().line);
            next();
            n->a = parse_not();
            return finish(std::move(n));
        }
        return compare();
    }

    NodePtr compare() {
        const int line = cur().line;
        NodePtr first = math1();
        auto n = node(NK::Compare, line);
        while (true) {
            static const char *const cmp[] = {"==", "!=", "<", "<=", ">", ">="};
            bool found = false;
            if (cur().type == Tok::Op) {
                for (const char *c : cmp) {
                    if (cur().text == c) {
                        next();
                        n->ops.push_back(c);
                        n->args.push_back(math1());
                        found = true;
                        break;
                    }
                }
            }
            if (found) continue;
            if (skip_name("in")) {
                n->ops.push_back("in");
                n->args.push_back(math1());
            } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
                next();
                next();
                n->ops.push_back("notin");
                n->args.push_back(math1());
            } else {
                break;
            }
        }
        if (n->ops.empty()) return first;
        n->a = std::move(first);
        return finish(std::move(n));
    }

    NodePtr math1() {
        const int line = cur().line;
        NodePtr l = concat();
        while (is_op("+") || is_op("-")) {
            const char *op = is_op("+") ? "+" : "-";
            next();
            l = binary(op, std::move(l), concat(), line);
        }
        return l;
    }

    NodePtr concat() {
        const int line = cur().line;
        NodePtr first = math2();
        if (!is_op("~")) return first;
        auto n = node(NK::Concat, line);
        n->args.push_back(std::move(first));
        while (skip_op("~")) n->args.push_back(math2());
        return finish(std::move(n));
    }

    NodePtr math2() {
        const int line = cur().line;
        NodePtr l = power();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().text;
            next();
            auto r = power();
            auto n = node(NK::Binary, line);
            n->str = std::string(op);
            n->a = std::move(l);
            n->b = std::move(r);
            l = finish(std::move(n));
        }
        return l;
    }

    NodePtr power() {
        const int line = cur().line;
        NodePtr l = unary(true);
        while (skip_op("**")) l = binary("**", std::move(l), unary(true), line);
        return l;
    }

    NodePtr unary(bool with_filter) {
        Nest nest(*this);
        NodePtr n;
        if (is_op("-") || is_op("+")) {
            n = node(is_op("-") ? NK::Neg : NK::Pos, cur().line);
            next();
            n->a = unary(false);
            n = finish(std::move(n));
        } else {
            n = primary();
        }
        n = postfix(std::move(n));
        if (with_filter) n = filter_expr(std::move(n));
        return n;
    }

    NodePtr primary() {
        const Token &t = cur();
        const int line = t.line;
        if (t.type == Tok::Name) {
            auto n = node(NK::Const, line);
            if (t.text == "true" || t.text == "True") {
                n->value = Value::boolean(true);
            } else if (t.text == "false" || t.text == "False") {
                n->value = Value::boolean(false);
            } else if (t.text == "none" || t.text == "None") {
                n->value = Value::none();
            } else {
                n = node(NK::Name, line);
                n->str = t.text;
            }
            next();
            return n;
        }
        if (t.type == Tok::String) {
            std::string s;
            while (cur().type == Tok::String) {  // adjacent literals join, as in Python
                s += cur().text;
                next();
            }
            auto n = node(NK::Const, line);
            n->value = Value::string(std::move(s));
            return n;
        }
        if (t.type == Tok::Int || t.type == Tok::Float) {
            auto n = node(NK::Const, line);
            n->value = t.type == Tok::Int ? Value::integer(t.ival) : Value::number(t.fval);
            next();
            return n;
        }
        if (is_op("(")) {
            next();
            auto n = parse_tuple(true, {}, true);
            expect_op(")");
            return n;
        }
        if (is_op("[")) {
            next();
            auto n = node(NK::List, line);
            while (!is_op("]")) {
                if (!n->args.empty()) expect_op(",");
                if (is_op("]")) break;
                n->args.push_back(expression(true));
            }
            expect_op("]");
            return finish(std::move(n));
        }
        if (is_op("{")) {
            next();
            auto n = node(NK::Dict, line);
            while (!is_op("}")) {
                if (!n->args.empty()) expect_op(",");
                if (is_op("}")) break;
                n->args.push_back(expression(true));
                expect_op(":");
                n->args.push_back(expression(true));
            }
            expect_op("}");
            return finish(std::move(n));
        }
        fail_syntax(line, "unexpected " + describe(t));
    }

    NodePtr postfix(NodePtr n) {
        while (true) {
            if (is_op(".") || is_op("[")) {
                n = subscript(std::move(n));
            } else if (is_op("(")) {
                n = call(std::move(n));
            } else {
                return n;
            }
        }
    }

    NodePtr filter_expr(NodePtr n) {
        while (true) {
            if (is_op("|")) {
                n = filter_chain(std::move(n), false);
            } else if (is_name("is")) {
                n = test(std::move(n));
            } else if (is_op("(")) {
                n = call(std::move(n));
            } else {
                return n;
            }
        }
    }

    NodePtr subscript(NodePtr obj) {
        const int line = cur().line;
        if (skip_op(".")) {
            if (cur().type == Tok::Name) {
                auto n = node(NK::Getattr, line);
                n->a = std::move(obj);
                n->str = cur().text;
                next();
                return finish(std::move(n));
            }
            if (cur().type != Tok::Int) fail_syntax(line, "expected name or number");
            auto n = node(NK::Getitem, line);
            n->a = std::move(obj);
            n->b = node(NK::Const, line);
            n->b->value = Value::integer(cur().ival);
            next();
            return finish(std::move(n));
        }
        expect_op("[");
        std::vector<NodePtr> keys;
        while (!is_op("]")) {
            if (!keys.empty()) expect_op(",");
            keys.push_back(subscribed());
        }
        expect_op("]");
        auto n = node(NK::Getitem, line);
        n->a = std::move(obj);
        if (keys.size() == 1) {
            n->b = std::move(keys[0]);
        } else {
            auto t = node(NK::Tuple, line);
            t->args = std::move(keys);
            n->b = finish(std::move(t));
        }
        return finish(std::move(n));
    }

    NodePtr subscribed() {
        const int line = cur().line;
        NodePtr start;
        if (!is_op(":")) {
            start = expression(true);
            if (!is_op(":")) return start;
        }
        next();  // the ':'
        auto n = node(NK::Slice, line);
        n->a = std::move(start);
        if (!is_op(":") && !is_op("]") && !is_op(",")) n->b = expression(true);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) n->c = expression(true);
        }
        return finish(std::move(n));
    }

    // Arguments in parentheses into n->args / n->kwargs.
    void call_args(Node &n) {
        expect_op("(");
        bool need_comma = false;
        while (!is_op(")")) {
            if (need_comma) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*") || is_op("**")) {
                next();
                n.dyn_args = true;
                n.args.push_back(expression(true));
            } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
                std::string key = cur().text;
                next();
                next();
                n.kwargs.emplace_back(std::move(key), expression(true));
            } else {
                if (!n.kwargs.empty()) fail_syntax(cur().line, "invalid syntax for function call expression");
                n.args.push_back(expression(true));
            }
            need_comma = true;
        }
        expect_op(")");
    }

    NodePtr call(NodePtr fn) {
        auto n = node(NK::Call, cur().line);
        n->a = std::move(fn);
        call_args(*n);
        return finish(std::move(n));
    }

    NodePtr filter_chain(NodePtr n, bool start_inline) {
        while (is_op("|") || start_inline) {
            if (!start_inline) next();
            start_inline = false;
            auto f = node(NK::Filter, cur().line);
            f->str = expect_name();
            while (skip_op(".")) f->str.append(1, '.').append(expect_name());
            if (!jinja_has_filter(f->str) && !soft_) unknown_.push_back(f.get());
            f->a = std::move(n);
            if (is_op("(")) call_args(*f);
            n = finish(std::move(f));
        }
        return n;
    }

    NodePtr test(NodePtr n) {
        const int line = cur().line;
        next();  // is
        const bool negated = skip_name("not");
        auto t = node(NK::Test, line);
        t->str = expect_name();
        while (skip_op(".")) t->str.append(1, '.').append(expect_name());
        if (!jinja_has_test(t->str) && !soft_) unknown_.push_back(t.get());
        t->a = std::move(n);
        if (is_op("(")) {
            call_args(*t);
        } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                    cur().type == Tok::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail_syntax(line, "You cannot chain multiple tests with is");
            t->args.push_back(postfix(primary()));
        }
        NodePtr out = finish(std::move(t));
        if (negated) {
            auto no = node(NK::Not, line);
            no->a = std::move(out);
            out = finish(std::move(no));
        }
        return out;
    }
};

}  // namespace

Template parse(std::string_view source, const Limits &limits) { return Parser(tokenize(source), limits).run(); }

}  // namespace llm::jinja
