// The C API: thin shims from llm.h onto the C++ runtime. Each body validates its pointers and runs
// through guard() so no exception escapes.
#include "llm.h"

#include <string>

#include "api/guard.h"

namespace llm {
namespace {
thread_local std::string g_last_error;
}
void set_last_error(const std::string &msg) {
    try {
        g_last_error = msg;
    } catch (...) {
        g_last_error.clear();
    }
}
void clear_last_error() { g_last_error.clear(); }
}  // namespace llm

using namespace llm;

#define LLM_STR2(x) #x
#define LLM_STR(x) LLM_STR2(x)

extern "C" {

LLM_API const char *llm_version_string(void) {
    return LLM_STR(LLM_VERSION_MAJOR) "." LLM_STR(LLM_VERSION_MINOR) "." LLM_STR(LLM_VERSION_PATCH);
}

LLM_API const char *llm_status_string(int32_t status) {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_DONE: return "done (end of generation)";
    case LLM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LLM_ERR_IO: return "I/O error";
    case LLM_ERR_FORMAT: return "malformed model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_OUT_OF_MEMORY: return "out of memory";
    case LLM_ERR_CONTEXT_FULL: return "context full";
    case LLM_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case LLM_ERR_CANCELLED: return "cancelled";
    case LLM_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

LLM_API const char *llm_last_error(void) { return g_last_error.c_str(); }

LLM_API void llm_set_log_callback(llm_log_cb cb, void *user) {
    guard([&] {
        set_log_callback(cb, user);
        return LLM_OK;
    });
}

LLM_API void llm_set_log_level(int32_t level) {
    guard([&] {
        set_log_level(level);
        return LLM_OK;
    });
}

}  // extern "C"
