// The model and sessions fuzz_state and its corpus maker share: states of one fit the other.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llm.h"

namespace state_fuzz {

// Small enough that a state is a few tens of KiB (positions x 2 layers x K,V x 128 floats).
constexpr int32_t kCtx = 16;

inline void die(const char *what) {
    std::fprintf(stderr, "state fuzz setup: %s: %s\n", what, llm_last_error());
    std::exit(1);
}

inline llm_model *load_model(const std::string &path) {
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    mp.n_threads = 1;
    mp.prefetch_depth = 0;
    llm_model *m = nullptr;
    if (llm_model_load(path.c_str(), &mp, &m) != LLM_OK) die(path.c_str());
    return m;
}

inline llm_session *session(llm_model *m, float temperature = 0.8f) {
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.n_ctx = kCtx;
    sp.n_threads = 1;
    sp.temperature = temperature;
    sp.kv_type_k = sp.kv_type_v = LLM_KV_F32;
    llm_session *s = nullptr;
    if (llm_session_create(m, &sp, &s) != LLM_OK) die("llm_session_create");
    return s;
}

inline std::vector<uint8_t> save(llm_session *s) {
    std::vector<uint8_t> out;
    llm_writer w{};
    w.version = LLM_WRITER_VERSION;
    w.user = &out;
    w.write = [](void *u, const void *src, uint64_t n) -> int32_t {
        auto *v = static_cast<std::vector<uint8_t> *>(u);
        v->insert(v->end(), static_cast<const uint8_t *>(src), static_cast<const uint8_t *>(src) + n);
        return LLM_OK;
    };
    if (llm_session_save_io(s, &w) != LLM_OK) die("llm_session_save_io");
    return out;
}

}  // namespace state_fuzz
