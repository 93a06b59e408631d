#include "gguf/metadata.h"

#include <charconv>
#include <cstring>

#include "core/error.h"

namespace llm {

const char *name(MetaType t) {
    static const char *names[kMetaTypeCount] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                "bool", "string", "array", "u64", "i64", "f64"};
    auto i = static_cast<uint32_t>(t);
    return i < kMetaTypeCount ? names[i] : "invalid";
}

uint32_t meta_scalar_size(MetaType t) {
    switch (t) {
    case MetaType::U8:
    case MetaType::I8:
    case MetaType::BOOL: return 1;
    case MetaType::U16:
    case MetaType::I16: return 2;
    case MetaType::U32:
    case MetaType::I32:
    case MetaType::F32: return 4;
    case MetaType::U64:
    case MetaType::I64:
    case MetaType::F64: return 8;
    default: return 0;
    }
}

std::optional<std::string> meta_scalar_text(const MetaValue &v) {
    auto num = [&](auto x) {
        char buf[64];
        const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form for floats
        return std::string(buf, r.ptr);
    };
    auto at = [&](auto zero) {
        decltype(zero) x;
        std::memcpy(&x, v.raw.data(), sizeof x);
        return num(x);
    };
    switch (v.type) {
    case MetaType::STRING: return v.str;
    case MetaType::BOOL: return std::string(v.raw[0] ? "true" : "false");
    case MetaType::U8: return at(uint8_t{});
    case MetaType::I8: return at(int8_t{});
    case MetaType::U16: return at(uint16_t{});
    case MetaType::I16: return at(int16_t{});
    case MetaType::U32: return at(uint32_t{});
    case MetaType::I32: return at(int32_t{});
    case MetaType::U64: return at(uint64_t{});
    case MetaType::I64: return at(int64_t{});
    case MetaType::F32: return at(float{});
    case MetaType::F64: return at(double{});
    default: return std::nullopt;
    }
}

const MetaValue *Metadata::find(const std::string &key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

const MetaValue &Metadata::expect(const std::string &key, MetaType t) const {
    const MetaValue *v = find(key);
    if (v->type != t) {
        fail(LLM_ERR_FORMAT, "metadata key '{}' has type {}, expected {}", key, name(v->type), name(t));
    }
    return *v;
}

template <typename T>
static T load_scalar(const std::vector<uint8_t> &raw, size_t i = 0) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    return v;
}

std::optional<uint32_t> Metadata::u32(const std::string &key) const {
    if (!has(key)) return std::nullopt;
    return load_scalar<uint32_t>(expect(key, MetaType::U32).raw);
}

std::optional<float> Metadata::f32(const std::string &key) const {
    if (!has(key)) return std::nullopt;
    return load_scalar<float>(expect(key, MetaType::F32).raw);
}

std::optional<bool> Metadata::boolean(const std::string &key) const {
    if (!has(key)) return std::nullopt;
    return expect(key, MetaType::BOOL).raw[0] != 0;
}

std::optional<std::string> Metadata::str(const std::string &key) const {
    if (!has(key)) return std::nullopt;
    return expect(key, MetaType::STRING).str;
}

std::optional<std::vector<uint32_t>> Metadata::u32_per_layer(const std::string &key, uint32_t n) const {
    const MetaValue *v = find(key);
    if (!v) return std::nullopt;
    if (v->type == MetaType::U32) return std::vector<uint32_t>(n, load_scalar<uint32_t>(v->raw));
    // gguf-py writes a per-layer flag list (gemma4's sliding_window_pattern) as a BOOL array: 0 or 1.
    if (v->type == MetaType::ARRAY && v->elem_type == MetaType::BOOL) {
        if (v->count != n) {
            fail(LLM_ERR_FORMAT, "metadata key '{}' has {} entries, expected one per layer ({})", key, v->count, n);
        }
        std::vector<uint32_t> out(n);
        for (uint32_t i = 0; i < n; ++i) out[i] = load_scalar<uint8_t>(v->raw, i) != 0 ? 1 : 0;
        return out;
    }
    if (v->type == MetaType::ARRAY && (v->elem_type == MetaType::U32 || v->elem_type == MetaType::I32)) {
        if (v->count != n) {
            fail(LLM_ERR_FORMAT, "metadata key '{}' has {} entries, expected one per layer ({})", key, v->count, n);
        }
        std::vector<uint32_t> out(n);
        for (uint32_t i = 0; i < n; ++i) {
            int64_t x =
                v->elem_type == MetaType::U32 ? load_scalar<uint32_t>(v->raw, i) : load_scalar<int32_t>(v->raw, i);
            if (x < 0) fail(LLM_ERR_FORMAT, "metadata key '{}' entry {} is negative", key, i);
            out[i] = static_cast<uint32_t>(x);
        }
        return out;
    }
    fail(LLM_ERR_FORMAT, "metadata key '{}' has type {}, expected u32 or a u32 array", key, name(v->type));
}

const std::vector<std::string> *Metadata::str_array(const std::string &key) const {
    const MetaValue *v = find(key);
    if (!v) return nullptr;
    if (v->type != MetaType::ARRAY || v->elem_type != MetaType::STRING) {
        fail(LLM_ERR_FORMAT, "metadata key '{}' is not a string array", key);
    }
    return &v->strs;
}

std::optional<std::vector<float>> Metadata::f32_array(const std::string &key) const {
    const MetaValue *v = find(key);
    if (!v) return std::nullopt;
    if (v->type != MetaType::ARRAY || v->elem_type != MetaType::F32) {
        fail(LLM_ERR_FORMAT, "metadata key '{}' is not an f32 array", key);
    }
    std::vector<float> out(v->count);
    if (v->count) std::memcpy(out.data(), v->raw.data(), v->count * sizeof(float));
    return out;
}

std::optional<std::vector<int32_t>> Metadata::i32_array(const std::string &key) const {
    const MetaValue *v = find(key);
    if (!v) return std::nullopt;
    if (v->type != MetaType::ARRAY || (v->elem_type != MetaType::I32 && v->elem_type != MetaType::U32)) {
        fail(LLM_ERR_FORMAT, "metadata key '{}' is not an i32 array", key);
    }
    std::vector<int32_t> out(v->count);
    if (v->count) std::memcpy(out.data(), v->raw.data(), v->count * sizeof(int32_t));
    return out;
}

uint32_t Metadata::req_u32(const std::string &key) const {
    auto v = u32(key);
    if (!v) fail(LLM_ERR_FORMAT, "required metadata key '{}' is missing", key);
    return *v;
}

float Metadata::req_f32(const std::string &key) const {
    auto v = f32(key);
    if (!v) fail(LLM_ERR_FORMAT, "required metadata key '{}' is missing", key);
    return *v;
}

std::string Metadata::req_str(const std::string &key) const {
    auto v = str(key);
    if (!v) fail(LLM_ERR_FORMAT, "required metadata key '{}' is missing", key);
    return *v;
}

}  // namespace llm
