// WeightSource: the seam between the transformer and storage. It holds a GGUF file's typed metadata
// and tensor directory, and reads tensor bytes by position. The model never opens a file itself.
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
    uint64_t offset = 0;            // absolute file offset of the first byte
    uint64_t nbytes = 0;

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

    const Metadata &meta() const { return meta_; }
    const std::vector<TensorInfo> &tensors() const { return tensors_; }
    const TensorInfo *find(const std::string &name) const;
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    uint64_t file_size() const { return bytes_->size(); }

    // Reads n bytes starting `offset` bytes into tensor t.
    void read(const TensorInfo &t, uint64_t offset, void *dst, uint64_t n) const;
    ByteSource &bytes() const { return *bytes_; }

private:
    explicit WeightSource(std::unique_ptr<ByteSource> bytes) : bytes_(std::move(bytes)) {}
    void parse();

    std::unique_ptr<ByteSource> bytes_;
    Metadata meta_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, size_t> by_name_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    uint64_t data_offset_ = 0;
};

}  // namespace llm
