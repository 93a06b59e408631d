// RAM read bandwidth with T threads: the memory roof of decode (the fastest a token can be decoded is
// this over the bytes it reads). Each thread sums its slice of a 1 GiB buffer, best of 5 passes.
// Written with GCC/Clang vector types so it compiles to SIMD loads on x86-64 and AArch64 alike.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace bench {

// A buffer allocated and touched once, read as often as asked: llm-bench --roof measures after every
// decode repetition, and filling 1 GiB each time would cost a second per repetition.
class ReadBuffer {
  public:
    typedef uint64_t v4 __attribute__((vector_size(32)));

    explicit ReadBuffer(size_t bytes) : n_(bytes / sizeof(v4)) {
        buf_ = static_cast<v4 *>(std::aligned_alloc(64, n_ * sizeof(v4)));
        if (buf_) std::memset(buf_, 1, n_ * sizeof(v4));  // touch every page before timing
    }
    ~ReadBuffer() { std::free(buf_); }
    ReadBuffer(const ReadBuffer &) = delete;
    ReadBuffer &operator=(const ReadBuffer &) = delete;

    // Bytes per second, the best of `passes` passes, each thread summing its slice; 0 if the buffer
    // could not be allocated.
    double bandwidth(int threads, int passes) const {
        if (!buf_ || n_ == 0 || threads < 1) return 0;
        const size_t n = n_;
        const v4 *buf = buf_;
        std::vector<uint64_t> sink(static_cast<size_t>(threads));
        double best = 0;
        for (int pass = 0; pass < passes; ++pass) {
            const auto t0 = std::chrono::steady_clock::now();
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t) {
                pool.emplace_back([&, t] {
                    const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
                    const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
                    // Four independent sums, so the loads are not serialised behind one add chain.
                    v4 a = {0, 0, 0, 0}, b = a, c = a, d = a;
                    size_t i = lo;
                    for (; i + 4 <= hi; i += 4) {
                        a += buf[i];
                        b += buf[i + 1];
                        c += buf[i + 2];
                        d += buf[i + 3];
                    }
                    for (; i < hi; ++i) a += buf[i];
                    const v4 s = a + b + c + d;
                    sink[static_cast<size_t>(t)] = s[0] + s[1] + s[2] + s[3];
                });
            }
            for (std::thread &th : pool) th.join();
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (dt > 0) best = std::max(best, static_cast<double>(n * sizeof(v4)) / dt);
        }
        // Stored where the compiler must assume someone reads them, so the loads cannot be dropped.
        static volatile uint64_t keep;
        for (uint64_t v : sink) keep = keep + v;
        return best;
    }

  private:
    size_t n_;
    v4 *buf_ = nullptr;
};

inline double ram_read_bandwidth(int threads, size_t bytes = size_t{1} << 30, int passes = 5) {
    return ReadBuffer(bytes).bandwidth(threads, passes);
}

}  // namespace bench
