#include "core/thread_pool.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <set>
#include <string>

namespace llm {

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_work_.notify_all();
    for (auto &t : workers_) t.join();
}

static void chunk(int64_t n, int parts, int i, int64_t *b, int64_t *e) {
    int64_t per = n / parts, extra = n % parts;
    *b = i * per + std::min<int64_t>(i, extra);
    *e = *b + per + (i < extra ? 1 : 0);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
    const int parts = size();
    if (parts == 1 || n < 2) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        fn_ = &fn;
        n_ = n;
        pending_ = parts - 1;
        error_ = nullptr;
        ++generation_;
    }
    cv_work_.notify_all();
    std::exception_ptr mine;
    int64_t b, e;
    chunk(n, parts, 0, &b, &e);
    try {
        if (b < e) fn(b, e);
    } catch (...) {
        mine = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)> *fn;
        int64_t n;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            fn = fn_;
            n = n_;
        }
        int64_t b, e;
        chunk(n, size(), index, &b, &e);
        std::exception_ptr err;
        try {
            if (b < e) (*fn)(b, e);
        } catch (...) {
            err = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (err && !error_) error_ = err;
            if (--pending_ == 0) cv_done_.notify_one();
        }
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
