// A fixed set of worker threads created once per session; parallel_for splits a range into one
// contiguous chunk per thread (the calling thread takes the first) and returns when all are done.
//
// Workers spin for a short while after each job before sleeping on a futex, so the back-to-back
// matmuls of a decode step cost a few microseconds of dispatch each instead of a wake-up from the
// kernel; an idle session still sleeps.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llm {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }
    // fn(begin, end) over [0, n); exceptions from workers are rethrown on the caller. Callers that
    // need aligned chunks (the matmul's 4-row tiles) pass n in units of their alignment.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)> &fn);

private:
    void worker(int index);
    void run_chunk(int index);

    std::vector<std::thread> workers_;
    // Written by the caller before generation_ is bumped (release), read by workers after they see
    // the new generation (acquire).
    const std::function<void(int64_t, int64_t)> *fn_ = nullptr;
    int64_t n_ = 0;
    std::atomic<uint32_t> generation_{0};
    std::atomic<int> pending_{0};  // workers still running the current job
    std::atomic<bool> stop_{false};
    std::mutex error_mu_;
    std::exception_ptr error_;
};

// Physical cores if they can be told apart from SMT siblings, else hardware_concurrency.
int default_thread_count();

}  // namespace llm
