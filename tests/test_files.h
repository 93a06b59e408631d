// Test helpers shared by several test files: a fixture written again with edits and loaded, a model
// file behind llm_io that cancels a session at a chosen read (a cancel in the middle of a pass), token
// sequences over the fixtures' vocabulary and the logits a session holds.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gguf/byte_source.h"
#include "gguf/weight_source.h"
#include "gguf_writer.h"
#include "llm.h"

namespace test {

// Sanitizer builds (several times slower) and emulated runs (qemu, LLM_TEST_EMULATED) take a smaller
// matrix in the longest tests; the native optimized build runs every case.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(LLM_TEST_EMULATED)
constexpr bool kSlowBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSlowBuild = true;
#else
constexpr bool kSlowBuild = false;
#endif
#else
constexpr bool kSlowBuild = false;
#endif

// Emulated runs (qemu-user, LLM_TEST_EMULATED) emulate vector floating point in software, dozens of
// times slower than the host: there the end-to-end equivalences that only re-check what the [kernels]
// cases prove on every ISA (a tile gives its single dot's bits, whatever the residency) take fewer modes.
#if defined(LLM_TEST_EMULATED)
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

// A fixture file's architecture and type, split at the first dot of its file name:
// "models/llama.q4_k_m.gguf" -> ("models/llama", "q4_k_m.gguf"). The architecture keeps the
// directory, so a group's "llama" is not the main group's. Slow builds sample by these.
struct FixtureName {
    std::string arch, type;
};
inline FixtureName fixture_arch_type(const std::string &path) {
    const size_t dot = path.find('.', path.find_last_of('/') + 1);
    if (dot == std::string::npos) return {path, ""};
    return {path.substr(0, dot), path.substr(dot + 1)};
}

// A token sequence over the fixtures' 512-token vocabulary (no end-of-generation tokens: 3..511).
inline std::vector<int32_t> tokens(int n, int salt = 0) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = 3 + (i * 37 + salt * 101 + 11) % 509;
    return t;
}

// A copy of the session's last logits.
inline std::vector<float> last(llm_session *s) {
    const float *lg = nullptr;
    int32_t nv = 0;
    REQUIRE(llm_session_logits(s, &lg, &nv) == LLM_OK);
    return {lg, lg + nv};
}

// The text a new session of m with params sp generates from prompt in n tokens (its pieces joined).
inline std::string generated_text(llm_model *m, const llm_session_params &sp, const char *prompt, int32_t n) {
    llm_session *s = nullptr;
    REQUIRE(llm_session_create(m, &sp, &s) == LLM_OK);
    std::string text;
    auto cb = [](int32_t, const char *p, size_t len, void *u) {
        static_cast<std::string *>(u)->append(p, len);
        return true;
    };
    REQUIRE(llm_session_generate(s, prompt, n, cb, &text) >= 0);
    llm_session_free(s);
    return text;
}

inline bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Outcome {
    int32_t status;
    std::string error;
    std::string info;  // llm_model_info_json of the loaded model
};

// The GGUF at `path` written again without the keys and tensors the skips name, with `edit` applied
// to the writer afterwards, then loaded: its status, error and info.
inline Outcome load_edited(const std::string &path, const std::function<void(llm::GgufWriter &)> &edit,
                           const std::function<bool(const std::string &)> &skip_key = {},
                           const std::function<bool(const std::string &)> &skip_tensor = {}) {
    auto src = llm::WeightSource::open(llm::open_file_source(path));
    llm::GgufWriter w;
    w.add_all_from(*src, skip_key, skip_tensor);
    edit(w);
    char tmp[] = "/tmp/llm_edited_XXXXXX";
    const int fd = mkstemp(tmp);
    REQUIRE(fd >= 0);
    close(fd);
    w.write_file(tmp);
    llm_model_params mp;
    llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
    llm_model *m = nullptr;
    const int32_t st = llm_model_load(tmp, &mp, &m);
    Outcome o{st, st == LLM_OK ? "" : llm_last_error(), st == LLM_OK ? llm_model_info_json(m) : ""};
    llm_model_free(m);
    std::remove(tmp);
    return o;
}

// A model file behind llm_io whose read_at cancels `victim` at its cancel_in-th read from now.
struct CancellingFile {
    FILE *f = nullptr;
    uint64_t size = 0;
    std::atomic<int> cancel_in{0};
    llm_session *victim = nullptr;
    explicit CancellingFile(const std::string &path) {
        f = std::fopen(path.c_str(), "rb");
        REQUIRE(f);
        std::fseek(f, 0, SEEK_END);
        size = static_cast<uint64_t>(std::ftell(f));
    }
    ~CancellingFile() { std::fclose(f); }
    CancellingFile(const CancellingFile &) = delete;
    CancellingFile &operator=(const CancellingFile &) = delete;

    llm_io io() {
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = this;
        io.size = [](void *u) { return static_cast<CancellingFile *>(u)->size; };
        io.read_at = [](void *u, uint64_t off, void *dst, uint64_t n) -> int32_t {
            auto *c = static_cast<CancellingFile *>(u);
            if (c->cancel_in > 0 && --c->cancel_in == 0) llm_session_cancel(c->victim);
            if (std::fseek(c->f, static_cast<long>(off), SEEK_SET) != 0) return LLM_ERR_IO;
            return std::fread(dst, 1, n, c->f) == n ? LLM_OK : LLM_ERR_IO;
        };
        return io;
    }
};

}  // namespace test
