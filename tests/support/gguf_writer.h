// GgufWriter: builds GGUF v3 files. Test support (tests/support, not part of libllm): used by the
// tests and fuzzers (valid files and deliberately malformed ones) and by llm-bench's synthetic
// benchmark models, so tensor data is streamed: only the header
// is held in memory; each tensor's bytes come from a callback when the file is written.
//
// Normal use:
//     GgufWriter w;
//     w.add_string("general.architecture", "llama");
//     w.add_tensor("output_norm.weight", {64}, TensorType::F32, bytes);
//     w.write_file(path);
//
// Crafting malformed files: every field the reader validates can be overridden (magic, version,
// counts, KV type ids, raw KV / tensor-info bytes, n_dims, raw type ids, offsets), and layout()
// tells where each part lands so a test can truncate or patch the bytes precisely.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "gguf/metadata.h"
#include "gguf/types.h"

namespace llm {

class WeightSource;

// Little-endian byte builder for GGUF's primitive encodings.
class GgufBytes {
public:
    GgufBytes &u8(uint8_t v) { return put(&v, 1); }
    GgufBytes &i8(int8_t v) { return put(&v, 1); }
    GgufBytes &u16(uint16_t v) { return le(v, 2); }
    GgufBytes &i16(int16_t v) { return le(static_cast<uint16_t>(v), 2); }
    GgufBytes &u32(uint32_t v) { return le(v, 4); }
    GgufBytes &i32(int32_t v) { return le(static_cast<uint32_t>(v), 4); }
    GgufBytes &u64(uint64_t v) { return le(v, 8); }
    GgufBytes &i64(int64_t v) { return le(static_cast<uint64_t>(v), 8); }
    GgufBytes &f32(float v);
    GgufBytes &f64(double v);
    // A GGUF string: u64 length, then the bytes (no NUL).
    GgufBytes &str(const std::string &s) { return u64(s.size()).put(s.data(), s.size()); }
    GgufBytes &put(const void *p, size_t n);
    GgufBytes &zeros(size_t n) {
        bytes.insert(bytes.end(), n, 0);
        return *this;
    }

    size_t size() const { return bytes.size(); }
    std::vector<uint8_t> bytes;

private:
    GgufBytes &le(uint64_t v, int n);
};

// Where the written bytes go. Implementations throw Error(LLM_ERR_IO) on failure.
class GgufSink {
public:
    virtual ~GgufSink() = default;
    virtual void write(const void *p, uint64_t n) = 0;
};

// Produces a tensor's bytes: must write exactly the tensor's nbytes to the sink, in any number of
// pieces. Called once per write, in tensor order.
using GgufDataFn = std::function<void(GgufSink &out)>;

// A tensor-info entry with every field explicit. add_tensor() fills one from the type table; tests
// build their own to write impossible values.
struct GgufTensorSpec {
    std::string name;
    std::vector<uint64_t> ne;        // ne[0] is the contiguous dimension; all written, as u64
    uint32_t type = 0;               // raw ggml type id
    std::optional<uint32_t> n_dims;  // default: ne.size()
    std::optional<uint64_t> offset;  // written offset; default: where the data really goes
    uint64_t nbytes = 0;             // bytes `data` produces (and the layout reserves)
    GgufDataFn data;                 // empty: nbytes zero bytes
};

// Byte positions in the file that write() produces, for tests that cut or patch it.
struct GgufLayout {
    std::vector<uint64_t> kv_offsets;           // start of each KV entry (its key length)
    std::vector<uint64_t> tensor_info_offsets;  // start of each tensor info (its name length)
    uint64_t infos_end = 0;                     // first byte after the last tensor info
    uint64_t data_offset = 0;                   // start of the data section
    std::vector<uint64_t> tensor_offsets;       // where each tensor's data goes, relative to data_offset
    uint64_t file_size = 0;
    uint32_t alignment = 32;
};

class GgufWriter {
public:
    // ---- metadata -------------------------------------------------------------------------------
    void add_u8(const std::string &key, uint8_t v);
    void add_i8(const std::string &key, int8_t v);
    void add_u16(const std::string &key, uint16_t v);
    void add_i16(const std::string &key, int16_t v);
    void add_u32(const std::string &key, uint32_t v);
    void add_i32(const std::string &key, int32_t v);
    void add_f32(const std::string &key, float v);
    void add_bool(const std::string &key, bool v);
    void add_string(const std::string &key, const std::string &v);
    void add_u64(const std::string &key, uint64_t v);
    void add_i64(const std::string &key, int64_t v);
    void add_f64(const std::string &key, double v);

    // Array of `count` scalars of elem (not STRING/ARRAY) packed little-endian at data.
    void add_array(const std::string &key, MetaType elem, const void *data, uint64_t count);
    template <typename T>
    void add_array(const std::string &key, const std::vector<T> &v) {
        add_array(key, meta_type_of<T>(), v.data(), v.size());
    }
    void add_string_array(const std::string &key, const std::vector<std::string> &v);

    // Sets general.alignment (u32) and lays the data out with it. A u32 general.alignment added
    // through add_u32 has the same effect when it is a non-zero power of two.
    void set_alignment(uint32_t a) { add_u32("general.alignment", a); }

    // Any key with any type id and value bytes as given (for invalid type ids, nested arrays...).
    void add_kv_raw(const std::string &key, uint32_t type_id, const std::vector<uint8_t> &value);
    // A complete KV entry as raw bytes (for bad key lengths); counts as one entry of n_kv.
    void add_kv_bytes(const std::vector<uint8_t> &entry);

    // A value as the file stores it after its type id (for add_kv_raw): copies an entry as read.
    static std::vector<uint8_t> encode_value(const MetaValue &v);

    // Every metadata entry and tensor of src except those the skip functions name; tensor bytes are
    // read from src when the file is written (src must outlive that). For tests and tools that
    // derive a file from another: a relabelled vocabulary, an extra tensor or key.
    void add_all_from(const WeightSource &src, const std::function<bool(const std::string &)> &skip_key = {},
                      const std::function<bool(const std::string &)> &skip_tensor = {});

    // ---- tensors --------------------------------------------------------------------------------
    // Checked against the type table: ne[0] a multiple of the block size, data of exactly the
    // tensor's byte size. Throws Error(LLM_ERR_INTERNAL) otherwise.
    void add_tensor(const std::string &name, const std::vector<uint64_t> &ne, TensorType type,
                    std::vector<uint8_t> data);
    void add_tensor(const std::string &name, const std::vector<uint64_t> &ne, TensorType type, GgufDataFn data);
    // Unchecked: written exactly as specified.
    void add_tensor_spec(GgufTensorSpec spec);
    // A complete tensor-info entry as raw bytes, with no data; counts as one entry of n_tensors.
    void add_tensor_info_bytes(const std::vector<uint8_t> &info);

    // ---- header overrides (malformed files) -----------------------------------------------------
    void set_magic(const std::array<char, 4> &m) { magic_ = m; }
    void set_version(uint32_t v) { version_ = v; }
    void set_n_kv(uint64_t n) { n_kv_ = n; }
    void set_n_tensors(uint64_t n) { n_tensors_ = n; }
    // Alignment used for the layout regardless of the metadata.
    void set_layout_alignment(uint32_t a) { layout_alignment_ = a; }

    // ---- output ---------------------------------------------------------------------------------
    GgufLayout layout() const;
    void write(GgufSink &out) const;
    void write_file(const std::string &path) const;
    std::vector<uint8_t> to_bytes() const;

    // Byte size of a tensor of this shape and type (0 if ne[0] does not fit the block size or the
    // size overflows).
    static uint64_t tensor_nbytes(const std::vector<uint64_t> &ne, TensorType type);

    template <typename T>
    static constexpr MetaType meta_type_of() {
        if constexpr (std::is_same_v<T, uint8_t>)
            return MetaType::U8;
        else if constexpr (std::is_same_v<T, int8_t>)
            return MetaType::I8;
        else if constexpr (std::is_same_v<T, uint16_t>)
            return MetaType::U16;
        else if constexpr (std::is_same_v<T, int16_t>)
            return MetaType::I16;
        else if constexpr (std::is_same_v<T, uint32_t>)
            return MetaType::U32;
        else if constexpr (std::is_same_v<T, int32_t>)
            return MetaType::I32;
        else if constexpr (std::is_same_v<T, float>)
            return MetaType::F32;
        else if constexpr (std::is_same_v<T, uint64_t>)
            return MetaType::U64;
        else if constexpr (std::is_same_v<T, int64_t>)
            return MetaType::I64;
        else if constexpr (std::is_same_v<T, double>)
            return MetaType::F64;
        else
            static_assert(sizeof(T) == 0, "no GGUF array type for this element type");
    }

private:
    struct Tensor {
        GgufTensorSpec spec;
        std::vector<uint8_t> raw_info;  // with raw: written instead of the spec, and no data
        bool raw = false;
    };

    void add_scalar(const std::string &key, MetaType t, uint64_t bits, int n);
    uint32_t alignment() const;
    GgufBytes header(GgufLayout *lay) const;

    std::array<char, 4> magic_{'G', 'G', 'U', 'F'};
    uint32_t version_ = 3;
    std::optional<uint64_t> n_kv_, n_tensors_;
    std::optional<uint32_t> layout_alignment_;
    std::optional<uint32_t> alignment_kv_;   // value of a u32 general.alignment, if added
    std::vector<std::vector<uint8_t>> kvs_;  // encoded entries
    std::vector<Tensor> tensors_;
};

}  // namespace llm
