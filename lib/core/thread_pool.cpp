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
constexpr auto kSpin = std::chrono::microseconds(300);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Chunk i of `parts` near-equal contiguous pieces of [0, n).
void chunk(int64_t n, int64_t parts, int64_t i, int64_t *b, int64_t *e) {
    const int64_t per = n / parts, extra = n % parts;
    *b = i * per + std::min<int64_t>(i, extra);
    *e = *b + per + (i < extra ? 1 : 0);
}

// Chunks per thread: enough slack that a slow or descheduled thread's share is picked up by the
// others, few enough that claiming stays negligible next to a matmul row tile.
constexpr int64_t kChunksPerThread = 4;

// Chunk index of a job whose fields are being written: no chunk can be claimed.
constexpr uint32_t kClosed = 0xFFFFFFFFu;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    wake_sleepers();
    for (auto &t : workers_) t.join();
}

void ThreadPool::wake_sleepers() {
    if (sleepers_.load() == 0) return;  // the common case while workers spin: no syscall
    std::lock_guard<std::mutex> lock(sleep_mu_);
    sleep_cv_.notify_all();
}

bool ThreadPool::help(uint32_t job) {
    uint64_t s = state_.load();
    for (;;) {
        if (static_cast<uint32_t>(s >> 32) != job) return false;
        const auto *fn = fn_.load();
        const int64_t n = n_.load();
        const uint32_t chunks = chunks_.load();
        const uint32_t idx = static_cast<uint32_t>(s);
        if (idx >= chunks) return true;
        if (!state_.compare_exchange_weak(s, s + 1)) continue;  // s reloaded
        int64_t b, e;
        chunk(n, chunks, idx, &b, &e);
        try {
            (*fn)(b, e);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mu_);
            if (!error_) error_ = std::current_exception();
        }
        done_.fetch_add(1);
        s = state_.load();
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
    const int parts = size();
    if (parts == 1 || n < 2) {
        fn(0, n);
        return;
    }
    const uint32_t chunks = static_cast<uint32_t>(std::min<int64_t>(n, parts * kChunksPerThread));
    const uint32_t job = static_cast<uint32_t>(state_.load() >> 32) + 1;
    // Close the state while the job's fields change: a worker that read the previous job's state
    // and then these fields would otherwise claim a chunk of the new job under the old job's state
    // and count it twice (done_ passing chunks: the caller then waits forever).
    state_.store(static_cast<uint64_t>(job) << 32 | kClosed);
    error_ = nullptr;
    fn_.store(&fn);
    n_.store(n);
    chunks_.store(chunks);
    done_.store(0);
    state_.store(static_cast<uint64_t>(job) << 32);
    generation_.fetch_add(1);
    wake_sleepers();

    help(job);
    // Only chunks already running on other threads remain.
    for (int spins = 0; done_.load() != chunks; ++spins) {
        if (spins < 4096) cpu_relax(); else std::this_thread::yield();
    }
    if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker() {
    // A worker may start after jobs (or the shutdown) were already posted, so every wait also
    // watches stop_: a late starter never sleeps through the destructor.
    uint32_t seen = generation_.load();
    for (;;) {
        uint32_t g = generation_.load();
        if (g == seen && !stop_.load()) {
            const auto start = std::chrono::steady_clock::now();
            for (int spins = 0; (g = generation_.load()) == seen && !stop_.load(); ++spins) {
                if ((spins & 255) == 255 && std::chrono::steady_clock::now() - start > kSpin) {
                    // seq_cst: either we see the new generation / stop below, or the caller sees us in
                    // sleepers_ after bumping it and notifies under the mutex.
                    std::unique_lock<std::mutex> lock(sleep_mu_);
                    sleepers_.fetch_add(1);
                    sleep_cv_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
                    sleepers_.fetch_sub(1);
                } else {
                    cpu_relax();
                }
            }
        }
        seen = g;
        if (stop_.load()) return;
        help(static_cast<uint32_t>(state_.load() >> 32));
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
