// The names of the LLM_* statuses, and the one map from a C++ exception to a status.
#include "core/error.h"

#include <new>

namespace llm {

namespace {

void set_message(std::string *message, const char *prefix, const char *text) noexcept {
    if (!message) return;
    try {
        message->assign(prefix).append(text);
    } catch (...) {
        message->clear();
    }
}

}  // namespace

int32_t status_of(std::exception_ptr e, std::string *message) noexcept {
    if (!e) return LLM_OK;
    try {
        std::rethrow_exception(e);
    } catch (const Error &x) {
        set_message(message, "", x.what());
        return x.status();
    } catch (const std::bad_alloc &) {
        set_message(message, "", "out of memory");
        return LLM_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &x) {
        set_message(message, "internal error: ", x.what());
        return LLM_ERR_INTERNAL;
    } catch (...) {
        set_message(message, "", "internal error: unknown exception");
        return LLM_ERR_INTERNAL;
    }
}

const char *status_string(int32_t status) noexcept {
    switch (status) {
    case LLM_OK: return "ok";
    case LLM_DONE: return "done (end of generation)";
    case LLM_STOPPED: return "stopped (a stop string)";
    case LLM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LLM_ERR_IO: return "I/O error";
    case LLM_ERR_FORMAT: return "malformed model file";
    case LLM_ERR_UNSUPPORTED: return "unsupported";
    case LLM_ERR_OUT_OF_MEMORY: return "out of memory";
    case LLM_ERR_CONTEXT_FULL: return "context full";
    case LLM_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case LLM_ERR_CANCELLED: return "cancelled";
    case LLM_ERR_INTERNAL: return "internal error";
    case LLM_ERR_NOT_FOUND: return "not found";
    default: return "unknown status";
    }
}

}  // namespace llm
