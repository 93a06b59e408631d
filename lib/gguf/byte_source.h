// Where GGUF bytes come from: positional reads only, so nothing ever needs the whole file in memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "llm.h"

namespace llm {

class ByteSource {
public:
    virtual ~ByteSource() = default;
    virtual uint64_t size() const = 0;
    // Fills dst with exactly n bytes at offset or throws Error(LLM_ERR_IO).
    void read_at(uint64_t offset, void *dst, uint64_t n);
    // Counters, for the I/O statistics hosts see.
    uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
    uint64_t read_calls() const { return read_calls_.load(std::memory_order_relaxed); }
    virtual std::string describe() const = 0;

protected:
    virtual void do_read(uint64_t offset, void *dst, uint64_t n) = 0;

private:
    std::atomic<uint64_t> bytes_read_{0};
    std::atomic<uint64_t> read_calls_{0};
};

// A file read with pread(2).
std::unique_ptr<ByteSource> open_file_source(const std::string &path);
// The host's callbacks. Takes over io->close: it is called when the source is destroyed.
std::unique_ptr<ByteSource> make_io_source(const llm_io &io);

}  // namespace llm
