// GGUF key/value metadata with typed, exact-type getters (llama.cpp rejects a count stored as the
// wrong integer type; so do we, naming the key).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace llm {

enum class MetaType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};
constexpr uint32_t kMetaTypeCount = 13;
const char *name(MetaType t);
// Size of one scalar element; 0 for STRING and ARRAY.
uint32_t meta_scalar_size(MetaType t);

struct MetaValue;
// A scalar or string value as text: strings as stored, integers in decimal, floats in the shortest
// form that reads back the same (f32 as f32), booleans "true"/"false". nullopt for arrays.
std::optional<std::string> meta_scalar_text(const MetaValue &v);

struct MetaValue {
    MetaType type = MetaType::U8;
    MetaType elem_type = MetaType::U8;  // arrays only
    uint64_t count = 0;                 // arrays only
    std::vector<uint8_t> raw;           // scalar bytes, or packed numeric array elements
    std::string str;                    // STRING
    std::vector<std::string> strs;      // ARRAY of STRING
};

class Metadata {
public:
    void add(std::string key, MetaValue v) { kv_.emplace(std::move(key), std::move(v)); }
    bool has(const std::string &key) const { return kv_.count(key) != 0; }
    const MetaValue *find(const std::string &key) const;
    const std::map<std::string, MetaValue> &all() const { return kv_; }

    // Each getter: absent key -> nullopt; present with another type -> Error(LLM_ERR_FORMAT).
    std::optional<uint32_t> u32(const std::string &key) const;
    std::optional<float> f32(const std::string &key) const;
    std::optional<bool> boolean(const std::string &key) const;
    std::optional<std::string> str(const std::string &key) const;
    // u32 scalar, or an array of u32/i32 with exactly n entries (per-layer hparams).
    std::optional<std::vector<uint32_t>> u32_per_layer(const std::string &key, uint32_t n) const;
    // Arrays; the element type must match.
    const std::vector<std::string> *str_array(const std::string &key) const;
    std::optional<std::vector<float>> f32_array(const std::string &key) const;
    std::optional<std::vector<int32_t>> i32_array(const std::string &key) const;

    // Required variants: absent -> Error(LLM_ERR_FORMAT) naming the key.
    uint32_t req_u32(const std::string &key) const;
    float req_f32(const std::string &key) const;
    std::string req_str(const std::string &key) const;

private:
    const MetaValue &expect(const std::string &key, MetaType t) const;
    std::map<std::string, MetaValue> kv_;
};

}  // namespace llm
