// Where GGUF bytes come from: positional reads only, so nothing ever needs the whole file in memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm.h"

namespace llm {

// What weight reads do to the OS page cache. Streaming reads each block once per token; by default the
// kernel keeps those pages cached, which makes the next pass fast but, on a phone, evicts other apps'
// memory (and the cached file is counted against us by some memory killers).
enum class CachePolicy : int32_t {
    KEEP = 0,    // plain reads; the kernel decides
    DROP = 1,    // plain reads, then posix_fadvise(DONTNEED) on the range just read
    DIRECT = 2,  // O_DIRECT reads of page-aligned runs; other weight reads as DROP
    // Streamed pieces and expert slabs are mapped read-only from the file instead of copied into a
    // slot (ByteSource::map_weights); every other read as KEEP. Files only: a host's llm_io falls
    // back to KEEP (the values are ordered so that the min over shards is the fallback).
    MAP = 3,
};
const char *name(CachePolicy p);
constexpr uint64_t kDirectAlign = 4096;  // offset, length and buffer alignment of a direct read

// The OS page size. A mapping starts on the page holding its first byte, so what a mapped range costs
// in RSS (LayerStore::slot_bytes) rounds with the same value map_weights does.
uint64_t os_page_bytes();

// A read-only mapping of a file range (CachePolicy::MAP), unmapped when destroyed or reset. While it
// lives, the pages it touched count in the process's RSS like a copy would.
class MappedRange {
public:
    MappedRange() = default;
    ~MappedRange() { reset(); }
    MappedRange(MappedRange &&o) noexcept;
    MappedRange &operator=(MappedRange &&o) noexcept;
    MappedRange(const MappedRange &) = delete;
    MappedRange &operator=(const MappedRange &) = delete;

    // The first byte asked for (the mapping itself starts on the page holding it); null if unmapped.
    const uint8_t *data() const { return data_; }
    void reset();

private:
    friend class ByteSource;
    void *base_ = nullptr;  // page-aligned start of the mapping
    size_t len_ = 0;
    const uint8_t *data_ = nullptr;
};

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

    // Asks for a cache policy; returns the one in force (a host's llm_io and files that refuse
    // O_DIRECT fall back: llm_io keeps its own policy, DIRECT becomes DROP).
    virtual CachePolicy set_cache_policy(CachePolicy p) {
        (void)p;
        return CachePolicy::KEEP;
    }
    CachePolicy cache_policy() const { return policy_; }
    // The host asked to be called only on the thread that called libllm (LLM_IO_THREAD_BOUND): then
    // nothing may read this source from an I/O thread.
    virtual bool thread_bound() const { return false; }
    // A read of weight bytes, under the cache policy. Metadata reads use read_at.
    void read_weights(uint64_t offset, void *dst, uint64_t n);
    // A run of weights laid out for direct I/O: offset is kDirectAlign-aligned, dst is page-aligned
    // with room for n rounded up to kDirectAlign; the bytes past the end of the file are left as
    // they were. Same as read_weights when the policy is not DIRECT.
    void read_weights_aligned(uint64_t offset, void *dst, uint64_t n);
    // Under MAP: maps [offset, offset + n) read-only into out (replacing what it held), with its pages
    // read ahead and mapped in (so a later touch does not fault), and counts it as a read. False
    // when the range is not mapped (another policy, not a file, or mmap refused): the caller copies
    // instead, and that read reports any I/O error. Throws Error(LLM_ERR_IO) if the file no longer
    // holds the range (truncated since load), since touching such a page would be SIGBUS.
    bool map_weights(uint64_t offset, uint64_t n, MappedRange &out);

protected:
    virtual void do_read(uint64_t offset, void *dst, uint64_t n) = 0;
    virtual void drop_cached(uint64_t offset, uint64_t n) {
        (void)offset;
        (void)n;
    }
    // Reads [offset, offset + n) with n rounded up; may stop at the end of the file.
    virtual void do_read_direct(uint64_t offset, void *dst, uint64_t n) { do_read(offset, dst, n); }
    // Maps [begin, begin + len) (begin page-aligned) and returns its start, or nullptr if it cannot.
    virtual void *do_map(uint64_t begin, uint64_t len) {
        (void)begin;
        (void)len;
        return nullptr;
    }
    void count(uint64_t n) {
        bytes_read_.fetch_add(n, std::memory_order_relaxed);
        read_calls_.fetch_add(1, std::memory_order_relaxed);
    }
    CachePolicy policy_ = CachePolicy::KEEP;

private:
    std::atomic<uint64_t> bytes_read_{0};
    std::atomic<uint64_t> read_calls_{0};
};

// A file read with pread(2).
std::unique_ptr<ByteSource> open_file_source(const std::string &path);
// The rules for the host's llm_io structs, whatever their version (see llm.h, "host-supplied bytes").
// Checks io (version known, size and read_at set) or throws LLM_ERR_INVALID_ARGUMENT naming it `what`.
void check_io(const llm_io &io, const std::string &what);
// Calls io->close if the struct is readable enough to find it (version >= 1: close never moves).
void close_io(const llm_io *io);
// Element k of an array of llm_io whose layout is the one of ios[0].version (a version 1 host's array
// has version 1's stride); nullptr if that version is unknown, so the stride is too.
const llm_io *io_at(const llm_io *ios, size_t k);

// The host's callbacks. Takes over io->close: it is called when the source is destroyed.
std::unique_ptr<ByteSource> make_io_source(const llm_io &io);
// The shards of a split model as host callbacks, in order (ios laid out as io_at says). They share
// one lock, so the host sees one read_at at a time per model, as with one llm_io. Each is described as
// "llm_io ios[k]". Takes over each io's close as its source is made, counting them in *taken: if this
// throws, the caller closes ios[*taken..n).
std::vector<std::unique_ptr<ByteSource>> make_io_sources(const llm_io *ios, size_t n, size_t *taken);

}  // namespace llm
