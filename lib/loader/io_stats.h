// I/O counters a session reports: what streaming cost in bytes, calls and time spent waiting.
#pragma once

#include <atomic>
#include <cstdint>

namespace llm {

struct IoStats {
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> wait_ns{0};  // time the compute thread waited for a unit (or an expert) to be read

    void add_read(uint64_t n) {
        bytes.fetch_add(n, std::memory_order_relaxed);
        calls.fetch_add(1, std::memory_order_relaxed);
    }
    void reset() {
        bytes = 0;
        calls = 0;
        wait_ns = 0;
    }
};

}  // namespace llm
