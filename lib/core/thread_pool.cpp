#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace llm {
namespace {

// How long a worker polls for the next job before it sleeps. Long enough to bridge the gaps of a
// decode step (norms, attention bookkeeping between matmuls), short enough that an idle session
// does not burn a core.
constexpr auto kSpin = std::chrono::microseconds(1000);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

void chunk(int64_t n, int parts, int i, int64_t *b, int64_t *e) {
    int64_t per = n / parts, extra = n % parts;
    *b = i * per + std::min<int64_t>(i, extra);
    *e = *b + per + (i < extra ? 1 : 0);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto &t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
    int64_t b, e;
    chunk(n_, size(), index, &b, &e);
    if (b >= e) return;
    try {
        (*fn_)(b, e);
    } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
    const int parts = size();
    if (parts == 1 || n < 2) {
        fn(0, n);
        return;
    }
    fn_ = &fn;
    n_ = n;
    error_ = nullptr;
    pending_.store(parts - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();  // a no-op unless some worker has gone to sleep

    run_chunk(0);
    // Workers finish about when we do; yield only if one was descheduled.
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 100000) cpu_relax(); else std::this_thread::yield();
    }
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = generation_.load(std::memory_order_acquire);
        if (g == seen) {
            const auto start = std::chrono::steady_clock::now();
            for (int spins = 0; (g = generation_.load(std::memory_order_acquire)) == seen; ++spins) {
                if ((spins & 255) == 255 && std::chrono::steady_clock::now() - start > kSpin) {
                    generation_.wait(seen, std::memory_order_acquire);
                } else {
                    cpu_relax();
                }
            }
        }
        seen = g;
        if (stop_.load(std::memory_order_relaxed)) return;
        run_chunk(index);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

int default_thread_count() {
    // Count distinct (physical id, core id) pairs; SMT siblings share one.
    std::ifstream f("/proc/cpuinfo");
    std::set<std::string> cores;
    std::string line, phys;
    while (std::getline(f, line)) {
        if (line.rfind("physical id", 0) == 0) phys = line.substr(line.find(':') + 1);
        if (line.rfind("core id", 0) == 0) cores.insert(phys + "/" + line.substr(line.find(':') + 1));
    }
    int hw = static_cast<int>(std::thread::hardware_concurrency());
    int n = cores.empty() ? hw : static_cast<int>(cores.size());
    if (hw > 0 && n > hw) n = hw;
    return n > 0 ? n : 1;
}

}  // namespace llm
