#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "jinja/text.h"
#include "llm.h"

namespace llm::jinja {

std::string quote(std::string_view text) {
    std::string q;
    q.reserve(text.size() + 2);
    q += '\'';
    q += text;
    q += '\'';
    return q;
}

namespace {

int32_t kind_status(TemplateError::Kind kind) {
    switch (kind) {
    case TemplateError::Kind::Runtime:
    case TemplateError::Kind::Raised: return LLM_ERR_INVALID_ARGUMENT;
    case TemplateError::Kind::Syntax:
    case TemplateError::Kind::Limit: return LLM_ERR_FORMAT;
    case TemplateError::Kind::Unsupported: return LLM_ERR_UNSUPPORTED;
    }
    return LLM_ERR_INTERNAL;
}

std::string describe(TemplateError::Kind kind, const std::string &detail, int line) {
    const std::string at = std::to_string(line);
    switch (kind) {
    case TemplateError::Kind::Raised: return "template raised: " + detail;
    case TemplateError::Kind::Unsupported: return "unsupported: " + detail + (line ? " (line " + at + ")" : "");
    case TemplateError::Kind::Syntax:
        return (line ? "template line " + at + ": " : "template: ") + "syntax error: " + detail;
    case TemplateError::Kind::Limit:
        return (line ? "template line " + at + ": " : "template: ") + "limit exceeded: " + detail;
    case TemplateError::Kind::Runtime: break;
    }
    return (line ? "template line " + at + ": " : "template: ") + detail;
}

}  // namespace

TemplateError::TemplateError(Kind kind, std::string detail, int line)
    : Error(kind_status(kind), describe(kind, detail, line)), kind_(kind), detail_(std::move(detail)), line_(line) {}

void fail_runtime(std::string msg) { throw TemplateError(TemplateError::Kind::Runtime, std::move(msg)); }
void fail_unsupported(std::string msg) { throw TemplateError(TemplateError::Kind::Unsupported, std::move(msg)); }
void fail_unsupported_at(int line, std::string msg) {
    throw TemplateError(TemplateError::Kind::Unsupported, std::move(msg), line);
}
void fail_limit(std::string msg) { throw TemplateError(TemplateError::Kind::Limit, std::move(msg)); }
void fail_syntax(int line, std::string msg) { throw TemplateError(TemplateError::Kind::Syntax, std::move(msg), line); }
void fail_raised(std::string msg) { throw TemplateError(TemplateError::Kind::Raised, std::move(msg)); }

// ---- construction and access -----------------------------------------------------------------------
Value Value::string(std::string s, bool markup) {
    Value v(Kind::String);
    auto d = std::make_shared<StrData>();
    d->s = std::move(s);
    v.p_ = std::move(d);
    v.flag_ = markup;
    return v;
}

Value Value::undefined(std::string hint) {
    Value v(Kind::Undefined);
    if (!hint.empty()) {
        auto d = std::make_shared<StrData>();
        d->s = std::move(hint);
        v.p_ = std::move(d);
    }
    return v;
}

Value Value::list(std::vector<Value> items, bool tuple) {
    Value v(Kind::List);
    auto d = std::make_shared<ListData>();
    uint32_t depth = 0;
    for (const auto &it : items) depth = std::max(depth, it.depth());
    d->depth = depth + 1;
    d->items = std::move(items);
    v.p_ = std::move(d);
    v.flag_ = tuple;
    return v;
}

Value Value::dict(std::shared_ptr<DictData> d) {
    Value v(Kind::Dict);
    uint32_t depth = 0;
    for (const auto &kv : d->entries) depth = std::max({depth, kv.first.depth(), kv.second.depth()});
    d->depth = depth + 1;
    v.p_ = std::move(d);
    return v;
}

Value Value::func(std::shared_ptr<FuncData> f) {
    Value v(Kind::Func);
    v.p_ = std::move(f);
    return v;
}

Value Value::object(std::shared_ptr<ObjData> o) {
    Value v(Kind::Object);
    v.p_ = std::move(o);
    return v;
}

const std::string &Value::str() const {
    static const std::string empty;
    if ((kind_ == Kind::String || kind_ == Kind::Undefined) && p_) return static_cast<const StrData &>(*p_).s;
    return empty;
}
const std::vector<Value> &Value::items() const { return static_cast<const ListData &>(*p_).items; }
const DictData &Value::dict() const { return static_cast<const DictData &>(*p_); }
const FuncData &Value::func() const { return static_cast<const FuncData &>(*p_); }
ObjData &Value::object() const { return static_cast<ObjData &>(*p_); }

uint32_t Value::depth() const {
    if (kind_ == Kind::List) return static_cast<const ListData &>(*p_).depth;
    if (kind_ == Kind::Dict) return static_cast<const DictData &>(*p_).depth;
    return 0;
}

const Value *DictData::find(const Value &key) const {
    std::string k;
    if (!dict_key(key, &k)) return nullptr;
    auto it = index.find(k);
    return it == index.end() ? nullptr : &entries[it->second].second;
}

const Value *DictData::find(std::string_view key) const {
    std::string k = "s";
    k += key;
    auto it = index.find(k);
    return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictData::set(const Value &key, Value v) {
    std::string k;
    if (!dict_key(key, &k)) fail_runtime("TypeError: unhashable type: '" + type_name(key) + "'");
    auto it = index.find(k);
    if (it != index.end()) {
        entries[it->second].second = std::move(v);  // Python keeps the first key object and its position
        return;
    }
    index.emplace(std::move(k), entries.size());
    entries.emplace_back(key, std::move(v));
}

// ---- Python semantics ----------------------------------------------------------------------------------
bool truthy(const Value &v) {
    switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.get_bool();
    case Kind::Int: return v.get_int() != 0;
    case Kind::Float: return v.get_float() != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return v.is_lazy() || !v.items().empty();
    case Kind::Dict: return !v.dict().entries.empty();
    case Kind::Func:
    case Kind::Object: return true;
    }
    return false;
}

std::string type_name(const Value &v) {
    switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return v.is_markup() ? "Markup" : "str";
    case Kind::List: {
        static const char *const names[] = {"list",  "dict_keys", "dict_values",         "dict_items",
                                            "range", "generator", "list_reverseiterator"};
        return v.is_tuple() ? "tuple" : names[static_cast<size_t>(v.view_kind())];
    }
    case Kind::Dict: return "dict";
    case Kind::Func: return "function";
    case Kind::Object: return v.object().type;
    }
    return "object";
}

bool dict_key(const Value &v, std::string *out) {
    switch (v.kind()) {
    case Kind::Undefined: *out = "U"; return true;
    case Kind::None: *out = "N"; return true;
    case Kind::Bool:
    case Kind::Int: *out = "i" + std::to_string(v.get_int()); return true;
    case Kind::Float: {
        const double d = v.get_float();
        if (std::trunc(d) == d && std::fabs(d) < 9.2e18) {
            *out = "i" + std::to_string(static_cast<int64_t>(d));
        } else {
            *out = "f" + float_repr(d);
        }
        return true;
    }
    case Kind::String: *out = "s" + v.str(); return true;
    case Kind::List: {
        if (!v.is_tuple()) return false;
        std::string k = "t";
        for (const auto &it : v.items()) {
            std::string sub;
            if (!dict_key(it, &sub)) return false;
            k += std::to_string(sub.size()) + ":" + sub;
        }
        *out = std::move(k);
        return true;
    }
    case Kind::Dict: return false;
    case Kind::Func:
    case Kind::Object: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "p%p", static_cast<const void *>(v.heap().get()));
        *out = buf;
        return true;
    }
    }
    return false;
}

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16, else exponent.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    const bool neg = sci[0] == '-';
    if (neg) sci.erase(0, 1);
    const size_t epos = sci.find('e');
    std::string digits = sci.substr(0, epos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int exp = std::atoi(sci.c_str() + epos + 1);
    std::string out = neg ? "-" : "";
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
            out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        out += eb;
    }
    return out;
}

namespace {

void write_value(std::string &out, const Value &v, bool as_repr, Budget &b, uint32_t depth);

void write_items(std::string &out, const Value &v, Budget &b, uint32_t depth) {
    b.depth(depth);
    const auto &items = v.items();
    out += v.is_tuple() ? '(' : '[';
    for (size_t i = 0; i < items.size(); i++) {
        if (i) out += ", ";
        write_value(out, items[i], true, b, depth + 1);
        b.string_bytes(out.size());
    }
    if (v.is_tuple() && items.size() == 1) out += ',';
    out += v.is_tuple() ? ')' : ']';
}

void write_dict(std::string &out, const DictData &d, Budget &b, uint32_t depth) {
    b.depth(depth);
    out += '{';
    bool first = true;
    for (const auto &[k, val] : d.entries) {
        if (!first) out += ", ";
        first = false;
        write_value(out, k, true, b, depth + 1);
        out += ": ";
        write_value(out, val, true, b, depth + 1);
        b.string_bytes(out.size());
    }
    out += '}';
}

void write_value(std::string &out, const Value &v, bool as_repr, Budget &b, uint32_t depth) {
    switch (v.kind()) {
    case Kind::Undefined: out += as_repr ? "Undefined" : ""; return;
    case Kind::None: out += "None"; return;
    case Kind::Bool: out += v.get_bool() ? "True" : "False"; return;
    case Kind::Int: out += std::to_string(v.get_int()); return;
    case Kind::Float: out += float_repr(v.get_float()); return;
    case Kind::String:
        if (!as_repr) {
            out += v.str();
        } else if (v.is_markup()) {
            out += "Markup(" + text::repr(v.str()) + ")";
        } else {
            out += text::repr(v.str());
        }
        return;
    case Kind::List: {
        static const char *const names[] = {"", "dict_keys(", "dict_values(", "dict_items("};
        if (v.view_kind() == Value::View::Range || v.is_lazy())
            fail_unsupported("printing a " + type_name(v) + " object");
        const auto view = static_cast<size_t>(v.view_kind());
        out += names[view];
        write_items(out, v, b, depth);
        if (view) out += ')';
        return;
    }
    case Kind::Dict: write_dict(out, v.dict(), b, depth); return;
    case Kind::Func:
        if (!v.func().macro) fail_unsupported("printing a function object");
        out += "<Macro " + text::repr(v.func().name) + ">";
        return;
    case Kind::Object: {
        const ObjData &o = v.object();
        if (o.type == "Namespace") {
            out += "<Namespace ";
            write_dict(out, o.attrs, b, depth + 1);
            out += ">";
        } else if (o.type == "LoopContext") {
            out += "<LoopContext " + std::to_string(o.loop_index) + "/" + std::to_string(o.loop_length) + ">";
        } else {
            fail_unsupported("printing a " + o.type + " object");
        }
        return;
    }
    }
}

}  // namespace

std::string to_str(const Value &v, Budget &b) {
    if (v.kind() == Kind::String) return v.str();
    std::string out;
    write_value(out, v, false, b, 0);
    b.string_bytes(out.size());
    return out;
}

std::string to_repr(const Value &v, Budget &b) {
    std::string out;
    write_value(out, v, true, b, 0);
    b.string_bytes(out.size());
    return out;
}

bool equals(const Value &a, const Value &b, Budget &bud, uint32_t depth) {
    bud.depth(depth);
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.get_float() == b.get_float();
        return a.get_int() == b.get_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
        if (a.is_lazy() || b.is_lazy()) return a.heap() == b.heap();
        if (a.view_kind() != b.view_kind()) return false;
        if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
        bud.charge(a.items().size());
        for (size_t i = 0; i < a.items().size(); i++)
            if (!equals(a.items()[i], b.items()[i], bud, depth + 1)) return false;
        return true;
    }
    case Kind::Dict: {
        const auto &da = a.dict(), &db = b.dict();
        if (da.entries.size() != db.entries.size()) return false;
        bud.charge(da.entries.size());
        for (const auto &[k, v] : da.entries) {
            const Value *o = db.find(k);
            if (!o || !equals(v, *o, bud, depth + 1)) return false;
        }
        return true;
    }
    default: return a.heap() == b.heap();
    }
}

bool less(const Value &a, const Value &b, Budget &bud, const char *op, uint32_t depth) {
    bud.depth(depth);
    if (a.is_undefined()) fail_runtime(a.str().empty() ? "UndefinedError: undefined value" : a.str());
    if (b.is_undefined()) fail_runtime(b.str().empty() ? "UndefinedError: undefined value" : b.str());
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.get_float() < b.get_float();
        return a.get_int() < b.get_int();
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        const auto &x = a.items(), &y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); i++) {
            if (!equals(x[i], y[i], bud, depth + 1)) return less(x[i], y[i], bud, op, depth + 1);
        }
        return x.size() < y.size();
    }
    fail_runtime(std::string("TypeError: '") + op + "' not supported between instances of '" + type_name(a) +
                 "' and '" + type_name(b) + "'");
}

Value fresh_copy(const Value &v) {
    if (v.kind() == Kind::List) {
        std::vector<Value> items;
        for (const auto &it : v.items()) items.push_back(fresh_copy(it));
        return v.is_view() ? Value::view(std::move(items), v.view_kind()) : Value::list(std::move(items), v.is_tuple());
    }
    if (v.kind() == Kind::Dict) {
        auto d = std::make_shared<DictData>();
        for (const auto &[k, val] : v.dict().entries) d->set(k, fresh_copy(val));
        return Value::dict(std::move(d));
    }
    return v;
}

// ---- JSON ----------------------------------------------------------------------------------------------
namespace {

void json_string(std::string &out, std::string_view s, bool ensure_ascii) {
    out += '"';
    const auto cps = text::decode(s);
    for (uint32_t c : cps) {
        char buf[16];
        switch (c) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += "\\n"; continue;
        case '\r': out += "\\r"; continue;
        case '\t': out += "\\t"; continue;
        case '\b': out += "\\b"; continue;
        case '\f': out += "\\f"; continue;
        default: break;
        }
        if (c >= 0xDC80 && c <= 0xDCFF) fail_unsupported("tojson of a string holding invalid UTF-8");
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
            if (c < 0x10000) {
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            } else {
                const uint32_t v = c - 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                              static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
                out += buf;
            }
            continue;
        }
        text::append_utf8(out, c);
    }
    out += '"';
}

std::string json_float(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return float_repr(d);
}

void json_value(std::string &out, const Value &v, const JsonStyle &st, Budget &b, uint32_t depth);

void json_newline(std::string &out, const JsonStyle &st, uint32_t level) {
    out += '\n';
    for (uint32_t i = 0; i < level; i++) out += st.indent;
}

std::string json_key(const Value &k) {
    switch (k.kind()) {
    case Kind::String: return k.str();
    case Kind::None: return "null";
    case Kind::Bool: return k.get_bool() ? "true" : "false";
    case Kind::Int: return std::to_string(k.get_int());
    case Kind::Float: return json_float(k.get_float());
    default: fail_runtime("TypeError: keys must be str, int, float, bool or None, not " + type_name(k));
    }
}

void json_value(std::string &out, const Value &v, const JsonStyle &st, Budget &b, uint32_t depth) {
    b.depth(depth);
    b.string_bytes(out.size());
    switch (v.kind()) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.get_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.get_int()); return;
    case Kind::Float: out += json_float(v.get_float()); return;
    case Kind::String: json_string(out, v.str(), st.ensure_ascii); return;
    case Kind::List: {
        if (v.is_view()) fail_runtime("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
        const auto &items = v.items();
        if (items.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); i++) {
            if (i) out += st.item_sep;
            if (st.pretty) json_newline(out, st, depth + 1);
            json_value(out, items[i], st, b, depth + 1);
        }
        if (st.pretty) json_newline(out, st, depth);
        out += ']';
        return;
    }
    case Kind::Dict: {
        const auto &d = v.dict();
        if (d.entries.empty()) {
            out += "{}";
            return;
        }
        std::vector<const std::pair<Value, Value> *> order;
        for (const auto &kv : d.entries) order.push_back(&kv);
        if (st.sort_keys) {
            for (const auto *kv : order)
                if (!kv->first.is_string()) fail_unsupported("tojson(sort_keys=true) with non-string keys");
            std::stable_sort(order.begin(), order.end(),
                             [](const auto *x, const auto *y) { return x->first.str() < y->first.str(); });
        }
        out += '{';
        bool first = true;
        for (const auto *kv : order) {
            if (!first) out += st.item_sep;
            first = false;
            if (st.pretty) json_newline(out, st, depth + 1);
            json_string(out, json_key(kv->first), st.ensure_ascii);
            out += st.key_sep;
            json_value(out, kv->second, st, b, depth + 1);
        }
        if (st.pretty) json_newline(out, st, depth);
        out += '}';
        return;
    }
    case Kind::Undefined: fail_runtime("TypeError: Object of type Undefined is not JSON serializable");
    case Kind::Func:
    case Kind::Object: fail_runtime("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
    }
}

template <typename Json>
Value convert_json(const Json &j, Budget &b, uint32_t depth) {
    b.depth(depth);
    b.charge(1);
    switch (j.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded: return Value::none();
    case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case Json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
        const auto u = j.template get<uint64_t>();
        if (u > static_cast<uint64_t>(INT64_MAX)) fail_unsupported("an integer beyond 64 bits in the context");
        return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value::number(j.template get<double>());
    case Json::value_t::string: return Value::string(j.template get<std::string>());
    case Json::value_t::binary: fail_unsupported("binary JSON values in the context");
    case Json::value_t::array: {
        std::vector<Value> items;
        items.reserve(j.size());
        for (const auto &e : j) items.push_back(convert_json(e, b, depth + 1));
        return Value::list(std::move(items));
    }
    case Json::value_t::object: {
        auto d = std::make_shared<DictData>();
        for (auto it = j.begin(); it != j.end(); ++it)
            d->set(Value::string(it.key()), convert_json(it.value(), b, depth + 1));
        return Value::dict(std::move(d));
    }
    }
    return Value::none();
}

}  // namespace

std::string to_json(const Value &v, const JsonStyle &style, Budget &b) {
    std::string out;
    json_value(out, v, style, b, 0);
    b.string_bytes(out.size());
    return out;
}

Value from_json(const nlohmann::json &j, Budget &b, uint32_t depth) { return convert_json(j, b, depth); }
Value from_json(const nlohmann::ordered_json &j, Budget &b, uint32_t depth) { return convert_json(j, b, depth); }

}  // namespace llm::jinja
