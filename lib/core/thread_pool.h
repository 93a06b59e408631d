// A fixed set of worker threads created once per session. parallel_for cuts a range into a few
// contiguous chunks per thread; the caller and the workers claim chunks from a shared counter, so a
// worker the OS has descheduled (an oversubscribed machine) costs nothing: the others take its share
// instead of waiting for it. Returns when every chunk is done.
//
// Workers spin for a short while after each job before sleeping on a futex, so the back-to-back
// matmuls of a decode step cost a few microseconds of dispatch each instead of a wake-up from the
// kernel; an idle session still sleeps.
#pragma once

#include <atomic>
#include <condition_variable>
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
    void worker();
    void wake_sleepers();
    // Claims and runs chunks of job `job` until none are left; false if that job is already over.
    bool help(uint32_t job);

    std::vector<std::thread> workers_;
    // The current job. A claim is a CAS on state_ = (job << 32 | next chunk). The caller writes the
    // job's fields while state_ is closed (no claimable chunk) and claimers read them before the
    // CAS, so a claim that succeeds saw the fields of its own job (all seq_cst).
    std::atomic<uint64_t> state_{0};
    std::atomic<const std::function<void(int64_t, int64_t)> *> fn_{nullptr};
    std::atomic<int64_t> n_{0};
    std::atomic<uint32_t> chunks_{0};
    std::atomic<uint32_t> done_{0};        // chunks of the current job finished
    std::atomic<uint32_t> generation_{0};  // bumped per job and at shutdown
    std::atomic<bool> stop_{false};
    // The sleep path after a worker's spin.
    std::atomic<int> sleepers_{0};
    std::mutex sleep_mu_;
    std::condition_variable sleep_cv_;
    std::mutex error_mu_;
    std::exception_ptr error_;
};

// Physical cores if they can be told apart from SMT siblings, else hardware_concurrency.
int default_thread_count();

}  // namespace llm
