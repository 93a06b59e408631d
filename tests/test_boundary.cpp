// The C boundary's guarantees to hosts, through llm.h only: llm_model_info_json called from several
// threads at once, sessions that outlive the host's model handle, and a cancel that only ever reaches
// the call in flight. Run under the sanitizer build (ASan/LSan/UBSan) by CI; for data races, the
// ThreadSanitizer recipe at the top of tests/test_hardening.cpp runs these too with "[boundary]".
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "llm.h"

namespace {

const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";
const char *kStory = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw";

llm_session_params greedy() {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.temperature = 0;
    sp.n_ctx = 256;
    sp.n_threads = 1;
    return sp;
}

bool append_piece(int32_t, const char *piece, size_t len, void *user) {
    static_cast<std::string *>(user)->append(piece, len);
    return true;
}

// The story without Catch2 assertions (they are not thread-safe): for worker threads; "" on failure.
std::string story_unchecked(llm_session *s) {
    std::string text;
    if (llm_session_reset(s) != LLM_OK) return "";
    if (llm_session_generate(s, "Once upon a time", 32, append_piece, &text) != LLM_OK) return "";
    return text;
}

std::string story(llm_session *s) {
    std::string text;
    REQUIRE(llm_session_reset(s) == LLM_OK);
    REQUIRE(llm_session_generate(s, "Once upon a time", 32, append_piece, &text) == LLM_OK);
    return text;
}

// stories260K behind llm_io, counting close calls.
struct CountedFile {
    FILE *f = nullptr;
    uint64_t size = 0;
    std::atomic<int> closes{0};

    explicit CountedFile(const std::string &path) {
        f = std::fopen(path.c_str(), "rb");
        REQUIRE(f);
        std::fseek(f, 0, SEEK_END);
        size = static_cast<uint64_t>(std::ftell(f));
    }
    ~CountedFile() { std::fclose(f); }
    CountedFile(const CountedFile &) = delete;
    CountedFile &operator=(const CountedFile &) = delete;

    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) { return static_cast<CountedFile *>(u)->size; };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *c = static_cast<CountedFile *>(u);
            // One model, reads never concurrent for it (llm.h): a FILE* is enough.
            if (std::fseek(c->f, static_cast<long>(off), SEEK_SET) != 0) return LLM_ERR_IO;
            return std::fread(dst, 1, n, c->f) == n ? LLM_OK : LLM_ERR_IO;
        };
        io.close = [](void *u) { static_cast<CountedFile *>(u)->closes++; };
        return io;
    }
};

}  // namespace

// ---- llm_model_info_json on several threads --------------------------------------------------------

TEST_CASE("llm_model_info_json: concurrent calls on one model, each pointer stays valid until its thread asks again",
          "[boundary][info]") {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.residency = LLM_RESIDENCY_BUDGET;
    mp.ram_budget_bytes = 64u << 20;
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), &mp, &m) == LLM_OK);

    // Four readers; a fifth thread turns the RAM dial, which changes the text (ram_budget_bytes), so
    // the model's cached string is replaced while readers still hold the previous one.
    constexpr int kReaders = 4, kCalls = 300;
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0}, changes_seen{0};
    std::thread dial([&] {
        uint64_t b = 64u << 20;
        while (!stop) {
            b = b == (64u << 20) ? (65u << 20) : (64u << 20);
            if (llm_model_set_ram_budget(m, b) != LLM_OK) bad++;
            std::this_thread::yield();
        }
    });
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
        readers.emplace_back([&] {
            std::string prev;
            for (int i = 0; i < kCalls; ++i) {
                const char *p = llm_model_info_json(m);
                if (!p || std::strstr(p, "\"arch\"") == nullptr || std::strstr(p, "\"ram_budget_bytes\"") == nullptr) {
                    bad++;
                    continue;
                }
                const std::string copy = p;
                if (copy != prev) changes_seen++;
                prev = copy;
                for (int k = 0; k < 20; ++k) std::this_thread::yield();  // let the others replace it
                if (copy != p) bad++;  // still the same bytes at the same address
            }
        });
    }
    for (std::thread &t : readers) t.join();
    stop = true;
    dial.join();
    CHECK(bad == 0);
    INFO("distinct texts seen by the readers: " << changes_seen.load());
    CHECK(changes_seen >= kReaders);

    // A pointer survives calls on another model from the same thread, and another thread's call.
    llm_model *m2 = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), nullptr, &m2) == LLM_OK);
    const char *p1 = llm_model_info_json(m);
    const std::string copy1 = p1;
    CHECK(llm_model_info_json(m2) != nullptr);
    REQUIRE(llm_model_set_ram_budget(m, 80u << 20) == LLM_OK);
    std::thread([&] { CHECK(std::strstr(llm_model_info_json(m), "83886080") != nullptr); }).join();
    CHECK(copy1 == p1);
    CHECK(std::strstr(llm_model_info_json(m), "83886080") != nullptr);
    llm_model_free(m2);
    llm_model_free(m);
}

// ---- sessions keep their model alive -----------------------------------------------------------------

TEST_CASE("llm_model_free before the sessions: they keep working, the model goes with the last one",
          "[boundary][lifetime]") {
    CountedFile file(kStories);
    llm_io io = file.io();
    llm_model *m = nullptr;
    REQUIRE(llm_model_load_io(&io, nullptr, &m) == LLM_OK);
    llm_session_params sp = greedy();
    llm_session *a = nullptr, *b = nullptr;
    REQUIRE(llm_session_create(m, &sp, &a) == LLM_OK);
    REQUIRE(llm_session_create(m, &sp, &b) == LLM_OK);
    llm_model_free(m);
    CHECK(file.closes == 0);

    CHECK(story(a).rfind(kStory, 0) == 0);
    std::thread([&] { CHECK(story(b).rfind(kStory, 0) == 0); }).join();
    llm_session_free(a);
    CHECK(file.closes == 0);
    CHECK(story(b).rfind(kStory, 0) == 0);
    char stats[16];
    std::snprintf(stats, sizeof stats, "%.15s", llm_session_stats_json(b));
    CHECK(stats[0] == '{');
    llm_session_free(b);
    CHECK(file.closes == 1);

    // Without sessions the model is destroyed at once; the usual order still works.
    CountedFile file2(kStories);
    llm_io io2 = file2.io();
    REQUIRE(llm_model_load_io(&io2, nullptr, &m) == LLM_OK);
    REQUIRE(llm_session_create(m, &sp, &a) == LLM_OK);
    llm_session_free(a);
    CHECK(file2.closes == 0);
    llm_model_free(m);
    CHECK(file2.closes == 1);
}

TEST_CASE("sessions on several threads outlive a model freed while they generate", "[boundary][lifetime]") {
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), nullptr, &m) == LLM_OK);
    llm_session_params sp = greedy();
    std::vector<llm_session *> sessions(3, nullptr);
    for (llm_session *&s : sessions) REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    std::atomic<int> started{0};
    std::vector<std::string> texts(sessions.size());
    std::vector<std::thread> workers;
    for (size_t i = 0; i < sessions.size(); ++i) {
        workers.emplace_back([&, i] {
            started++;
            texts[i] = story_unchecked(sessions[i]);
            llm_session_free(sessions[i]);  // the last one to finish destroys the model
        });
    }
    while (started < static_cast<int>(sessions.size())) std::this_thread::yield();
    llm_model_free(m);
    for (std::thread &t : workers) t.join();
    for (const std::string &t : texts) CHECK(t.rfind(kStory, 0) == 0);
}

// ---- a cancel reaches only the call in flight ----------------------------------------------------------

TEST_CASE("llm_session_cancel: only the call in flight is cancelled, never a later one", "[boundary][cancel]") {
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), nullptr, &m) == LLM_OK);
    llm_session_params sp = greedy();
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    int32_t toks[16];
    int32_t n = 0;
    REQUIRE(llm_tokenize(m, "Once upon a time", 16, true, false, toks, 16, &n) == LLM_OK);

    SECTION("with no call in flight: new work drops it, the next step of a pull loop is cancelled once") {
        llm_session_cancel(s);
        llm_session_cancel(s);
        CHECK(llm_session_prefill(s, toks, static_cast<size_t>(n)) == LLM_OK);  // new work
        int32_t t = 0;
        size_t len = 0;
        char piece[64];
        REQUIRE(llm_session_next(s, &t, piece, sizeof piece, &len) == LLM_OK);
        const int32_t n_past = llm_session_n_past(s);
        llm_session_cancel(s);  // between two steps of the pull loop
        CHECK(llm_session_next(s, &t, piece, sizeof piece, &len) == LLM_ERR_CANCELLED);
        CHECK(llm_session_n_past(s) == n_past);
        CHECK(llm_session_accept(s, 300) == LLM_OK);  // the cancel was used up
        llm_session_cancel(s);
        CHECK(story(s).rfind(kStory, 0) == 0);  // new work again
    }
    SECTION("a cancel that arrives after its call returned does not cancel the next call") {
        REQUIRE(llm_session_prefill(s, toks, static_cast<size_t>(n)) == LLM_OK);
        std::thread([&] { llm_session_cancel(s); }).join();  // the prefill has returned
        CHECK(llm_session_accept(s, 300) == LLM_OK);
        std::string text;
        std::thread([&] { llm_session_cancel(s); }).join();
        CHECK(llm_session_generate(s, nullptr, 4, append_piece, &text) == LLM_OK);
        CHECK(text.size() > 0);
    }
    SECTION("a cancel during generate (here from its own callback) ends that generate only") {
        struct Ctx {
            llm_session *s;
            int tokens = 0;
        } ctx{s};
        auto cancel_at_third = [](int32_t, const char *, size_t, void *u) {
            auto *c = static_cast<Ctx *>(u);
            if (++c->tokens == 3) llm_session_cancel(c->s);
            return true;
        };
        CHECK(llm_session_generate(s, "Once upon a time", 32, cancel_at_third, &ctx) == LLM_ERR_CANCELLED);
        CHECK(ctx.tokens == 3);
        CHECK(std::string(llm_last_error()).find("cancel") != std::string::npos);
        const int32_t n_past = llm_session_n_past(s);
        CHECK(n_past == n + 2);  // the third token was not accepted
        std::string more;
        CHECK(llm_session_generate(s, nullptr, 4, append_piece, &more) == LLM_OK);
        CHECK(llm_session_n_past(s) == n_past + 4);
    }
    SECTION("a canceller racing with many short calls: each call ends OK or cancelled, none after it stops") {
        std::atomic<bool> stop{false};
        std::atomic<long> cancels{0};
        std::thread canceller([&] {
            while (!stop) {
                llm_session_cancel(s);
                cancels++;
            }
        });
        int ok = 0, cancelled = 0, other = 0;
        for (int i = 0; i < 300; ++i) {
            if (llm_session_n_past(s) + 1 >= sp.n_ctx) REQUIRE(llm_session_reset(s) == LLM_OK);
            const int32_t st = llm_session_accept(s, 300 + i % 100);
            (st == LLM_OK ? ok : st == LLM_ERR_CANCELLED ? cancelled : other)++;
        }
        stop = true;
        canceller.join();
        INFO(ok << " ok, " << cancelled << " cancelled, " << cancels.load() << " cancels");
        CHECK(other == 0);
        CHECK(ok + cancelled == 300);
        // Whatever was in flight when the canceller stopped is over: nothing carries over.
        for (int i = 0; i < 20; ++i) {
            if (llm_session_n_past(s) + 1 >= sp.n_ctx) REQUIRE(llm_session_reset(s) == LLM_OK);
            CHECK(llm_session_accept(s, 300 + i) == LLM_OK);
        }
    }
    SECTION("a cancel racing with the end of a call never reaches the next one") {
        // Each round: one thread cancels at about the moment a short call ends; once both are
        // done, the next call must run. Repeated so the cancel lands before, inside and after.
        int late = 0;
        for (int round = 0; round < 200; ++round) {
            if (llm_session_n_past(s) + 2 >= sp.n_ctx) REQUIRE(llm_session_reset(s) == LLM_OK);
            std::atomic<bool> go{false};
            std::thread t([&] {
                while (!go) std::this_thread::yield();
                for (int k = 0; k < round % 8; ++k) std::this_thread::yield();
                llm_session_cancel(s);
            });
            go = true;
            const int32_t st = llm_session_accept(s, 300 + round % 100);
            CHECK((st == LLM_OK || st == LLM_ERR_CANCELLED));
            t.join();
            if (st == LLM_OK) late++;
            CHECK(llm_session_accept(s, 301) == LLM_OK);
        }
        INFO(late << " of 200 cancels came too late for their call");
        SUCCEED();
    }
    llm_session_free(s);
    llm_model_free(m);
}
