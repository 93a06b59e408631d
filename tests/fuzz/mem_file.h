// An llm_io over a fuzz input held in memory, shared by the fuzz targets. read_at aborts on a request
// outside the size it reported: the library must never ask for bytes it was not told exist.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "llm.h"

namespace fuzz {

struct MemFile {
    const uint8_t *data;
    size_t size;
    int closes = 0;
};

inline uint64_t mem_size(void *user) { return static_cast<MemFile *>(user)->size; }

inline int32_t mem_read_at(void *user, uint64_t offset, void *dst, uint64_t n) {
    const auto *f = static_cast<const MemFile *>(user);
    if (offset > f->size || n > f->size - offset) {
        std::fprintf(stderr, "read_at(%llu, %llu) outside a %zu-byte input\n", static_cast<unsigned long long>(offset),
                     static_cast<unsigned long long>(n), f->size);
        std::abort();
    }
    if (n) std::memcpy(dst, f->data + offset, n);
    return LLM_OK;
}

inline void mem_close(void *user) { static_cast<MemFile *>(user)->closes++; }

}  // namespace fuzz
