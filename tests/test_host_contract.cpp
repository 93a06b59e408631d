// The host contract as an FFI client relies on it (issue 18), through the public C API only:
//  - no host callback after a call returns: a slow read_at with prefetch 2 is never in flight when
//    generate (or a cancelled or failing call) returns, and llm_session_free / llm_model_free never
//    wait on a read;
//  - LLM_IO_THREAD_BOUND: every callback on the calling thread, even streamed with prefetch 2;
//  - close on every failed load (an unknown llm_io version too), version 1 llm_io structs and arrays,
//    NULL *out from failed constructors, llm_session_last_error from another thread, and
//    llm-run's UTF-8 repair for JSON.
// Run it under ThreadSanitizer as well (see test_hardening.cpp for the build):
//   llm_tests "[api][hardening]"
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "common.h"  // examples/: utf8_repair, json_escape
#include "llm.h"
#include "test_files.h"

namespace {

using Clock = std::chrono::steady_clock;
const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";

// stories260K behind llm_io, with a read_at that takes `delay` and records what the contract is about:
// how many reads are in flight, reads that start while no libllm call runs, and which threads call.
struct SlowHost {
    int fd = -1;
    uint64_t size = 0;
    std::chrono::microseconds delay{0};
    std::atomic<int> in_flight{0};
    std::atomic<bool> in_call{false};      // set by the test around each libllm call
    std::atomic<int> outside_calls{0};     // callbacks that began with no call running
    std::atomic<int64_t> reads{0};
    std::atomic<int> fail_from{-1};        // reads numbered >= this fail (1-based); -1: none
    std::atomic<int> closes{0};
    std::mutex mu;
    std::set<std::thread::id> threads;     // every thread that ran one of the callbacks

    explicit SlowHost(std::chrono::microseconds d = std::chrono::microseconds(0)) : delay(d) {
        fd = ::open(kStories.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        size = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
    }
    ~SlowHost() { ::close(fd); }
    SlowHost(const SlowHost &) = delete;
    SlowHost &operator=(const SlowHost &) = delete;

    void saw_thread() {
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
    }

    llm_io io(uint32_t flags = 0) {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.flags = flags;
        io.size = [](void *u) {
            auto *h = static_cast<SlowHost *>(u);
            h->saw_thread();
            return h->size;
        };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *h = static_cast<SlowHost *>(u);
            h->saw_thread();
            if (!h->in_call.load()) h->outside_calls++;
            h->in_flight++;
            const int64_t k = ++h->reads;
            if (h->delay.count() > 0) std::this_thread::sleep_for(h->delay);
            int32_t st = LLM_OK;
            if (h->fail_from.load() > 0 && k >= h->fail_from.load()) {
                st = LLM_ERR_IO;
            } else {
                const ssize_t got = ::pread(h->fd, dst, n, static_cast<off_t>(off));
                if (got < 0 || static_cast<uint64_t>(got) != n) st = LLM_ERR_IO;
            }
            // Still counted as in flight while this callback has not returned: a read that outlives
            // the libllm call shows up as in_flight > 0 right after the call.
            h->in_flight--;
            return st;
        };
        io.close = [](void *u) {
            auto *h = static_cast<SlowHost *>(u);
            h->saw_thread();
            h->closes++;
        };
        return io;
    }

    // Runs one libllm call with in_call set around it.
    template <typename F>
    auto call(F &&f) {
        in_call = true;
        auto r = f();
        in_call = false;
        return r;
    }
};

llm_model_params streamed(int32_t depth) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 2;
    mp.residency = LLM_RESIDENCY_STREAMED;
    mp.prefetch_depth = depth;
    return mp;
}

llm_session_params greedy() {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0;
    sp.n_ctx = 128;
    sp.n_threads = 2;
    return sp;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

TEST_CASE("no read is in flight when a call returns, and free never waits on one", "[api][hardening]") {
    // 100 runs of a short generation, streamed with prefetch 2 behind a 1 ms read_at: the read-ahead
    // of the next token's first blocks is under way when the last token is done, so before the fix
    // generate returned with a read running in most runs.
    constexpr int kRuns = 100;
    int returned_in_flight = 0, outside = 0;
    double worst_free = 0;
    for (int run = 0; run < kRuns; ++run) {
        SlowHost h(std::chrono::microseconds(1000));
        llm_io io = h.io();
        llm_model_params mp = streamed(2);
        llm_model *m = nullptr;
        REQUIRE(h.call([&] { return llm_model_load_io(&io, &mp, &m); }) == LLM_OK);
        llm_session_params sp = greedy();
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
        const int32_t st = h.call([&] { return llm_session_generate(s, "Once upon a time", 2, nullptr, nullptr); });
        REQUIRE((st == LLM_OK || st == LLM_DONE));
        if (h.in_flight.load() != 0) ++returned_in_flight;
        // A read that starts now, between calls, is a callback after return.
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        const auto t0 = Clock::now();
        llm_model_free(m);
        llm_session_free(s);
        worst_free = std::max(worst_free, seconds_since(t0));
        outside += h.outside_calls.load();
        REQUIRE(h.closes == 1);
    }
    INFO("runs with a read in flight at return: " << returned_in_flight << ", reads outside a call: " << outside
                                                   << ", slowest free: " << worst_free << " s");
    CHECK(returned_in_flight == 0);
    CHECK(outside == 0);
    CHECK(worst_free < 0.5);
}

TEST_CASE("a cancelled or failing streamed call leaves no read behind", "[api][hardening]") {
    SlowHost h(std::chrono::microseconds(1000));
    llm_io io = h.io();
    llm_model_params mp = streamed(2);
    llm_model *m = nullptr;
    REQUIRE(h.call([&] { return llm_model_load_io(&io, &mp, &m); }) == LLM_OK);
    llm_session_params sp = greedy();
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);

    SECTION("cancelled from the token callback") {
        auto cancel = [](int32_t, const char *, size_t, void *u) {
            llm_session_cancel(static_cast<llm_session *>(u));
            return true;
        };
        const int32_t st = h.call([&] { return llm_session_generate(s, "Once upon a time", 8, cancel, s); });
        CHECK(st == LLM_ERR_CANCELLED);
        CHECK(h.in_flight == 0);
    }
    SECTION("a read failing mid-generation") {
        h.fail_from = static_cast<int>(h.reads.load()) + 20;
        const int32_t st = h.call([&] { return llm_session_generate(s, "Once upon a time", 16, nullptr, nullptr); });
        CHECK(st == LLM_ERR_IO);
        CHECK(h.in_flight == 0);
        // The session error is readable from any thread (here another one).
        std::string from_other;
        std::thread([&] { from_other = llm_session_last_error(s); }).join();
        CHECK(from_other.find("read_at") != std::string::npos);
        h.fail_from = -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    CHECK(h.outside_calls == 0);
    llm_session_free(s);
    llm_model_free(m);
    CHECK(h.closes == 1);
}

TEST_CASE("LLM_IO_THREAD_BOUND: every callback runs on the calling thread, streamed with prefetch 2",
          "[api][hardening]") {
    // The same text as with the I/O thread, and no thread but this one ever calls the host: not the
    // I/O thread, not the two compute threads.
    auto run = [](uint32_t flags, std::set<std::thread::id> &threads, std::string &text, uint32_t &slots) {
        SlowHost h;
        llm_io io = h.io(flags);
        llm_model_params mp = streamed(2);
        struct Seen {
            std::set<std::thread::id> *threads;
            std::mutex *mu;
            std::string text;
        } seen{&h.threads, &h.mu, {}};
        mp.progress = [](float, void *u) {
            auto *sn = static_cast<Seen *>(u);
            std::lock_guard<std::mutex> lock(*sn->mu);
            sn->threads->insert(std::this_thread::get_id());
            return true;
        };
        mp.progress_user = &seen;
        llm_model *m = nullptr;
        REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
        llm_memory_plan plan;
        REQUIRE(llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION) == LLM_OK);
        REQUIRE(llm_model_memory_plan(m, 0, &plan) == LLM_OK);
        slots = plan.n_stream_slots;
        llm_session_params sp = greedy();
        llm_session *s = nullptr;
        REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
        auto on_token = [](int32_t, const char *piece, size_t len, void *u) {
            auto *sn = static_cast<Seen *>(u);
            std::lock_guard<std::mutex> lock(*sn->mu);
            sn->threads->insert(std::this_thread::get_id());
            sn->text.append(piece, len);
            return true;
        };
        const int32_t st = llm_session_generate(s, "Once upon a time", 16, on_token, &seen);
        REQUIRE((st == LLM_OK || st == LLM_DONE));
        // The pull API too.
        int32_t tok = 0;
        char piece[64];
        size_t len = 0;
        REQUIRE(llm_session_next(s, &tok, piece, sizeof piece, &len) >= 0);
        llm_session_free(s);
        llm_model_free(m);
        CHECK(h.closes == 1);
        CHECK(h.reads > 0);
        threads = h.threads;
        text = seen.text;
    };
    std::set<std::thread::id> bound_threads, free_threads;
    std::string bound_text, free_text;
    uint32_t bound_slots = 0, free_slots = 0;
    run(LLM_IO_THREAD_BOUND, bound_threads, bound_text, bound_slots);
    run(0, free_threads, free_text, free_slots);
    CHECK(bound_threads == std::set<std::thread::id>{std::this_thread::get_id()});
    CHECK(bound_slots == 1);  // read synchronously: one streaming slot
    // Without the flag the I/O thread reads too: the test would see it.
    CHECK(free_threads.size() > 1);
    CHECK(free_slots == 3);
    CHECK(!bound_text.empty());
    CHECK(bound_text == free_text);
}

TEST_CASE("LLM_PAGE_CACHE_MAP: a host's llm_io keeps being read (KEEP); an unknown policy is refused",
          "[api][hardening][cache]") {
    auto text_of = [](llm_model *m) { return test::generated_text(m, greedy(), "Once upon a time", 12); };
    llm_model_params mp = streamed(1);
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    const std::string ref = text_of(m);
    llm_model_free(m);

    // We do not own a host's storage, so nothing is mapped: every weight byte still comes by read_at.
    SlowHost h;
    llm_io io = h.io();
    mp.page_cache = LLM_PAGE_CACHE_MAP;
    m = nullptr;
    REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
    CHECK(std::string(llm_model_info_json(m)).find("\"page_cache\":\"keep\"") != std::string::npos);
    const int64_t before = h.reads.load();
    CHECK(text_of(m) == ref);
    CHECK(h.reads.load() > before);
    llm_model_free(m);

    // A file maps.
    m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);
    CHECK(std::string(llm_model_info_json(m)).find("\"page_cache\":\"map\"") != std::string::npos);
    CHECK(text_of(m) == ref);
    llm_model_free(m);

    mp.page_cache = LLM_PAGE_CACHE_MAP + 1;
    m = nullptr;
    CHECK(llm_model_load(kStories.c_str(), &mp, &m) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(m == nullptr);
}

TEST_CASE("llm_io versions: 1 is read no further than close, unknown flags are refused", "[api][hardening]") {
    SlowHost h;
    llm_model_params mp = streamed(1);
    llm_model *m = nullptr;

    SECTION("a version 1 struct: flags are not part of it, whatever lies there") {
        llm_io io = h.io();
        io.version = 1;
        io.flags = 0xdeadbeef;  // where a v1 host's memory ends: must be ignored
        REQUIRE(llm_model_load_io(&io, &mp, &m) == LLM_OK);
        llm_model_free(m);
        CHECK(h.closes == 1);
    }
    SECTION("a version 1 array for a split load has version 1's stride (40 bytes on LP64)") {
        // Two v1 structs packed as a v1 host lays them out; n_io = 1 still has to find ios[0] only,
        // and a two-element array must read the second element at the v1 stride.
        struct IoV1 {
            uint32_t version;
            void *user;
            uint64_t (*size)(void *);
            int32_t (*read_at)(void *, uint64_t, void *, uint64_t);
            void (*close)(void *);
        };
        static_assert(sizeof(IoV1) == offsetof(llm_io, flags), "IoV1 mirrors a version 1 llm_io");
        llm_io full = h.io();
        IoV1 v1[2];
        for (IoV1 &e : v1) e = {1, full.user, full.size, full.read_at, full.close};
        v1[1].read_at = nullptr;  // found at the v1 stride, this element is refused
        const auto *arr = reinterpret_cast<const llm_io *>(v1);
        CHECK(llm_model_load_io_split(arr, 2, &mp, &m) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("ios[1]") != std::string::npos);
        CHECK(h.closes == 2);  // both closed
        CHECK(m == nullptr);
        REQUIRE(llm_model_load_io_split(arr, 1, &mp, &m) == LLM_OK);
        llm_model_free(m);
        CHECK(h.closes == 3);
    }
    SECTION("unknown flag bits are refused (and close still runs)") {
        llm_io io = h.io(0x2);
        CHECK(llm_model_load_io(&io, &mp, &m) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("flags") != std::string::npos);
        CHECK(h.closes == 1);
    }
    SECTION("an unknown newer version is refused, and close, which never moves, runs") {
        llm_io io = h.io();
        io.version = LLM_IO_VERSION + 1;
        CHECK(llm_model_load_io(&io, &mp, &m) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(h.closes == 1);
        CHECK(h.reads == 0);
    }
}

TEST_CASE("failed constructors write NULL to *out", "[api][hardening]") {
    auto *junk = reinterpret_cast<llm_model *>(static_cast<uintptr_t>(0x1234));
    llm_model *m = junk;
    CHECK(llm_model_load("/nonexistent/model.gguf", nullptr, &m) == LLM_ERR_IO);
    CHECK(m == nullptr);
    m = junk;
    CHECK(llm_model_load(nullptr, nullptr, &m) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(m == nullptr);
    m = junk;
    CHECK(llm_model_load_io(nullptr, nullptr, &m) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(m == nullptr);
    m = junk;
    CHECK(llm_model_load_io_split(nullptr, 1, nullptr, &m) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(m == nullptr);

    REQUIRE(llm_model_load(kStories.c_str(), nullptr, &m) == LLM_OK);
    auto *sjunk = reinterpret_cast<llm_session *>(static_cast<uintptr_t>(0x1234));
    llm_session *s = sjunk;
    llm_session_params sp = greedy();
    sp.version = 999;
    CHECK(llm_session_create(m, &sp, &s) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(s == nullptr);
    s = sjunk;
    CHECK(llm_session_create(nullptr, nullptr, &s) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(s == nullptr);

    // llm_session_last_error keeps the session's failure while other calls fail on this thread.
    REQUIRE(llm_session_create(m, nullptr, &s) == LLM_OK);
    CHECK(std::string(llm_session_last_error(s)).empty());
    const int32_t bad = 1 << 30;
    CHECK(llm_session_prefill(s, &bad, 1) == LLM_ERR_INVALID_ARGUMENT);
    const std::string msg = llm_last_error();
    CHECK(msg.find("out of range") != std::string::npos);
    llm_model *other = nullptr;
    CHECK(llm_model_load(nullptr, nullptr, &other) != LLM_OK);  // another failure on this thread...
    CHECK(std::string(llm_session_last_error(s)) == msg);   // ...does not touch the session's
    CHECK(std::string(llm_session_last_error(nullptr)).empty());
    llm_session_free(s);
    llm_model_free(m);
}

TEST_CASE("llm-run's JSON text is valid UTF-8 even when a piece splits a character", "[api][hardening]") {
    using tools::utf8_repair;
    const std::string euro = "\xE2\x82\xAC", fffd = "\xEF\xBF\xBD";
    CHECK(utf8_repair("plain") == "plain");
    CHECK(utf8_repair("a" + euro + "b") == "a" + euro + "b");
    CHECK(utf8_repair("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");  // 4 bytes
    // Generation stopped inside a character: its start is one U+FFFD.
    CHECK(utf8_repair("she saw \xE2\x82") == "she saw " + fffd);
    CHECK(utf8_repair("\xE2\x82x") == fffd + "x");
    // A lone continuation byte, a byte never used, an overlong and a surrogate.
    CHECK(utf8_repair("\x80") == fffd);
    CHECK(utf8_repair("\xFF") == fffd);
    CHECK(utf8_repair("\xC0\xAF") == fffd + fffd);
    CHECK(utf8_repair("\xED\xA0\x80") == fffd + fffd + fffd);
    CHECK(tools::json_escape("\"\xE2\x82") == "\\\"" + fffd);
}
