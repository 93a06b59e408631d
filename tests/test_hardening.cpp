// The hardened boundary, through the public C API only: failing host storage at every read of a load
// and during streamed generation, cancellation of load / prefill / decode (and how fast it lands),
// sessions sharing one model on several threads, a full context, a 10,000-token soak with flat RSS,
// and every function of llm.h given NULL handles, bad params versions and out-of-range values.
//
// Leaks are checked by the sanitizer build (LSan). Data races: a ThreadSanitizer build of these tests,
//   cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLM_BUILD_EXAMPLES=OFF
//     -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread
//   cmake --build build-tsan --target llm_tests && build-tsan/tests/llm_tests "[hardening]"
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "llm.h"
#include "synth_model.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- host storage that can fail ------------------------------------------------------------------

// A file behind llm_io. read_at call number `fail_at` (1-based) fails, and every call fails while
// `failing` is set; calls are counted either way. Atomics: read_at may run on a libllm I/O thread.
struct HostFile {
    int fd = -1;
    uint64_t size = 0;
    std::atomic<int64_t> calls{0};
    std::atomic<int64_t> fail_at{-1};
    std::atomic<bool> failing{false};
    std::atomic<int> closes{0};

    explicit HostFile(const std::string &path) {
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        size = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
    }
    ~HostFile() { ::close(fd); }
    HostFile(const HostFile &) = delete;
    HostFile &operator=(const HostFile &) = delete;

    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) { return static_cast<HostFile *>(u)->size; };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *f = static_cast<HostFile *>(u);
            const int64_t call = ++f->calls;
            if (call == f->fail_at.load() || f->failing.load()) return LLM_ERR_IO;
            auto *p = static_cast<char *>(dst);
            while (n > 0) {
                const ssize_t got = ::pread(f->fd, p, n, static_cast<off_t>(off));
                if (got <= 0) return LLM_ERR_IO;
                p += got;
                off += static_cast<uint64_t>(got);
                n -= static_cast<uint64_t>(got);
            }
            return LLM_OK;
        };
        io.close = [](void *u) { static_cast<HostFile *>(u)->closes++; };
        return io;
    }
};

llm_model_params model_params(int32_t residency = LLM_RESIDENCY_RESIDENT, int32_t depth = 1) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 1;
    mp.residency = residency;
    mp.prefetch_depth = depth;
    return mp;
}

llm_session_params greedy(int32_t n_ctx = 256) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0;
    sp.n_ctx = n_ctx;
    sp.n_threads = 1;
    return sp;
}

std::vector<int32_t> tokenize(const llm_model *m, const std::string &text, bool bos = true) {
    std::vector<int32_t> ids(text.size() + 8);
    int32_t n = 0;
    REQUIRE(llm_tokenize(m, text.data(), text.size(), bos, false, ids.data(), static_cast<int32_t>(ids.size()), &n) ==
            LLM_OK);
    ids.resize(static_cast<size_t>(n));
    return ids;
}

std::vector<float> last_logits(llm_session *s) {
    const float *lg = nullptr;
    int32_t nv = 0;
    REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
    return std::vector<float>(lg, lg + nv);
}

// Greedy continuation by sample/accept: `n` ids after the current context.
std::vector<int32_t> continue_greedy(llm_session *s, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
        int32_t t = -1;
        REQUIRE(llm_session_sample(s, &t) == LLM_OK);
        out.push_back(t);
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
    }
    return out;
}

bool on_token_collect(int32_t token, const char *, size_t, void *user) {
    static_cast<std::vector<int32_t> *>(user)->push_back(token);
    return true;
}

// A synthetic 24-layer q8_0 model (tools::write_synth_model), written once per process.
const std::string &deep_model() {
    struct File {
        std::string path;
        File() {
            path = (fs::temp_directory_path() / ("llm-hardening-tiny-deep-" + std::to_string(::getpid()) + ".gguf")).string();
            tools::write_synth_model(*tools::find_shape("tiny-deep"), "q8_0", path, 11);
        }
        ~File() {
            std::error_code ec;
            fs::remove(path, ec);
        }
    };
    static File f;
    return f.path;
}

int64_t vm_rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
    }
    return -1;
}

}  // namespace

// ---- failing storage -------------------------------------------------------------------------------

TEST_CASE("a read_at failing at any one call of a load fails it with LLM_ERR_IO and closes once", "[hardening][io]") {
    struct Mode {
        const char *name;
        int32_t residency;
        bool vocab_only;
    };
    for (const Mode &mode : {Mode{"resident", LLM_RESIDENCY_RESIDENT, false}, Mode{"streamed", LLM_RESIDENCY_STREAMED, false},
                             Mode{"vocab-only", LLM_RESIDENCY_RESIDENT, true}}) {
        INFO("mode " << mode.name);
        llm_model_params mp = model_params(mode.residency);
        mp.vocab_only = mode.vocab_only;

        // The number of reads a successful load makes.
        int64_t total = 0;
        {
            HostFile f(kStories);
            llm_io io = f.io();
            llm_model *m = nullptr;
            REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
            total = f.calls.load();
            CHECK(f.closes == 0);
            llm_model_free(m);
            CHECK(f.closes == 1);
        }
        REQUIRE(total >= 1);
        for (int64_t n = 1; n <= total; ++n) {
            INFO("read_at call " << n << " of " << total << " fails");
            HostFile f(kStories);
            f.fail_at = n;
            llm_io io = f.io();
            llm_model *m = reinterpret_cast<llm_model *>(&f);  // must be left untouched or set NULL
            CHECK(llm_model_load_io(&io, &mp, &m) == LLM_ERR_IO);
            CHECK(m == nullptr);
            CHECK(f.closes == 1);
            CHECK(f.calls == n);  // the load stops at the first failure
            CHECK(std::string(llm_last_error()).find("read_at") != std::string::npos);
        }
    }
}

TEST_CASE("a read_at failing during streamed generation gives LLM_ERR_IO and the session recovers with the storage",
          "[hardening][io]") {
    const int32_t depth = GENERATE(0, 1);
    INFO("prefetch_depth " << depth);
    {
        HostFile f(kStories);
        llm_io io = f.io();
        llm_model_params mp = model_params(LLM_RESIDENCY_STREAMED, depth);
        llm_model *m = nullptr;
        REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
        const std::vector<int32_t> prompt = tokenize(m, "Once upon a time");
        llm_session_params sp = greedy();

        // Reference with healthy storage.
        llm_session *ref = nullptr;
        REQUIRE(llm_session_create(m, &sp, &ref) == LLM_OK);
        REQUIRE(llm_session_prefill(ref, prompt.data(), prompt.size()) == LLM_OK);
        const std::vector<float> ref_logits = last_logits(ref);
        const std::vector<int32_t> ref_tokens = continue_greedy(ref, 12);
        llm_session_free(ref);

        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);

        SECTION("prefill, then prefill again once the storage is back") {
            f.failing = true;
            CHECK(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_ERR_IO);
            CHECK(llm_session_n_past(s) == 0);
            f.failing = false;
            REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
            CHECK(last_logits(s) == ref_logits);
            CHECK(continue_greedy(s, 12) == ref_tokens);
        }
        SECTION("a read failing k reads into a prefill") {
            for (int64_t k = 1; k <= 12; ++k) {
                INFO("fails at read " << k << " of the call");
                REQUIRE(llm_session_reset(s) == LLM_OK);
                f.fail_at = f.calls.load() + k;
                const int32_t st = llm_session_prefill(s, prompt.data(), prompt.size());
                f.fail_at = -1;
                if (st == LLM_OK) continue;  // the failing read came after this prefill's last one
                CHECK(st == LLM_ERR_IO);
                CHECK(llm_session_n_past(s) == 0);
                REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
                CHECK(last_logits(s) == ref_logits);
            }
        }
        SECTION("accept and generate fail, the context stays, and generation goes on identically") {
            REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
            const int32_t n_past = llm_session_n_past(s);
            f.failing = true;
            CHECK(llm_session_accept(s, ref_tokens[0]) == LLM_ERR_IO);
            CHECK(llm_session_n_past(s) == n_past);
            // A failed evaluation discards the last logits, as a cancel does: nothing to sample from.
            int32_t t = -1;
            CHECK(llm_session_sample(s, &t) == LLM_ERR_INVALID_ARGUMENT);
            std::vector<int32_t> got;
            CHECK(llm_session_generate(s, " and", 4, on_token_collect, &got) == LLM_ERR_IO);  // its prefill
            CHECK(got.empty());
            CHECK(llm_session_n_past(s) == n_past);
            f.failing = false;
            REQUIRE(llm_session_accept(s, ref_tokens[0]) == LLM_OK);

            // Storage fails from the third token of a generate on: the tokens before it stay accepted.
            const int32_t base = llm_session_n_past(s);
            struct FailAfter {
                HostFile *file;
                std::vector<int32_t> *got;
            } fa{&f, &got};
            const int32_t st = llm_session_generate(
                s, nullptr, 8,
                [](int32_t token, const char *, size_t, void *user) {
                    auto *p = static_cast<FailAfter *>(user);
                    p->got->push_back(token);
                    if (p->got->size() == 2) p->file->failing = true;
                    return true;
                },
                &fa);
            f.failing = false;
            CHECK(st == LLM_ERR_IO);
            REQUIRE(got.size() == 2);
            CHECK(llm_session_n_past(s) == base + static_cast<int32_t>(got.size()) - 1);
            CHECK(got == std::vector<int32_t>(ref_tokens.begin() + 1, ref_tokens.begin() + 1 + got.size()));
            // Resume: accept again the token whose evaluation failed, then carry on.
            REQUIRE(llm_session_accept(s, got.back()) == LLM_OK);
            CHECK(continue_greedy(s, static_cast<int>(11 - got.size())) ==
                  std::vector<int32_t>(ref_tokens.begin() + 1 + got.size(), ref_tokens.end()));
        }
        llm_session_free(s);
        llm_model_free(m);
        CHECK(f.closes == 1);
    }
}

// With prefetch_depth >= 1 the I/O thread may fail to read a block ahead that the failing call never
// uses (e.g. the wrap-around prefetch of block 0 during the last layer); that speculative error must
// not surface in the next call once the storage has recovered.
TEST_CASE("after a failed read, the next call on healthy storage succeeds (no stale errors)", "[hardening][io]") {
    const int32_t depth = GENERATE(0, 1);
    INFO("prefetch_depth " << depth);
    HostFile f(kStories);
    llm_io io = f.io();
    llm_model_params mp = model_params(LLM_RESIDENCY_STREAMED, depth);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
    const std::vector<int32_t> prompt = tokenize(m, "Once upon a time");
    llm_session_params sp = greedy();
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    const std::vector<float> ref_logits = last_logits(s);
    for (int64_t k = 1; k <= 16; ++k) {
        INFO("read " << k << " of the call fails");
        REQUIRE(llm_session_reset(s) == LLM_OK);
        f.fail_at = f.calls.load() + k;
        const int32_t st = llm_session_prefill(s, prompt.data(), prompt.size());
        f.fail_at = -1;
        CAPTURE(st);
        CHECK((st == LLM_OK || st == LLM_ERR_IO));
        REQUIRE(llm_session_reset(s) == LLM_OK);
        CHECK(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
        CAPTURE(llm_last_error());
    }
    llm_session_free(s);
    llm_model_free(m);
}

// ---- cancellation ----------------------------------------------------------------------------------

TEST_CASE("a progress callback returning false cancels the load at any call", "[hardening][cancel]") {
    struct Progress {
        int calls = 0;
        int stop_at = -1;  // return false at this call (1-based)
    };
    auto cb = [](float, void *u) {
        auto *p = static_cast<Progress *>(u);
        return ++p->calls != p->stop_at;
    };
    for (int32_t residency : {LLM_RESIDENCY_RESIDENT, LLM_RESIDENCY_STREAMED}) {
        INFO("residency " << residency);
        llm_model_params mp = model_params(residency);
        mp.progress = cb;
        Progress counted;
        mp.progress_user = &counted;
        llm_model *m = nullptr;
        REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
        llm_model_free(m);
        REQUIRE(counted.calls >= 1);
        for (int k = 1; k <= counted.calls; ++k) {
            INFO("stop at progress call " << k << " of " << counted.calls);
            HostFile f(kStories);
            llm_io io = f.io();
            Progress p;
            p.stop_at = k;
            mp.progress_user = &p;
            CHECK(llm_model_load_io(&io, &mp, &m) == LLM_ERR_CANCELLED);
            CHECK(m == nullptr);
            CHECK(p.calls == k);
            CHECK(f.closes == 1);
        }
    }
}

TEST_CASE("another thread cancels a load through the progress callback", "[hardening][cancel]") {
    struct Shared {
        std::mutex mu;
        std::condition_variable cv;
        bool in_progress = false;
        std::atomic<bool> stop{false};
        int calls_after_stop = 0;
    } sh;
    llm_model_params mp = model_params();
    mp.progress_user = &sh;
    mp.progress = [](float, void *u) {
        auto *s = static_cast<Shared *>(u);
        std::unique_lock<std::mutex> lock(s->mu);
        s->in_progress = true;
        s->cv.notify_all();
        s->cv.wait(lock, [&] { return s->stop.load(); });  // the host's UI thread decides
        ++s->calls_after_stop;
        return !s->stop.load();
    };
    std::thread ui([&] {
        std::unique_lock<std::mutex> lock(sh.mu);
        sh.cv.wait(lock, [&] { return sh.in_progress; });
        sh.stop = true;
        sh.cv.notify_all();
    });
    HostFile f(deep_model());
    llm_io io = f.io();
    llm_model *m = nullptr;
    const int32_t st = llm_model_load_io(&io, &mp, &m);
    ui.join();
    CHECK(st == LLM_ERR_CANCELLED);
    CHECK(m == nullptr);
    CHECK(sh.calls_after_stop == 1);
    CHECK(f.closes == 1);
}

TEST_CASE("llm_session_cancel from another thread stops a prefill and a decode within about a layer",
          "[hardening][cancel]") {
    const int n_layer = 24;
    llm_model_params mp = model_params();
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(deep_model().c_str(), &mp, &m) == LLM_OK);
    llm_session_params sp = greedy(512);
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);

    // Size the prompt so a prefill takes long enough to be cancelled in the middle (any build type).
    std::vector<int32_t> prompt = {1};
    for (int i = 0; prompt.size() < 8; ++i) prompt.push_back(300 + i);
    auto t0 = Clock::now();
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    const double t8 = seconds_since(t0);
    const size_t n_prompt = std::clamp<size_t>(static_cast<size_t>(8 * 0.6 / std::max(t8, 1e-6)), 16, 400);
    while (prompt.size() < n_prompt) prompt.push_back(static_cast<int32_t>(3 + prompt.size() % 500));
    REQUIRE(llm_session_reset(s) == LLM_OK);
    t0 = Clock::now();
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    const double t_full = seconds_since(t0);
    const std::vector<float> ref_logits = last_logits(s);
    const double layer = t_full / n_layer;
    const double slack = 0.05;  // thread wake-up and scheduling on a loaded machine

    SECTION("prefill") {
        REQUIRE(llm_session_reset(s) == LLM_OK);
        std::atomic<bool> started{false};
        Clock::time_point t_cancel, t_return;
        int32_t st = LLM_OK;
        std::thread worker([&] {
            started = true;
            st = llm_session_prefill(s, prompt.data(), prompt.size());
            t_return = Clock::now();
        });
        while (!started) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::duration<double>(t_full * 0.4));
        t_cancel = Clock::now();
        llm_session_cancel(s);
        worker.join();
        const double latency = std::chrono::duration<double>(t_return - t_cancel).count();
        INFO("prompt " << prompt.size() << " tokens, full prefill " << t_full << " s, layer " << layer
                       << " s, cancel latency " << latency << " s");
        REQUIRE(st == LLM_ERR_CANCELLED);
        CHECK(latency < 2 * layer + slack);
        CHECK(llm_session_n_past(s) == 0);
        const float *lg = nullptr;
        int32_t nv = 0;
        CHECK(llm_session_logits(s, &lg, &nv) == LLM_ERR_INVALID_ARGUMENT);  // discarded
        // The cancel ended with its call: the same prefill now runs to the same logits.
        REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
        CHECK(last_logits(s) == ref_logits);
        WARN("prefill cancel latency " << latency * 1e3 << " ms (one layer: " << layer * 1e3 << " ms)");
    }
    SECTION("decode") {
        REQUIRE(llm_session_reset(s) == LLM_OK);
        REQUIRE(llm_session_prefill(s, prompt.data(), 4) == LLM_OK);
        struct Ctx {
            std::atomic<int> tokens{0};
        } ctx;
        auto on_token = [](int32_t, const char *, size_t, void *u) {
            static_cast<Ctx *>(u)->tokens++;
            return true;
        };
        Clock::time_point t_cancel, t_return;
        int32_t st = LLM_OK;
        std::atomic<bool> done{false};
        t0 = Clock::now();
        std::thread worker([&] {
            st = llm_session_generate(s, nullptr, 400, on_token, &ctx);
            t_return = Clock::now();
            done = true;
        });
        while (ctx.tokens < 20 && !done) std::this_thread::yield();
        t_cancel = Clock::now();
        llm_session_cancel(s);
        worker.join();
        const double latency = std::chrono::duration<double>(t_return - t_cancel).count();
        const int n = ctx.tokens.load();
        const double per_token = std::chrono::duration<double>(t_cancel - t0).count() / n;
        INFO("decode " << per_token << " s/token, cancel latency " << latency << " s");
        REQUIRE(st == LLM_ERR_CANCELLED);
        CHECK(latency < 2 * per_token / n_layer + slack);
        // Tokens accepted before the cancel stay; the one being evaluated does not.
        const int32_t n_past = llm_session_n_past(s);
        CHECK(n_past >= 4 + n - 1);
        CHECK(n_past <= 4 + n);
        CHECK(n < 400);
        WARN("decode cancel latency " << latency * 1e3 << " ms (one token: " << per_token * 1e3 << " ms)");
        // The cancel ended with its call; evaluating again works.
        CHECK(llm_session_accept(s, 300) == LLM_OK);
    }
    SECTION("a cancel with no call in flight is dropped") {
        // (tests/test_boundary.cpp covers the races with the end and start of a call.)
        REQUIRE(llm_session_reset(s) == LLM_OK);
        llm_session_cancel(s);
        CHECK(llm_session_prefill(s, prompt.data(), 4) == LLM_OK);
        llm_session_cancel(s);
        CHECK(llm_session_accept(s, 300) == LLM_OK);
    }
    llm_session_free(s);
    llm_model_free(m);
}

// ---- concurrency -----------------------------------------------------------------------------------

TEST_CASE("sessions on four threads share one model and match the single-threaded result", "[hardening][threads]") {
    struct Mode {
        const char *name;
        int32_t residency;
        int32_t depth;
        bool io;
    };
    for (const Mode &mode : {Mode{"resident", LLM_RESIDENCY_RESIDENT, 1, false},
                             Mode{"streamed via llm_io, prefetch 1", LLM_RESIDENCY_STREAMED, 1, true},
                             Mode{"streamed, synchronous", LLM_RESIDENCY_STREAMED, 0, false}}) {
        INFO("mode " << mode.name);
        std::unique_ptr<HostFile> f;
        llm_model_params mp = model_params(mode.residency, mode.depth);
        llm_model *m = nullptr;
        if (mode.io) {
            f = std::make_unique<HostFile>(kStories);
            llm_io io = f->io();
            REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
        } else {
            REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
        }
        const char *prompts[2] = {"Once upon a time", "The little dog"};
        auto run = [&](int which, float temp, std::vector<int32_t> &out) -> int32_t {
            llm_session_params sp = greedy();
            sp.temperature = temp;
            sp.seed = 42;
            llm_session *s = nullptr;
            int32_t st = llm_session_create(m, &sp, &s);
            if (st != LLM_OK) return st;
            st = llm_session_generate(s, prompts[which], 40, on_token_collect, &out);
            llm_session_free(s);
            return st;
        };
        std::vector<int32_t> ref[2][2];
        for (int w = 0; w < 2; ++w) {
            REQUIRE(run(w, 0.0f, ref[w][0]) >= LLM_OK);
            REQUIRE(run(w, 0.8f, ref[w][1]) >= LLM_OK);
            REQUIRE(ref[w][0].size() >= 8);
        }
        constexpr int kThreads = 4;
        std::vector<int32_t> got[kThreads][2];
        int32_t status[kThreads][2];
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                status[t][0] = run(t % 2, 0.0f, got[t][0]);
                status[t][1] = run(t % 2, 0.8f, got[t][1]);
            });
        }
        for (auto &th : threads) th.join();
        for (int t = 0; t < kThreads; ++t) {
            INFO("thread " << t);
            CHECK(status[t][0] >= LLM_OK);
            CHECK(status[t][1] >= LLM_OK);
            CHECK(got[t][0] == ref[t % 2][0]);
            CHECK(got[t][1] == ref[t % 2][1]);
        }
        llm_model_free(m);
        if (f) CHECK(f->closes == 1);
    }
}

// ---- context limits --------------------------------------------------------------------------------

TEST_CASE("a prompt longer than the context fails with LLM_ERR_CONTEXT_FULL and changes nothing", "[hardening][context]") {
    llm_model_params mp = model_params();
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    const int32_t n_ctx = 24;
    llm_session_params sp = greedy(n_ctx);
    llm_session *s = nullptr, *ref = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    REQUIRE(llm_session_create(m, &sp, &ref) == LLM_OK);

    const std::vector<int32_t> start = tokenize(m, "Once upon a time");
    REQUIRE(llm_session_prefill(s, start.data(), start.size()) == LLM_OK);
    REQUIRE(llm_session_prefill(ref, start.data(), start.size()) == LLM_OK);
    const int32_t n_past = llm_session_n_past(s);
    const std::vector<float> logits = last_logits(s);

    std::string long_text;
    for (int i = 0; i < 10; ++i) long_text += " there was a little girl named Lily.";
    const std::vector<int32_t> long_ids = tokenize(m, long_text, false);
    REQUIRE(long_ids.size() + static_cast<size_t>(n_past) > static_cast<size_t>(n_ctx));

    CHECK(llm_session_prefill(s, long_ids.data(), long_ids.size()) == LLM_ERR_CONTEXT_FULL);
    CHECK(std::string(llm_last_error()).find("do not fit") != std::string::npos);
    CHECK(llm_session_n_past(s) == n_past);
    CHECK(last_logits(s) == logits);
    CHECK(llm_session_generate(s, long_text.c_str(), 4, nullptr, nullptr) == LLM_ERR_CONTEXT_FULL);
    CHECK(llm_session_n_past(s) == n_past);
    // An empty session: the prompt alone is too long.
    llm_session *empty = nullptr;
    REQUIRE(llm_session_create(m, &sp, &empty) == LLM_OK);
    CHECK(llm_session_generate(empty, long_text.c_str(), 4, nullptr, nullptr) == LLM_ERR_CONTEXT_FULL);
    CHECK(llm_session_n_past(empty) == 0);
    llm_session_free(empty);

    // A following generate continues exactly as if nothing had been tried.
    std::vector<int32_t> a, b;
    const int32_t sa = llm_session_generate(s, nullptr, 6, on_token_collect, &a);
    const int32_t sb = llm_session_generate(ref, nullptr, 6, on_token_collect, &b);
    CHECK(sa == LLM_OK);
    CHECK(sa == sb);
    CHECK(a == b);

    // Generation that runs into the end of the context stops there with CONTEXT_FULL, keeping it all.
    std::vector<int32_t> rest;
    const int32_t word = tokenize(m, " and", false).back();
    int32_t st = LLM_OK;
    for (int i = 0; i < n_ctx && st != LLM_ERR_CONTEXT_FULL; ++i) {
        st = llm_session_generate(s, nullptr, 2 * n_ctx, on_token_collect, &rest);
        if (st == LLM_DONE) st = llm_session_accept(s, word);  // past an end-of-text token
    }
    CHECK(st == LLM_ERR_CONTEXT_FULL);
    CHECK(llm_session_n_past(s) == n_ctx);
    int32_t t = 0;
    CHECK(llm_session_accept(s, 300) == LLM_ERR_CONTEXT_FULL);
    CHECK(llm_session_sample(s, &t) == LLM_OK);  // the last logits are still there
    llm_session_free(s);
    llm_session_free(ref);
    llm_model_free(m);
}

// ---- soak ------------------------------------------------------------------------------------------

TEST_CASE("10,000 generated tokens keep RSS flat", "[hardening][.slow]") {
    llm_model_params mp = model_params();
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    const int32_t n_ctx = 10240;
    llm_session_params sp = greedy(n_ctx);
    sp.temperature = 0.8f;  // varied text; EOG tokens are replaced below so the context keeps growing
    sp.seed = 7;
    const int64_t rss_before = vm_rss_kib();
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    llm_memory_plan plan{};
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    REQUIRE(llm_model_memory_plan(m, n_ctx, &plan) == LLM_OK);
    const int64_t rss_created = vm_rss_kib();

    const std::vector<int32_t> prompt = tokenize(m, "Once upon a time");
    REQUIRE(llm_session_prefill(s, prompt.data(), prompt.size()) == LLM_OK);
    const int32_t filler = tokenize(m, " the", false).back();
    int64_t rss_1k = 0;
    const auto t0 = Clock::now();
    for (int i = 1; i <= 10000; ++i) {
        int32_t t = -1;
        REQUIRE(llm_session_sample(s, &t) == LLM_OK);
        if (llm_model_token_is_eog(m, t)) t = filler;
        REQUIRE(llm_session_accept(s, t) == LLM_OK);
        if (i == 1000) rss_1k = vm_rss_kib();
    }
    const int64_t rss_10k = vm_rss_kib();
    const double secs = seconds_since(t0);
    CHECK(llm_session_n_past(s) == static_cast<int32_t>(prompt.size()) + 10000);
    INFO("RSS KiB: before session " << rss_before << ", created " << rss_created << ", 1k tokens " << rss_1k
                                    << ", 10k tokens " << rss_10k << "; KV cache " << plan.kv_cache_bytes / 1024
                                    << " KiB; " << secs << " s");
    // The KV cache is allocated (and zeroed) when the session is created, so it is in RSS already.
    CHECK(rss_created - rss_before >= static_cast<int64_t>(plan.kv_cache_bytes / 1024) * 9 / 10);
    CHECK(rss_10k - rss_1k < 2048);
    WARN("soak: RSS " << rss_1k << " KiB at 1,000 tokens, " << rss_10k << " KiB at 10,000; " << secs << " s");
    llm_session_free(s);
    llm_model_free(m);
}

// ---- the boundary itself ---------------------------------------------------------------------------

namespace {
// Every failing call must leave a message.
#define CHECK_FAILS(call, status)                                                                   \
    do {                                                                                            \
        CHECK((call) == (status));                                                                  \
        CHECK(llm_last_error()[0] != '\0');                                                         \
    } while (0)
}  // namespace

TEST_CASE("every function of llm.h takes NULL handles, bad versions and bad values", "[hardening][api]") {
    const int32_t INV = LLM_ERR_INVALID_ARGUMENT;
    // Static strings and no-ops.
    CHECK(llm_version_string() != nullptr);
    CHECK(std::string(llm_status_string(12345)) == "unknown status");
    for (int32_t st = LLM_ERR_INTERNAL; st <= LLM_DONE; ++st) CHECK(std::string(llm_status_string(st)) != "unknown status");
    CHECK(llm_last_error() != nullptr);
    llm_set_log_callback(nullptr, nullptr);
    llm_set_log_level(LLM_LOG_WARN);
    CHECK_FAILS(llm_model_params_init(nullptr, LLM_MODEL_PARAMS_VERSION), INV);
    CHECK_FAILS(llm_session_params_init(nullptr, LLM_SESSION_PARAMS_VERSION), INV);
    CHECK_FAILS(llm_memory_plan_init(nullptr, LLM_MEMORY_PLAN_VERSION), INV);
    CHECK_FAILS(llm_stats_init(nullptr, LLM_STATS_VERSION), INV);
    llm_model_free(nullptr);
    llm_session_free(nullptr);
    llm_session_cancel(nullptr);

    // ---- model loading ----
    llm_model *m = nullptr;
    llm_model_params mp = model_params();
    CHECK_FAILS(llm_model_load(nullptr, &mp, &m), INV);
    CHECK_FAILS(llm_model_load(kStories.c_str(), &mp, nullptr), INV);
    CHECK_FAILS(llm_model_load("/nonexistent/x.gguf", &mp, &m), LLM_ERR_IO);
    CHECK_FAILS(llm_model_load(LLM_SHARED_DIR, &mp, &m), LLM_ERR_IO);  // a directory
    for (uint32_t v : {0u, static_cast<uint32_t>(LLM_MODEL_PARAMS_VERSION + 1), 0xFFFFFFFFu}) {
        llm_model_params bad = mp;
        bad.version = v;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), INV);
    }
    {
        llm_model_params bad = mp;
        bad.residency = 3;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), INV);
        bad = mp;
        bad.residency = -1;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), INV);
        bad = mp;
        bad.prefetch_depth = -1;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), INV);
        bad = mp;
        bad.prefetch_depth = 17;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), INV);
        bad = mp;
        bad.residency = LLM_RESIDENCY_BUDGET;
        bad.ram_budget_bytes = 0;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), INV);
        bad.ram_budget_bytes = 1;
        CHECK_FAILS(llm_model_load(kStories.c_str(), &bad, &m), LLM_ERR_OUT_OF_MEMORY);
    }
    CHECK(m == nullptr);
    {
        // llm_io: close runs exactly once on every failure once the struct is readable.
        CHECK_FAILS(llm_model_load_io(nullptr, &mp, &m), INV);
        HostFile f(kStories);
        llm_io io = f.io();
        CHECK_FAILS(llm_model_load_io(&io, &mp, nullptr), INV);
        CHECK(f.closes == 1);
        llm_io no_read = io;
        no_read.read_at = nullptr;
        CHECK_FAILS(llm_model_load_io(&no_read, &mp, &m), INV);
        CHECK(f.closes == 2);
        llm_io no_size = io;
        no_size.size = nullptr;
        CHECK_FAILS(llm_model_load_io(&no_size, &mp, &m), INV);
        CHECK(f.closes == 3);
        llm_model_params bad = mp;
        bad.version = 99;
        CHECK_FAILS(llm_model_load_io(&io, &bad, &m), INV);
        CHECK(f.closes == 4);
        llm_io no_close = io;
        no_close.close = nullptr;
        no_close.read_at = nullptr;
        CHECK_FAILS(llm_model_load_io(&no_close, &mp, &m), INV);
        CHECK(f.closes == 4);
        // An unknown (newer) io version is refused, but close is where it always was: it runs.
        llm_io future = io;
        future.version = LLM_IO_VERSION + 1;
        CHECK_FAILS(llm_model_load_io(&future, &mp, &m), INV);
        CHECK(f.closes == 5);
        // Version 0 is no struct at all: nothing in it is called.
        llm_io zero = io;
        zero.version = 0;
        CHECK_FAILS(llm_model_load_io(&zero, &mp, &m), INV);
        CHECK(f.closes == 5);
        CHECK(f.calls == 0);
    }
    CHECK(m == nullptr);
    // NULL params mean the defaults.
    REQUIRE(llm_model_load(kStories.c_str(), nullptr, &m) == LLM_OK);
    llm_model_free(m);
    m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    const int32_t n_vocab = llm_model_n_vocab(m);
    REQUIRE(n_vocab > 0);

    // ---- model getters ----
    CHECK(llm_model_info_json(nullptr) == nullptr);
    CHECK(llm_model_info_json(m) != nullptr);
    CHECK_FAILS(llm_model_set_ram_budget(nullptr, 1 << 20), INV);
    llm_memory_plan plan{};
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    CHECK_FAILS(llm_model_memory_plan(nullptr, 0, &plan), INV);
    CHECK_FAILS(llm_model_memory_plan(m, 0, nullptr), INV);
    plan.version = LLM_MEMORY_PLAN_VERSION + 1;
    CHECK_FAILS(llm_model_memory_plan(m, 0, &plan), INV);
    plan.version = 0;
    CHECK_FAILS(llm_model_memory_plan(m, 0, &plan), INV);
    CHECK(llm_model_n_vocab(nullptr) == 0);
    CHECK(llm_model_token_bos(nullptr) == -1);
    CHECK(llm_model_token_eos(nullptr) == -1);
    CHECK_FALSE(llm_model_token_is_eog(nullptr, llm_model_token_eos(m)));
    CHECK(llm_model_token_is_eog(m, llm_model_token_eos(m)));
    CHECK_FALSE(llm_model_token_is_eog(m, -1));
    CHECK_FALSE(llm_model_token_is_eog(m, n_vocab));

    // ---- tokenizer ----
    int32_t ids[64];
    int32_t n = -7;
    CHECK_FAILS(llm_tokenize(nullptr, "a", 1, true, false, ids, 64, &n), INV);
    CHECK_FAILS(llm_tokenize(m, "a", 1, true, false, ids, 64, nullptr), INV);
    CHECK_FAILS(llm_tokenize(m, nullptr, 1, true, false, ids, 64, &n), INV);
    CHECK_FAILS(llm_tokenize(m, "a", 1, true, false, nullptr, 4, &n), INV);
    CHECK_FAILS(llm_tokenize(m, "a", 1, true, false, ids, -1, &n), INV);
    CHECK(n == -7);
    CHECK(llm_tokenize(m, nullptr, 0, true, false, ids, 64, &n) == LLM_OK);  // empty text
    CHECK(n == 1);                                                            // just BOS
    CHECK_FAILS(llm_tokenize(m, "hello world", 11, true, false, nullptr, 0, &n), LLM_ERR_BUFFER_TOO_SMALL);
    CHECK(n > 1);
    CHECK_FAILS(llm_tokenize(m, "hello world", 11, true, false, ids, n - 1, &n), LLM_ERR_BUFFER_TOO_SMALL);
    char buf[64];
    size_t len = 99;
    CHECK_FAILS(llm_token_to_piece(nullptr, 5, buf, sizeof buf, &len), INV);
    CHECK_FAILS(llm_token_to_piece(m, 5, buf, sizeof buf, nullptr), INV);
    CHECK_FAILS(llm_token_to_piece(m, 5, nullptr, 8, &len), INV);
    CHECK_FAILS(llm_token_to_piece(m, -1, buf, sizeof buf, &len), INV);
    CHECK_FAILS(llm_token_to_piece(m, n_vocab, buf, sizeof buf, &len), INV);
    CHECK(len == 99);
    const int32_t word = tokenize(m, " little", false).back();
    CHECK_FAILS(llm_token_to_piece(m, word, nullptr, 0, &len), LLM_ERR_BUFFER_TOO_SMALL);
    CHECK(len > 0);

    // ---- sessions ----
    llm_session *s = nullptr;
    llm_session_params sp = greedy(64);
    CHECK_FAILS(llm_session_create(nullptr, &sp, &s), INV);
    CHECK_FAILS(llm_session_create(m, &sp, nullptr), INV);
    for (uint32_t v : {0u, static_cast<uint32_t>(LLM_SESSION_PARAMS_VERSION + 1)}) {
        llm_session_params bad = sp;
        bad.version = v;
        CHECK_FAILS(llm_session_create(m, &bad, &s), INV);
    }
    {
        llm_session_params bad = sp;
        bad.n_ctx = (1 << 24) + 1;
        CHECK_FAILS(llm_session_create(m, &bad, &s), INV);
        bad = sp;
        bad.repeat_last_n = -1;
        CHECK_FAILS(llm_session_create(m, &bad, &s), INV);
        bad = sp;
        bad.temperature = std::nanf("");
        CHECK_FAILS(llm_session_create(m, &bad, &s), INV);
        bad = sp;
        bad.repeat_penalty = 0;
        CHECK_FAILS(llm_session_create(m, &bad, &s), INV);
    }
    CHECK(s == nullptr);
    REQUIRE(llm_session_create(m, nullptr, &s) == LLM_OK);  // defaults
    llm_session_free(s);
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);

    CHECK_FAILS(llm_session_reset(nullptr), INV);
    CHECK(llm_session_n_past(nullptr) == 0);
    const float *lg = nullptr;
    int32_t nv = 0;
    int32_t tok = -5;
    // Nothing evaluated yet.
    CHECK_FAILS(llm_session_logits(s, &lg, &nv), INV);
    CHECK_FAILS(llm_session_logits_ith(s, 0, &lg, &nv), INV);
    CHECK_FAILS(llm_session_sample(s, &tok), INV);
    CHECK_FAILS(llm_session_next(s, &tok, buf, sizeof buf, &len), INV);
    CHECK(tok == -5);
    // An empty prompt on an empty context starts from BOS.
    CHECK(llm_session_generate(s, "", 2, nullptr, nullptr) >= LLM_OK);
    CHECK(llm_session_n_past(s) >= 1);
    REQUIRE(llm_session_reset(s) == LLM_OK);
    CHECK(llm_session_n_past(s) == 0);

    const int32_t toks[3] = {1, word, word};
    CHECK_FAILS(llm_session_prefill(nullptr, toks, 3), INV);
    CHECK_FAILS(llm_session_prefill(s, nullptr, 3), INV);
    CHECK_FAILS(llm_session_prefill(s, toks, 0), INV);
    const int32_t bad_toks[2] = {1, n_vocab};
    CHECK_FAILS(llm_session_prefill(s, bad_toks, 2), INV);
    const int32_t neg_toks[2] = {1, -1};
    CHECK_FAILS(llm_session_prefill(s, neg_toks, 2), INV);
    CHECK(llm_session_n_past(s) == 0);
    REQUIRE(llm_session_prefill(s, toks, 3) == LLM_OK);

    CHECK_FAILS(llm_session_logits(nullptr, &lg, &nv), INV);
    CHECK_FAILS(llm_session_logits(s, nullptr, &nv), INV);
    CHECK_FAILS(llm_session_logits(s, &lg, nullptr), INV);
    CHECK_FAILS(llm_session_logits_ith(nullptr, 0, &lg, &nv), INV);
    CHECK_FAILS(llm_session_logits_ith(s, -1, &lg, &nv), INV);
    CHECK_FAILS(llm_session_logits_ith(s, 1, &lg, &nv), INV);  // no logits_all: only row 0
    CHECK_FAILS(llm_session_logits_ith(s, 0, nullptr, &nv), INV);
    CHECK(llm_session_logits_ith(s, 0, &lg, &nv) == LLM_OK);
    CHECK(nv == n_vocab);
    CHECK_FAILS(llm_session_sample(nullptr, &tok), INV);
    CHECK_FAILS(llm_session_sample(s, nullptr), INV);
    CHECK_FAILS(llm_session_accept(nullptr, word), INV);
    CHECK_FAILS(llm_session_accept(s, -1), INV);
    CHECK_FAILS(llm_session_accept(s, n_vocab), INV);
    CHECK(llm_session_n_past(s) == 3);
    CHECK_FAILS(llm_session_generate(nullptr, "x", 4, nullptr, nullptr), INV);
    CHECK_FAILS(llm_session_generate(s, nullptr, -1, nullptr, nullptr), INV);
    CHECK(llm_session_generate(s, nullptr, 0, nullptr, nullptr) == LLM_OK);
    CHECK(llm_session_n_past(s) == 3);
    CHECK_FAILS(llm_session_next(nullptr, &tok, buf, sizeof buf, &len), INV);
    CHECK_FAILS(llm_session_next(s, nullptr, buf, sizeof buf, &len), INV);
    CHECK_FAILS(llm_session_next(s, &tok, nullptr, 8, &len), INV);
    CHECK(llm_session_n_past(s) == 3);
    const int32_t st_next = llm_session_next(s, &tok, nullptr, 0, nullptr);  // piece and len may be NULL
    CHECK((st_next == LLM_OK || st_next == LLM_DONE));

    llm_stats total{}, last{};
    llm_stats_init(&total, LLM_STATS_VERSION);
    llm_stats_init(&last, LLM_STATS_VERSION);
    CHECK_FAILS(llm_session_stats(nullptr, &total, &last), INV);
    CHECK(llm_session_stats(s, nullptr, nullptr) == LLM_OK);
    CHECK(llm_session_stats(s, &total, nullptr) == LLM_OK);
    CHECK(total.prompt_tokens == 3);
    last.version = LLM_STATS_VERSION + 1;
    CHECK_FAILS(llm_session_stats(s, &total, &last), INV);
    CHECK(llm_session_stats_json(nullptr) == nullptr);
    CHECK(llm_session_stats_json(s) != nullptr);

    // ---- embeddings (tests/test_embed.cpp has the rest) ----
    CHECK_FAILS(llm_embed_params_init(nullptr, LLM_EMBED_PARAMS_VERSION), INV);
    CHECK(llm_model_pooling_type(nullptr) == -1);
    CHECK(llm_model_pooling_type(m) == LLM_POOLING_NONE);
    {
        const char *texts[] = {"Once"};
        float out[4096];
        size_t n = 0;
        llm_embed_params ep;
        llm_embed_params_init(&ep, LLM_EMBED_PARAMS_VERSION);
        ep.pooling = LLM_POOLING_MEAN;
        CHECK_FAILS(llm_session_embed(nullptr, texts, 1, &ep, out, 4096, &n, nullptr, nullptr), INV);
        CHECK_FAILS(llm_session_embed(s, nullptr, 1, &ep, out, 4096, &n, nullptr, nullptr), INV);
        CHECK_FAILS(llm_session_embed(s, texts, 1, &ep, out, 4096, nullptr, nullptr, nullptr), INV);
        const int32_t *toks[] = {nullptr};
        const size_t lens[] = {1};
        CHECK_FAILS(llm_session_embed_tokens(nullptr, toks, lens, 1, &ep, out, 4096, &n, nullptr, nullptr), INV);
        CHECK_FAILS(llm_session_embed_tokens(s, toks, lens, 1, &ep, out, 4096, &n, nullptr, nullptr), INV);
        for (uint32_t v : {0u, static_cast<uint32_t>(LLM_EMBED_PARAMS_VERSION + 1)}) {
            llm_embed_params bad = ep;
            bad.version = v;
            CHECK_FAILS(llm_session_embed(s, texts, 1, &bad, out, 4096, &n, nullptr, nullptr), INV);
        }
        ep.pooling = 77;
        CHECK_FAILS(llm_session_embed(s, texts, 1, &ep, out, 4096, &n, nullptr, nullptr), INV);
        CHECK(llm_session_embed(s, texts, 1, nullptr, out, 4096, &n, nullptr, nullptr) == LLM_OK);  // defaults
    }
    llm_session_free(s);
    llm_model_free(m);

    // ---- a vocab-only model cannot run or be planned ----
    llm_model_params vp = model_params();
    vp.vocab_only = true;
    REQUIRE(llm_model_load(kStories.c_str(), &vp, &m) == LLM_OK);
    CHECK(llm_model_n_vocab(m) == n_vocab);
    CHECK_FAILS(llm_session_create(m, &sp, &s), INV);
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    CHECK_FAILS(llm_model_memory_plan(m, 0, &plan), INV);
    CHECK_FAILS(llm_model_set_ram_budget(m, 1 << 20), INV);
    CHECK(llm_model_info_json(m) != nullptr);
    CHECK(llm_model_pooling_type(m) == -1);
    llm_model_free(m);
}
