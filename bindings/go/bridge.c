// C side of the cgo bridge: trampolines that turn libllm's (fn, void *user) callbacks into calls of
// exported Go functions, with a runtime/cgo.Handle carried in `user`.
#include "_cgo_export.h"
#include "bridge.h"

static bool llm_go_token_tramp(int32_t token, const char *piece, size_t len, void *user) {
    return llmGoOnToken(token, (char *)piece, len, (uintptr_t)user);
}

static bool llm_go_progress_tramp(float fraction, void *user) {
    return llmGoOnProgress(fraction, (uintptr_t)user);
}

int32_t llm_go_generate(llm_session *s, const char *prompt, int32_t max_tokens, uintptr_t handle) {
    return llm_session_generate(s, prompt, max_tokens, llm_go_token_tramp, (void *)handle);
}

int32_t llm_go_model_load(const char *path, llm_model_params *p, uintptr_t handle, llm_model **out) {
    if (handle) {
        p->progress = llm_go_progress_tramp;
        p->progress_user = (void *)handle;
    }
    return llm_model_load(path, p, out);
}

static int32_t llm_go_write_tramp(void *user, const void *src, uint64_t n) {
    return llmGoOnWrite((void *)src, n, (uintptr_t)user);
}

static uint64_t llm_go_size_tramp(void *user) {
    return llmGoIoSize((uintptr_t)user);
}

static int32_t llm_go_read_tramp(void *user, uint64_t offset, void *dst, uint64_t n) {
    return llmGoIoReadAt(offset, dst, n, (uintptr_t)user);
}

int32_t llm_go_session_save_io(llm_session *s, uintptr_t handle) {
    llm_writer w = {0};
    w.version = LLM_WRITER_VERSION;
    w.user = (void *)handle;
    w.write = llm_go_write_tramp;
    return llm_session_save_io(s, &w);
}

int32_t llm_go_session_load_io(llm_session *s, uintptr_t handle) {
    llm_io io = {0};
    io.version = 1;
    io.user = (void *)handle;
    io.size = llm_go_size_tramp;
    io.read_at = llm_go_read_tramp;
    return llm_session_load_io(s, &io);
}
