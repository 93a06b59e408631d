#include "gguf/weight_source.h"

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

// One GGUF file's header. Offsets are absolute in that file.
struct FileHeader {
    Metadata meta;
    std::vector<TensorInfo> tensors;
    std::unordered_map<std::string, size_t> by_name;
    uint32_t version = 0;
    uint32_t alignment = 32;
    uint64_t data_offset = 0;
};

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
        if (a->type != MetaType::U32)
            fail(LLM_ERR_FORMAT, "general.alignment must be u32, got {}", meta_type_name(a->type));
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

// A split.* key: llama.cpp reads split.no and split.count as u16, split.tensors.count as i32, with
// exactly those types. -1 when absent.
int64_t split_key(const Metadata &m, const std::string &key, MetaType type) {
    const MetaValue *v = m.find(key);
    if (!v) return -1;
    if (v->type != type)
        fail(LLM_ERR_FORMAT, "{} must be {}, got {}", key, meta_type_name(type), meta_type_name(v->type));
    if (type == MetaType::U16) {
        uint16_t x;
        std::memcpy(&x, v->raw.data(), 2);
        return x;
    }
    int32_t x;
    std::memcpy(&x, v->raw.data(), 4);
    return x;
}

}  // namespace

std::string TensorInfo::shape_string() const {
    std::string s = "[";
    for (uint32_t i = 0; i < std::max<uint32_t>(n_dims, 1); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

std::unique_ptr<WeightSource> WeightSource::open(std::unique_ptr<ByteSource> bytes) {
    std::vector<std::unique_ptr<ByteSource>> one;
    one.push_back(std::move(bytes));
    return open(std::move(one));
}

std::unique_ptr<WeightSource> WeightSource::open(std::vector<std::unique_ptr<ByteSource>> shards) {
    if (shards.empty()) fail(LLM_ERR_INTERNAL, "a model needs at least one GGUF source");
    std::unique_ptr<WeightSource> ws(new WeightSource());
    ws->add_shard(std::move(shards[0]));
    ws->expect_shards(shards.size());
    for (size_t k = 1; k < shards.size(); ++k) ws->add_shard(std::move(shards[k]));
    ws->check_complete();
    return ws;
}

std::unique_ptr<WeightSource> WeightSource::open_file(const std::string &path) {
    std::unique_ptr<WeightSource> ws(new WeightSource());
    ws->add_shard(open_file_source(path));
    const uint32_t n = ws->split_count_;
    if (n > 1) {
        const std::string tail = fmt::format("-00001-of-{:05}.gguf", n);
        if (path.size() < tail.size() || path.compare(path.size() - tail.size(), tail.size(), tail) != 0) {
            fail(LLM_ERR_FORMAT,
                 "'{}' is the first of {} shards of a split model, but its name does not end in '{}', "
                 "so the other shards cannot be found",
                 path, n, tail);
        }
        const std::string prefix = path.substr(0, path.size() - tail.size());
        for (uint32_t k = 1; k < n; ++k) {
            std::unique_ptr<ByteSource> b;
            try {
                b = open_file_source(fmt::format("{}-{:05}-of-{:05}.gguf", prefix, k + 1, n));
            } catch (const Error &e) {
                fail(LLM_ERR_FORMAT, "shard {} of {} of the split model '{}' is missing: {}", k + 1, n, path, e.what());
            }
            ws->add_shard(std::move(b));
        }
    }
    ws->check_complete();
    return ws;
}

void WeightSource::add_shard(std::unique_ptr<ByteSource> bytes) {
    const uint32_t k = n_shards();
    shards_.push_back(std::move(bytes));
    ByteSource &b = *shards_.back();
    if (k == 0) {
        FileHeader h = parse_file(b);
        const int64_t no = split_key(h.meta, "split.no", MetaType::U16);
        const int64_t count = split_key(h.meta, "split.count", MetaType::U16);
        if (count == 0) fail(LLM_ERR_FORMAT, "{}: split.count 0 is invalid", b.describe());
        if (no > 0) {
            fail(LLM_ERR_FORMAT,
                 "{} is shard {} of {} of a split model (split.no {}); load the first shard, split.no 0", b.describe(),
                 no + 1, count > 0 ? std::to_string(count) : "?", no);
        }
        split_count_ = count > 0 ? static_cast<uint32_t>(count) : 1;
        split_tensors_ = split_key(h.meta, "split.tensors.count", MetaType::I32);
        meta_ = std::move(h.meta);
        tensors_ = std::move(h.tensors);
        by_name_ = std::move(h.by_name);
        version_ = h.version;
        alignment_ = h.alignment;
        data_offset_ = h.data_offset;
        return;
    }
    // The other shards' own metadata is only their split.* keys; the model's is the first shard's.
    FileHeader h;
    try {
        h = parse_file(b);
        const int64_t no = split_key(h.meta, "split.no", MetaType::U16);
        const int64_t count = split_key(h.meta, "split.count", MetaType::U16);
        const int64_t n_tensors = split_key(h.meta, "split.tensors.count", MetaType::I32);
        if (count < 0) fail(LLM_ERR_FORMAT, "it has no split.count, so it is not a shard of a split model");
        if (count != split_count_) {
            fail(LLM_ERR_FORMAT, "its split.count is {}, the first shard's {}: it belongs to another split set", count,
                 split_count_);
        }
        if (no < 0) fail(LLM_ERR_FORMAT, "it has no split.no");
        if (no != k) {
            fail(LLM_ERR_FORMAT, "its split.no is {}, expected {}: shards out of order, or from another split set", no,
                 k);
        }
        if (n_tensors >= 0 && split_tensors_ >= 0 && n_tensors != split_tensors_) {
            fail(LLM_ERR_FORMAT, "its split.tensors.count is {}, the first shard's {}: it belongs to another split set",
                 n_tensors, split_tensors_);
        }
    } catch (const Error &e) {
        fail(e.status(), "shard {} of {} ({}): {}", k + 1, split_count_, b.describe(), e.what());
    }
    for (TensorInfo &t : h.tensors) {
        t.shard = k;
        auto [it, fresh] = by_name_.emplace(t.name, tensors_.size());
        if (!fresh) {
            const uint32_t first = tensors_[it->second].shard;
            fail(LLM_ERR_FORMAT, "tensor '{}' is in shard {} ({}) and again in shard {} ({})", t.name, first + 1,
                 shards_[first]->describe(), k + 1, b.describe());
        }
        tensors_.push_back(std::move(t));
    }
}

void WeightSource::expect_shards(size_t n) const {
    if (split_count_ == n) return;
    if (split_count_ == 1) {
        fail(LLM_ERR_FORMAT, "{} is not the first shard of a split model (no split.count), but {} shards were given",
             shards_[0]->describe(), n);
    }
    if (n == 1) {
        fail(LLM_ERR_FORMAT, "{} is the first of {} shards of a split model; the other shards are needed too",
             shards_[0]->describe(), split_count_);
    }
    fail(LLM_ERR_FORMAT, "{} says the split model has {} shards (split.count), but {} were given",
         shards_[0]->describe(), split_count_, n);
}

void WeightSource::check_complete() const {
    if (split_tensors_ >= 0 && tensors_.size() != static_cast<uint64_t>(split_tensors_)) {
        fail(LLM_ERR_FORMAT,
             "the {} shard(s) of {} hold {} tensors, but split.tensors.count is {}: a shard is "
             "incomplete or from another split set",
             n_shards(), shards_[0]->describe(), tensors_.size(), split_tensors_);
    }
}

uint64_t WeightSource::file_size() const {
    uint64_t n = 0;
    for (const auto &b : shards_) n += b->size();
    return n;
}

CachePolicy WeightSource::set_cache_policy(CachePolicy p) {
    // One policy for all shards: block reads are laid out once (page-aligned under DIRECT) for the whole
    // model, so a shard that falls back takes the others with it.
    CachePolicy got = p;
    for (auto &b : shards_) got = std::min(got, b->set_cache_policy(p));
    if (got != p)
        for (auto &b : shards_) b->set_cache_policy(got);
    return got;
}

bool WeightSource::thread_bound() const {
    for (const auto &b : shards_)
        if (b->thread_bound()) return true;
    return false;
}

const TensorInfo *WeightSource::find(const std::string &name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

void WeightSource::read(const TensorInfo &t, uint64_t offset, void *dst, uint64_t n) const {
    if (offset > t.nbytes || n > t.nbytes - offset) {
        fail(LLM_ERR_INTERNAL, "read of {} bytes at {} outside tensor '{}' ({} bytes)", n, offset, t.name, t.nbytes);
    }
    shards_[t.shard]->read_weights(t.offset + offset, dst, n);
}

uint64_t WeightSource::fingerprint() const {
    Fnv1a64 h;
    h.add_value(version_);
    h.add_value(static_cast<uint64_t>(meta_.all().size()));
    for (const auto &[key, v] : meta_.all()) {  // a std::map: in key order, whatever the file's order
        h.add_string(key);
        h.add_value(static_cast<uint32_t>(v.type));
        h.add_value(static_cast<uint32_t>(v.elem_type));
        h.add_value(v.count);
        h.add_value(static_cast<uint64_t>(v.raw.size()));
        h.add(v.raw.data(), v.raw.size());
        h.add_string(v.str);
        h.add_value(static_cast<uint64_t>(v.strs.size()));
        for (const std::string &s : v.strs) h.add_string(s);
    }
    h.add_value(static_cast<uint64_t>(tensors_.size()));
    for (const TensorInfo &t : tensors_) {
        h.add_string(t.name);
        h.add_value(t.n_dims);
        for (uint64_t n : t.ne) h.add_value(n);
        h.add_value(static_cast<uint32_t>(t.type));
        h.add_value(t.shard);
        h.add_value(t.offset);
    }
    return h.value();
}

}  // namespace llm
