// The versioned structs as a host built against an older llm.h holds them: only its version's bytes
// are its own. Each struct sits at the start of a buffer whose tail is guard bytes (a stand-in for
// the host's neighbouring memory); *_init and the calls that fill or read a struct must leave the
// tail alone, and must not read it either (the guard bytes are invalid field values).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>

#include "llm.h"

namespace {

const std::string kStories = std::string(LLM_SHARED_DIR) + "/models/stories260K.gguf";
constexpr unsigned char kGuard = 0xA5;

// Where version v of each struct ends: the first field of v + 1, or sizeof for the newest version.
size_t model_params_end(uint32_t v) {
    return v == 1 ? offsetof(llm_model_params, residency)
           : v == 2 ? offsetof(llm_model_params, page_cache)
                    : sizeof(llm_model_params);
}

template <class T> struct Guarded {
    alignas(8) unsigned char bytes[sizeof(T) + 64];
    Guarded() { std::memset(bytes, kGuard, sizeof bytes); }
    T *get() { return reinterpret_cast<T *>(bytes); }
    bool intact_from(size_t end) const {
        for (size_t i = end; i < sizeof bytes; ++i)
            if (bytes[i] != kGuard) return false;
        return true;
    }
};

}  // namespace

TEST_CASE("*_init writes exactly the fields of the version it is given", "[api][abi]") {
    for (uint32_t v = 1; v <= LLM_MODEL_PARAMS_VERSION; ++v) {
        Guarded<llm_model_params> g;
        REQUIRE(llm_model_params_init(g.get(), v) == LLM_OK);
        CHECK(g.get()->version == v);
        CHECK(g.get()->n_threads != static_cast<int32_t>(0xA5A5A5A5u));
        CHECK(g.intact_from(model_params_end(v)));
        CHECK_FALSE(g.intact_from(model_params_end(v) - 4));  // the last field of v was written
    }
    Guarded<llm_session_params> sp;
    REQUIRE(llm_session_params_init(sp.get(), LLM_SESSION_PARAMS_VERSION) == LLM_OK);
    CHECK(sp.get()->temperature > 0.0f);
    CHECK(sp.intact_from(sizeof(llm_session_params)));
    Guarded<llm_memory_plan> plan;
    REQUIRE(llm_memory_plan_init(plan.get(), LLM_MEMORY_PLAN_VERSION) == LLM_OK);
    CHECK((plan.get()->version == LLM_MEMORY_PLAN_VERSION && plan.get()->total_bytes == 0));
    CHECK(plan.intact_from(sizeof(llm_memory_plan)));
    Guarded<llm_stats> stats;
    REQUIRE(llm_stats_init(stats.get(), LLM_STATS_VERSION) == LLM_OK);
    CHECK((stats.get()->version == LLM_STATS_VERSION && stats.get()->read_calls == 0));
    CHECK(stats.intact_from(sizeof(llm_stats)));
}

TEST_CASE("*_init refuses version 0 and versions newer than the library's, writing nothing", "[api][abi]") {
    for (uint32_t v : {0u, static_cast<uint32_t>(LLM_MODEL_PARAMS_VERSION + 1), 0xFFFFFFFFu}) {
        Guarded<llm_model_params> g;
        CHECK(llm_model_params_init(g.get(), v) == LLM_ERR_INVALID_ARGUMENT);
        CHECK(std::string(llm_last_error()).find("llm_model_params.version") != std::string::npos);
        CHECK(g.intact_from(0));
    }
    Guarded<llm_session_params> sp;
    CHECK(llm_session_params_init(sp.get(), LLM_SESSION_PARAMS_VERSION + 1) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(llm_session_params_init(sp.get(), 0) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(sp.intact_from(0));
    Guarded<llm_memory_plan> plan;
    CHECK(llm_memory_plan_init(plan.get(), LLM_MEMORY_PLAN_VERSION + 1) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(plan.intact_from(0));
    Guarded<llm_stats> stats;
    CHECK(llm_stats_init(stats.get(), LLM_STATS_VERSION + 1) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(stats.intact_from(0));
}

TEST_CASE("structs are read and written only as far as their version reaches", "[api][abi]") {
    // A version-1 llm_model_params followed by guard bytes where v2/v3 keep residency, the budget,
    // prefetch_depth and page_cache: 0xA5A5A5A5 is no valid residency, so reading them would fail.
    Guarded<llm_model_params> mp;
    REQUIRE(llm_model_params_init(mp.get(), 1) == LLM_OK);
    mp.get()->n_threads = 1;
    llm_model *m = nullptr;
    REQUIRE(llm_model_load(kStories.c_str(), mp.get(), &m) == LLM_OK);
    CHECK(mp.intact_from(model_params_end(1)));
    // The version-2 fields were ignored: the model loaded with the defaults (every block resident).
    CHECK(std::string(llm_model_info_json(m)).find("\"residency\":\"resident\"") != std::string::npos);

    Guarded<llm_memory_plan> plan;
    REQUIRE(llm_memory_plan_init(plan.get(), LLM_MEMORY_PLAN_VERSION) == LLM_OK);
    REQUIRE(llm_model_memory_plan(m, 64, plan.get()) == LLM_OK);
    CHECK(plan.get()->total_bytes > 0);
    CHECK(plan.intact_from(sizeof(llm_memory_plan)));

    Guarded<llm_session_params> sp;
    REQUIRE(llm_session_params_init(sp.get(), LLM_SESSION_PARAMS_VERSION) == LLM_OK);
    sp.get()->n_ctx = 64;
    sp.get()->temperature = 0.0f;
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, sp.get(), &s) == LLM_OK);
    CHECK(llm_session_generate(s, "Once", 4, nullptr, nullptr) >= LLM_OK);

    Guarded<llm_stats> total, last;
    REQUIRE(llm_stats_init(total.get(), LLM_STATS_VERSION) == LLM_OK);
    REQUIRE(llm_stats_init(last.get(), LLM_STATS_VERSION) == LLM_OK);
    REQUIRE(llm_session_stats(s, total.get(), last.get()) == LLM_OK);
    CHECK(total.get()->prompt_tokens > 0);
    CHECK(total.intact_from(sizeof(llm_stats)));
    CHECK(last.intact_from(sizeof(llm_stats)));

    // A future version is refused before anything is written, for both outputs.
    Guarded<llm_stats> future;
    std::memset(future.bytes, 0, sizeof(uint32_t));
    future.get()->version = LLM_STATS_VERSION + 1;
    const llm_stats before = *total.get();
    CHECK(llm_session_stats(s, total.get(), future.get()) == LLM_ERR_INVALID_ARGUMENT);
    CHECK(std::memcmp(&before, total.get(), sizeof before) == 0);
    llm_session_free(s);
    llm_model_free(m);
}
