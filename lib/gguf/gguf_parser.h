// The GGUF parser: one file's header (metadata, tensor directory, data offset) read through a
// ByteSource field by field, every length and offset checked against the file before anything is
// allocated (GGUF.md). WeightSource (weight_source.h) builds a model's view over one or more of these.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/byte_source.h"
#include "gguf/metadata.h"
#include "gguf/weight_source.h"

namespace llm {

// One GGUF file's header. Offsets are absolute in that file.
struct FileHeader {
    Metadata meta;
    std::vector<TensorInfo> tensors;
    std::unordered_map<std::string, size_t> by_name;
    uint32_t version = 0;
    uint32_t alignment = 32;
    uint64_t data_offset = 0;
};

// Throws Error(LLM_ERR_FORMAT) naming the field and offset of the first problem.
FileHeader parse_file(ByteSource &bytes);

}  // namespace llm
