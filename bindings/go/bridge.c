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
