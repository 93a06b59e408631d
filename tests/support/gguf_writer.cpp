// GgufWriter (gguf_writer.h): lays out and writes GGUF v3 files, overrides included.
#include "gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "gguf/weight_source.h"

namespace llm {
namespace {

// GgufBytes writes little-endian explicitly, but tensor data and array elements go out in host
// order; a big-endian host would produce a mixed file.
static_assert(std::endian::native == std::endian::little, "GgufWriter assumes a little-endian host");

constexpr uint32_t kDefaultAlignment = 32;

uint64_t align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

class VectorSink final : public GgufSink {
public:
    explicit VectorSink(std::vector<uint8_t> &out) : out_(out) {}
    void write(const void *p, uint64_t n) override {
        auto *b = static_cast<const uint8_t *>(p);
        out_.insert(out_.end(), b, b + n);
    }

private:
    std::vector<uint8_t> &out_;
};

class FileSink final : public GgufSink {
public:
    FileSink(std::FILE *f, const std::string &path) : f_(f), path_(path) {}
    void write(const void *p, uint64_t n) override {
        if (n != 0 && std::fwrite(p, 1, n, f_) != n) {
            fail(LLM_ERR_IO, "writing '{}': {}", path_, std::strerror(errno));
        }
    }

private:
    std::FILE *f_;
    const std::string &path_;
};

// Counts what a tensor's data callback produces, so a callback that writes too much or too little
// is caught here instead of silently shifting every later tensor.
class CountingSink final : public GgufSink {
public:
    explicit CountingSink(GgufSink &out) : out_(out) {}
    void write(const void *p, uint64_t n) override {
        out_.write(p, n);
        count += n;
    }
    uint64_t count = 0;

private:
    GgufSink &out_;
};

void write_zeros(GgufSink &out, uint64_t n) {
    static const uint8_t zeros[256] = {};
    while (n > 0) {
        uint64_t k = std::min<uint64_t>(n, sizeof zeros);
        out.write(zeros, k);
        n -= k;
    }
}

}  // namespace

GgufBytes &GgufBytes::put(const void *p, size_t n) {
    auto *b = static_cast<const uint8_t *>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
}

GgufBytes &GgufBytes::le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
}

GgufBytes &GgufBytes::f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u32(u);
}

GgufBytes &GgufBytes::f64(double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    return u64(u);
}

// ---- metadata -----------------------------------------------------------------------------------

void GgufWriter::add_scalar(const std::string &key, MetaType t, uint64_t bits, int n) {
    GgufBytes e;
    e.str(key).u32(static_cast<uint32_t>(t));
    for (int i = 0; i < n; ++i) e.u8(static_cast<uint8_t>(bits >> (8 * i)));
    kvs_.push_back(std::move(e.bytes));
}

void GgufWriter::add_u8(const std::string &key, uint8_t v) { add_scalar(key, MetaType::U8, v, 1); }
void GgufWriter::add_i8(const std::string &key, int8_t v) { add_scalar(key, MetaType::I8, static_cast<uint8_t>(v), 1); }
void GgufWriter::add_u16(const std::string &key, uint16_t v) { add_scalar(key, MetaType::U16, v, 2); }
void GgufWriter::add_i16(const std::string &key, int16_t v) {
    add_scalar(key, MetaType::I16, static_cast<uint16_t>(v), 2);
}
void GgufWriter::add_u32(const std::string &key, uint32_t v) {
    add_scalar(key, MetaType::U32, v, 4);
    if (key == "general.alignment") alignment_kv_ = v;
}
void GgufWriter::add_i32(const std::string &key, int32_t v) {
    add_scalar(key, MetaType::I32, static_cast<uint32_t>(v), 4);
}
void GgufWriter::add_f32(const std::string &key, float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    add_scalar(key, MetaType::F32, u, 4);
}
void GgufWriter::add_bool(const std::string &key, bool v) { add_scalar(key, MetaType::BOOL, v ? 1 : 0, 1); }
void GgufWriter::add_u64(const std::string &key, uint64_t v) { add_scalar(key, MetaType::U64, v, 8); }
void GgufWriter::add_i64(const std::string &key, int64_t v) {
    add_scalar(key, MetaType::I64, static_cast<uint64_t>(v), 8);
}
void GgufWriter::add_f64(const std::string &key, double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    add_scalar(key, MetaType::F64, u, 8);
}

void GgufWriter::add_string(const std::string &key, const std::string &v) {
    GgufBytes e;
    e.str(key).u32(static_cast<uint32_t>(MetaType::STRING)).str(v);
    kvs_.push_back(std::move(e.bytes));
}

void GgufWriter::add_array(const std::string &key, MetaType elem, const void *data, uint64_t count) {
    const uint32_t size = meta_scalar_size(elem);
    if (size == 0) fail(LLM_ERR_INTERNAL, "add_array('{}'): {} is not a scalar type", key, name(elem));
    GgufBytes e;
    e.str(key).u32(static_cast<uint32_t>(MetaType::ARRAY)).u32(static_cast<uint32_t>(elem)).u64(count);
    e.put(data, count * size);
    kvs_.push_back(std::move(e.bytes));
}

void GgufWriter::add_string_array(const std::string &key, const std::vector<std::string> &v) {
    GgufBytes e;
    e.str(key).u32(static_cast<uint32_t>(MetaType::ARRAY)).u32(static_cast<uint32_t>(MetaType::STRING));
    e.u64(v.size());
    for (const std::string &s : v) e.str(s);
    kvs_.push_back(std::move(e.bytes));
}

void GgufWriter::add_kv_raw(const std::string &key, uint32_t type_id, const std::vector<uint8_t> &value) {
    GgufBytes e;
    e.str(key).u32(type_id).put(value.data(), value.size());
    kvs_.push_back(std::move(e.bytes));
}

void GgufWriter::add_kv_bytes(const std::vector<uint8_t> &entry) { kvs_.push_back(entry); }

std::vector<uint8_t> GgufWriter::encode_value(const MetaValue &v) {
    GgufBytes b;
    if (v.type == MetaType::STRING) {
        b.str(v.str);
    } else if (v.type == MetaType::ARRAY) {
        b.u32(static_cast<uint32_t>(v.elem_type)).u64(v.count);
        if (v.elem_type == MetaType::STRING) {
            for (const std::string &x : v.strs) b.str(x);
        } else {
            b.put(v.raw.data(), v.raw.size());
        }
    } else {
        b.put(v.raw.data(), v.raw.size());
    }
    return b.bytes;
}

void GgufWriter::add_all_from(const WeightSource &src, const std::function<bool(const std::string &)> &skip_key,
                              const std::function<bool(const std::string &)> &skip_tensor) {
    for (const auto &[key, v] : src.meta().all()) {
        if (skip_key && skip_key(key)) continue;
        add_kv_raw(key, static_cast<uint32_t>(v.type), encode_value(v));
    }
    for (const TensorInfo &t : src.tensors()) {
        if (skip_tensor && skip_tensor(t.name)) continue;
        std::vector<uint64_t> ne(t.ne, t.ne + std::max<uint32_t>(t.n_dims, 1));
        const TensorInfo *tp = &t;
        add_tensor(t.name, ne, t.type, [&src, tp](GgufSink &out) {
            std::vector<uint8_t> buf(tp->nbytes);
            src.read(*tp, 0, buf.data(), buf.size());
            out.write(buf.data(), buf.size());
        });
    }
}

// ---- tensors ------------------------------------------------------------------------------------

uint64_t GgufWriter::tensor_nbytes(const std::vector<uint64_t> &ne, TensorType type) {
    TypeInfo ti = type_info(type);
    if (!ti.name || ti.block == 0 || ne.empty() || ne[0] % ti.block != 0) return 0;
    uint64_t n = 1, bytes = 0;
    for (uint64_t d : ne) {
        if (__builtin_mul_overflow(n, d, &n)) return 0;
    }
    if (__builtin_mul_overflow(n / ti.block, ti.bytes, &bytes)) return 0;
    return bytes;
}

void GgufWriter::add_tensor(const std::string &name, const std::vector<uint64_t> &ne, TensorType type,
                            GgufDataFn data) {
    if (ne.empty() || ne.size() > 4) fail(LLM_ERR_INTERNAL, "tensor '{}': {} dimensions", name, ne.size());
    const uint64_t nbytes = tensor_nbytes(ne, type);
    if (nbytes == 0) {
        fail(LLM_ERR_INTERNAL, "tensor '{}': shape does not fit type {}", name, type_name(type));
    }
    GgufTensorSpec s;
    s.name = name;
    s.ne = ne;
    s.type = static_cast<uint32_t>(type);
    s.nbytes = nbytes;
    s.data = std::move(data);
    add_tensor_spec(std::move(s));
}

void GgufWriter::add_tensor(const std::string &name, const std::vector<uint64_t> &ne, TensorType type,
                            std::vector<uint8_t> data) {
    if (data.size() != tensor_nbytes(ne, type)) {
        fail(LLM_ERR_INTERNAL, "tensor '{}': {} data bytes, the shape needs {}", name, data.size(),
             tensor_nbytes(ne, type));
    }
    // shared_ptr: GgufDataFn must be copyable, and the bytes should not be copied with it.
    auto bytes = std::make_shared<std::vector<uint8_t>>(std::move(data));
    add_tensor(name, ne, type, [bytes](GgufSink &out) { out.write(bytes->data(), bytes->size()); });
}

void GgufWriter::add_tensor_spec(GgufTensorSpec spec) { tensors_.push_back({std::move(spec), {}, false}); }

void GgufWriter::add_tensor_info_bytes(const std::vector<uint8_t> &info) {
    Tensor t;
    t.raw_info = info;
    t.raw = true;
    tensors_.push_back(std::move(t));
}

// ---- output -------------------------------------------------------------------------------------

uint32_t GgufWriter::alignment() const {
    if (layout_alignment_) return *layout_alignment_ ? *layout_alignment_ : 1;
    if (alignment_kv_ && *alignment_kv_ != 0 && (*alignment_kv_ & (*alignment_kv_ - 1)) == 0) return *alignment_kv_;
    return kDefaultAlignment;
}

GgufBytes GgufWriter::header(GgufLayout *lay) const {
    const uint32_t align = alignment();
    lay->alignment = align;
    GgufBytes h;
    h.put(magic_.data(), 4).u32(version_);
    h.u64(n_tensors_ ? *n_tensors_ : tensors_.size());
    h.u64(n_kv_ ? *n_kv_ : kvs_.size());
    for (const auto &kv : kvs_) {
        lay->kv_offsets.push_back(h.size());
        h.put(kv.data(), kv.size());
    }
    uint64_t data_pos = 0;  // running offset in the data section
    for (const Tensor &t : tensors_) {
        lay->tensor_info_offsets.push_back(h.size());
        lay->tensor_offsets.push_back(data_pos);
        if (t.raw) {
            h.put(t.raw_info.data(), t.raw_info.size());
            continue;
        }
        const GgufTensorSpec &s = t.spec;
        h.str(s.name).u32(s.n_dims ? *s.n_dims : static_cast<uint32_t>(s.ne.size()));
        for (uint64_t d : s.ne) h.u64(d);
        h.u32(s.type).u64(s.offset ? *s.offset : data_pos);
        data_pos += align_up(s.nbytes, align);
    }
    lay->infos_end = h.size();
    // The padding before the data exists only when there is data (GGUF.md §2).
    lay->data_offset = tensors_.empty() ? h.size() : align_up(h.size(), align);
    lay->file_size = lay->data_offset + data_pos;
    return h;
}

GgufLayout GgufWriter::layout() const {
    GgufLayout lay;
    header(&lay);
    return lay;
}

void GgufWriter::write(GgufSink &out) const {
    GgufLayout lay;
    GgufBytes h = header(&lay);
    out.write(h.bytes.data(), h.size());
    write_zeros(out, lay.data_offset - h.size());
    for (const Tensor &t : tensors_) {
        if (t.raw) continue;
        const GgufTensorSpec &s = t.spec;
        CountingSink counted(out);
        if (s.data) {
            s.data(counted);
        } else {
            write_zeros(counted, s.nbytes);
        }
        if (counted.count != s.nbytes) {
            fail(LLM_ERR_INTERNAL, "tensor '{}': data callback wrote {} bytes, expected {}", s.name, counted.count,
                 s.nbytes);
        }
        write_zeros(out, align_up(s.nbytes, lay.alignment) - s.nbytes);
    }
}

void GgufWriter::write_file(const std::string &path) const {
    std::unique_ptr<std::FILE, int (*)(std::FILE *)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
    if (!f) fail(LLM_ERR_IO, "cannot create '{}': {}", path, std::strerror(errno));
    try {
        FileSink sink(f.get(), path);
        write(sink);
        if (std::fclose(f.release()) != 0) fail(LLM_ERR_IO, "writing '{}': {}", path, std::strerror(errno));
    } catch (...) {
        // A half-written model would only fail later, far from the cause; leave nothing behind.
        f.reset();
        std::remove(path.c_str());
        throw;
    }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out;
    out.reserve(layout().file_size);
    VectorSink sink(out);
    write(sink);
    return out;
}

}  // namespace llm
