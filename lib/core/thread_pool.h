// A fixed set of worker threads created once per session; parallel_for splits a range into one
// contiguous chunk per thread (the calling thread takes the first) and returns when all are done.
#pragma once

#include <condition_variable>
#include <cstdint>
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
    // fn(begin, end) over [0, n); exceptions from workers are rethrown on the caller.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)> &fn);

private:
    void worker(int index);

    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
    const std::function<void(int64_t, int64_t)> *fn_ = nullptr;
    int64_t n_ = 0;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
};

// Physical cores if they can be told apart from SMT siblings, else hardware_concurrency.
int default_thread_count();

}  // namespace llm
