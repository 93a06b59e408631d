// libFuzzer target over the saved-session loader: the fuzz input is a state served from memory
// through llm_io and loaded into two sessions of each of two small models — one holding a context of
// its own (a failed load must leave it exactly as it was), one empty (rows go straight into its
// cache). A load that succeeds is then driven a step and replaced by a known-good state again. The
// second model is a hybrid (recurrent layers), so a state's recurrent section and its checkpoint
// position are fuzzed too; its full session holds a truncated context, whose recurrent state is
// due to be recomputed from a checkpoint, which a failed load must not disturb. Only the public C
// API is used.
//
// The models are read once, from $LLM_FUZZ_STATE_MODEL / $LLM_FUZZ_STATE_HYBRID or else
// LLM_SHARED_DIR's llama.f32 and qwen35.q8_0 fixtures.
// Build: cmake -S . -B build-fuzz -DLLM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
//        cmake --build build-fuzz --target fuzz_state fuzz_state_corpus
// Run:   build-fuzz/tests/fuzz/fuzz_state_corpus MODEL HYBRID corpus && build-fuzz/tests/fuzz/fuzz_state corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llm.h"
#include "mem_file.h"
#include "state_fuzz_common.h"

namespace {

using fuzz::mem_close;
using fuzz::mem_read_at;
using fuzz::mem_size;
using fuzz::MemFile;

void check(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_state: %s (last error: %s)\n", what, llm_last_error());
        std::abort();
    }
}

int32_t load(llm_session *s, const uint8_t *data, size_t size) {
    MemFile f{data, size};
    llm_io io{};
    io.version = LLM_IO_VERSION;
    io.user = &f;
    io.size = mem_size;
    io.read_at = mem_read_at;
    io.close = mem_close;
    const int32_t st = llm_session_load_io(s, &io);
    check(f.closes == 1, "llm_io.close not called exactly once");
    return st;
}

struct Snapshot {
    std::vector<int32_t> tokens;
    std::vector<float> logits;
    bool operator==(const Snapshot &o) const { return tokens == o.tokens && logits == o.logits; }
};

Snapshot snapshot(llm_session *s) {
    Snapshot snap;
    int32_t n = 0;
    llm_session_tokens(s, nullptr, 0, &n);
    snap.tokens.resize(n);
    check(llm_session_tokens(s, snap.tokens.data(), n, &n) == LLM_OK, "llm_session_tokens");
    const float *lg = nullptr;
    int32_t nv = 0;
    if (llm_session_logits(s, &lg, &nv) == LLM_OK) snap.logits.assign(lg, lg + nv);
    return snap;
}

// One model's two sessions and the known-good state of the full one.
struct Target {
    llm_model *model = nullptr;
    llm_session *full = nullptr, *empty = nullptr;
    std::vector<uint8_t> good;
    Snapshot before;
};
Target g_targets[2];

void setup(Target &t, const std::string &path, bool truncated) {
    t.model = state_fuzz::load_model(path);
    t.full = state_fuzz::session(t.model);
    t.empty = state_fuzz::session(t.model);
    const int32_t prompt[] = {1, 403, 407, 261, 378};
    check(llm_session_prefill(t.full, prompt, 5) == LLM_OK, "prefill");
    if (truncated) {
        const int32_t more[] = {300, 301, 302};
        check(llm_session_prefill(t.full, more, 3) == LLM_OK, "prefill");
        check(llm_session_truncate(t.full, 6) == LLM_OK, "truncate");
    }
    t.good = state_fuzz::save(t.full);
    t.before = snapshot(t.full);
}

std::string env_or(const char *name, const std::string &fallback) {
    const char *v = std::getenv(name);
    return v ? v : fallback;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llm_set_log_level(LLM_LOG_OFF);
    const std::string shared = LLM_SHARED_DIR;
    setup(g_targets[0], env_or("LLM_FUZZ_STATE_MODEL", shared + "/fixtures/models/llama.f32.gguf"), false);
    setup(g_targets[1], env_or("LLM_FUZZ_STATE_HYBRID", shared + "/fixtures/qwen35/models/qwen35.q8_0.gguf"), true);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (Target &tg : g_targets) {
        for (llm_session *s : {tg.full, tg.empty}) {
            const int32_t st = load(s, data, size);
            if (st != LLM_OK) {
                check(st < 0 && st != LLM_ERR_INTERNAL, "a failed load returned a bad status");
                check(llm_last_error()[0] != '\0', "failed load without a message");
                if (s == tg.full)
                    check(snapshot(s) == tg.before, "a failed load changed the session");
                else
                    check(llm_session_n_past(s) == 0, "a failed load changed the empty session");
                continue;
            }
            // A state that loads is a context like any other: sample and go one step.
            int32_t t = -1;
            if (llm_session_sample(s, &t) == LLM_OK) {
                check(t >= 0 && t < llm_model_n_vocab(tg.model), "sampled token out of the vocabulary");
                const int32_t a = llm_session_accept(s, t);
                check(a == LLM_OK || a == LLM_ERR_CONTEXT_FULL, "accept after a load");
            }
            if (s == tg.full) {
                check(load(s, tg.good.data(), tg.good.size()) == LLM_OK, "the known-good state no longer loads");
                check(snapshot(s) == tg.before, "the known-good state loads differently");
            } else {
                check(llm_session_reset(s) == LLM_OK, "reset");
            }
        }
    }
    return 0;
}
