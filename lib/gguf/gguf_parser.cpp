// The GGUF parser (gguf_parser.h): a bounded cursor over a ByteSource, typed metadata values and the
// tensor directory, each checked against the bytes that remain before anything is allocated.
#include "gguf/gguf_parser.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/hash.h"

namespace llm {
namespace {

constexpr uint64_t kMaxString = 1ull << 30;  // GGUF_MAX_STRING_LENGTH
constexpr uint64_t kMaxArray = 1ull << 30;   // GGUF_MAX_ARRAY_ELEMENTS
constexpr uint64_t kMaxName = 63;            // GGML_MAX_NAME - 1
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
// Empty name, n_dims 0 (accepted, as llama.cpp does), type, offset: the bound must not reject such
// a valid file.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
// The counts are only bounded by the file size, so reserve no more than this up front: a hostile
// count must not turn into a huge allocation before the entries are actually read.
constexpr uint64_t kMaxReserve = 1 << 16;

// Sequential reader over a ByteSource with a small window: the header is parsed without ever
// holding the file, and every length is compared with what is left before anything is allocated.
class Cursor {
public:
    explicit Cursor(ByteSource &src) : src_(src), size_(src.size()) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    void need(uint64_t n, const std::string &what) {
        if (n > remaining()) {
            fail(LLM_ERR_FORMAT, "truncated file: {} needs {} bytes at offset {}, only {} left", what, n, pos_,
                 remaining());
        }
    }

    void read(void *dst, uint64_t n, const std::string &what) {
        need(n, what);
        auto *out = static_cast<uint8_t *>(dst);
        while (n > 0) {
            if (pos_ < win_start_ || pos_ >= win_start_ + win_.size()) fill();
            uint64_t off = pos_ - win_start_;
            uint64_t take = std::min<uint64_t>(n, win_.size() - off);
            std::memcpy(out, win_.data() + off, take);
            out += take;
            pos_ += take;
            n -= take;
        }
    }

    template <typename T>
    T get(const std::string &what) {
        T v;
        read(&v, sizeof v, what);
        return v;
    }

    std::string string(const std::string &what) {
        uint64_t len = get<uint64_t>(what + " length");
        if (len > kMaxString) fail(LLM_ERR_FORMAT, "{}: string length {} exceeds 1 GiB", what, len);
        need(len, what);
        std::string s(len, '\0');
        read(s.data(), len, what);
        return s;
    }

    void skip_to(uint64_t p) { pos_ = p; }

private:
    void fill() {
        uint64_t n = std::min<uint64_t>(kWindow, size_ - pos_);
        win_.resize(n);
        src_.read_at(pos_, win_.data(), n);
        win_start_ = pos_;
    }

    static constexpr uint64_t kWindow = 1 << 16;
    ByteSource &src_;
    uint64_t size_;
    uint64_t pos_ = 0;
    uint64_t win_start_ = 0;
    std::vector<uint8_t> win_;
};

bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out); }

MetaValue read_value(Cursor &c, MetaType type, const std::string &key) {
    MetaValue v;
    v.type = type;
    if (type == MetaType::STRING) {
        v.str = c.string("value of '" + key + "'");
    } else if (type == MetaType::ARRAY) {
        uint32_t et = c.get<uint32_t>("array type of '" + key + "'");
        if (et >= kMetaTypeCount) fail(LLM_ERR_FORMAT, "key '{}': invalid array element type {}", key, et);
        if (et == static_cast<uint32_t>(MetaType::ARRAY))
            fail(LLM_ERR_FORMAT, "key '{}': nested arrays are not allowed", key);
        v.elem_type = static_cast<MetaType>(et);
        v.count = c.get<uint64_t>("array length of '" + key + "'");
        if (v.count > kMaxArray) fail(LLM_ERR_FORMAT, "key '{}': array length {} exceeds 2^30", key, v.count);
        if (v.elem_type == MetaType::STRING) {
            if (v.count * 8 > c.remaining()) {
                fail(LLM_ERR_FORMAT, "key '{}': array of {} strings does not fit in the {} bytes left", key, v.count,
                     c.remaining());
            }
            v.strs.reserve(std::min(v.count, kMaxReserve));
            for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(c.string("element of '" + key + "'"));
        } else {
            uint64_t bytes = v.count * meta_scalar_size(v.elem_type);
            if (bytes > c.remaining()) {
                fail(LLM_ERR_FORMAT, "key '{}': array of {} bytes does not fit in the {} bytes left", key, bytes,
                     c.remaining());
            }
            v.raw.resize(bytes);
            c.read(v.raw.data(), bytes, "array '" + key + "'");
        }
    } else {
        uint32_t n = meta_scalar_size(type);
        v.raw.resize(n);
        c.read(v.raw.data(), n, "value of '" + key + "'");
    }
    return v;
}

}  // namespace

FileHeader parse_file(ByteSource &bytes) {
    FileHeader h;
    Cursor c(bytes);
    // Shorter files are still read field by field, so the message names the field that is cut off.
    if (bytes.size() < 4) fail(LLM_ERR_FORMAT, "not a GGUF file: only {} bytes", bytes.size());
    char magic[4];
    c.read(magic, 4, "magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) fail(LLM_ERR_FORMAT, "not a GGUF file: bad magic");
    h.version = c.get<uint32_t>("version");
    if (h.version == 0) fail(LLM_ERR_FORMAT, "GGUF version 0 is invalid");
    if ((h.version & 0xFFFF) == 0) fail(LLM_ERR_FORMAT, "GGUF version {:#x}: file has the wrong byte order", h.version);
    if (h.version == 1) fail(LLM_ERR_FORMAT, "GGUF version 1 is no longer supported");
    if (h.version > 3) fail(LLM_ERR_FORMAT, "GGUF version {} is newer than this reader (2 or 3)", h.version);

    int64_t n_tensors = c.get<int64_t>("tensor count");
    int64_t n_kv = c.get<int64_t>("metadata count");
    if (n_tensors < 0 || static_cast<uint64_t>(n_tensors) > c.remaining() / kMinTensorInfoBytes) {
        fail(LLM_ERR_FORMAT, "tensor count {} is impossible for a file of {} bytes", n_tensors, bytes.size());
    }
    if (n_kv < 0 || static_cast<uint64_t>(n_kv) > c.remaining() / kMinKvBytes) {
        fail(LLM_ERR_FORMAT, "metadata count {} is impossible for a file of {} bytes", n_kv, bytes.size());
    }

    for (int64_t i = 0; i < n_kv; ++i) {
        std::string key = c.string("metadata key #" + std::to_string(i));
        if (key.empty()) fail(LLM_ERR_FORMAT, "metadata key #{} is empty", i);
        if (h.meta.has(key)) fail(LLM_ERR_FORMAT, "duplicate metadata key '{}'", key);
        uint32_t t = c.get<uint32_t>("type of '" + key + "'");
        if (t >= kMetaTypeCount) fail(LLM_ERR_FORMAT, "metadata key '{}' has invalid type {}", key, t);
        h.meta.add(key, read_value(c, static_cast<MetaType>(t), key));
    }

    if (const MetaValue *a = h.meta.find("general.alignment")) {
        if (a->type != MetaType::U32) fail(LLM_ERR_FORMAT, "general.alignment must be u32, got {}", name(a->type));
        uint32_t al;
        std::memcpy(&al, a->raw.data(), 4);
        if (al == 0 || (al & (al - 1)) != 0) fail(LLM_ERR_FORMAT, "general.alignment {} is not a power of two", al);
        h.alignment = al;
    }

    h.tensors.reserve(std::min(static_cast<uint64_t>(n_tensors), kMaxReserve));
    for (int64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t;
        t.name = c.string("name of tensor #" + std::to_string(i));
        if (t.name.size() > kMaxName)
            fail(LLM_ERR_FORMAT, "tensor #{} name is {} bytes long (max {})", i, t.name.size(), kMaxName);
        if (h.by_name.count(t.name)) fail(LLM_ERR_FORMAT, "duplicate tensor name '{}'", t.name);
        const std::string what = "tensor '" + t.name + "'";
        t.n_dims = c.get<uint32_t>(what + " n_dims");
        if (t.n_dims > 4) fail(LLM_ERR_FORMAT, "{} has {} dimensions (max 4)", what, t.n_dims);
        uint64_t total = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            int64_t ne = c.get<int64_t>(what + " shape");
            if (ne <= 0) fail(LLM_ERR_FORMAT, "{} dimension {} is {} (must be > 0)", what, d, ne);
            t.ne[d] = static_cast<uint64_t>(ne);
            if (mul_overflows(total, t.ne[d], &total) || total > static_cast<uint64_t>(INT64_MAX)) {
                fail(LLM_ERR_FORMAT, "{} element count overflows", what);
            }
        }
        uint32_t type = c.get<uint32_t>(what + " type");
        TypeInfo ti = type_info(type);
        // A well-formed file can hold a type this library does not know (a later llama.cpp's, or one
        // it removed): unsupported rather than malformed, naming the tensor and the id.
        if (!ti.name || ti.block == 0) {
            fail(LLM_ERR_UNSUPPORTED, "{} has unknown type id {}, which this library cannot read", what, type);
        }
        t.type = static_cast<TensorType>(type);
        if (t.ne[0] % ti.block != 0) {
            fail(LLM_ERR_FORMAT, "{} row length {} is not a multiple of the {} block size {}", what, t.ne[0], ti.name,
                 ti.block);
        }
        if (mul_overflows(total / ti.block, ti.bytes, &t.nbytes)) fail(LLM_ERR_FORMAT, "{} byte size overflows", what);
        uint64_t rel = c.get<uint64_t>(what + " offset");
        if (rel % h.alignment != 0)
            fail(LLM_ERR_FORMAT, "{} offset {} is not a multiple of the alignment {}", what, rel, h.alignment);
        t.offset = rel;  // relative for now
        h.by_name.emplace(t.name, h.tensors.size());
        h.tensors.push_back(std::move(t));
    }

    uint64_t pos = c.pos();
    h.data_offset = h.tensors.empty() ? pos : (pos + h.alignment - 1) / h.alignment * h.alignment;
    if (!h.tensors.empty() && h.data_offset > bytes.size()) {
        fail(LLM_ERR_FORMAT, "truncated file: tensor data would start at {} past the end ({} bytes)", h.data_offset,
             bytes.size());
    }

    // Writers lay tensors out back to back, each padded to the alignment; llama.cpp insists on that,
    // which also rules out overlaps. Then every tensor must lie inside the file.
    uint64_t expected = 0;
    for (TensorInfo &t : h.tensors) {
        if (t.offset != expected) {
            fail(LLM_ERR_FORMAT, "tensor '{}' has offset {}, expected {} (tensors must be contiguous)", t.name,
                 t.offset, expected);
        }
        uint64_t padded = (t.nbytes + h.alignment - 1) / h.alignment * h.alignment;
        if (padded < t.nbytes || __builtin_add_overflow(expected, padded, &expected)) {
            fail(LLM_ERR_FORMAT, "tensor '{}': data offsets overflow", t.name);
        }
        uint64_t abs = 0, end = 0;
        if (__builtin_add_overflow(h.data_offset, t.offset, &abs) || __builtin_add_overflow(abs, t.nbytes, &end) ||
            end > bytes.size()) {
            fail(LLM_ERR_FORMAT, "tensor '{}' data [{}, +{}) lies outside the file ({} bytes): truncated or corrupt",
                 t.name, h.data_offset + t.offset, t.nbytes, bytes.size());
        }
        t.offset = abs;
    }
    return h;
}

}  // namespace llm
