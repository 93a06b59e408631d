#include "gguf/weight_source.h"

#include "gguf/gguf_parser.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/hash.h"

namespace llm {
namespace {

// A split.* key: llama.cpp reads split.no and split.count as u16, split.tensors.count as i32, with
// exactly those types. -1 when absent.
int64_t split_key(const Metadata &m, const std::string &key, MetaType type) {
    const MetaValue *v = m.find(key);
    if (!v) return -1;
    if (v->type != type) fail(LLM_ERR_FORMAT, "{} must be {}, got {}", key, name(type), name(v->type));
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
    // model, so a shard that falls back takes the others with it. Each policy's fallback is a smaller
    // value (DIRECT to DROP, MAP or any other to KEEP for llm_io), so the min is what all can do.
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
