// WeightSource: the seam between the transformer and storage. It holds a GGUF file's typed metadata
// and tensor directory, and reads tensor bytes by position. The model never opens a file itself.
// A split model (llama.cpp's gguf-split: split.no, split.count, split.tensors.count) is one
// WeightSource over all its shards: metadata from the first, tensors from any, each shard its own source.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/byte_source.h"
#include "gguf/metadata.h"
#include "gguf/types.h"

namespace llm {

struct TensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    uint64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (input) dimension
    TensorType type = TensorType::F32;
    uint64_t offset = 0;  // absolute offset of the first byte in its shard's file
    uint64_t nbytes = 0;
    uint32_t shard = 0;  // the file of a split model holding it (its split.no); 0 otherwise

    uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    uint64_t row_bytes() const { return llm::row_bytes(type, ne[0]); }
    uint64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    std::string shape_string() const;
};

class WeightSource {
public:
    // Parses and validates the header (every check of the GGUF spec §7 that does not need the
    // architecture). Throws Error(LLM_ERR_FORMAT) naming the offending field or tensor.
    static std::unique_ptr<WeightSource> open(std::unique_ptr<ByteSource> bytes);
    // The shards of a split model in split.no order (a single plain file is a set of one). Each is
    // checked as above, and against the first: a shard that is missing, out of place or from
    // another split set, or a tensor in two shards or in none, is Error(LLM_ERR_FORMAT) naming the
    // shard by its source's describe().
    static std::unique_ptr<WeightSource> open(std::vector<std::unique_ptr<ByteSource>> shards);
    // Opens a GGUF file; when it is the first shard of a split model, also the other shards beside
    // it, named as gguf-split writes them: <prefix>-00002-of-00003.gguf, ... A shard that cannot be
    // opened is LLM_ERR_FORMAT naming its path.
    static std::unique_ptr<WeightSource> open_file(const std::string &path);

    const Metadata &meta() const { return meta_; }
    const std::vector<TensorInfo> &tensors() const { return tensors_; }
    const TensorInfo *find(const std::string &name) const;
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    // Bytes of all shards together.
    uint64_t file_size() const;
    uint32_t n_shards() const { return static_cast<uint32_t>(shards_.size()); }

    // Reads n bytes starting `offset` bytes into tensor t.
    void read(const TensorInfo &t, uint64_t offset, void *dst, uint64_t n) const;
    ByteSource &bytes(uint32_t shard = 0) const { return *shards_[shard]; }
    // Asks every shard for the policy; returns the one in force on all of them (see ByteSource).
    CachePolicy set_cache_policy(CachePolicy p);
    // True if any shard may be read only on the thread that called libllm (ByteSource::thread_bound).
    bool thread_bound() const;
    // A 64-bit hash (FNV-1a) of the metadata and the tensor directory (names, types, shapes, shards,
    // offsets), not of the weight bytes: cheap for a streamed model, and two files that differ in any
    // key or tensor layout differ in it. Saved sessions record it to recognise their model.
    uint64_t fingerprint() const;

private:
    WeightSource() = default;
    // Parses the next shard (number shards_.size()) and checks its split keys against the first.
    void add_shard(std::unique_ptr<ByteSource> bytes);
    // After the first shard: n shards make up the model.
    void expect_shards(size_t n) const;
    // After the last shard: split.tensors.count agrees.
    void check_complete() const;

    std::vector<std::unique_ptr<ByteSource>> shards_;
    Metadata meta_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, size_t> by_name_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    uint32_t split_count_ = 1;
    int64_t split_tensors_ = -1;  // split.tensors.count of the first shard; -1: absent
};

}  // namespace llm
