// libFuzzer target over the whole host-facing load path: the fuzz input is a GGUF file served from
// memory through llm_io, loaded vocab-only and in full. A model that loads is then driven a little:
// a fixed text and a slice of the input itself are tokenized and the ids turned back into bytes;
// a full model small enough to run also evaluates a few tokens. Only the public C API is used, so
// every path a host can reach is covered, including the llm_io close-exactly-once contract.
//
// Build: cmake -S . -B build-fuzz -DLLM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14
//        cmake --build build-fuzz --target fuzz_gguf fuzz_gguf_corpus
// Run:   build-fuzz/tests/fuzz/fuzz_gguf_corpus ../shared corpus && build-fuzz/tests/fuzz/fuzz_gguf corpus
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llm.h"
#include "mem_file.h"

namespace {

using fuzz::MemFile;
using fuzz::mem_close;
using fuzz::mem_read_at;
using fuzz::mem_size;

void check(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_gguf: %s (last error: %s)\n", what, llm_last_error());
        std::abort();
    }
}

// Tokenizes text both ways, then prints every id back; each call must either succeed or report a
// clean error, and the two-call size protocol must agree with itself.
void round_trip(const llm_model *m, const char *text, size_t len) {
    const int32_t n_vocab = llm_model_n_vocab(m);
    for (bool special : {false, true}) {
        int32_t need = 0;
        int32_t st = llm_tokenize(m, text, len, true, special, nullptr, 0, &need);
        if (st != LLM_OK && st != LLM_ERR_BUFFER_TOO_SMALL) continue;
        check(need >= 0, "negative token count");
        std::vector<int32_t> ids(static_cast<size_t>(need) + 1);
        int32_t got = -1;
        st = llm_tokenize(m, text, len, true, special, ids.data(), static_cast<int32_t>(ids.size()), &got);
        check(st == LLM_OK && got == need, "second llm_tokenize disagrees with the size it asked for");
        char piece[256];
        for (int32_t i = 0; i < got; ++i) {
            check(ids[i] >= 0 && ids[i] < n_vocab, "token id out of the vocabulary");
            size_t plen = 0;
            st = llm_token_to_piece(m, ids[i], piece, sizeof piece, &plen);
            if (st == LLM_ERR_BUFFER_TOO_SMALL) {
                std::vector<char> big(plen);
                size_t again = 0;
                check(llm_token_to_piece(m, ids[i], big.data(), big.size(), &again) == LLM_OK && again == plen,
                      "llm_token_to_piece disagrees with the size it asked for");
            }
            (void)llm_model_token_is_eog(m, ids[i]);
        }
    }
}

// A few tokens through a loaded model, if its predicted memory is small (a mutated header can ask
// for gigabytes legitimately; that is not a bug, but it is not what this target explores).
void evaluate(llm_model *m) {
    llm_memory_plan plan{};
    llm_memory_plan_init(&plan, LLM_MEMORY_PLAN_VERSION);
    if (llm_model_memory_plan(m, 8, &plan) != LLM_OK || plan.total_bytes > (64u << 20)) return;
    llm_session_params sp;
    llm_session_params_init(&sp, LLM_SESSION_PARAMS_VERSION);
    sp.n_ctx = 8;
    sp.n_threads = 1;
    sp.temperature = 0;
    llm_session *s = nullptr;
    if (llm_session_create(m, &sp, &s) != LLM_OK) return;
    const int32_t n_vocab = llm_model_n_vocab(m);
    const int32_t toks[3] = {0, n_vocab > 1 ? 1 : 0, n_vocab - 1};
    if (llm_session_prefill(s, toks, 3) == LLM_OK) {
        int32_t t = -1;
        if (llm_session_sample(s, &t) == LLM_OK) {
            check(t >= 0 && t < n_vocab, "sampled token out of the vocabulary");
            (void)llm_session_accept(s, t);
        }
    }
    (void)llm_session_stats_json(s);
    llm_session_free(s);
}

void exercise(llm_model *m, const uint8_t *data, size_t size, bool vocab_only) {
    (void)llm_model_info_json(m);
    (void)llm_model_token_bos(m);
    (void)llm_model_token_eos(m);
    static const char kText[] = "Hello world! Once upon a time, 12345 <s></s> caf\xC3\xA9 \xF0\x9F\x98\x80\n\t  end";
    round_trip(m, kText, sizeof kText - 1);
    // The input's last bytes as text: arbitrary, often invalid UTF-8.
    const size_t n = size < 96 ? size : 96;
    round_trip(m, reinterpret_cast<const char *>(data + size - n), n);
    if (!vocab_only) evaluate(m);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    llm_set_log_level(LLM_LOG_OFF);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (bool vocab_only : {true, false}) {
        MemFile f{data, size};
        llm_io io{};
        io.version = LLM_IO_VERSION;
        io.user = &f;
        io.size = mem_size;
        io.read_at = mem_read_at;
        io.close = mem_close;
        llm_model_params mp;
        llm_model_params_init(&mp, LLM_MODEL_PARAMS_VERSION);
        mp.vocab_only = vocab_only;
        mp.n_threads = 1;
        mp.prefetch_depth = 0;
        llm_model *m = nullptr;
        const int32_t st = llm_model_load_io(&io, &mp, &m);
        if (st == LLM_OK) {
            check(m != nullptr, "load succeeded without a model");
            check(f.closes == 0, "llm_io closed while the model lives");
            exercise(m, data, size, vocab_only);
            llm_model_free(m);
        } else {
            check(st < 0 && m == nullptr, "failed load left a model behind");
            check(st != LLM_ERR_INTERNAL, "LLM_ERR_INTERNAL: a bug by the library's own definition");
            check(llm_last_error()[0] != '\0', "failed load without a message");
        }
        check(f.closes == 1, "llm_io.close not called exactly once");
    }
    return 0;
}
